"""One rollout iteration against real Verilator: rewards, group advantages and update tensors."""
import pytest
from transformers import AutoTokenizer

from chorus.policy.engines import Generation, SamplingParams
from chorus.rl.algos import get_algo
from chorus.rl.rewards import RewardConfig
from chorus.rl.rollouts import RolloutSpec, collect, sample_groups
from chorus.rl.task_sampler import TaskSampler
from chorus.sim.executor import LocalExecutor
from chorus.sim.pool import make_pool
from chorus.tasks import load_tasks


class GroupScript:
    """Returns, for every prompt, the given answers as a group, tokenised by the real tokenizer."""

    def __init__(self, tok, answers):
        self.tok, self.answers = tok, answers

    def generate(self, prompts, n=1, params=None):
        out = []
        for _ in prompts:
            group = []
            for text in self.answers[:n]:
                ids = self.tok(text, add_special_tokens=False)["input_ids"]
                group.append(Generation(text, ids, [-0.5] * len(ids), "stop", 0))
            out.append(group)
        return out


def test_collect_scores_groups_and_builds_masked_update_tensors(tiny_xs, sim_cfg):
    tok = AutoTokenizer.from_pretrained(tiny_xs)
    task = load_tasks("generated", per_family=1, families=["counter"])[0]
    strong, weak = task.meta["programs"]["strong"], task.meta["programs"]["weak"]
    answers = [f"```vectors\n{strong}```\n", f"```vectors\n{weak}```\n", "no idea", f"```vectors\n{strong}```\n"]
    algo = get_algo("dapo", overlong_buffer=0)
    with make_pool(2) as pool:
        spec = RolloutSpec(algo, "vectors", 4, SamplingParams(), sim_cfg, RewardConfig(compile_penalty=-0.2))
        batch = collect(TaskSampler([task]).draw, GroupScript(tok, answers), tok, pool, spec, 1)
    rewards = [r["reward"] for r in batch.rows]
    assert rewards[0] == pytest.approx(1.0) and rewards[3] == pytest.approx(1.0)
    assert 0 < rewards[1] < 0.6 and rewards[2] == pytest.approx(-0.2)  # weak coverage; unparsable vectors
    adv = batch.advantages.tolist()
    assert adv[0] == pytest.approx(adv[3]) and adv[0] > 0 > adv[2] and sum(adv) == pytest.approx(0, abs=1e-5)
    for i, text in enumerate(answers):  # the completion mask covers exactly the answer's tokens
        n = len(tok(text, add_special_tokens=False)["input_ids"])
        assert int(batch.completion_mask[i].sum()) == n
        assert float(batch.old_logprobs[i][batch.completion_mask[i].bool()].sum()) == pytest.approx(-0.5 * n)
    assert batch.stats["compile_rate"] == 0.75 and batch.stats["distinct_ratio"] == 0.75
    assert batch.stats["zero_std_fraction"] == 0.0


def test_a_group_with_one_reward_everywhere_is_dropped_by_dynamic_sampling(tiny_xs, sim_cfg):
    tok = AutoTokenizer.from_pretrained(tiny_xs)
    task = load_tasks("generated", per_family=1, families=["counter"])[0]
    same = [f"```vectors\n{task.meta['programs']['strong']}```\n"] * 2
    sampler = TaskSampler([task])
    spec = RolloutSpec(get_algo("dapo", max_refills=2), "vectors", 2, SamplingParams(), sim_cfg)
    with make_pool(2) as pool, pytest.warns(RuntimeWarning, match="kept 0 of 1 groups after 2 refills"):
        batch = collect(sampler.draw, GroupScript(tok, same), tok, pool, spec, 1)
    assert batch.rows == [] and batch.stats["zero_std_fraction"] == 1.0
    # the two refills drew (and simulated) two more groups: the data position moved past them
    assert sampler.drawn == 3 and batch.stats["samples"] == 6 and batch.stats["refills"] == 2
    assert batch.input_ids.shape[0] == 0


def _score_or_die(task, gen, cfg):
    """A scoring function whose worker process dies on one marked sample (a segfaulting simulator);
    given a task's group of samples (a vectors job), it scores them in turn and dies on that one too."""
    import os

    from chorus.sim.result import SimResult
    if isinstance(gen, list):
        return [_score_or_die(task, g, cfg) for g in gen]
    if "DIE" in gen.text:
        os._exit(1)
    return SimResult("rejected", "scored by the test")


class DyingScorer(LocalExecutor):
    """The real forkserver pool, running _score_or_die instead of the simulator."""

    def submit(self, fn, *args):
        return super().submit(_score_or_die, *args)


@pytest.mark.slow  # two forkserver pools start: ~11 s on the shared cores
def test_a_sample_that_kills_its_simulation_worker_is_charged_to_it_not_an_aborted_step(tiny_xs, sim_cfg):
    tok = AutoTokenizer.from_pretrained(tiny_xs)
    task = load_tasks("generated", per_family=1, families=["counter"])[0]
    # one worker runs the jobs in order, so the first two finish before the third kills its process
    spec = RolloutSpec(get_algo("dapo", dynamic_sampling=False), "vectors", 3, SamplingParams(), sim_cfg)
    with DyingScorer(1) as pool:
        groups, _ = sample_groups([task], GroupScript(tok, ["a", "b", "DIE"]), tok, pool, spec, 0)
        assert [s["result"].status for s in groups[0]] == ["rejected", "rejected", "runtime_error"]
        # re-run alone, it killed that worker too: the stimulus's own error, with the usual penalty
        assert "killed its worker process" in groups[0][2]["result"].reason
        assert groups[0][2]["reward"] is not None and groups[0][2]["reward"] == groups[0][0]["reward"]
        # the pool broke with its worker; the next step gets a fresh one instead of failing
        again, _ = sample_groups([task], GroupScript(tok, ["a"]), tok, pool, spec, 1)
    assert again[0][0]["result"].status == "rejected"


class StreamingScript(GroupScript):
    """A streaming engine (HFEngine.streams_groups): reports the prompts' groups in reverse order
    through on_group, and records how many simulations the pool had been given at each report."""
    streams_groups = True

    def __init__(self, tok, answers, pool):
        super().__init__(tok, answers)
        self.pool, self.submitted_at_report = pool, []

    def generate(self, prompts, n=1, params=None, on_group=None):
        out = super().generate(prompts, n, params)
        for i in reversed(range(len(out))):
            self.submitted_at_report.append(self.pool.submitted)
            on_group(i, out[i])
        return out


class CountingPool:
    def __init__(self, pool):
        self.pool, self.submitted = pool, 0

    def submit(self, *args, **kwargs):
        self.submitted += 1
        return self.pool.submit(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.pool, name)


def test_a_streaming_engine_s_groups_are_simulated_while_it_still_generates(tiny_xs, sim_cfg):
    """Each group goes to the simulator from inside generate (the second report finds the first
    group's samples submitted), and the groups come back in the tasks' order whatever order they
    finished in."""
    tok = AutoTokenizer.from_pretrained(tiny_xs)
    tasks = load_tasks("generated", per_family=1, families=["counter", "alu"])
    answers = [f"```vectors\n{tasks[0].meta['programs']['strong']}```\n", "no idea"]
    spec = RolloutSpec(get_algo("dapo", overlong_buffer=0), "vectors", 2, SamplingParams(), sim_cfg,
                       prompts_per_generate=2)
    with make_pool(2) as real:
        pool = CountingPool(real)
        engine = StreamingScript(tok, answers, pool)
        groups, _ = sample_groups(tasks, engine, tok, pool, spec, seed=0)
    assert engine.submitted_at_report == [0, 1]  # at the second report the first group (vectors: one job) is in the pool
    assert [g[0]["task"].id for g in groups] == [t.id for t in tasks]
