"""Verilator runtime objects and a precompiled header, built once per flag set and reused.

Every testbench built with the same Verilator flags links the same verilated*.o files, so
compiling them per build is waste (3.6 s -> 1.3 s per new testbench). The precompiled
header covers verilated.h and friends, which dominate compiling a small model at -O0.
"""
from __future__ import annotations

import fcntl
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .process import run_limited
from .toolchain import Toolchain, flagset_key, model_compiler
from .workdirs import run_dir

# What every chorus model is built with, the runtime kit included: the kit's objects and header are
# compiled against chorus's driver and the Verilator prefix, so they live here and build.py imports
# them (the kit is the lower layer; it knows nothing of builds).
PREFIX = "Vtb"


def main_source() -> Path:
    """chorus's C++ driver (main) for the Verilated model."""
    return Path(str(resources.files("chorus.sim") / "csrc" / "chorus_main.cpp"))


def includer_script() -> Path:
    """A shell stand-in for Verilator's Python verilator_includer (same output, no interpreter start)."""
    return Path(str(resources.files("chorus.sim") / "csrc" / "includer.sh"))


_TRIVIAL_TB = "`timescale 1ns/1ps\nmodule tb; logic c = 0; always #1 c = ~c; initial begin @(posedge c); #1 $finish; end endmodule\n"
_PCH = '#include "verilated.h"\n#include "verilated_cov.h"\n#include "verilated_timing.h"\n'


class RuntimeBuildError(RuntimeError):
    pass


@dataclass(frozen=True)
class RuntimeKit:
    dir: Path
    objects: tuple[Path, ...]
    pch_header: Path | None
    main_object: Path | None = None  # chorus's driver, compiled against `model_header` (see main_fits)
    # clang's precompiled header and the object holding its code (see toolchain.model_compiler)
    clang_pch: Path | None = None
    clang_object: Path | None = None


MAIN_OBJECT, MODEL_HEADER, MODEL_SETTINGS = "chorus_main.o", "Vtb.h.ref", "Vtb_settings.ref"
CLANG_PCH, CLANG_OBJECT = "chorus_pch.h.pch", "chorus_pch.o"


def _load(d: Path) -> RuntimeKit:
    pch = d / "chorus_pch.h"
    clang = (d / CLANG_PCH).exists() and (d / CLANG_OBJECT).exists()
    return RuntimeKit(d, tuple(sorted(d.glob("verilated*.o"))),
                      pch if (d / "chorus_pch.h.gch").exists() else None,
                      d / MAIN_OBJECT if (d / MAIN_OBJECT).exists() and (d / MODEL_HEADER).exists() else None,
                      d / CLANG_PCH if clang else None, d / CLANG_OBJECT if clang else None)


def model_settings(classes_mk: str) -> str:
    """The settings lines of a model's <prefix>_classes.mk (VM_COVERAGE, VM_TIMING, ...): what decides
    how the driver's headers expand, apart from the model header itself."""
    return "\n".join(ln for ln in classes_mk.splitlines() if ln.startswith("VM_") and " = " in ln
                     and not ln.startswith("VM_PARALLEL_BUILDS"))


def main_fits(kit: RuntimeKit, obj: Path, prefix: str = PREFIX) -> bool:
    """Whether the kit's compiled driver can be linked into the model Verilator just wrote to `obj`:
    the driver sees the model only through <prefix>.h, so it fits when that header and the settings
    the headers depend on are byte for byte the kit's (a testbench top without ports; one with ports
    changes the class layout and gets the driver compiled for it)."""
    if kit.main_object is None:
        return False
    try:
        return ((obj / f"{prefix}.h").read_bytes() == (kit.dir / MODEL_HEADER).read_bytes()
                and model_settings((obj / f"{prefix}_classes.mk").read_text())
                == (kit.dir / MODEL_SETTINGS).read_text())
    except OSError:
        return False


# The runtime objects are compiled once, so they are optimised whatever the models are built with:
# at -O0 a batch of short programs spends most of its time in Verilator's coverage bookkeeping
# (inserting and writing points: std::string and std::map code, ~4x slower unoptimised).
RUNTIME_OPT = "-O2"


def ensure_runtime(tc: Toolchain, flags: tuple[str, ...], make_vars: dict[str, str], cache_root: Path) -> RuntimeKit:
    make_vars = {**make_vars, "OPT_GLOBAL": RUNTIME_OPT} if RUNTIME_OPT and "OPT_GLOBAL" in make_vars else make_vars
    key = flagset_key(tc, flags, make_vars)
    d = Path(cache_root) / "runtime" / key
    if (d / "READY").exists():
        return _load(d)
    d.parent.mkdir(parents=True, exist_ok=True)
    with open(d.parent / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (d / "READY").exists():
            return _load(d)
        with tempfile.TemporaryDirectory(prefix="chorus-rt-", dir=run_dir()) as tmp:
            _build_kit(tc, flags, make_vars, Path(tmp), d)
    return _load(d)


def model_cflags(obj: Path, make_vars: dict[str, str], env: dict[str, str]) -> list[str]:
    """The flags Verilator's makefile compiles a one-file model with (include dirs, VM_* defines,
    -std), read from `make -n` so that they stay Verilator's, minus compiler, optimisation and files."""
    marker = "chorus-cxx-marker"
    cmd = ["make", "-n", "-B", "-C", str(obj), "-f", f"{PREFIX}.mk", f"{PREFIX}__ALL.o",
           *(f"{k}={v}" for k, v in make_vars.items() if k != "OBJCACHE"), f"CXX={marker}", "OPT_FAST="]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith(marker) and " -c " in ln), None)
    if line is None:
        raise RuntimeBuildError(f"could not read the model compile flags from make -n: {out.stdout[-300:]}")
    words, flags = shlex.split(line)[1:], []
    while words:
        w = words.pop(0)
        if w == "-o":
            words.pop(0)
        elif w not in ("-c", "-MMD") and not w.endswith(".cpp"):
            flags.append(w)
    return flags


def _verilator_include(env: dict[str, str]) -> Path:
    return Path(env["VERILATOR_ROOT"]) / "include"


def _build_clang_pch(clang: tuple[str, ...], obj: Path, make_vars: dict[str, str], env: dict[str, str],
                     stage: Path) -> None:
    """clang's header with the templates instantiated, and its code compiled once into an object;
    models include the one and link the other. Models get built with g++ if this fails (logged)."""
    opt = make_vars.get("OPT_FAST", "-O0").split()
    flags = model_cflags(obj, make_vars, env)
    # clang's header records the files it was made from and checks them when used: the kit's own
    # chorus_pch.h moves (stage -> cache dir), so the header is made of Verilator's headers directly.
    *first, last = [ln.split('"')[1] for ln in _PCH.splitlines()]
    steps = ([*clang, *opt, *flags, *(a for h in first for a in ("-include", h)), "-x", "c++-header",
              "-fpch-codegen", "-fpch-instantiate-templates", str(_verilator_include(env) / last), "-o", CLANG_PCH],
             [*clang, *opt, "-c", CLANG_PCH, "-o", CLANG_OBJECT])
    for cmd in steps:
        r = run_limited(cmd, cwd=obj, env=env, timeout_s=300, log_path=obj / "clang.log", mem_mb=8192, file_mb=512)
        if r.returncode != 0:
            (stage / "clang.log").write_text(r.log[-4000:])
            return
    for name in (CLANG_PCH, CLANG_OBJECT):
        shutil.copy(obj / name, stage / name)


def _build_kit(tc: Toolchain, flags, make_vars, tmp: Path, dest: Path) -> None:
    (tmp / "tb.sv").write_text(_TRIVIAL_TB)
    shutil.copy(main_source(), tmp / "chorus_main.cpp")
    env = tc.env()
    obj = tmp / "obj"
    cmd = [str(tc.verilator), *flags, "--prefix", PREFIX, "--top-module", "tb", "--Mdir", str(obj),
           "-o", "sim", "tb.sv", "chorus_main.cpp"]
    r = run_limited(cmd, cwd=tmp, env=env, timeout_s=300, log_path=tmp / "v.log", mem_mb=8192, file_mb=512)
    if r.returncode != 0:
        raise RuntimeBuildError(f"could not verilate the runtime probe: {r.log[-500:]}")
    (obj / "chorus_pch.h").write_text(_PCH)
    shutil.copy(includer_script(), obj / includer_script().name)
    targets = ["sim", "chorus_pch.h.fast.gch"]
    cmd = ["make", "-s", "-C", str(obj), "-f", f"{PREFIX}.mk", "-j2", *targets,
           *(f"{k}={v}" for k, v in make_vars.items())]
    r = run_limited(cmd, cwd=obj, env=env, timeout_s=900, log_path=tmp / "m.log", mem_mb=8192, file_mb=512)
    if r.returncode != 0:
        raise RuntimeBuildError(f"could not build the Verilator runtime: {r.log[-500:]}")
    stage = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    for o in obj.glob("verilated*.o"):
        shutil.copy(o, stage / o.name)
    shutil.copy(obj / "chorus_pch.h", stage / "chorus_pch.h")
    shutil.copy(obj / "chorus_main.o", stage / MAIN_OBJECT)
    shutil.copy(obj / f"{PREFIX}.h", stage / MODEL_HEADER)
    (stage / MODEL_SETTINGS).write_text(model_settings((obj / f"{PREFIX}_classes.mk").read_text()))
    shutil.copy(obj / "chorus_pch.h.fast.gch", stage / "chorus_pch.h.gch")
    if clang := model_compiler(tc):
        _build_clang_pch(clang, obj, make_vars, env, stage)
    (stage / "READY").write_text("ok\n")
    shutil.rmtree(dest, ignore_errors=True)
    stage.rename(dest)
