"""SystemVerilog that chorus writes around stimulus: alias declarations, the DUT instance under
the required name, a clock, a reset sequence and a time limit.

Inputs change on the falling clock edge and the design samples them on the rising edge, so
stimulus never races the DUT. Designs without a clock still get `clk` to pace stimulus.
"""
from __future__ import annotations

from ..core.task import Task
from .aliases import AliasMap
from .program import RANDOM, Program

CLOCK_HALF_NS = 5
TOP = "chorus_tb"
COCOTB_TOP = "chorus_cocotb_top"


def _decl(width: int) -> str:
    return f"[{width - 1}:0] " if width > 1 else ""


def prelude(task: Task, amap: AliasMap) -> list[str]:
    lines = ["`timescale 1ns/1ps", f"module {TOP};", "  logic clk = 1'b0;"]
    if amap.reset:
        lines.append(f"  logic {amap.reset.alias} = 1'b{amap.reset_active};")
    lines += [f"  logic {_decl(a.width)}{a.alias} = '0;" for a in amap.inputs]
    lines += [f"  wire {_decl(a.width)}{a.alias};" for a in amap.outputs]
    lines.append(dut_instance(task, amap))
    lines.append(f"  always #{CLOCK_HALF_NS} clk = ~clk;")
    return lines


def dut_instance(task: Task, amap: AliasMap) -> str:
    """The DUT under its required instance name, each port wired to the signal named by its alias."""
    conns = [f".{a.port}({a.alias})" for a in amap.all]
    params = ", ".join(f".{k}({v})" for k, v in task.stated_parameters)
    return f"  {task.top} {'#(' + params + ') ' if params else ''}{task.instance} ({', '.join(conns)});"


def cocotb_wrapper(task: Task, amap: AliasMap, top: str = COCOTB_TOP) -> str:
    """A toplevel whose ports are the aliases around the DUT, for cocotb to drive through VPI.

    Only these ports are made visible to VPI (not --public-flat-rw), so stimulus cannot reach
    or force signals inside the DUT. `clk` is a port even when the design has no clock.
    """
    pub = " /*verilator public_flat_rw*/"
    ports = ["input  logic clk"] + ([f"input  logic {amap.reset.alias}"] if amap.reset else [])
    ports += [f"input  logic {_decl(a.width)}{a.alias}" for a in amap.inputs]
    ports += [f"output wire  {_decl(a.width)}{a.alias}" for a in amap.outputs]
    lines = ["`timescale 1ns/1ps", f"module {top} ("]
    lines += [f"  {p}{pub}{',' if i < len(ports) - 1 else ''}" for i, p in enumerate(ports)]
    lines += [");", dut_instance(task, amap), "endmodule", ""]
    return "\n".join(lines)


def reset_sequence(amap: AliasMap, cycles: int) -> list[str]:
    if not amap.reset:
        return ["    @(negedge clk);"]
    r = amap.reset
    return [f"    {r.alias} = 1'b{amap.reset_active};", f"    repeat ({cycles}) @(negedge clk);",
            f"    {r.alias} = 1'b{1 - amap.reset_active};"]


def body_testbench(task: Task, amap: AliasMap, body: str, reset_cycles: int = 2,
                   max_time_ns: int = 1_000_000) -> str:
    lines = prelude(task, amap)
    lines += [f"  initial begin #{max_time_ns}; $finish; end", "  initial begin : chorus_stimulus"]
    lines += reset_sequence(amap, reset_cycles)
    lines += ["    begin", "// ---- stimulus ----", body.rstrip(), "// ---- end of stimulus ----", "    end",
              "    @(negedge clk);", "    $finish;", "  end", "endmodule", ""]
    return "\n".join(lines)


def vectors_harness(task: Task, amap: AliasMap, reset_cycles: int = 2) -> str:
    """Reads records `<cycles> <reset> <n> (<input index> <hex value>)*` from `../in/<i>/stim.dat`,
    where i is the program's number in its batch (the driver's +chorus_program=i; 0 alone)."""
    width = max([a.width for a in amap.inputs] + [1])
    lines = prelude(task, amap)
    lines += ["  integer fd, cyc, rs, n, k, idx, code, prog;", f"  logic [{width - 1}:0] val;",
              "  initial begin : chorus_vectors", '    if (!$value$plusargs("chorus_program=%d", prog)) prog = 0;',
              '    fd = $fopen($sformatf("../in/%0d/stim.dat", prog), "r");']
    lines += reset_sequence(amap, reset_cycles)
    lines += ["    if (fd != 0) begin", "      forever begin",
              '        code = $fscanf(fd, "%d %d %d", cyc, rs, n);', "        if (code != 3) break;",
              "        for (k = 0; k < n; k = k + 1) begin", '          code = $fscanf(fd, "%d %h", idx, val);',
              "          case (idx)"]
    lines += [f"            {i}: {a.alias} = val[{a.width - 1}:0];" for i, a in enumerate(amap.inputs)]
    lines += ["            default: ;", "          endcase", "        end"]
    if amap.reset:
        r = amap.reset
        lines.append(f"        {r.alias} = rs != 0 ? 1'b{amap.reset_active} : 1'b{1 - amap.reset_active};")
    lines += ["        repeat (cyc) @(negedge clk);", "      end", "    end", "    $finish;", "  end",
              "endmodule", ""]
    return "\n".join(lines)


def render_body(program: Program, amap: AliasMap) -> str:
    """The program as body statements (what a strong model would write)."""
    out = []
    r = amap.reset
    for s in program.steps:
        # As in vectors, driving the reset alias active holds reset for this step only.
        reset = bool(r) and (s.reset or any(a == r.alias and v == amap.reset_active for a, v in s.assigns))
        assigns = [(a, v) for a, v in s.assigns if not (r and a == r.alias)]
        fixed = [f"{a} = {_literal(amap, a, v)};" for a, v in assigns if v is not RANDOM]
        rand = [f"{a} = {_random_literal(amap.drivable[a].width)};" for a, v in assigns if v is RANDOM]
        if reset:
            fixed.insert(0, f"{r.alias} = 1'b{amap.reset_active};")
        if fixed:
            out.append("    " + " ".join(fixed))
        if rand:
            out.append(f"    repeat ({s.cycles}) begin {' '.join(rand)} @(negedge clk); end")
        else:
            out.append(f"    repeat ({s.cycles}) @(negedge clk);" if s.cycles > 1 else "    @(negedge clk);")
        if reset:
            out.append(f"    {r.alias} = 1'b{1 - amap.reset_active};")
    return "\n".join(out) + "\n"


def _random_literal(width: int) -> str:
    """Enough $urandom words to fill every bit of a `width`-bit input."""
    words = -(-width // 32)
    return "$urandom" if words == 1 else "{" + ", ".join(["$urandom"] * words) + "}"


def _literal(amap: AliasMap, alias: str, value: int) -> str:
    width = amap.drivable[alias].width
    return f"{width}'h{value:x}"
