"""protocol=agentic: feedback rounds, stop at 100 %, best result kept, markov conversations."""
from chorus.policy.engines import Generation, HFEngine, SamplingParams
from chorus.policy.models import load_model
from chorus.protocol.agentic import run_agentic
from chorus.tasks import load_tasks


class ScriptedEngine:
    """Answers from a script, one entry per round, and records the prompts it was given."""

    def __init__(self, answers):
        self.answers, self.prompts = answers, []

    def generate(self, prompts, n=1, params=None):
        rnd = len(self.prompts)
        self.prompts.append(prompts)
        text = self.answers[min(rnd, len(self.answers) - 1)]
        return [[Generation(text, [1] * 5, [-0.1] * 5, "stop", 10)] for _ in prompts]


def fenced(vectors: str) -> str:
    return f"filename: stimulus.vec\n```vectors\n{vectors}```\n"


def test_refines_until_full_coverage_and_keeps_the_best(tiny_xs, sim_cfg):
    _, tok = load_model("hf", path=str(tiny_xs))
    task = load_tasks("generated", per_family=1, families=["counter"])[0]
    weak, strong = task.meta["programs"]["weak"], task.meta["programs"]["strong"]
    engine = ScriptedEngine(["I am not sure.", fenced(weak), fenced(strong), fenced(weak)])
    rows = run_agentic([task], engine, tok, "vectors", 1, SamplingParams(), sim_cfg, rounds=5, workers=2,
                       max_prompt_tokens=50_000)
    assert [(r["round"], r["status"], r["parse_status"]) for r in rows] == [
        (0, "compile_error", "unfenced"), (1, "ok", "ok"), (2, "ok", "ok")]  # stopped at 100 %, no round 3
    assert rows[1]["overall"] < 50 and rows[2]["overall"] == 100.0
    assert [r["final"] for r in rows] == [False, False, True]
    round1, round2 = engine.prompts[1][0], engine.prompts[2][0]
    assert "did not produce coverage: compile_error: malformed vectors: line 1" in round1
    assert "Not yet covered:" in round2 and "rtl/" in round2 and "I am not sure." in round2


def test_markov_keeps_only_the_best_answer_and_its_feedback(tiny_xs, sim_cfg):
    _, tok = load_model("hf", path=str(tiny_xs))
    task = load_tasks("generated", per_family=1, families=["fsm"])[0]
    medium, weak = task.meta["programs"]["medium"], task.meta["programs"]["weak"]
    engine = ScriptedEngine([fenced(medium), fenced(weak), fenced(weak)])
    rows = run_agentic([task], engine, tok, "vectors", 1, SamplingParams(), sim_cfg, rounds=2, markov=True,
                       workers=2)
    assert [r["final"] for r in rows] == [True, False, False]  # the medium answer stays the best
    last = engine.prompts[2][0]
    assert last.count("<|im_start|>assistant") == 2  # best answer + the generation prompt
    assert medium.splitlines()[1] in last and last.count("Coverage of") == 1


def test_tiny_model_end_to_end_rows_show_rounds_and_statuses(tiny_xs, sim_cfg):
    model, tok = load_model("hf", path=str(tiny_xs))
    tasks = load_tasks("generated", per_family=1, families=["alu"])
    rows = run_agentic(tasks, HFEngine(model, tok), tok, "vectors", 2, SamplingParams(max_new_tokens=16), sim_cfg,
                       rounds=1, workers=2)
    assert sorted((r["sample"], r["round"]) for r in rows) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert sum(r["final"] for r in rows) == 2 and all(r["status"] for r in rows)
