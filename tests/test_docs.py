"""The documentation: README.md stays a landing page, every local link resolves, the MkDocs site builds
with --strict (its configuration page generated from the schema), every documented chorus command is one
chorus would accept, and the metrics page names every metric the code logs."""
import itertools
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser

from chorus.config.job_settings import check_settings
from chorus.config.schema import CONF_DIR, register_configs
from chorus.train import checked_job, container

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").rglob("*.md"))
TEXTS = [README, *PAGES]
JOBS = ("train", "evaluate", "pipeline")  # the chorus modules whose documented command lines are checked


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def prose(text: str) -> str:
    """The text outside fenced code blocks and inline code spans."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def readme_sections() -> dict[str, str]:
    """README.md's `## ` sections by heading, each with the lines up to the next one."""
    parts = re.split(r"^## (.+)$", README.read_text(), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def test_readme_is_a_landing_page():
    lines = README.read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move detail into docs/"
    text = README.read_text()
    assert "python -m pytest -q" in text and "what CI runs" in text
    assert "python -m chorus.pipeline pipeline=smoke" in text and "1.5 min" in text and "58.3 min" in text
    # what a new user needs first comes first: everything from Install to Documentation in 80 lines
    sections = readme_sections()
    assert list(sections)[:4] == ["Install", "Run it", "Test", "Documentation"], list(sections)
    after = next(i for i, line in enumerate(lines) if line.startswith("## ") and line[3:] not in list(sections)[:4])
    assert after < 80, f"README.md's landing sections end at line {after}"
    # CI runs the README's test command, and Install pins the versions it is tested with
    (test,) = re.findall(r"^```bash\n(.+)\n```", sections["Test"], flags=re.M)
    assert test.endswith("python -m pytest -q") and test in (ROOT / ".ci" / "run").read_text()
    assert "pip install -e '.[dev]' -c constraints.txt" in sections["Install"] and "-c constraints.txt" in test


@pytest.mark.parametrize("path", TEXTS, ids=rel)
def test_every_local_link_resolves(path):
    missing = []
    for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", prose(path.read_text())):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a URL, or an anchor in the same page (MkDocs --strict checks anchors)
        if not (path.parent / target.split("#")[0]).exists():
            missing.append(target)
    assert not missing, f"{rel(path)} links to missing files: {missing}"


@pytest.mark.parametrize("path", TEXTS, ids=rel)
def test_no_references_to_files_users_do_not_have(path):
    text = path.read_text()
    assert "DESIGN.md" not in text and "../shared" not in text


@pytest.mark.slow
def test_site_builds_strictly_with_the_generated_configuration_page(tmp_path):
    pytest.importorskip("mkdocs")
    site = tmp_path / "site"
    p = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                        "-d", str(site)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "WARNING" not in p.stderr, p.stderr[-3000:]
    page = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", (site / "reference" / "configuration" / "index.html").read_text()))
    for name, default in (("rl.steps", "30"), ("teacher_pool.from_runs", "null"), ("trainer.extra", "{}"),
                          ("simulator.workers", "null"), ("wandb_filter.mixed", "false"), ("jobs", "2")):
        assert re.search(rf"\b{re.escape(name)} \S.*? {re.escape(default)} ", page), name
    assert "rollout iterations (Lightning's global_step and max_steps count these)" in page  # the field's comment
    assert "config-reference" not in page  # the marker was replaced


def fenced_commands(path: Path) -> list[tuple[str, str, list[str]]]:
    """(where, module, arguments) of every `python -m chorus.<job>` line in the file's fenced code blocks,
    backslash continuations joined, leading VAR=value assignments and # comments dropped."""
    found = []
    for block in re.finditer(r"^```[^\n]*\n(.*?)^```", path.read_text(), flags=re.S | re.M):
        start = path.read_text()[:block.start()].count("\n") + 2
        lines, offset = block.group(1).split("\n"), 0
        while offset < len(lines):
            first, line = offset, lines[offset]
            while True:  # a command goes on after a trailing backslash and inside an open quote
                try:
                    words = None if line.endswith("\\") else shlex.split(line, comments=True)
                except ValueError:
                    words = None
                if words is not None or offset + 1 >= len(lines):
                    break
                offset += 1
                line = (line[:-1] if line.endswith("\\") else line + "\n") + lines[offset]
            offset += 1
            words = words or []
            while words and re.match(r"[A-Z_][A-Z0-9_]*=", words[0]):
                words.pop(0)
            if words[:2] == ["python", "-m"] and len(words) > 2 and words[2] in {f"chorus.{j}" for j in JOBS}:
                found.append((f"{rel(path)}:{start + first}", words[2].split(".")[1], words[3:]))
    return found


COMMANDS = [c for path in TEXTS for c in fenced_commands(path)]


def runs_of(args: list[str]) -> list[list[str]]:
    """The jobs one command line starts: its overrides (Hydra's own and flags left out), a multirun's
    sweeps expanded as Hydra's basic sweeper does."""
    multirun = "-m" in args or "--multirun" in args
    overrides = [a for a in args if not a.startswith("-") and not re.match(r"\+?\+?hydra[./]", a)]
    if not multirun:
        return [overrides]
    choices = []
    for o in OverridesParser.create().parse_overrides(overrides):
        if o.is_sweep_override():
            choices.append([f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()])
        else:
            choices.append([o.input_line])
    return [list(c) for c in itertools.product(*choices)]


def test_the_docs_document_commands_of_every_job():
    jobs = [job for _, job, _ in COMMANDS]
    assert jobs.count("train") >= 10 and jobs.count("evaluate") >= 5 and jobs.count("pipeline") >= 5, jobs


@pytest.mark.parametrize("where,job,args", COMMANDS, ids=[w for w, _, _ in COMMANDS])
def test_documented_command_is_accepted(where, job, args, monkeypatch):
    """Composes as chorus.<job> composes it, and chorus.train and chorus.evaluate accept its settings
    (no unknown key, none the job would ignore): a command chorus would refuse fails here."""
    monkeypatch.setenv("WANDB_RUN_ID", "docs")  # the sweeps' run_tag interpolation
    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        for overrides in runs_of(args):
            node = compose(config_name=job, overrides=overrides)
            if job == "train":
                checked_job(node, overrides)
            elif job == "evaluate":
                c = container(node)
                check_settings("evaluate", f"policy={c['policy']['name']}", c, node, overrides)


def test_the_metrics_page_names_every_logged_metric():
    """Every per-step scalar RL logs (the batch's and the update's) and every summary.json key is on the
    metrics page, so a new metric cannot go undocumented."""
    import inspect

    from chorus.rl.module import RLModule
    from chorus.rl.rollouts import collect, sample_stats
    from chorus.tracking.summary import summarize

    page = (ROOT / "docs" / "reference" / "metrics.md").read_text()
    row = {"task_id": "t", "reward": 0.5, "text": "x", "passed": True, "status": "ok", "finish_reason": "stop",
           "completion_tokens": 3, "overall": 50.0, "instance_ok": True, "seconds": 1.0}
    keys = set(sample_stats([row])) | set(summarize([row]))
    update = inspect.getsource(RLModule._update)
    keys |= set(re.findall(r'"(\w+)"', update[update.rindex("return {"):]))
    keys |= set(re.findall(r"(\w+)=", re.search(r"stats\.update\((.*?)\)\n", inspect.getsource(RLModule.training_step),
                                                  re.S).group(1)))
    keys |= set(re.findall(r'"(\w+)"', re.search(r"stats = \{(.*?)\}\n", inspect.getsource(collect), re.S).group(1)))
    keys -= {"b"}
    undocumented = sorted(k for k in keys if f"`{k}`" not in page and f"`{k}/" not in page)
    assert not undocumented, f"docs/reference/metrics.md lacks {undocumented}"


PIPELINE_RUNS = sorted({tuple(o) for _, job, args in COMMANDS if job == "pipeline" for o in runs_of(args)})


@pytest.mark.slow
@pytest.mark.parametrize("overrides", PIPELINE_RUNS, ids=[" ".join(o) or "default" for o in PIPELINE_RUNS])
def test_documented_pipeline_plans(overrides):
    """A documented pipeline command plans: every step composes and every setting it passes reaches a
    step that reads it (what chorus.pipeline checks before anything runs)."""
    from chorus.pipeline import plan

    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        assert plan(container(compose(config_name="pipeline", overrides=list(overrides))))
