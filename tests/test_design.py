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


def locs(*entries):
    out = {}
    for hier, file, line in entries:
        out.setdefault(hier, set()).add((file, line))
    return out


def test_named_instance_of_the_dut_wins_over_another_instance():
    facts = design_facts(RTL)
    point_locs = locs(("TOP.tb", "tb.sv", 3), ("TOP.tb.u2", "cnt.sv", 4), ("TOP.tb.uut", "cnt.sv", 4))
    assert find_dut_instance(point_locs, facts, "cnt", "uut") == ("TOP.tb.uut", True)


def test_fallback_to_the_dut_module_when_the_name_is_wrong():
    facts = design_facts(RTL)
    point_locs = locs(("TOP.tb", "tb.sv", 3), ("TOP.tb.dut", "cnt.sv", 4), ("TOP.tb.dut2", "cnt.sv", 5))
    assert find_dut_instance(point_locs, facts, "cnt", "uut") == ("TOP.tb.dut", False)


def test_a_non_dut_instance_named_like_the_required_one_is_not_taken():
    facts = design_facts(RTL)
    point_locs = locs(("TOP.tb.uut", "wrap.sv", 2), ("TOP.tb.uut.inner", "cnt.sv", 4))
    assert find_dut_instance(point_locs, facts, "cnt", "uut") == ("TOP.tb.uut.inner", False)


def test_no_instance_at_all():
    assert find_dut_instance(locs(("TOP.tb", "tb.sv", 3)), design_facts(RTL), "cnt", "uut") == (None, False)
