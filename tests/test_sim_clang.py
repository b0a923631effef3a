"""Models compiled by clang (ziglang wheel) score exactly as g++-built ones; g++ decides failures."""
import dataclasses
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from chorus.sim import build as build_module
from chorus.sim import simulate
from chorus.sim.runtime import includer_script
from chorus.sim.toolchain import find_toolchain, model_compiler
from chorus.tasks import load_bundled
from helpers import counter_tb

needs_clang = pytest.mark.skipif(not model_compiler(find_toolchain()),
                                 reason="ziglang (clang) is not installed: models are built with g++ only")


def built_by(tmp: Path) -> list[bytes]:
    """Which compiler made each kept build's model object: its .comment section names it."""
    out = []
    for o in sorted(tmp.glob("chorus-kept-sim-*/obj/Vtb__ALL.o")):  # keep_workdir: beside the run dir
        data = o.read_bytes()
        out.append(b"clang" if b"clang version" in data else b"gcc" if b"GCC: (" in data else b"?")
    return out


def kept_run(task, tb, cfg, tmp: Path, monkeypatch):
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return simulate(task, tb, dataclasses.replace(cfg, keep_workdir=True))


def outcome(r) -> tuple:
    return r.status, r.reason, r.end, r.report.to_dict() if r.report else None, r.run_log


@pytest.mark.slow
@needs_clang
def test_clang_and_gcc_models_score_alike_on_every_bundled_family(sim_cfg, tmp_path, monkeypatch):
    """One task per bundled family (different designs, FSMs, memories, parameters), built both ways:
    identical status, end, coverage report (every point) and log; the object files prove which
    compiler built each (without clang both would be g++ and the test would show nothing)."""
    by_family = {}
    for t in load_bundled():
        if t.reference_tb:
            by_family.setdefault(t.family, t)
    tasks = list(by_family.values())
    assert len(tasks) == 5
    for i, t in enumerate(tasks):
        got = {clang: kept_run(t, t.reference_tb, dataclasses.replace(sim_cfg, clang=clang),
                               tmp_path / f"{i}-{clang}", monkeypatch) for clang in (True, False)}
        assert got[True].status == "ok", (t.id, got[True].reason)
        assert outcome(got[True]) == outcome(got[False]), t.id
        assert built_by(tmp_path / f"{i}-True") == [b"clang"] and built_by(tmp_path / f"{i}-False") == [b"gcc"]


@needs_clang
def test_a_clang_failure_is_decided_by_gcc(counter_task, sim_cfg, tmp_path, monkeypatch):
    """Were clang to reject a model that g++ builds, the testbench would not be charged: the build is
    re-run with g++, whose verdict is the result, as when clang is absent."""
    # "clang" writes a model object that cannot link (as a header object short of a runtime symbol
    # would): the link fails, and g++ must not reuse what clang left behind
    monkeypatch.setattr(build_module, "model_compiler",
                        lambda tc: ("sh", "-c", 'for a; do o=$n; n=$a; done; echo junk > "$o"', "--"))
    tb = counter_tb("    repeat (20) @(posedge clk);\n    $finish;")
    r = kept_run(counter_task, tb, sim_cfg, tmp_path / "w", monkeypatch)
    assert r.status == "ok", r.reason
    assert built_by(tmp_path / "w") == [b"gcc"]
    reference = simulate(counter_task, tb, dataclasses.replace(sim_cfg, clang=False))
    assert outcome(r) == outcome(reference)


def test_the_shell_includer_writes_what_verilators_does(tmp_path):
    args = ["-DVL_INCLUDE_OPT=include", "-DA=b=c", "-DEMPTY=", "-Dnoeq", "Vtb.cpp", "dir/Vtb__Syms__Slow.cpp",
            "with space.cpp"]
    ours = subprocess.run(["sh", str(includer_script()), *args], capture_output=True, text=True, check=True)
    theirs = subprocess.run([sys.executable, str(find_toolchain().root / "bin" / "verilator_includer"), *args],
                            capture_output=True, text=True, check=True,
                            env={**os.environ, "VERILATOR_ROOT": str(find_toolchain().root)})
    assert ours.stdout == theirs.stdout
    assert '#define A b=c\n' in ours.stdout and '#include "with space.cpp"\n' in ours.stdout
