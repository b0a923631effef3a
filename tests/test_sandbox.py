"""Static rejection of unsafe testbenches (no simulator needed)."""
import re

import pytest

from chorus.sim.sandbox import rewrite_stop_as_finish, scan_testbench
from chorus.sim.svlex import top_modules

OK_TB = """module tb;
  // $system("rm -rf /") in a comment is harmless
  string s = "$system and $c are just text here";
  integer fd;
  initial begin
    fd = $fopen("log.txt", "w");
    $fdisplay(fd, "hi");
    $readmemh("init.hex", mem);
    $finish;
  end
endmodule
"""


@pytest.mark.parametrize("body, reason", [
    ('initial $system("ls");', r"\$system is not allowed"),
    ('initial $c("printf(1);");', r"\$c is not allowed"),
    ('initial $c32("x");', r"\$c32 is not allowed"),
    ('import "DPI-C" function void f();', "DPI import"),
    ('export "DPI-C" function f;', "DPI export"),
    ('initial fd = $fopen("/etc/passwd", "r");', "absolute path"),
    ('initial fd = $fopen("../out/coverage.dat", "w");', "leaving the working directory"),
    ('initial fd = $fopen(name, "w");', "string-literal file name"),
    ('initial $readmemh("/tmp/x.hex", m);', "absolute path"),
    ('initial $writememh("sub/../../x.hex", m);', "leaving the working directory"),
    ('initial $dumpfile("~/.bashrc");', "absolute path"),
    ('`include "/etc/hosts"', "`include with an absolute path"),
    ('`verilator_config\nlint_off', "`verilator_config is not allowed"),
    ('`systemc_header\n#include <cstdlib>', "`systemc_header is not allowed"),
    ("bind cnt checker c();", "bind is not allowed"),
])
def test_rejections_name_the_reason(body, reason):
    src = f"module tb;\n{body}\nendmodule\n"
    why = scan_testbench(src)
    assert why is not None
    assert re.search(reason, why), why


def test_rejection_reports_the_line():
    assert scan_testbench("module tb;\n\n\ninitial $system(\"x\");\nendmodule").startswith("line 4:")


@pytest.mark.parametrize("src", ["", "   \n\t", None])
def test_empty_testbench_is_rejected(src):
    assert scan_testbench(src or "") == "empty testbench"


def test_redefining_a_design_module_is_rejected():
    src = "module cnt(output logic [3:0] q); assign q = 0; endmodule\nmodule tb; cnt uut(.q()); endmodule"
    assert "redefines design unit 'cnt'" in scan_testbench(src, {"cnt"})
    assert scan_testbench(src, {"other"}) is None


def test_safe_testbench_passes_scan():
    assert scan_testbench(OK_TB) is None


def test_stop_is_rewritten_outside_comments_and_strings_only():
    src = 'initial begin $display("$stop"); // $stop\n $stop; $stopx; end'
    assert rewrite_stop_as_finish(src) == 'initial begin $display("$stop"); // $stop\n $finish; $stopx; end'


def test_top_modules_ignores_end_labels_and_finds_uninstantiated():
    src = """module a #(parameter W=1)(input x); endmodule : a
module b; a #(.W(2)) ua(.x(1'b0)); endmodule
module tb; b ub(); endmodule
module lone; endmodule"""
    assert top_modules(src) == ["tb", "lone"]
