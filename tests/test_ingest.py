"""chorus.ingest: a folder of designs as tasks with measured targets (tasks/folder.py, ingest.py,
measured_targets.py), through the real CLI, pyslang and Verilator."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chorus.tasks.ingest import split_of
from chorus.tasks.measured_targets import rule_target

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "designs"

COUNTER = """module cnt #(parameter int W = 4) (input logic clk, input logic rst_n, input logic en,
  input logic [3:0] k, output logic [W-1:0] q, output logic hit);
  always_ff @(posedge clk or negedge rst_n)
    if (!rst_n) q <= '0; else if (en) q <= q + 1'b1;
  assign hit = (q == 4'd9) && (k == 4'hA);
endmodule
"""


def ingest_cli(src, out, cache, *args, tmp):
    env = dict(os.environ, CHORUS_CACHE_DIR=str(cache))
    return subprocess.run([sys.executable, "-m", "chorus.ingest", f"src={src}", f"out={out}",
                           f"hydra.run.dir={tmp / 'hydra'}", *args], capture_output=True, text=True, env=env,
                          timeout=600, cwd=ROOT)


def test_rule_target_by_hand():
    assert rule_target(90.0, 1 / 3) == 93.3  # 90 + 10/3 = 93.33.. rounded down
    assert rule_target(100.0, 1 / 3) == 100.0
    assert rule_target(40.0, 0.5) == 70.0


def test_split_depends_on_the_name_alone_and_follows_the_shares():
    shares = {"train": 0.6, "validation": 0.2, "test": 0.2}
    assert split_of("sync_fifo", shares) == split_of("sync_fifo", dict(reversed(list(shares.items()))))
    counts = {s: 0 for s in shares}
    for i in range(3000):
        counts[split_of(f"design{i}", shares)] += 1
    assert abs(counts["train"] / 3000 - 0.6) < 0.03 and abs(counts["test"] / 3000 - 0.2) < 0.03
    assert {split_of(f"d{i}", {"train": 1.0}) for i in range(50)} == {"train"}
    with pytest.raises(ValueError, match="summing to 1"):
        split_of("x", {"train": 0.5, "test": 0.2})


@pytest.mark.slow
def test_examples_ingest_with_measured_targets_score_as_jsonl_and_come_back_from_the_cache(tmp_path):
    cache, out = tmp_path / "cache", tmp_path / "tasks.jsonl"
    first = ingest_cli(EXAMPLES, out, cache, tmp=tmp_path)
    assert first.returncode == 0, first.stderr
    designs = sorted(d.name for d in EXAMPLES.iterdir() if d.is_dir())
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(designs) >= 3 and sorted(r["id"] for r in rows) == designs
    for r in rows:
        cal = r["meta"]["calibration"]
        assert cal["random_runs"] == 4 and cal["random_cycles"] == 500 and 0 < cal["random_mean"] <= cal["random_best"]
        assert r["targets"]["overall"] == rule_target(cal["random_best"], 1 / 3) >= cal["random_best"]
        assert r["split"] == split_of(r["id"], {"train": 0.6, "validation": 0.2, "test": 0.2})
        assert r["instance"] == "dut" and r["rtl"] and r["spec"]
    uart = next(r for r in rows if r["id"] == "uart_rx")
    assert uart["top"] == "uart_rx" and uart["parameters"] == {"CLKS_PER_BIT": 4}
    assert "`include" not in "".join(uart["rtl"].values())  # the header is inlined
    assert f"simulated for {len(rows)} designs, read from the cache for 0" in first.stdout
    again = ingest_cli(EXAMPLES, tmp_path / "again.jsonl", cache, tmp=tmp_path)
    assert again.returncode == 0 and f"simulated for 0 designs, read from the cache for {len(rows)}" in again.stdout
    assert (tmp_path / "again.jsonl").read_text() == out.read_text()
    # the rows score with tasks=jsonl: uniform random stimulus in the vectors format, and whole testbenches
    # (chorus's rendering of a random burst for each task, scored as files)
    from chorus.core.task import read_jsonl
    from chorus.stimulus.aliases import alias_map
    from chorus.stimulus.formats import render
    from chorus.stimulus.program import parse_vectors
    from chorus.tasks.measured_targets import random_bursts

    (tmp_path / "tbs").mkdir()
    for t in read_jsonl(out):
        amap = alias_map(t)
        (tmp_path / "tbs" / f"{t.id}.sv").write_text(render("testbench", t, parse_vectors(random_bursts(t, amap)[0], amap)))
    env = dict(os.environ, CHORUS_CACHE_DIR=str(cache))
    for fmt, policy in (("vectors", ["policy=random"]), ("testbench", ["policy=file", f"policy.dir={tmp_path / 'tbs'}"])):
        p = subprocess.run([sys.executable, "-m", "chorus.evaluate", "tasks=jsonl", f"tasks.path={out}", *policy,
                            f"format={fmt}", "logger=none", "progress=false", f"hydra.run.dir={tmp_path / fmt}"],
                           capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
        assert p.returncode == 0, p.stderr
        scored = [json.loads(x) for x in (tmp_path / fmt / "per_task.jsonl").read_text().splitlines()]
        assert len(scored) == len(rows) and all(s["status"] == "ok" and s["overall"] > 0 for s in scored), scored


@pytest.mark.slow
def test_bad_designs_are_refused_in_one_line_each_and_the_others_ingest(tmp_path):
    src = tmp_path / "src"
    files = {
        "good/cnt.sv": COUNTER,
        "good/README.md": "A counter.\n\n## Ports\n- `en`: count enable\n",
        "broken/b.sv": "module broken(input logic clk, output logic y); assign y = nope; endmodule\n",
        "portless/p.sv": "module portless; endmodule\n",
        "twotops/t.sv": "module ta(input logic a, output logic y); assign y = a; endmodule\n"
                        "module tb2(input logic a, output logic y); assign y = ~a; endmodule\n",
        "named/t.sv": "module na(input logic a, output logic y); assign y = a; endmodule\n"
                      "module nb(input logic clk, input logic [1:0] a, output logic y); assign y = ^a; endmodule\n",
        "named/chorus.yaml": "top: nb\ntarget: 75\n",
        "vhdl/x.vhd": "entity x is end;\n",
        "vhdl/v.sv": "module v(input logic a, output logic b); assign b = a; endmodule\n",
        "typo/chorus.yaml": "tops: x\n",
        "typo/t.sv": "module t(input logic a, output logic b); assign b = a; endmodule\n",
        "outside/chorus.yaml": "files: [../good/cnt.sv]\n",
        "inc/hdr/defs.svh": "`ifndef DEFS\n`define DEFS\n`define WIDTH 3\n`endif\n",
        "inc/m.sv": '`include "defs.svh"\nmodule inc(input logic clk, input logic [`WIDTH-1:0] a, output logic y);\n'
                    "  assign y = &a;\nendmodule\n",
        "inc/chorus.yaml": "include_dirs: [hdr]\n",
    }
    for rel, text in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    out = tmp_path / "t.jsonl"
    p = ingest_cli(src, out, tmp_path / "cache", tmp=tmp_path)
    assert p.returncode == 0 and "Traceback" not in p.stderr + p.stdout, p.stderr
    refused = {line.split(":")[1].strip(): line for line in p.stdout.splitlines() if ": refused: " in line}
    assert sorted(refused) == ["broken", "outside", "portless", "twotops", "typo", "vhdl"]
    assert "lists ../good/cnt.sv, outside the design's folder" in refused["outside"]
    assert "undeclared identifier 'nope'" in refused["broken"] and "no ports" in refused["portless"]
    assert "several top modules (ta, tb2)" in refused["twotops"] and "top: in chorus.yaml" in refused["twotops"]
    assert "x.vhd" in refused["vhdl"] and "unknown key(s) ['tops']" in refused["typo"]
    rows = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert sorted(rows) == ["good", "inc", "named"]
    assert rows["named"]["top"] == "nb" and rows["named"]["targets"] == {"overall": 75.0}
    assert rows["named"]["meta"]["calibration"]["rule"] == "flat"
    assert "`define WIDTH 3" in rows["inc"]["rtl"]["m.sv"] and "| a | input | 3 |" in rows["inc"]["spec"]
    assert rows["good"]["spec"].startswith("A counter.")
    # nothing ingestible: a one-line error, and no task file left as if finished
    for d in ("good", "named", "inc"):
        for f in (src / d).rglob("*"):
            f.unlink() if f.is_file() else None
        for f in sorted((src / d).rglob("*"), reverse=True):
            f.rmdir()
        (src / d).rmdir()
    p = ingest_cli(src, tmp_path / "none.jsonl", tmp_path / "cache", tmp=tmp_path)
    assert p.returncode == 2 and p.stderr.strip().splitlines()[-1].startswith("chorus.ingest: error: no design")
    assert not (tmp_path / "none.jsonl").exists() and "Traceback" not in p.stderr
