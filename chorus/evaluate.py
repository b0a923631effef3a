"""python -m chorus.evaluate tasks=<bundled|cvdp|jsonl|generated> policy=<reference|file|random|model>
    format=<testbench|body|vectors|cocotb> [model=<tiny|hf> model.path=...] [protocol=<direct|agentic>]
    [n_samples=N] [hydra.run.dir=OUT]

Scores each task's stimulus in the simulator and writes OUT/per_task.jsonl,
OUT/per_task.parquet and OUT/summary.json (with the run's metadata); logger=wandb (default, offline)
also leaves a W&B copy in OUT/wandb/.
"""
from __future__ import annotations

import time
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from .config.schema import CONF_DIR, register_configs
from .config.job_settings import check_settings
from .core.task import TaskFormatError
from .entry import entry_point
from .policy.static import STATIC_POLICIES
from .scoring import score_completions
from .sim.config import sim_config
from .sim.executor import make_executor
from .stimulus.formats import get_format
from .tasks import load_tasks
from .tracking.progress import Progress
from .tracking.record import model_name, run_metadata
from .tracking.run_dir import write_run
from .tracking.summary import summarize
from .tracking.timing import add_seconds, rounded
from .tracking.wandb_mirror import open_mirror

register_configs()


def prepare(cfg: dict) -> dict:
    """Everything that can fail cheaply, before the W&B run or any model starts."""
    tasks = load_tasks(**{k: v for k, v in cfg["tasks"].items() if v is not None or k == "limit"})
    if not tasks:
        raise TaskFormatError("no tasks selected; check tasks.split / tasks.ids / tasks.limit")
    fmt_options = dict(cfg["format"])
    fmt = fmt_options.pop("name")
    get_format(fmt)
    policy = dict(cfg["policy"])
    name = policy.pop("name")
    if cfg["n_samples"] < 1:
        raise ValueError(f"n_samples must be >= 1, got {cfg['n_samples']}")
    if name not in [*STATIC_POLICIES, "model"]:
        raise ValueError(f"unknown policy {name!r}; choose one of {sorted([*STATIC_POLICIES, 'model'])}")
    if name == "model":
        from .policy.models import resolve_path
        from .protocol import PROTOCOLS

        if cfg["protocol"]["name"] not in PROTOCOLS:
            raise ValueError(f"unknown protocol {cfg['protocol']['name']!r}; choose one of {sorted(PROTOCOLS)}")
        resolve_path(**cfg["model"])  # a missing checkpoint stops here
        if policy["engine"] == "openai" and not policy["api_base_url"]:
            raise ValueError("policy.engine=openai needs policy.api_base_url=<server>/v1 "
                             "(e.g. http://127.0.0.1:8000/v1 for `transformers serve`)")
    sim, workers = sim_config(cfg["simulator"])
    return {"tasks": tasks, "fmt": fmt, "fmt_options": fmt_options, "policy_name": name, "policy": policy,
            "sim": sim, "workers": workers}


def run(cfg: dict, inputs: dict, out_dir: Path) -> dict:
    tasks, fmt, fmt_options, name, policy, sim, workers = (inputs[k] for k in (
        "tasks", "fmt", "fmt_options", "policy_name", "policy", "sim", "workers"))
    n, usage, timing = cfg["n_samples"], {}, {}
    with make_executor(sim, workers) as executor:
        if name == "model":
            rows = run_model_policy(tasks, cfg, policy, fmt, fmt_options, sim, workers, executor, usage, timing,
                                    reporter=Progress(out_dir))
        else:
            completions = [STATIC_POLICIES[name](t, samples=n, fmt=fmt, fmt_options=fmt_options, **policy)
                           for t in tasks]
            t0 = time.monotonic()
            rows = score_completions(tasks, completions, sim, fmt, fmt_options, workers, progress=cfg["progress"],
                                     executor=executor)
            add_seconds(timing, "simulation_wait_s", time.monotonic() - t0)
    model = model_name(cfg["model"]) if name == "model" else None
    summary = {**summarize(rows, cfg["pass_coverage"]), "format": fmt, "policy": name, "tasks": cfg["tasks"]["name"],
               **run_metadata("evaluate", model, policy.get("seed"), pass_coverage=cfg["pass_coverage"])}
    if name == "model" and cfg["protocol"]["name"] == "agentic":
        summary["stop_at"] = cfg["protocol"]["stop_at"]  # `pass` binds the run to its pass rule (tracking/runs.py)
    if usage:  # engine=openai: samples and tokens paid for in this run vs read from the cache, requests sent
        summary["api_usage"] = usage
    summary["timing"] = rounded(timing)
    write_run(out_dir, rows, summary)
    return summary


def run_model_policy(tasks, cfg: dict, policy: dict, fmt: str, fmt_options: dict, sim, workers,
                     executor=None, usage: dict | None = None, timing: dict | None = None,
                     reporter: Progress | None = None) -> list[dict]:
    """`usage`, when given, receives engine=openai's paid/cached sample and token counts and its requests;
    `timing` the seconds spent generating and waiting on simulations (protocol=direct and agentic);
    `reporter` the samples generated so far (progress.jsonl in the run dir, which the pipeline shows)."""
    from .policy.engines import SamplingParams, make_engine
    from .policy.models import load_model, resolve_path
    from .protocol import PROTOCOLS

    proto = dict(cfg["protocol"])
    proto_name = proto.pop("name")
    if policy["engine"] in ("vllm", "openai"):  # the weights load elsewhere; chorus renders prompts only
        from transformers import AutoTokenizer

        path = resolve_path(**cfg["model"])
        model, tok = None, AutoTokenizer.from_pretrained(path)
    else:
        model, tok = load_model(**cfg["model"])
        path = None
    context = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if context and policy["max_prompt_tokens"] + policy["max_new_tokens"] > context:
        raise ValueError(f"policy.max_prompt_tokens + policy.max_new_tokens = "
                         f"{policy['max_prompt_tokens'] + policy['max_new_tokens']} exceeds the model's context of "
                         f"{context} tokens; lower one of them")
    if policy["engine"] == "openai":
        from .policy.openai_engine import open_openai_engine
        from .sim.cache import default_cache_root

        engine = open_openai_engine(policy, path, default_cache_root(sim.cache_dir))
    else:
        engine = make_engine(policy["engine"], model, tok, path=path, dtype=cfg["model"]["dtype"],
                             seed=policy["seed"], threads=policy["threads"], generation=policy["generation"])
    params = SamplingParams(max_new_tokens=policy["max_new_tokens"], temperature=policy["temperature"],
                            top_p=policy["top_p"], top_k=policy["top_k"], seed=policy["seed"])
    rows = PROTOCOLS[proto_name](tasks, engine, tok, fmt, cfg["n_samples"], params, sim, fmt_options,
                                 max_prompt_tokens=policy["max_prompt_tokens"], workers=workers, executor=executor,
                                 progress=cfg["progress"], timing=timing, reporter=reporter,
                                 pass_coverage=cfg["pass_coverage"],
                                 on_progress=reporter.callback("evaluation") if reporter else None, **proto)
    if usage is not None and hasattr(engine, "usage"):
        usage.update({**engine.usage, "http_calls": engine.http_calls})
    return rows


@hydra.main(config_path=str(CONF_DIR), config_name="evaluate", version_base="1.3")
def main(cfg: DictConfig) -> None:
    c = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)  # outside: a bad interpolation is Hydra's to say
    with entry_point("chorus.evaluate") as entry:
        out_dir = entry.out_dir
        check_settings("evaluate", f"policy={c['policy']['name']}", c, cfg, entry.overrides)
        inputs = prepare(c)
        with open_mirror(c["logger"], c, out_dir, name=f"evaluate/{out_dir.name}", job_type="evaluate") as mirror:
            summary = run(c, inputs, out_dir)
            mirror.log_result(out_dir)
    print(f"{summary['n_tasks']} tasks, pass rate {summary['pass_rate']:.3f}, "
          f"mean overall {summary['mean_overall']:.2f}%, statuses {summary['status_counts']} -> {out_dir}")


if __name__ == "__main__":
    main()
