"""Completion parsing on tricky completions, and pass@k against hand-computed values."""
import pytest

from chorus.policy.parsing import parse_completion
from chorus.tracking.passk import mean_pass_at_k, pass_at_k

TB = "module tb;\n  initial $finish;\nendmodule"
F = "```"


@pytest.mark.parametrize("text, fmt, status, code, filename", [
    (f"{F}systemverilog\n{TB}\n{F}\n", "testbench", "ok", TB, None),
    (f"{F}verilog\n{TB}\n{F}", "testbench", "ok", TB, None),
    (f"{F}sv\n{TB}\n{F}", "testbench", "ok", TB, None),
    (f"{F}SystemVerilog\n{TB}\n{F}", "testbench", "ok", TB, None),
    (f"Here is the testbench:\n{F}verilog\n{TB}\n{F}\nIt covers every state.", "testbench", "ok", TB, None),
    (f"Some prose.\n{TB}\nMore prose.", "testbench", "unfenced", TB, None),
    (f"{F}verilog\n{TB}\n{F}\nand also\n{F}verilog\nmodule other; endmodule\n{F}", "testbench", "ok", TB, None),
    (f"{F}python\nprint(1)\n{F}\n{F}verilog\n{TB}\n{F}", "testbench", "ok", TB, None),
    (f"{F}python\n{TB}\n{F}", "testbench", "wrong_language", TB, None),
    (f"{F}verilog\nmodule tb;\n  initial begin\n", "testbench", "truncated", "module tb;\n  initial begin", None),
    (f"filename: tb_counter.sv\n{F}systemverilog\n{TB}\n{F}", "testbench", "ok", TB, "tb_counter.sv"),
    (f"**Filename:** verif/tb_counter.sv\n\n{F}verilog\n{TB}\n{F}", "testbench", "ok", TB, "verif/tb_counter.sv"),
    (f"{F}verilog\n{TB}\n{F}\nfilename: late.sv", "testbench", "ok", TB, None),
    (f"{F}verilog\n\n{F}", "testbench", "no_code", None, None),
    ("I cannot write this testbench.", "testbench", "no_code", None, None),
    ("module tb;\n  initial begin\n    x = 1;", "testbench", "truncated", None, None),
    (f"````verilog\n{TB}\n// ``` inside\n````", "testbench", "ok", TB + "\n// ``` inside", None),
    (f"~~~verilog\n{TB}\n~~~", "testbench", "ok", TB, None),
    (f"{F}systemverilog title=tb.sv\n{TB}\n{F}", "testbench", "ok", TB, None),
    (f"{F}verilog\r\n{TB}\r\n{F}\r\n".replace("\n", "\r\n").replace("\r\r", "\r"), "testbench", "ok", TB, None),
    (f"1. the code:\n   {F}verilog\n{TB}\n   {F}", "testbench", "ok", TB, None),
    (None, "testbench", "no_code", None, None),
    (f"{F}verilog\nin0 = 1; @(negedge clk);\n{F}", "body", "ok", "in0 = 1; @(negedge clk);", None),
    (f"{F}vectors\nin0=1 x4\nrst x2\n{F}", "vectors", "ok", "in0=1 x4\nrst x2", None),
    ("in0=1 x4\n. x3", "vectors", "unfenced", "in0=1 x4\n. x3", None),
    (f"{F}text\nin0=? x10\n{F}", "vectors", "ok", "in0=? x10", None),
    ("filename: stim.vec\nin0=3", "vectors", "unfenced", "in0=3", "stim.vec"),
    (f"{F}python\nasync def stimulus(dut):\n    dut.in0.value = 1\n{F}", "cocotb", "ok",
     "async def stimulus(dut):\n    dut.in0.value = 1", None),
    (f"{F}py\nasync def stimulus(dut):\n    pass\n{F}", "cocotb", "ok", "async def stimulus(dut):\n    pass", None),
    (f"{F}\n{TB}\n{F}", "testbench", "ok", TB, None),
])
def test_parse_tricky_completions(text, fmt, status, code, filename):
    p = parse_completion(text, fmt)
    assert p.status == status
    assert (p.code.rstrip("\n") if p.code else p.code) == code
    assert p.filename == filename


def test_parse_never_raises_on_junk():
    for junk in ["", "```", "```verilog", "````", "\x00\x01", "module", "endmodule module", "~~~\n~~~"]:
        assert parse_completion(junk, "testbench").status in ("ok", "unfenced", "truncated", "no_code")


@pytest.mark.parametrize("n, c, k, expected", [
    (5, 0, 1, 0.0), (5, 5, 1, 1.0), (5, 2, 1, 0.4), (5, 2, 2, 0.7), (10, 3, 5, 1 - 21 / 252),
    (4, 1, 4, 1.0), (3, 1, 2, 2 / 3), (1, 1, 1, 1.0), (1, 0, 1, 0.0),
])
def test_pass_at_k_hand_computed(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_rejects_impossible_counts():
    with pytest.raises(ValueError, match="needs at least 5 samples"):
        pass_at_k(4, 1, 5)
    with pytest.raises(ValueError, match="0 <= c <= n"):
        pass_at_k(3, 4, 1)


def test_mean_pass_at_k_over_tasks():
    rows = [{"task_id": "a", "passed": p} for p in (True, False, True, False)]
    rows += [{"task_id": "b", "passed": False} for _ in range(4)]
    assert mean_pass_at_k(rows, 1) == pytest.approx((0.5 + 0.0) / 2)
    assert mean_pass_at_k(rows, 2) == pytest.approx((1 - 1 / 6 + 0.0) / 2)
