"""Real Verilator runs: statuses, coverage under $stop/$fatal/$error, limits, instances."""
import dataclasses
import time

import pytest

from chorus.sim import simulate
from chorus.sim.pool import evaluate_many
from chorus.core.task import Task
from helpers import counter_tb

AND2_TB = """`timescale 1ns/1ps
module tb;
  logic a = 0, b = 0; logic y;
  and2 uut(.a(a), .b(b), .y(y));
  initial begin
    #1 a = 1;
    #1 b = 1;
    {tail}
    #1 $finish;
  end
endmodule
"""


def test_and_gate_hand_computed_coverage(and2_task, sim_cfg):
    # Rows of `a & b`: (a==0)=>0 at t=0, (b==0)=>0 at t=1, (a==1 && b==1)=>1 at t=2: 3/3.
    # Toggles: a, b and y rise; only with the tail do they fall again.
    full = simulate(and2_task, AND2_TB.format(tail="#1 a = 0; b = 0;"), sim_cfg)
    assert full.status == "ok" and full.end == "finish"
    assert full.report.counts == {"expression": [3, 3], "toggle": [3, 3]}
    assert full.overall == 100.0 and full.passed(90.0)
    half = simulate(and2_task, AND2_TB.format(tail=""), sim_cfg)
    assert half.report.counts == {"expression": [3, 3], "toggle": [0, 3]}
    assert half.overall == pytest.approx(50.0) and not half.passed(90.0)
    assert {u.what for u in half.report.uncovered} == {"toggle a", "toggle b", "toggle y"}


@pytest.mark.parametrize("ending", ["$stop;", '$fatal(1, "boom");', "$finish;"])
def test_stop_and_fatal_still_yield_coverage(counter_task, sim_cfg, ending):
    r = simulate(counter_task, counter_tb(f"    repeat (20) @(posedge clk);\n    {ending}\n    en = 0;"), sim_cfg)
    assert r.status == "ok", r.reason
    assert r.report.metrics["block"] > 50 and r.end in ("finish", "stop")


def test_error_does_not_abort_the_run(counter_task, sim_cfg):
    # The counter only reaches 15 (covering `top`) after the $error; that must still count.
    body = '    $error("checker complaint");\n    repeat (20) @(posedge clk);\n    $finish;'
    r = simulate(counter_task, counter_tb(body), sim_cfg)
    assert r.status == "ok" and "checker complaint" in r.run_log
    assert r.report.counts["toggle"][0] >= 6  # q[3:0] and top toggled both ways after the error


def test_testbench_that_never_finishes_stops_at_max_time_with_coverage(counter_task, sim_cfg):
    cfg = dataclasses.replace(sim_cfg, max_sim_time_ns=5000)
    r = simulate(counter_task, counter_tb("    repeat (10) @(posedge clk);"), cfg)
    assert r.status == "ok" and r.end == "max_time" and r.overall is not None


def test_zero_delay_loop_times_out_and_is_killed(counter_task, sim_cfg):
    cfg = dataclasses.replace(sim_cfg, run_timeout_s=3)
    t = time.monotonic()
    r = simulate(counter_task, counter_tb("    forever en = ~en;"), cfg)
    assert r.status == "timeout" and "wall clock" in r.reason
    assert time.monotonic() - t < 60


def test_output_flood_is_cut_at_the_limit_and_keeps_coverage(counter_task, sim_cfg):
    cfg = dataclasses.replace(sim_cfg, output_limit_mb=1)
    body = '    repeat (10) @(posedge clk);\n    forever begin #1 $display("%0200d", 1); end'
    r = simulate(counter_task, counter_tb(body), cfg)
    assert r.status == "runtime_error" and "output limit" in r.reason
    assert r.end == "output_limit" and r.overall is not None


def test_syntax_error_is_a_compile_error(counter_task, sim_cfg):
    r = simulate(counter_task, counter_tb("    en = ;"), sim_cfg)
    assert r.status == "compile_error" and r.reason.startswith("%Error")


def test_wrong_module_name_is_a_compile_error(counter_task, sim_cfg):
    r = simulate(counter_task, counter_tb("    $finish;").replace("cnt uut", "counter uut"), sim_cfg)
    assert r.status == "compile_error" and "counter" in r.reason


def test_system_call_is_rejected_before_any_build(counter_task, sim_cfg):
    t = time.monotonic()
    r = simulate(counter_task, counter_tb('    $system("touch /tmp/pwned");'), sim_cfg)
    assert r.status == "rejected" and "$system" in r.reason and r.seconds.get("build") is None
    assert time.monotonic() - t < 5


def test_empty_testbench_is_rejected(counter_task, sim_cfg):
    assert simulate(counter_task, "", sim_cfg).status == "rejected"
    assert simulate(counter_task, None, sim_cfg).reason == "empty testbench"


def test_testbench_cannot_alter_the_coverage_it_is_scored_on(counter_task, sim_cfg):
    body = "    repeat (3) @(posedge clk);\n    $finish;"
    honest = simulate(counter_task, counter_tb(body), sim_cfg)
    forge = """  integer fd;
  initial begin
    fd = $fopen("coverage.dat", "w");
    $fdisplay(fd, "C '\\001f\\002rtl/cnt.sv\\001l\\0024\\001t\\002line\\001h\\002TOP.tb.uut' 99");
    fd = $fopen("status.json", "w");
    $fdisplay(fd, "{\\"end\\": \\"finish\\"}");
  end"""
    forged = simulate(counter_task, counter_tb(body, extra=forge), sim_cfg)
    assert forged.status == "ok"
    assert forged.report.counts == honest.report.counts and forged.overall == honest.overall


def test_two_instances_score_only_the_required_one(counter_task, sim_cfg):
    extra = "  logic [3:0] q2; logic top2;\n  cnt u2(.clk(clk), .rst_n(rst_n), .en(1'b0), .q(q2), .top(top2));"
    r = simulate(counter_task, counter_tb("    repeat (20) @(posedge clk);\n    $finish;", extra), sim_cfg)
    assert r.report.instance == "TOP.tb.uut" and r.instance_ok
    alone = simulate(counter_task, counter_tb("    repeat (20) @(posedge clk);\n    $finish;"), sim_cfg)
    assert r.report.counts == alone.report.counts  # the idle twin neither adds nor dilutes


def test_wrong_instance_name_falls_back_and_strict_mode_fails_it(counter_task, sim_cfg):
    tb = counter_tb("    repeat (20) @(posedge clk);\n    $finish;").replace("cnt uut", "cnt dut")
    r = simulate(counter_task, tb, sim_cfg)
    assert r.status == "ok" and r.report.instance == "TOP.tb.dut" and not r.instance_ok
    assert "not instantiated as 'uut'" in r.reason
    assert r.passed(0.0, strict_instance=False) and not r.passed(0.0, strict_instance=True)


def test_result_cache_returns_without_rebuilding(counter_task, sim_cfg):
    cfg = dataclasses.replace(sim_cfg, cache=True, cache_dir=str(sim_cfg.cache_dir))
    tb = counter_tb("    repeat (5) @(posedge clk);\n    $finish;  // cache-test")
    first = simulate(counter_task, tb, cfg)
    t = time.monotonic()
    second = simulate(counter_task, tb, cfg)
    assert not first.cached and second.cached and time.monotonic() - t < 0.5
    assert second.report.counts == first.report.counts
    other = simulate(counter_task, tb, dataclasses.replace(cfg, max_sim_time_ns=123456))
    assert not other.cached  # the key covers simulator settings


def test_pool_returns_results_in_job_order(counter_task, and2_task, sim_cfg):
    jobs = [(counter_task, counter_tb("    $finish;")), (and2_task, AND2_TB.format(tail="")),
            (counter_task, "")]
    seen = []
    results = evaluate_many(jobs, sim_cfg, workers=2, on_result=lambda i, r: seen.append(i))
    assert [r.status for r in results] == ["ok", "ok", "rejected"]
    assert results[1].report.counts["toggle"] == [0, 3] and sorted(seen) == [0, 1, 2]


def test_dut_with_every_input_tied_to_a_literal_reports_why_it_has_no_coverage(counter_task, sim_cfg):
    tb = "module tb;\n  cnt uut(.clk(1'b0), .rst_n(1'b1), .en(1'b0), .q(), .top());\n  initial #10 $finish;\nendmodule\n"
    r = simulate(counter_task, tb, sim_cfg)
    assert r.status == "ok" and r.report is None and r.overall is None and not r.passed(0.0)
    assert "tied to constants" in r.reason


BIG = "module big(input logic clk, input logic [7:0] a, output logic [7:0] y);\n{decl}\n{body}\n  assign y = {xor};\nendmodule\n"


def test_second_instance_of_a_large_module_does_not_hide_the_first(sim_cfg):
    # Verilator does not inline a module this size by default and then reports one shared set
    # of counters under a single instance; chorus inlines everything so each instance counts.
    n = 60
    rtl = BIG.format(decl="\n".join(f"  logic [7:0] r{i};" for i in range(n)),
                     body="\n".join(f"  always_ff @(posedge clk) if (a[{i % 8}]) r{i} <= r{i} + a; else r{i} <= a;"
                                     for i in range(n)),
                     xor=" ^ ".join(f"r{i}" for i in range(n)))
    task = Task(id="big", spec="", rtl={"big.sv": rtl}, top="big", instance="uut")
    tb = """module tb; logic clk = 0; logic [7:0] a = 0;
  big uut(.clk(clk), .a(a), .y());
  {twin}
  always #5 clk = ~clk;
  initial begin repeat (40) begin @(posedge clk); a = $urandom; end $finish; end
endmodule
"""
    alone = simulate(task, tb.format(twin=""), sim_cfg)
    twin = simulate(task, tb.format(twin="big u2(.clk(clk), .a(8'h00), .y());"), sim_cfg)
    assert alone.report.counts["block"] == [3 * n, 3 * n]  # always, if, else per register
    assert twin.report.counts == alone.report.counts


def test_testbench_without_timescale_runs_in_nanoseconds(counter_task, sim_cfg):
    # Like xrun, a module without `timescale gets 1ns: 300 periods of #5 are 3000 ns < 5000 ns.
    cfg = dataclasses.replace(sim_cfg, max_sim_time_ns=5000)
    tb = counter_tb("    repeat (150) @(posedge clk);\n    $finish;").replace("`timescale 1ns/1ps\n", "")
    r = simulate(counter_task, tb, cfg)
    assert r.status == "ok" and r.end == "finish"


def test_cache_key_follows_the_verilator_flags(counter_task, sim_cfg):
    cfg = dataclasses.replace(sim_cfg, cache=True)
    tb = counter_tb("    repeat (4) @(posedge clk);\n    $finish;  // flags-key")
    simulate(counter_task, tb, cfg)
    assert simulate(counter_task, tb, cfg).cached
    flagged = dataclasses.replace(cfg, extra_verilator_flags=("-Wno-WIDTH",))
    assert not simulate(counter_task, tb, flagged).cached


def test_the_prebuilt_driver_is_linked_only_into_models_it_was_compiled_for(counter_task, sim_cfg, tmp_path,
                                                                           monkeypatch):
    """chorus's driver is compiled once (runtime kit) against a port-less model header; a testbench whose
    top has ports changes that header, so its build compiles the driver for itself. Both score alike."""
    import tempfile

    from chorus.sim.build import make_vars, verilator_flags
    from chorus.sim.cache import default_cache_root
    from chorus.sim.runtime import MAIN_OBJECT, ensure_runtime
    from chorus.sim.toolchain import find_toolchain

    cfg = dataclasses.replace(sim_cfg, keep_workdir=True)
    kit = ensure_runtime(find_toolchain(), verilator_flags(cfg), make_vars(cfg, find_toolchain()),
                         default_cache_root(cfg.cache_dir))
    plain = counter_tb("    repeat (20) @(posedge clk);\n    $finish;")
    ported = plain.replace("module tb;", "module tb(input logic unused_port);")
    drivers, results = [], []
    for i, tb in enumerate((plain, ported)):
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / str(i)))
        (tmp_path / str(i)).mkdir()
        results.append(simulate(counter_task, tb, cfg))
        # make's dependency file exists only where the compiler ran on the driver
        drivers += [(o.read_bytes(), o.with_suffix(".d").exists())
                    for o in (tmp_path / str(i)).glob("chorus-kept-sim-*/obj/chorus_main.o")]
    assert [r.status for r in results] == ["ok", "ok"] and len(drivers) == 2
    assert results[0].report.to_dict() == results[1].report.to_dict()
    assert drivers[0] == ((kit.dir / MAIN_OBJECT).read_bytes(), False)  # linked as prebuilt
    assert drivers[1][1]  # compiled for the model with a port
