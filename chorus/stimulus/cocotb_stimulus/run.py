"""Build the DUT + alias wrapper once per design with cocotb's Verilator main, then run it per
stimulus module in a fresh directory and score coverage like every other format."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

from ...core.task import Task
from ...sim.build import build, build_fingerprint, make_vars, verilator_flags
from ...sim.cache import ResultCache, default_cache_root
from ...sim.config import SimConfig
from ...sim.result import SimResult
from ...sim.runtime import RuntimeBuildError, ensure_runtime
from ...sim.prebuilt import cached_binary, store_binary, untrusted_rtl_in_harness
from ...sim.execute import RunRecord, launch, score_run, scratch_policy
from ...sim.process import tree_bytes
from ...sim.design_check import stage_design
from ...sim.simulate import task_facts
from ...sim.toolchain import ToolchainError, find_toolchain, flagset_key
from ..aliases import AliasMap, alias_map
from ..skeleton import CLOCK_HALF_NS, COCOTB_TOP, cocotb_wrapper
from .check import STIMULUS_FILE
from ...sim.workdirs import new_workdir

VERSION = "1"
HARNESS_MODULE = "chorus_cocotb_harness"
HARNESS = (Path(__file__).resolve().parent / "harness_module.py").read_text()
CHILD_DIR = "chorus_child"  # the harness runs the stimulus from CHILD_DIR/main.py, next to it
# Every module of the stimulus process's package (child/), by file name, sorted.
CHILD = tuple((p.name, p.read_text()) for p in sorted((Path(__file__).resolve().parent / "child").glob("*.py")))
_SAFE_BUILTINS = ("abs all any bin bool bytes chr dict divmod enumerate filter float format frozenset hex int "
                  "isinstance iter len list map max min next oct ord pow print range repr reversed round set "
                  "slice sorted str sum tuple zip Exception ValueError TypeError RuntimeError AssertionError "
                  "ArithmeticError ZeroDivisionError IndexError KeyError LookupError AttributeError "
                  "NotImplementedError OverflowError StopIteration StopAsyncIteration TimeoutError").split()

def _cocotb_paths() -> tuple[Path, Path, str]:
    import cocotb
    import cocotb_tools.config as cc

    return Path(cc.libs_dir), Path(cc.share_dir) / "lib" / "verilator" / "verilator.cpp", cocotb.__version__


def build_key(task: Task, wrapper: str, cfg: SimConfig, tc) -> str:
    libs, main, version = _cocotb_paths()
    h = hashlib.sha256()
    for part in (sorted(task.rtl.items()), sorted(task.defines.items()), task.top, wrapper, build_fingerprint(cfg),
                 tc.version, str(libs), main.read_bytes(), version, VERSION):
        h.update(repr(part).encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def ensure_build(task: Task, cfg: SimConfig) -> tuple[Path | None, str, SimResult | None]:
    """The cached cocotb simulation binary for this design, building it on first use."""
    try:
        tc = find_toolchain()
        wrapper = cocotb_wrapper(task, alias_map(task))
        key = build_key(task, wrapper, cfg, tc)
    except (ToolchainError, ImportError) as exc:
        return None, "", SimResult("harness_error", f"cocotb format unavailable: {exc}")
    binary, failure = cached_binary("cocotb", key, cfg, lambda b: _build_into(task, wrapper, cfg, tc, b))
    return binary, key, failure


def _build_into(task: Task, wrapper: str, cfg: SimConfig, tc, binary: Path) -> SimResult | None:
    libs, main, _ = _cocotb_paths()
    root = default_cache_root(cfg.cache_dir)
    # --vpi adds runtime objects the shared kit lacks (verilated_vpi.o, verilated_dpi.o); like the
    # kit they depend only on the flags, so the first cocotb build keeps them for the next ones.
    extra = root / "cocotb" / f"runtime-{flagset_key(tc, verilator_flags(cfg), make_vars(cfg, tc))}"
    workdir = new_workdir("cocotb", cfg.keep_workdir)
    try:
        design, obj = workdir / "design", workdir / "obj"
        design.mkdir()
        sources = stage_design(task, design)
        if isinstance(sources, SimResult):
            return sources
        (design / "verif").mkdir(exist_ok=True)
        (design / "verif" / f"{COCOTB_TOP}.sv").write_text(wrapper)
        (workdir / "out").mkdir(exist_ok=True)
        refused = untrusted_rtl_in_harness(task, tc, cfg, root, workdir, [*sources, f"verif/{COCOTB_TOP}.sv"],
                                           COCOTB_TOP)
        if refused is not None:
            return refused
        try:
            b = build(tc, cfg, workdir, [*sources, f"verif/{COCOTB_TOP}.sv"], COCOTB_TOP, task.defines, root,
                      prefix="Vtop", main=main,
                      extra_args=("--vpi", "-LDFLAGS", f"-Wl,-rpath,{libs} -L{libs} -lcocotbvpi_verilator"),
                      extra_objects=tuple(sorted(extra.glob("verilated*.o"))))
        except RuntimeBuildError as exc:
            return SimResult("harness_error", str(exc).splitlines()[0])
        if b.status != "ok":
            return SimResult(b.status, f"the design does not build with the cocotb wrapper: {b.reason}",
                             build_log=b.log)
        if not extra.exists():
            shared = {o.name for o in ensure_runtime(tc, verilator_flags(cfg), make_vars(cfg, tc), root).objects} \
                if cfg.prebuilt_runtime else set()
            tmp = extra.with_name(f"{extra.name}.{os.getpid()}.tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            for o in obj.glob("verilated*.o"):
                if o.name not in shared:
                    shutil.copy2(o, tmp / o.name)
            try:
                tmp.rename(extra)
            except OSError:  # another process stored them first
                shutil.rmtree(tmp, ignore_errors=True)
        store_binary(b.binary, binary)
        return None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# ---------------------------------------------------------------- one evaluation

def _max_time_ns(cfg: SimConfig, opts: dict) -> float:
    return float(min(opts.get("max_time_ns", cfg.max_sim_time_ns), cfg.max_sim_time_ns))


def _wall_s(cfg: SimConfig) -> float:
    """Wall-clock budget inside the run: ends it with coverage before run_limited kills it."""
    return max(1.0, cfg.run_timeout_s - 5.0)


def _env(inp: Path, amap: AliasMap, opts: dict, cfg: SimConfig) -> dict[str, str]:
    import cocotb_tools.config as cc
    import find_libpython

    libpython = find_libpython.find_libpython()
    harness = {"stimulus": str(inp / STIMULUS_FILE), "half_ns": CLOCK_HALF_NS, "builtins": list(_SAFE_BUILTINS),
               "reset": amap.reset.alias if amap.reset else None, "reset_active": amap.reset_active,
               "reset_cycles": int(opts.get("reset_cycles", 2)), "seed": int(opts.get("seed", 1)),
               "max_time_ns": _max_time_ns(cfg, opts), "wall_s": _wall_s(cfg), "watch_ns": 2000 * CLOCK_HALF_NS}
    # What cocotb_tools.runner.Verilator sets for a test run, for our own process limits.
    return {"PATH": f"{os.environ.get('PATH', '/usr/bin:/bin')}:{cc.libs_dir}",
            "PYTHONPATH": os.pathsep.join([str(inp), *(p for p in sys.path if p)]),
            "PYGPI_PYTHON_BIN": sys.executable, "LIBPYTHON_LOC": str(libpython),
            "GPI_USERS": f"{libpython};{cc.pygpi_entry_point()}", "COCOTB_TEST_MODULES": HARNESS_MODULE,
            "COCOTB_TOPLEVEL": COCOTB_TOP, "TOPLEVEL_LANG": "verilog", "COCOTB_TRUST_INERTIAL_WRITES": "1",
            "COCOTB_RANDOM_SEED": str(int(opts.get("seed", 1))), "COCOTB_RESULTS_FILE": "/dev/null",
            "COCOTB_ANSI_OUTPUT": "0", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1",
            # No pytest assertion rewriting: it builds a pytest config, loading every installed
            # pytest plugin (hydra, trio, ...) into each run for ~0.2 s.
            "COCOTB_REWRITE_ASSERTION_FILES": "", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "CHORUS_COCOTB": json.dumps(harness)}


def _error_from_log(log: str) -> str:
    """The exception of a task the stimulus started, from the traceback cocotb logs for it."""
    lines = log.splitlines()
    frames = [i for i, ln in enumerate(lines) if f'File "{STIMULUS_FILE}", line' in ln]
    if not frames:
        return "an exception in a task it started (see the run log)"
    line = re.search(r"line (\d+)", lines[frames[-1]]).group(1)
    for ln in lines[frames[-1] + 2:frames[-1] + 12]:
        m = re.match(r"\s*([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Iteration)\w*)(?::\s*(.*))?$", ln)
        if m:
            return f"{m.group(1)} at line {line}: {m.group(2) or ''}".rstrip(": ")[:300]
    return f"an exception at line {line} in a task it started (see the run log)"


def _run_once(task: Task, cfg: SimConfig, binary: Path, workdir: Path, env: dict) -> tuple[SimResult, dict | None]:
    """One jailed run of the cocotb binary. Only chorus's harness runs in the simulator process
    (the stimulus runs in a locked-down child of it), reading its modules from `in/`. Like every
    format, it works in a fresh tmpfs of the run's write budget; status and coverage go to the two
    files of `out/` made for them (the only other files it may write), read after the whole tree is dead."""
    run, inp, out = workdir / "run", workdir / "in", workdir / "out"
    for d in (run, out):
        d.mkdir(exist_ok=True)
    status_file, coverage_file = out / "status.json", out / "coverage.dat"
    for f in (status_file, coverage_file):
        f.write_bytes(b"")
    args = ["--coverage-per-instance", f"+verilator+coverage+file+{coverage_file}"]
    policy = scratch_policy(cfg, run, (str(binary.parent), str(inp)), (str(status_file), str(coverage_file)))
    r = launch(cfg, default_cache_root(cfg.cache_dir), binary, args, run, out,
               {"CHORUS_STATUS_OUT": str(status_file), **env}, policy)
    if r.scratch_bytes is None and not r.setup_error:  # no tmpfs of its own (isolation off): its files are here
        r.scratch_bytes = tree_bytes(run)
    try:
        status = json.loads(status_file.read_text())
    except (OSError, json.JSONDecodeError):
        status = None
    coverage = coverage_file.read_text(errors="replace") if coverage_file.stat().st_size else None
    end = status.get("end") if isinstance(status, dict) else None
    record = RunRecord(end if isinstance(end, str) else None, coverage)
    return score_run(task, cfg, r, record, task_facts(task), {}), status


def run_cocotb(task: Task, text: str, cfg: SimConfig, opts: dict) -> SimResult:
    """Run a checked stimulus module against the design's cached cocotb build and score coverage."""
    t0 = time.monotonic()
    binary, bkey, failure = ensure_build(task, cfg)
    if failure is not None:
        return failure
    amap = alias_map(task)
    knobs = (opts.get("reset_cycles", 2), opts.get("seed", 1), _max_time_ns(cfg, opts))
    parts = (bkey, task.instance, text, HARNESS, CHILD, knobs, cfg.fingerprint())
    key = hashlib.sha256(repr(parts).encode()).hexdigest()
    cache = ResultCache(default_cache_root(cfg.cache_dir), cfg.cache_max_gb) if cfg.cache else None
    if cache and (hit := cache.get(key)):
        return hit
    workdir = new_workdir("cocotb", cfg.keep_workdir)
    try:
        inp = workdir / "in"
        (inp / CHILD_DIR).mkdir(parents=True)
        (inp / STIMULUS_FILE).write_text(text)
        (inp / f"{HARNESS_MODULE}.py").write_text(HARNESS)
        for name, source in CHILD:
            (inp / CHILD_DIR / name).write_text(source)
        result, status = _run_once(task, cfg, binary, workdir, _env(inp, amap, opts, cfg))
        if status is None and result.status == "runtime_error":
            tail = [ln for ln in result.run_log.splitlines() if ln.strip()][-1:] or ["no output"]
            result.status = "harness_error"
            result.reason = f"cocotb did not start the chorus harness: {tail[0][:200]}"
        elif status and status.get("end") == "wall_clock" and result.report:
            result.status = "timeout"
            result.reason = (f"stopped after {_wall_s(cfg):.0f} s of wall clock (a loop without await, "
                             "or too long a run); coverage kept")
        elif status and status.get("end") == "exception" and result.status == "ok":
            kept = "coverage up to that point is kept" if result.report else "no coverage"
            error = status.get("error") or _error_from_log(result.run_log)
            result.status, result.reason = "runtime_error", f"the stimulus raised {error} ({kept})"
    finally:
        if not cfg.keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    result.seconds["total"] = round(time.monotonic() - t0, 4)
    if cache and result.status != "harness_error":
        cache.put(key, result)
    return result
