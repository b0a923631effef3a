"""`python -m chorus.<job> --help`: what the job does, the config groups it uses with their options,
its own settings, and how to see the rest.

Everything is read from where it is defined, so the help cannot drift: the job module's docstring,
the groups in the `defaults:` list of conf/<job>.yaml, each option's first comment sentence in
conf/<group>/<option>.yaml, the composed config's top-level settings. conf/hydra/help/<job>.yaml
calls `render` through the `chorus_help` resolver and adds the job's example.
"""
from __future__ import annotations

import ast
import importlib.util
import json
import re
import textwrap
from pathlib import Path

import yaml
from omegaconf import DictConfig, OmegaConf

# schema.CONF_DIR (not imported from there: schema imports this module to register it)
CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
WIDTH = 100

# One line per config group; tests/test_cli_help.py fails for a group of conf/ that is missing here.
GROUPS = {
    "sft_stage": "SFT curriculum stage: its tasks, data mix, steps and starting point",
    "rl_algo": "RL algorithm for job=rl: advantages, loss aggregation, clipping, KL, dynamic sampling",
    "trainer": "where job=rl and OPD train: CPU, one GPU, DDP or FSDP",
    "consolidation": "merge or distil the teacher pool into one model (none: job=sft or job=rl)",
    "teacher_pool": "the experts a consolidation merges or distils, and where their rewards come from",
    "model": "the policy: the tiny model built locally or any Hugging Face checkpoint",
    "format": "what the model writes: a whole testbench, a body, vectors or a cocotb module",
    "simulator": "Verilator settings: limits, isolation, cache, workers",
    "logger": "the W&B copy of each run (offline unless configured), or none",
    "experiment": "presets that set several groups at once (the merge sweeps use them)",
    "tasks": "the tasks to score: the bundled suite, CVDP rows, a JSONL file or generated designs",
    "policy": "who writes the stimulus: the reference, files, uniform random or a model",
    "protocol": "how a model answers: one shot per sample, or agentic rounds with feedback",
    "pipeline": "preset of the end-to-end run: model size, budgets, settings every step gets",
}


def job_groups(job: str, conf_dir: Path = CONF_DIR) -> list[tuple[str, str | None]]:
    """(group, default option) for each config group in the job's defaults list, in its order."""
    defaults = yaml.safe_load((conf_dir / f"{job}.yaml").read_text()).get("defaults", [])
    entries = [next(iter(d.items())) for d in defaults if isinstance(d, dict)]
    # `override hydra/...` entries configure Hydra itself, not the job
    return [(g, o) for g, o in entries if " " not in g and not g.startswith("hydra")]


def options(group: str, conf_dir: Path = CONF_DIR) -> dict[str, str]:
    """The group's options (paths under conf/<group>/, no .yaml) and each one's description."""
    root = conf_dir / group
    return {str(f.relative_to(root).with_suffix("")): description(f) for f in sorted(root.rglob("*.yaml"))}


def description(path: Path) -> str:
    """The first sentence of the file's leading comment (the comment continues onto the next line
    while a line does not end one; a line that starts with `key:` begins a new thought)."""
    text = ""
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        part = line.lstrip("#").strip()
        if part.startswith("@package"):
            continue
        if text and re.match(r"[\w.]+: ", part):
            break
        text = f"{text} {part}".strip()
        if _sentence_end(text) is not None:
            break
    return text[:_sentence_end(text)]


def _sentence_end(text: str) -> int | None:
    """Where the first sentence ends: after [.!?] before a capital or the end, unless the word before
    is an abbreviation such as "Dr." (one capital and at most one more letter)."""
    for m in re.finditer(r"[.!?](?=\s+[A-Z(`]|$)", text):
        if not re.search(r"(?:^|\s)[A-Z][a-z]?$", text[:m.start()]):
            return m.end()
    return None


def job_docstring(job: str) -> str:
    """chorus.<job>'s module docstring, read without importing the module (and its dependencies)."""
    origin = importlib.util.find_spec(f"chorus.{job}").origin
    return ast.get_docstring(ast.parse(Path(origin).read_text())) or ""


def settings(root: DictConfig | None, groups: list[str]) -> str:
    """The composed config's own top-level settings (the groups' are listed above), as written:
    key=value, interpolations unresolved; a nested block shows as key.*."""
    if root is None:
        return ""
    raw = OmegaConf.to_container(root, resolve=False)
    shown = [f"{k}.*" if isinstance(v, dict) else f"{k}={v if isinstance(v, str) and v else json.dumps(v)}"
             for k, v in raw.items() if k not in groups and k != "hydra"]
    return textwrap.fill("  ".join(shown), WIDTH, initial_indent="  ", subsequent_indent="  ",
                         break_on_hyphens=False, break_long_words=False)


def render(job: str, root: DictConfig | None = None, conf_dir: Path = CONF_DIR) -> str:
    groups = job_groups(job, conf_dir)
    out = [f"chorus.{job}", "", job_docstring(job), ""]
    if groups:
        out.append("== Config groups: pick an option with group=option ==")
        for group, default in groups:
            out += ["", f"{group}: {GROUPS.get(group, '')}"]
            opts = options(group, conf_dir)
            width = max(map(len, opts), default=0) + 2
            for name, text in opts.items():
                mark = "* " if name == default else "  "
                out.append(textwrap.fill(text, WIDTH, initial_indent=f"  {mark}{name:<{width}}",
                                         subsequent_indent=" " * (width + 4), break_on_hyphens=False))
        out += ["", "(* = the default)"]
    else:
        out.append("== Config groups: none; the job has settings only ==")
    body = settings(root, [g for g, _ in groups])
    if body:
        out += ["", "== Settings: override any with key=value (nested ones: key.sub=value) ==", body]
    cfg, hydra_help = f"python -m chorus.{job} [overrides] --cfg job", f"python -m chorus.{job} --hydra-help"
    width = max(len(cfg), len(hydra_help)) + 3
    out += ["", "== The whole config ==",
            f"  {cfg:<{width}}every setting and its value (--resolve: with ${{...}} resolved)",
            f"  {hydra_help:<{width}}Hydra's own flags (--multirun, --info, ...)"]
    return "\n".join(out)


def _resolver(job: str, *, _root_: DictConfig) -> str:
    # Hydra feeds the template through string.Template after OmegaConf: a literal $ must be doubled.
    return render(job, _root_).replace("$", "$$")


OmegaConf.register_new_resolver("chorus_help", _resolver, replace=True)
