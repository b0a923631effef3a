"""The DUT is reachable only through its ports: routes a syntactic write check cannot see.

Real Verilator, the real jail. Each attack below built and scored above the honest testbench
before (virtual interface 100 % vs 76 %, a DUT task call 86 % vs 75 %, a helper's output on a
DUT-driven net 67 % vs 60 %, a DUT-driven interface member 95 % vs 86 %); each is now refused from
Verilator's own linked parse tree, and `allow_dut_writes=True` shows the same testbench builds.
The honest cases beside them (white-box reads, the testbench's own interface instance, std's
mailbox and semaphore) must keep scoring.
"""
from __future__ import annotations

import dataclasses

import pytest

from chorus.sim import SimConfig, simulate
from chorus.core.task import Task

INTERNAL_IFACE_DUT = """interface sif; logic [3:0] v; endinterface
module bdut(input logic clk, input logic rst_n, input logic [3:0] a, output logic [3:0] q);
  sif s();
  logic [3:0] st;
  logic boot_done;
  initial begin : boot boot_done = 0; #30 boot_done = 1; end
  task automatic load_state(input logic [3:0] x); st = x; endtask
  function automatic logic [3:0] peek(); return st; endfunction
  function automatic logic [3:0] next_of(input logic [3:0] x, input logic [3:0] y); return x + y; endfunction
  always_ff @(posedge clk or negedge rst_n)
    if (!rst_n) st <= '0; else st <= st + a;
  always_ff @(posedge clk) s.v <= st;
  assign q = (s.v == 4'hf) ? 4'ha : boot_done ? s.v : 4'h0;
endmodule
"""
PORT_IFACE_DUT = """interface pif; logic [3:0] a; logic [3:0] q;
  task automatic set_q(input logic [3:0] x); q = x; endtask
  task automatic put_a(input logic [3:0] x); a = x; endtask
endinterface
module pdut(input logic clk, input logic rst_n, pif p);
  logic [3:0] st;
  always_ff @(posedge clk or negedge rst_n)
    if (!rst_n) st <= '0; else st <= st + p.a;
  always_ff @(posedge clk) p.q <= st;
  always_ff @(posedge clk) if (p.q == 4'hf) $display("deep state");
endmodule
"""
TB_HEAD = """`timescale 1ns/1ps
{pre}module tb;
  logic clk = 0, rst_n = 0; logic [3:0] a = 0; logic [3:0] q;
  bdut uut(.clk(clk), .rst_n(rst_n), .a(a), .q(q));
  always #5 clk = ~clk;
{items}
  initial begin
    #12 rst_n = 1;
{stmts}    repeat (6) begin @(negedge clk) a = a + 1; end
    $finish;
  end
endmodule
{post}"""
PORT_TB = """`timescale 1ns/1ps
{pre}module tb;
  logic clk = 0, rst_n = 0;
  pif tbi();
  pdut uut(.clk(clk), .rst_n(rst_n), .p(tbi));
  always #5 clk = ~clk;
{items}
  initial begin
    tbi.a = 0;
    #12 rst_n = 1;
{stmts}    repeat (6) begin @(negedge clk) tbi.a = tbi.a + 1; end
    $finish;
  end
endmodule
{post}"""


def tb(pre: str = "", items: str = "", stmts: str = "", post: str = "", port: bool | str = False) -> str:
    text = (PORT_TB if port is True else TB_HEAD).format(pre=pre, items=items, stmts=stmts, post=post)
    return text.replace("bdut uut", "kdut uut") if port == "pkg" else text


@pytest.fixture
def cfg(cache_root, tmp_path) -> SimConfig:
    return SimConfig(cache=False, cache_dir=str(cache_root), run_timeout_s=20)


PKG_DUT = """package cpkg;
  logic [3:0] mode = 0;
  function automatic void set_mode(logic [3:0] m); mode = m; endfunction
  function automatic logic [3:0] twice(logic [3:0] m); return m + m; endfunction
endpackage
module kdut(input logic clk, input logic rst_n, input logic [3:0] a, output logic [3:0] q);
  always_ff @(posedge clk or negedge rst_n)
    if (!rst_n) q <= '0; else if (cpkg::mode == 4'hc) q <= 4'h5; else q <= q + a;
endmodule
"""


def task(port: bool = False) -> Task:
    if port == "pkg":
        return Task(id="kdut", spec="", rtl={"rtl/kdut.sv": PKG_DUT}, top="kdut", instance="uut")
    if port:
        return Task(id="pdut", spec="", rtl={"rtl/pdut.sv": PORT_IFACE_DUT}, top="pdut", instance="uut")
    return Task(id="bdut", spec="", rtl={"rtl/bdut.sv": INTERNAL_IFACE_DUT}, top="bdut", instance="uut")


# name: (testbench keyword arguments, what the reason names)
ATTACKS = {
    "virtual interface onto the DUT's interface instance": (
        dict(items="  virtual sif h;", stmts="    h = uut.s; h.v = 4'hf;\n"), "uut.s"),
    "virtual interface assigned at its declaration": (
        dict(items="  virtual sif h = uut.s;", stmts="    h.v = 4'hf;\n"), "uut.s"),
    "helper's interface port on the DUT's interface instance": (
        dict(items="  poker pk(.p(uut.s));", post="module poker(sif p); initial #30 p.v = 4'hf; endmodule\n"),
        "uut.s"),
    "hierarchical write to a member of the DUT's interface": (
        dict(stmts="    uut.s.v = 4'hf;\n"), "uut.s.v"),
    "DUT task call": (dict(stmts="    uut.load_state(4'hf);\n"), "uut.load_state"),
    "DUT task call through $root": (dict(stmts="    $root.tb.uut.load_state(4'hf);\n"), "load_state"),
    "DUT function call": (dict(stmts="    $display(\"%0d\", uut.peek());\n"), "uut.peek"),
    "helper's output port on the net a DUT output drives": (
        dict(items="  drv d(.clk(clk), .y(q));",
             post="module drv(input logic clk, output logic [3:0] y); always @(posedge clk) y <= 4'hf; endmodule\n"),
        "which the DUT's output port q drives"),
    "gate output on the net a DUT output drives": (
        dict(items="  logic z; assign z = 1'b1;\n  buf g(q[0], z);"), "which the DUT's output port q drives"),
    "initial value on the net a DUT output drives": (
        dict(items="  logic [3:0] q2 = 4'hf;", stmts="    q = 4'hf;\n"), "which the DUT's output port q drives"),
}
# Found by a red team against the first version of these rules (each scored above the honest bench).
ATTACKS.update({
    "helper writes its own input port, which is the net a DUT output drives": (
        dict(items="  pk p(.clk(clk), .i(q));",
             post="/* verilator lint_off ASSIGNIN */\nmodule pk(input logic clk, input logic [3:0] i); "
                  "initial begin @(negedge clk); i = 4'hf; end endmodule\n"), "input port i"),
    "escaped generate-block name that fakes a level under the DUT": (
        dict(items="  for (genvar g = 0; g < 1; g++) begin : \\uut.pad \n"
                   "    logic [3:0] q2; bdut x(.clk(clk), .rst_n(rst_n), .a(a), .q(q2));\n  end"), None),
    "disable of a DUT block": (dict(stmts="    disable uut.boot;\n"), "a disable of uut.boot"),
    "testbench instance of an interface type the DUT has inside": (
        dict(items="  sif mine();", stmts="    mine.v = 4'hf;\n"), "which the DUT instantiates inside itself"),
    "package function writing state the DUT reads": (
        dict(stmts="    cpkg::set_mode(4'hc);\n", port="pkg"), "set_mode"),
})
PORT_ATTACKS = {
    "write through a virtual interface to a signal the DUT drives": (
        dict(items="  virtual pif vh = tbi;", stmts="    vh.q = 4'hf;\n", port=True), "vh.q"),
    "virtual interface held in a class": (
        dict(items="  class drv; virtual pif v; function new(virtual pif x); v = x; endfunction\n"
                   "    task poke(); v.q = 4'hf; endtask endclass\n  drv d;",
             stmts="    d = new(tbi); d.poke();\n", port=True), "v.q"),
    "interface task that drives a signal the DUT drives": (
        dict(stmts="    tbi.set_q(4'hf);\n", port=True), "tbi.set_q"),
    # a second red team: the handle held in a container (the select chain hid the write)
    "virtual interface in an array": (
        dict(items="  virtual pif vhs[1];", stmts="    vhs[0] = tbi; vhs[0].q = 4'hf;\n", port=True), "vhs.q"),
    "virtual interface in a queue": (
        dict(items="  virtual pif vq[$];", stmts="    vq.push_back(tbi); vq[0].q = 4'hf;\n", port=True), "vq.q"),
    "virtual interface in an associative array": (
        dict(items="  virtual pif va[int];", stmts="    va[7] = tbi; va[7].q <= 4'hf;\n", port=True), "va.q"),
    "a wrapper passes the testbench's instance to a second DUT": (
        dict(items="  pif ref_if();\n  wrapper w(.clk(clk), .rst_n(rst_n), .p(ref_if));", stmts="    ref_if.q = 4'hf;\n",
             post="module wrapper(input logic clk, input logic rst_n, pif p); "
                  "pdut inner(.clk(clk), .rst_n(rst_n), .p(p)); endmodule\n", port=True), "ref_if.q"),
    "write to an interface member the DUT drives": (dict(stmts="    tbi.q = 4'hf;\n", port=True), "tbi.q"),
    "helper writes an interface member the DUT drives": (
        dict(items="  poke2 pk(.p(tbi));", post="module poke2(pif p); initial #30 p.q = 4'hf; endmodule\n",
             port=True), "p.q"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ATTACKS) + list(PORT_ATTACKS))
def test_routes_into_the_dut_other_than_its_ports_are_refused(cfg, name):
    kwargs, what = {**ATTACKS, **PORT_ATTACKS}[name]
    t, text = task(kwargs.get("port", False)), tb(**kwargs)
    r = simulate(t, text, cfg)
    assert r.status == "rejected", (r.status, r.reason, r.overall)
    if what is None:  # a name that fakes hierarchy: refused as a name, whatever allow_dut_writes says
        assert "would be read as a hierarchy path" in r.reason, r.reason
        return
    else:
        assert ("the DUT's internals" in r.reason or "the DUT" in r.reason) and what in r.reason, r.reason
    assert r.seconds.get("build") is None  # refused before anything was compiled
    allowed = simulate(t, text, dataclasses.replace(cfg, allow_dut_writes=True))
    assert allowed.status == "ok", (allowed.status, allowed.reason)  # the route itself is valid SV


HONEST = {
    "white-box reads of DUT state and its interface": dict(
        stmts="    $display(\"st=%0d v=%0d\", uut.st, uut.s.v);\n    if (uut.st > 4'h9) $display(\"big\");\n"),
    "std mailbox and semaphore": dict(
        items="  mailbox #(int) mb = new();\n  semaphore sem = new(1);",
        stmts="    begin int x; mb.put(3); mb.get(x); sem.get(1); sem.put(1); end\n"),
    "a process handle": dict(stmts="    begin process p = process::self(); $display(\"%0d\", p.status()); end\n"),
    "the testbench's own interface instance driving an interface-port DUT": dict(
        items="  task automatic put(input logic [3:0] x); tbi.a = x; endtask",
        stmts="    put(4'h3);\n    $display(\"q=%0d\", tbi.q);\n", port=True),
    "a private interface instance of the DUT's interface type, as a reference model": dict(
        items="  pif model();", stmts="    model.q = 4'h3; model.put_a(4'h1);\n", port=True),
    "an interface task that drives the DUT's inputs": dict(stmts="    tbi.put_a(4'h2);\n", port=True),
    "a golden model driving its own instance of the DUT's interface type": dict(
        items="  pif ref_if();\n  gold g(.clk(clk), .p(ref_if));",
        post="module gold(input logic clk, pif p); initial p.a = 0; always @(posedge clk) p.q <= p.q + 1; endmodule\n",
        port=True),
    "UVM-lite class driving the DUT's inputs through virtual interfaces in an array": dict(
        items="  class drv; virtual pif v[1]; task put(logic [3:0] x); v[0].a = x; endtask endclass\n  drv d;",
        stmts="    d = new; d.v[0] = tbi; d.put(4'h3);\n", port=True),
    "a design package function without side effects": dict(stmts="    $display(\"%0d\", cpkg::twice(4'h3));\n",
                                                           port="pkg"),
    "a pure DUT function computing an expected value": dict(
        stmts="    if (uut.next_of(4'h1, 4'h2) != 4'h3) $display(\"model mismatch\");\n"),
    "a helper that drives the testbench's inputs of the DUT": dict(
        items="  stim s(.clk(clk), .y(a));",
        post="module stim(input logic clk, output logic [3:0] y); initial y = 0; "
             "always @(posedge clk) y <= y + 1; endmodule\n"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(HONEST))
def test_honest_testbenches_that_touch_the_boundary_still_score(cfg, name):
    kwargs = dict(HONEST[name])
    if "helper" in name:  # the helper drives `a`; the initial block's own writes to `a` would be a second driver
        text = tb(**kwargs).replace("    repeat (6) begin @(negedge clk) a = a + 1; end\n", "    repeat (6) @(negedge clk);\n") \
            .replace("logic [3:0] a = 0;", "logic [3:0] a;")
    else:
        text = tb(**kwargs)
    r = simulate(task(kwargs.get("port", False)), text, cfg)
    assert r.status == "ok" and r.report.instance == "TOP.tb.uut", (r.status, r.reason)
    assert r.overall is not None and r.overall > 0


@pytest.mark.slow
def test_a_testbench_that_does_not_compile_is_its_own_error_for_an_interface_port_dut_too(cfg):
    """Blame for a failed build asks whether the RTL compiles on its own; a DUT with an interface
    port cannot be Verilator's top, so that lint wraps it (else every compile error would be the
    task's harness_error, which carries no penalty)."""
    broken = tb(stmts="    this is not systemverilog;\n", port=True)
    r = simulate(task(port=True), broken, cfg)
    assert r.status == "compile_error", (r.status, r.reason)


BRIDGE_DUT = """interface pif; logic [3:0] a; logic [3:0] q; endinterface
module xdut(input logic clk, input logic rst_n, pif p);
  pif inner();
  always_ff @(posedge clk or negedge rst_n) if (!rst_n) inner.q <= '0; else inner.q <= inner.q + p.a;
  always_ff @(posedge clk) p.q <= inner.q;
endmodule
"""


@pytest.mark.slow
def test_a_dut_with_an_interface_port_and_an_inner_instance_of_its_type_still_takes_its_testbench(cfg):
    """The instance the DUT's port needs is allowed although the DUT has one of that type inside
    (shared counters); any other testbench instance of that type is refused."""
    t = Task(id="xdut", spec="", rtl={"rtl/xdut.sv": BRIDGE_DUT}, top="xdut", instance="uut")
    ok = simulate(t, tb(port=True).replace("pdut uut", "xdut uut"), cfg)
    assert ok.status == "ok" and ok.overall > 0, (ok.status, ok.reason)
    other = simulate(t, tb(items="  pif other();", port=True).replace("pdut uut", "xdut uut"), cfg)
    assert other.status == "rejected" and "instantiates inside itself" in other.reason, other.reason
