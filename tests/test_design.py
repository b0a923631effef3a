"""Design facts from pyslang and the choice of the DUT instance to score."""
from chorus.sim.design import design_facts, dut_ports, find_dut_instance

from helpers import COUNTER

RTL = (("cnt.sv", COUNTER), ("wrap.sv", "module wrap(input logic clk);\n  cnt inner(.clk(clk), .rst_n(1'b1), .en(1'b1), .q(), .top());\nendmodule\n"))


def test_module_spans_and_unpacked_arrays():
    facts = design_facts(RTL)
    spans = {m.name: (m.file, m.start, m.end) for m in facts.modules}
    assert spans == {"cnt": ("cnt.sv", 1, 9), "wrap": ("wrap.sv", 1, 3)}
    assert facts.unpacked == {("cnt.sv", 2, "mem")}


def test_dut_ports_resolve_widths_and_directions():
    ports = [(p.name, p.direction, p.width) for p in dut_ports(RTL, "cnt")]
    assert ports == [("clk", "input", 1), ("rst_n", "input", 1), ("en", "input", 1), ("q", "output", 4),
                     ("top", "output", 1)]


def mods(*entries):
    out = {}
    for hier, module in entries:
        out.setdefault(hier, set()).add(module)
    return out


def test_named_instance_of_the_dut_wins_over_another_instance():
    point_modules = mods(("TOP.tb", "tb"), ("TOP.tb.u2", "cnt"), ("TOP.tb.uut", "cnt"))
    assert find_dut_instance(point_modules, "cnt", "uut") == ("TOP.tb.uut", True)


def test_fallback_to_the_dut_module_when_the_name_is_wrong():
    point_modules = mods(("TOP.tb", "tb"), ("TOP.tb.dut", "cnt"), ("TOP.tb.dut2", "cnt"))
    assert find_dut_instance(point_modules, "cnt", "uut") == ("TOP.tb.dut", False)


def test_a_non_dut_instance_named_like_the_required_one_is_not_taken():
    point_modules = mods(("TOP.tb.uut", "wrap"), ("TOP.tb.uut.inner", "cnt"))
    assert find_dut_instance(point_modules, "cnt", "uut") == ("TOP.tb.uut.inner", False)


def test_a_point_that_claims_the_dut_file_does_not_make_a_dut():
    # `line "rtl/cnt.sv" can give a fake module's points the DUT's file and lines; the
    # module that declared them is still `fake`.
    assert find_dut_instance(mods(("TOP.tb", "tb"), ("TOP.tb.uut", "fake")), "cnt", "uut") == (None, False)


def test_no_instance_at_all():
    assert find_dut_instance(mods(("TOP.tb", "tb")), "cnt", "uut") == (None, False)
