"""The safety check on parsed (already preprocessed) testbench source: no simulator needed.

The end-to-end cases, with Verilator's preprocessor in front (macro pasting, `include, `line),
are in test_adversarial.py."""
import re

import pytest

from chorus.sim import safety

RTL = safety.design_units(safety.parse("module cnt(input clk, output logic [3:0] q); sub s(); endmodule\n"
                   "module sub; endmodule\npackage cnt_pkg; endpackage\n"
                   "module uses_cell; cell_x c(); endmodule\n", "rtl"))

OK_TB = """module tb;
  logic clk; wire [3:0] q; integer fd; logic [3:0] v; logic [7:0] mem [4];
  typedef struct { int f; } s_t; s_t s;
  cnt uut(.clk(clk), .q(q));
  // $system("rm -rf /") in a comment is harmless
  string txt = "$system and $c are just text here";
  initial begin
    fd = $fopen("log.txt", "w");
    $fdisplay(fd, "q=%0d state=%0d", q, uut.q);   // reading internals is fine
    v = uut.q; s.f = 1;
    $readmemh("init.hex", mem);
    $finish;
  end
endmodule
"""


def check(body: str, allow_dut_writes: bool = False) -> str | None:
    src = OK_TB.replace("endmodule", body + "\nendmodule")
    return safety.check_testbench(safety.parse(src, "verif/tb.sv"), RTL, allow_dut_writes)


def test_safe_testbench_passes():
    assert check("") is None


@pytest.mark.parametrize("body, reason", [
    ('initial $system("ls");', r"\$system is not allowed"),
    ('initial $c("printf(1);");', r"\$c is not allowed"),
    ('initial $c32("x");', r"\$c32 is not allowed"),
    ('initial $cstmt("x");', r"\$cstmt is not allowed"),
    ('initial $load_coverage_db("x");', r"not an IEEE 1800 system task"),
    ('import "DPI-C" function void f();', "DPI import"),
    ('export "DPI-C" function f;', "DPI export"),
    ('initial fd = $fopen("/etc/passwd", "r");', "absolute path"),
    ('initial fd = $fopen("../out/result", "w");', "leaving the working directory"),
    ('initial fd = $fopen(txt, "w");', "string-literal file name"),
    ('initial $readmemh("/tmp/x.hex", mem);', "absolute path"),
    ('initial $writememh("sub/../../x.hex", mem);', "leaving the working directory"),
    ('initial $dumpfile("~/.bashrc");', "absolute path"),
    ("`verilator_config\n", "directive `verilator_config is not allowed"),
    ("`systemc_header\n", "directive `systemc_header is not allowed"),
    ("/*verilator sc_clock*/", "metacomment `verilator sc_clock`"),
    ("bind cnt checker c();", "bind is not allowed"),
    ("config cfg; design tb; endconfig", "configurations"),
])
def test_host_access_is_rejected_with_its_reason(body, reason):
    why = check(body)
    assert why is not None and re.search(reason, why), why


def test_escaped_identifiers_do_not_hide_code():
    # `\a/*` is one identifier (it ends at white space); a lexer that read `/*` as a comment
    # would miss the $system call on the same line.
    assert "$system is not allowed" in check('logic \\a/* ; initial $system("id"); logic \\b*/ ;')


@pytest.mark.parametrize("body, what", [
    ("initial force uut.q = 4;", "force uut.q"),
    ("initial release tb.uut.q;", "release tb.uut.q"),
    ("initial uut.q <= 3;", "an assignment to uut.q"),
    ("initial uut.q = 3;", "an assignment to uut.q"),
    ("initial uut.q++;", "an increment of uut.q"),
    ("assign uut.s.x = 1;", "an assignment to uut.s.x"),
    ('initial $readmemh("x.hex", uut.q);', "an output argument of $readmemh to uut.q"),
    ('initial fd = $sscanf("3", "%d", uut.q);', "an output argument of $sscanf to uut.q"),
    ('initial fd = $value$plusargs("q=%d", $root.tb.uut.q);', "through"),
    ("task t(output int x); x = 1; endtask\ninitial t(uut.q);", "an output argument of t to uut.q"),
])
def test_writes_into_the_dut_are_rejected_and_named(body, what):
    why = check(body)
    assert why is not None and "writes into the DUT's internals" in why, why
    if what != "through":
        assert what in why


def test_reads_and_local_writes_stay_allowed_and_writes_can_be_allowed():
    assert check("task t(input int x); endtask\ninitial t(uut.q);") is None
    assert check("initial force q = 0;") is None  # the testbench's own net
    assert check("initial force uut.q = 4;", allow_dut_writes=True) is None


@pytest.mark.parametrize("body, reason", [
    ("module cnt; endmodule", "redefines design unit 'cnt'"),
    ("module \\sub ; endmodule", "redefines design unit 'sub'"),
    ("package cnt_pkg; endpackage", "redefines design unit 'cnt_pkg'"),
    ("module cell_x; endmodule", "defines module 'cell_x', which the design instantiates"),
])
def test_design_units_cannot_be_replaced(body, reason):
    src = OK_TB + body + "\n"
    why = safety.check_testbench(safety.parse(src, "verif/tb.sv"), RTL)
    assert why is not None and reason in why, why


def test_stop_is_rewritten_in_code_only():
    src = 'module tb; initial begin $display("$stop"); // $stop\n $stop; end endmodule'
    tree = safety.parse(src, "tb.sv")
    assert safety.rewrite_stop_as_finish(tree, src) == \
        'module tb; initial begin $display("$stop"); // $stop\n $finish; end endmodule'


def test_top_modules_are_the_uninstantiated_ones():
    src = """module a #(parameter W=1)(input x); endmodule : a
module b; a #(.W(2)) ua(.x(1'b0)); endmodule
module tb; b ub(); endmodule
module lone; endmodule"""
    assert safety.top_modules(safety.parse(src, "tb.sv")) == ["tb", "lone"]


@pytest.mark.parametrize("text, reason", [
    ('initial (* a = "*) $system(cmd) (* z" *) ;', "an attribute"),
    ('initial (* a = "*) `verilator_config coverage_off -file \\"rtl/*\\" `verilog (* z" *) ;', "an attribute"),
    ('string s = "`verilator_config";', "`verilator_config is not allowed"),
    ("`begin_keywords \"1364-1995\"\nmodule tb; endmodule\n`end_keywords", "`begin_keywords"),
    ("`pragma protect begin", "`pragma"),
    ("x = 1; /*verilator sc_clock*/", "Verilator metacomment `verilator sc_clock` is not allowed"),
    ('s = "// synopsys translate_off";', "tool metacomment `synopsys translate_off`"),
])
def test_constructs_two_lexers_could_read_differently_are_refused_even_in_strings(text, reason):
    why = safety.check_raw_text(text)
    assert why is not None and reason in why, why


@pytest.mark.parametrize("text", ["always @(*) x = y;", "always @( * ) x = y;", '$display("(*)");',
                                  "/*verilator lint_off WIDTH*/", "/*verilator coverage_off*/ x = 1;"])
def test_ordinary_text_passes_the_raw_check(text):
    assert safety.check_raw_text(text) is None


def test_a_clocking_output_bound_to_the_dut_is_a_write_and_an_input_is_a_read():
    assert "a clocking output to uut.q" in check(
        "clocking cb @(posedge clk); default output #2; output qq = uut.q; endclocking")
    assert check("clocking cb @(posedge clk); input st = uut.q; endclocking") is None
