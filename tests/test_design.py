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


def test_named_instance_of_the_dut_wins_over_another_instance():
    assert find_dut_instance({"TOP.tb.u2", "TOP.tb.uut"}, "uut") == ("TOP.tb.uut", True)


def test_fallback_to_the_shallowest_dut_instance_when_the_name_is_wrong():
    assert find_dut_instance({"TOP.tb.dut2", "TOP.tb.dut", "TOP.tb.x.dut0"}, "uut") == ("TOP.tb.dut", False)


def test_the_named_instance_is_taken_even_below_another():
    assert find_dut_instance({"TOP.tb.w.uut", "TOP.tb.a"}, "uut") == ("TOP.tb.w.uut", True)


def test_no_instance_at_all():
    assert find_dut_instance(set(), "uut") == (None, False)


def test_a_position_is_in_a_module_only_inside_its_declaration_in_its_own_file():
    facts = design_facts(RTL)
    assert facts.in_module("cnt", "cnt.sv", 1) and facts.in_module("cnt", "./cnt.sv", 9)
    assert not facts.in_module("cnt", "cnt.sv", 10) and not facts.in_module("cnt", "wrap.sv", 2)
    assert not facts.in_module("cnt", "verif/cnt.sv", 2)
