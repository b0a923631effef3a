"""Turn design + testbench sources into a simulation binary with Verilator.

Fast path: Verilator only generates C++; chorus then runs make itself with the Verilator
runtime objects (verilated*.o) and a precompiled header prebuilt once per flag set, at -O0,
with ccache when present. The naive path (`naive=True`) is plain `--coverage` at Verilator's
default optimisation with everything compiled from scratch, kept as the benchmark baseline.
"""
from __future__ import annotations

import functools
import hashlib
import shlex
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .config import SimConfig
from .isolation import Policy
from .process import Jail, run_limited
from .runtime import PREFIX, RuntimeKit, ensure_runtime, includer_script, main_fits, main_source
from .toolchain import COVERAGE_FLAGS, WARNING_FLAGS, Toolchain, fast_linker, model_compiler

BINARY = "sim"


@dataclass
class BuildOutcome:
    status: str  # ok | compile_error | harness_error | timeout | stopped (see build's gate)
    reason: str
    log: str
    seconds: float
    binary: Path | None = None


def verilator_flags(cfg: SimConfig, naive: bool = False) -> tuple[str, ...]:
    cov = ("--coverage",) if naive else COVERAGE_FLAGS
    # --timescale: xrun's default for modules without one, so `#5` means 5 ns as under CVDP.
    # --inline-mult 0 inlines every module: Verilator keeps one set of coverage counters per
    # non-inlined module and reports them under a single instance, so a second instance of a
    # large DUT (or of a big submodule) would otherwise steal or hide the first one's coverage.
    return ("--cc", "--exe", "--timing", *cov, "--timescale", "1ns/1ps", "--inline-mult", "0",
            "-CFLAGS", "-std=c++20",
            *WARNING_FLAGS, *cfg.extra_verilator_flags)


def make_vars(cfg: SimConfig, tc: Toolchain, naive: bool = False) -> dict[str, str]:
    # The PCH include setting is a workaround needed even for naive builds of larger designs.
    if naive:
        return {"CFG_CXXFLAGS_PCH_I": "-include"}
    v = {"CFG_CXXFLAGS_PCH_I": "-include", "OPT_FAST": cfg.opt, "OPT_SLOW": cfg.opt, "OPT_GLOBAL": cfg.opt,
         "VERILATOR_INCLUDER": f"sh {includer_script().name}"}  # copied into the build dir (the jail reads it)
    if cfg.ccache and tc.ccache:
        v["OBJCACHE"] = tc.ccache
    if linker := fast_linker(tc):
        v["USER_LDFLAGS"] = linker  # linking was a tenth of a new testbench's build with the default ld
    return v


def define_args(defines: dict[str, str]) -> list[str]:
    """Verilator's +define+ arguments, the same for every Verilator run over one design."""
    return [f"+define+{k}={v}" if v != "" else f"+define+{k}" for k, v in defines.items()]


def verilator_errors(log: str) -> list[str]:
    return [ln.strip() for ln in log.splitlines() if ln.startswith("%Error")]


@functools.lru_cache(maxsize=1)
def _sources_digest() -> bytes:
    """The driver and the rules that decide what may be built: a cached `ok` must not outlive a
    stricter check. Read once per process (the fingerprint is computed for every evaluation)."""
    h = hashlib.sha256(main_source().read_bytes())
    for f in ("safety.py", "stdtasks.py", "preprocess.py", "verilator_ast.py", "verilator_tree.py", "dut_boundary.py",
              "design_check.py", "design.py", "execute.py", "batch.py", "coverage.py"):
        h.update((Path(__file__).parent / f).read_bytes())
    return h.digest()


def build_fingerprint(cfg: SimConfig) -> str:
    """Everything about a build that can change a result: settings, flags, the driver source and
    the safety rules."""
    h = hashlib.sha256()
    for part in (cfg.fingerprint(), *verilator_flags(cfg, cfg.naive_build), _sources_digest()):
        h.update(part if isinstance(part, bytes) else str(part).encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def _parallel_build(obj: Path, prefix: str = PREFIX) -> bool:
    classes = obj / f"{prefix}_classes.mk"
    return classes.exists() and "VM_PARALLEL_BUILDS = 1" in classes.read_text()


def classify_failure(log: str, returncode: int | None, signal: int | None) -> tuple[str, str]:
    """A failed Verilator run on a design that builds without this testbench: the testbench's
    compile error, whatever the log says (its text can quote the testbench)."""
    if signal is not None:
        hint = " (memory or CPU limit: a compile blowup?)" if signal in (9, 24) else ""
        return "compile_error", f"Verilator was killed by signal {signal} on this testbench{hint}"
    errors = verilator_errors(log)
    if errors:
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        return "compile_error", errors[0][:300] + more
    return "compile_error", f"Verilator failed with exit code {returncode} and no %Error line"


def _over_disk(cfg: SimConfig, step: str) -> str:
    return f"{step} wrote more than simulator.disk_quota_mb={cfg.disk_quota_mb} MB in total for this testbench"


def build_jail(cfg: SimConfig, cache_root: Path, read: tuple[Path, ...], write: tuple[Path, ...]) -> Jail:
    # Not strict: the linker sets the mode of the binary it writes.
    return Jail(cfg.isolation, str(cache_root), Policy(read=tuple(map(str, read)), write=tuple(map(str, write))))


def build(tc: Toolchain, cfg: SimConfig, workdir: Path, sources: list[str], tb_top: str,
          defines: dict[str, str], cache_root: Path, naive: bool = False, prefix: str = PREFIX,
          main: Path | None = None, extra_args: tuple[str, ...] = (),
          extra_objects: tuple[Path, ...] = (), gate: Callable[[], bool] | None = None,
          cancel: threading.Event | None = None) -> BuildOutcome:
    """Verilate and compile `sources` (paths relative to workdir/design) into workdir/obj/sim.

    `main` replaces chorus's driver (e.g. cocotb's VPI main), `extra_args` go to Verilator and
    `extra_objects` join the prebuilt runtime objects (e.g. the VPI ones a --vpi build needs).
    `gate`, when given, is asked after Verilator and before any C++ is compiled: False stops the
    build there (status "stopped"), so Verilator can run while a check of the same sources does;
    `cancel`, once set (the check failed), stops Verilator at once."""
    design, obj, host = workdir / "design", workdir / "obj", workdir / "host"
    main = main or main_source()
    # The C++ main lives in a dir of its own, never beside the task's files: the main's quoted
    # #includes are looked up first in its own dir, and make finds sources through its dir
    # (VPATH), so a task's verilated.h or .cpp there would be compiled into the simulation.
    host.mkdir(exist_ok=True)
    shutil.copy(main, host / main.name)
    (workdir / "out").mkdir(exist_ok=True)
    env = tc.env()
    env["TMPDIR"] = str(obj)  # the compiler's temporaries stay inside what the jail may write
    flags = verilator_flags(cfg, naive)
    mvars = make_vars(cfg, tc, naive)
    kit: RuntimeKit | None = None
    if not naive and cfg.prebuilt_runtime:
        kit = ensure_runtime(tc, flags, mvars, cache_root)
    cmd = [str(tc.verilator), *flags, *extra_args, "--prefix", prefix, "--top-module", tb_top, "--Mdir", str(obj),
           "-o", BINARY, *define_args(defines),
           *sources, str(host / main.name)]
    log_v = workdir / "out" / "verilator.log"
    mem, fsz = cfg.mem_limit_mb, 512
    obj.mkdir(exist_ok=True)
    kit_dirs = (kit.dir,) if kit else ()
    writable = (obj, *((Path(tc.ccache_dir),) if "OBJCACHE" in mvars and tc.ccache_dir else ()))
    jail = build_jail(cfg, cache_root, (design, host, *kit_dirs, *(o.parent for o in extra_objects)), writable)
    quota = (cfg.disk_quota_mb, (obj,))  # everything the build writes, in total (not only per file)
    v = run_limited(cmd, cwd=design, env=env, timeout_s=cfg.build_timeout_s, log_path=log_v, mem_mb=mem,
                    file_mb=fsz, jail=jail, disk_quota=quota, cancel=cancel)
    if cancel is not None and cancel.is_set():
        return BuildOutcome("stopped", "stopped: the sources' check did not pass", v.log, v.seconds)
    if v.setup_error:
        return BuildOutcome("harness_error", f"isolation could not be set up: {v.setup_error}", v.log, v.seconds)
    if v.over_disk:
        return BuildOutcome("compile_error", _over_disk(cfg, "Verilator"), v.log, v.seconds)
    if v.timed_out:
        return BuildOutcome("timeout", f"Verilator did not finish in {cfg.build_timeout_s:.0f} s", v.log, v.seconds)
    if v.returncode != 0 or v.signal is not None:
        status, reason = classify_failure(v.log, v.returncode, v.signal)
        return BuildOutcome(status, reason, v.log, v.seconds)
    if gate is not None and not gate():
        return BuildOutcome("stopped", "stopped before the C++ compile: the sources' check did not pass", v.log,
                            v.seconds)
    make_args = dict(mvars)
    shutil.copy(includer_script(), obj / includer_script().name)
    for o in (*(kit.objects if kit else ()), *extra_objects):
        shutil.copy(o, obj / o.name)  # copy, not copy2: must be newer than the generated .mk
    if kit is not None and main == main_source() and main_fits(kit, obj, prefix):
        shutil.copy(kit.main_object, obj / "chorus_main.o")  # newer than its source: make links it as is
    clang_args = {}
    if kit is not None and cfg.pch and not _parallel_build(obj, prefix):
        # Larger models are split into several files that use Verilator's own precompiled
        # header; a compile takes one PCH, so ours must stay out of those builds.
        if kit.pch_header is not None:
            make_args["OPT_FAST"] = f"{make_args['OPT_FAST']} -include {kit.pch_header}"
        # Only chorus's own driver: clang's header object needs every runtime object it was made
        # with, which a build with another main (cocotb's VPI one) does not link as such.
        if cfg.clang and kit.clang_pch is not None and main == main_source() and not extra_objects:
            # No ccache: a new testbench is a new file, so it could only miss.
            clang_args = {k: v for k, v in make_args.items() if k != "OBJCACHE"}
            clang_args.update(CXX=shlex.join(model_compiler(tc)).replace("$", "$$"), USER_LDLIBS=str(kit.clang_object),
                              OPT_FAST=f"{mvars['OPT_FAST']} -include-pch {kit.clang_pch}")
    log_m = workdir / "out" / "make.log"

    def make(args: dict[str, str], spent: float):
        cmd = ["make", "-s", "-C", str(obj), "-f", f"{prefix}.mk", f"-j{max(1, cfg.jobs)}",
               *(f"{k}={val}" for k, val in args.items())]
        return run_limited(cmd, cwd=obj, env=env, timeout_s=max(1.0, cfg.build_timeout_s - spent), log_path=log_m,
                           mem_mb=mem, file_mb=fsz, jail=jail, disk_quota=quota)

    before = {p.name for p in obj.iterdir()}
    m = make(clang_args or make_args, v.seconds)
    seconds = v.seconds + m.seconds
    if clang_args and not (m.over_disk or m.setup_error or m.timed_out) and (m.returncode != 0 or m.signal is not None):
        # g++ decides what fails to compile, as without clang: a failure is built again with g++
        # alone, from what Verilator wrote (whatever clang made is removed first).
        for p in obj.iterdir():
            if p.name not in before and p.is_file() and not p.is_symlink():
                p.unlink()
        m = make(make_args, seconds)
        seconds += m.seconds
    if m.over_disk:
        return BuildOutcome("compile_error", _over_disk(cfg, "the C++ compile"), v.log + m.log, seconds)
    if m.setup_error:
        return BuildOutcome("harness_error", f"isolation could not be set up: {m.setup_error}", m.log, seconds)
    if m.timed_out:
        return BuildOutcome("timeout", f"C++ compile did not finish in {cfg.build_timeout_s:.0f} s",
                            v.log + m.log, seconds)
    binary = obj / BINARY
    if m.returncode != 0 or m.signal is not None or not binary.exists():
        # The design compiles with chorus's own harness (a broken design is caught there), so a
        # failure here comes from the code this testbench made Verilator generate.
        first = next((ln for ln in m.log.splitlines() if "error" in ln.lower()), m.log.strip()[-200:])
        how = f"killed by signal {m.signal}" if m.signal is not None else f"failed: {first[:300]}"
        return BuildOutcome("compile_error", f"C++ compile of the Verilated model {how}", v.log + m.log, seconds)
    return BuildOutcome("ok", "", v.log + m.log, seconds, binary)
