"""Stimulus formats: aliases, the vectors language, and one program scored in every format."""
import time

import pytest

from chorus.stimulus.aliases import alias_map, alias_table
from chorus.stimulus.formats import check_body, render, score
from chorus.sim import SimConfig
from chorus.stimulus.program import (RANDOM, Program, Step, VectorsError, expand, expanded_values, parse_vectors,
                                     render_vectors)
from chorus.core.task import Task

RTL = """module pick(input logic clock, input logic rst_n, input logic [3:0] sel, input logic [7:0] data,
            input logic go, output logic [7:0] q, output logic hit);
  always_ff @(posedge clock or negedge rst_n) begin
    if (!rst_n) q <= '0;
    else if (go && sel == 4'd9) q <= data;
  end
  assign hit = (q == 8'hA5) ? 1'b1 : 1'b0;
endmodule
"""
SPEC = """- `clock` (1-bit): rising-edge clock.
- `rst_n` (1-bit): active-low reset.
- `sel` (4-bit): selector; only 9 loads.
- `data` (8-bit): value to load.
- `go` (1-bit): load strobe.
- `q` (8-bit): loaded value.
- `hit` (1-bit): q equals 0xA5.
"""


@pytest.fixture
def task():
    return Task(id="pick", spec=SPEC, rtl={"pick.sv": RTL}, top="pick", instance="uut", targets={"overall": 90})


def test_alias_map_names_widths_and_descriptions(task):
    amap = alias_map(task)
    assert (amap.clock.port, amap.reset.alias, amap.reset_active) == ("clock", "rst_n", 0)
    assert [(a.alias, a.port, a.width) for a in amap.inputs] == [("in0", "sel", 4), ("in1", "data", 8), ("in2", "go", 1)]
    assert [(a.alias, a.port, a.width) for a in amap.outputs] == [("out0", "q", 8), ("out1", "hit", 1)]
    assert amap.inputs[0].description == "`sel` (4-bit): selector; only 9 loads."
    table = alias_table(amap)
    assert "in1 | 8 | input | data |" in table and "active low" in table


def test_vectors_language_is_forgiving_and_exact(task):
    amap = alias_map(task)
    text = """# load the magic value
    RST x2
    in0 = 9, in1=8'hA5 , in2:1
    in2=0 x3      // hold
    in1=? x4
    wait 5
    . x2
    in1=0b1_0000_0001
    """
    p = parse_vectors(text, amap)
    assert p.steps == [Step((), 2, True), Step((("in0", 9), ("in1", 0xA5), ("in2", 1)), 1, False),
                       Step((("in2", 0),), 3, False), Step((("in1", RANDOM),), 4, False), Step((), 5, False),
                       Step((), 2, False), Step((("in1", 0x01),), 1, False)]  # 0x101 masked to 8 bits
    assert p.cycles == 18 and not p.is_empty
    assert parse_vectors(render_vectors(p), amap).steps == p.steps


@pytest.mark.parametrize("text, message", [
    ("in7=1", "unknown alias 'in7'; this design takes rst_n, in0, in1, in2"),
    ("in0=banana", "cannot read value 'banana'"),
    ("in0=1 jump", "cannot read 'jump'"),
    ("in0=1 x0", "at least 1"),
    ("in0=1 x30000", "exceeds 20000 cycles"),
])
def test_malformed_vectors_name_the_line_and_fix(task, text, message):
    with pytest.raises(VectorsError, match=message) as info:
        parse_vectors("# ok\n" + text, alias_map(task))
    assert str(info.value).startswith("line 2:")


def test_the_one_pass_reading_of_plain_lines_agrees_with_the_item_by_item_one(task):
    """parse_vectors reads a line of render_vectors' shape in one pass; the same line with commas
    (which that pass never takes) goes item by item: both must give the same program, or the same error."""
    import random

    rng = random.Random(7)
    names = [a.alias for a in alias_map(task).inputs] + ["rst_n", "in9", "q"]
    for _ in range(400):
        items = []
        for _ in range(rng.randint(1, 5)):
            v = rng.choice([str(rng.randint(0, 999)), hex(rng.getrandbits(rng.randint(1, 40))), "007", "0x" + "f" * 300])
            items.append(f"{rng.choice(names)}={v}")
        repeat = rng.choice(["", f" x{rng.randint(0, 40)}"])
        plain, commas = " ".join(items) + repeat, ", ".join(items) + repeat
        got = []
        for text in (plain, commas):
            try:
                got.append(parse_vectors(text, alias_map(task)).steps)
            except VectorsError as exc:
                got.append(str(exc))
        assert got[0] == got[1], (plain, got)


def test_expand_draws_random_values_from_the_seed_and_folds_reset(task):
    amap = alias_map(task)
    p = Program([Step((("rst_n", 0),), 2), Step((("in1", RANDOM),), 3), Step((("in0", 9),), 1)])
    a, b = list(expand(p, amap, seed=7)), list(expand(p, amap, seed=7))
    assert a == b and a[0] == (2, 1, []) and a[-1] == (1, 0, [(0, 9)])
    assert [r[0] for r in a[1:4]] == [1, 1, 1] and list(expand(p, amap, seed=8)) != a
    # a header and an input per record, the random step one record a cycle: 2 + 3 x 2 + 2; an upper
    # bound, as the reset input folds into the header (9 values written)
    assert expanded_values(p) == 10 and sum(1 + len(r[2]) for r in a) == 9


def test_vectors_are_bounded_by_their_expanded_size_before_expanding(task, monkeypatch):
    """A short text whose lines set random inputs for many cycles (1.1 KB once expanded to 10 MB) is
    refused from its parsed size; an input set twice on one line counts once (the last value)."""
    import chorus.stimulus.program as program

    amap = alias_map(task)
    line = " ".join(["in0=? in1=? in2=?"] * 40) + " x166\n"
    p = parse_vectors(line, amap)  # 40 repeats of the same three inputs: three values a cycle
    assert p.steps[0].assigns == (("in0", RANDOM), ("in1", RANDOM), ("in2", RANDOM))
    assert expanded_values(p) == 166 * 4
    assert parse_vectors("in0=1 in0=2\n", amap).steps[0].assigns == (("in0", 2),)
    monkeypatch.setattr(program, "expand", lambda *a, **k: pytest.fail("expanded before the size check"))
    with pytest.raises(VectorsError, match=f"expands to {400 * 166 * 4} values, over 250000"):
        parse_vectors(line * 400, amap, max_cycles=10 ** 6)
    r = score("vectors", task, line * 400, SimConfig(cache=False))  # the default 20,000-cycle bound first
    assert r.status == "compile_error" and "exceeds 20000 cycles" in r.reason


MAGIC = "rst x2\nin0=9 in1=0xa5 in2=1\nin2=0 x3\nin0=3 in1=0x5a in2=1\n. x2\n"


def test_one_program_scores_the_same_in_every_format(task, sim_cfg):
    program = parse_vectors(MAGIC, alias_map(task))
    results = {fmt: score(fmt, task, render(fmt, task, program), sim_cfg) for fmt in ("vectors", "body", "testbench")}
    assert all(r.status == "ok" for r in results.values()), {f: r.reason for f, r in results.items()}
    counts = {fmt: r.report.counts for fmt, r in results.items()}
    assert counts["vectors"] == counts["body"] == counts["testbench"]
    assert results["vectors"].report.metrics["expression"] == 100.0  # go && sel==9 and the ?: both ways


def test_vectors_reuse_the_harness_built_once(task, sim_cfg):
    score("vectors", task, "in0=1 x3", sim_cfg)  # builds (or finds) the harness
    t = time.monotonic()
    results = [score("vectors", task, f"in0={k} in2=1 x2", sim_cfg) for k in range(5)]
    assert all(r.status == "ok" for r in results)
    assert (time.monotonic() - t) / 5 < 0.5


def test_bad_stimulus_gets_a_clear_status_without_a_build(task, sim_cfg):
    assert score("vectors", task, "in0=1\nin5=2", sim_cfg).reason.startswith("malformed vectors: line 2")
    assert score("vectors", task, "# only a comment\n. x10", sim_cfg).status == "empty"
    assert score("vectors", task, "", sim_cfg).status == "empty"
    unknown = score("body", task, "in0 = 1; out9 = 2;", sim_cfg)
    assert unknown.status == "compile_error" and "unknown alias 'out9'" in unknown.reason
    idle = score("body", task, "repeat (50) @(negedge clk);  // looks busy, drives nothing", sim_cfg)
    assert idle.status == "empty" and idle.overall is None and not idle.passed(0.0)
    assert score("body", task, "   ", sim_cfg).status == "empty"


def test_body_counts_part_selects_and_nonblocking_as_stimulus(task):
    amap = alias_map(task)
    assert check_body("in1[3] = 1'b1;", amap) is None
    assert check_body("in2 <= 1;", amap) is None
    assert check_body("if (in0 == 3) $display(out0);", amap).status == "empty"
