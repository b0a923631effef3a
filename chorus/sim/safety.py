"""Is a testbench safe to build? Decided on the source Verilator will compile, parsed by pyslang.

simulate() first runs Verilator's own preprocessor over the design and the testbench (jailed,
in the same order and with the same defines as the build), then checks the testbench's part of
that output here and compiles exactly that text. Macro pasting, `include, `line and escaped
identifiers are therefore already resolved the way Verilator resolves them, and a real SV lexer
and parser (pyslang) reads what is left: no raw-text patterns.

Rejected (status `rejected`, with the line and the construct named):
- system tasks outside the IEEE 1800 set (Verilator's $c family, $system, ...) and file tasks
  whose file name is not a plain relative string literal;
- DPI imports/exports, `bind`, `config`, and directives that embed C++ or Verilator
  configuration (`systemc_*, `verilator_config), and Verilator metacomments outside a harmless set;
- redefining a design unit, or defining a module the design instantiates;
- writes into the DUT's internals (force/release/assign/deassign, assignments, increments,
  output arguments of calls, aliases) unless simulator.allow_dut_writes; reading internals stays
  allowed. A defparam is not a write: the DUT's parameters are checked on Verilator's elaboration
  (dut_parameters), so one that restates the task's values is fine.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from pyslang import parsing, syntax

from .stdtasks import FILE_TASKS, READ_ONLY_TASKS, STANDARD_TASKS

_SK = syntax.SyntaxKind
_TK = parsing.TokenKind
_DESIGN_DECLS = {_SK.ModuleDeclaration, _SK.InterfaceDeclaration, _SK.ProgramDeclaration, _SK.PackageDeclaration,
                 _SK.UdpDeclaration, _SK.ClassDeclaration}
_HARMLESS_DIRECTIVES = {"`timescale", "`default_nettype", "`resetall", "`celldefine", "`endcelldefine",
                        "`unconnected_drive", "`nounconnected_drive", "`line"}
# Raw-text over-approximations, checked on the whole preprocessed testbench including its strings:
# where Verilator's and pyslang's lexers could disagree about what is a string, these constructs
# must not appear at all. (Verilator ends an attribute `(* .. *)` at the first `*)` even inside a
# string; `verilator_config and metacomments change how Verilator treats code and leave no trace
# in its parse tree, so no later check could catch them.)
_RAW_FORBIDDEN = re.compile(r"`\s*(verilator_config|systemc_\w*|protect\w*|begin_keywords|end_keywords|pragma)"
                            r"|\(\*(?!\s*\))")
_RAW_META = re.compile(r"(?:/\*|//)\s*(?:(verilator)|synopsys|pragma|translate_\w+)\s*(\w*)", re.I)
# Verilator's rule for a metacomment: its preprocessor rewrites any comment that starts (after white
# space) with "verilator" as `/*verilator <rest>*/`, and its lexer acts on that only when <rest> begins
# with one of these words (some rules match a prefix: `tagged` is read as `tag`); anything else,
# such as `// Verilator testbench for the counter`, is an unknown comment (BADVLTPRAGMA) it ignores.
# These are the words Verilator 5.48 knows: its parser's tokens (tests/test_adversarial.py checks the
# list against the strings in the installed binary) and its lexer-only rules (coverage_*, lint_*,
# tracing_*, timing_*, hier_block, sc_clock). A comment counts as a metacomment when its text starts
# with one of them, case-insensitively, which errs towards counting.
_META_WORDS = ("clock_enable", "clocker", "coverage_block_off", "coverage_off", "coverage_on", "forceable",
               "fsm_arc_include_cond", "fsm_reset_arc", "fsm_state", "full_case", "hier_block", "hier_params",
               "inline_module", "isolate_assignments", "lint_off", "lint_on", "lint_restore", "lint_save",
               "no_clocker", "no_inline_module", "no_inline_task", "parallel_case", "public", "public_flat",
               "public_flat_on", "public_flat_rd", "public_flat_rd_on", "public_flat_rw", "public_flat_rw_on",
               "public_flat_rw_on_sns", "public_module", "public_off", "public_on", "sc_biguint", "sc_bv",
               "sc_clock", "sformat", "split_var", "tag", "timing_off", "timing_on", "trace_init_task",
               "tracing_off", "tracing_on", "unroll_disable", "unroll_full")
_HARMLESS_META = {"lint_off", "lint_on", "lint_save", "lint_restore", "public", "public_flat", "public_flat_rd",
                  "public_flat_rw", "public_module", "coverage_off", "coverage_on", "coverage_block_off",
                  "tracing_off", "tracing_on", "full_case", "parallel_case", "isolate_assignments",
                  "no_inline_module", "inline_module", "clocker", "no_clocker", "sformat", "split_var", "tag",
                  "timing_on", "timing_off"}
_ASSIGN_KINDS = {k for k in _SK.__members__.values() if k.name.endswith("AssignmentExpression")}
_STEP_KINDS = {_SK.PostincrementExpression, _SK.PostdecrementExpression, _SK.UnaryPreincrementExpression,
               _SK.UnaryPredecrementExpression}
_PROC_WRITES = {_SK.ProceduralForceStatement, _SK.ProceduralReleaseStatement, _SK.ProceduralAssignStatement,
                _SK.ProceduralDeassignStatement}


class Unsafe(Exception):
    """Why a source must not be built: one line naming the construct and where it is."""


def _line(tree, node) -> int:
    return tree.sourceManager.getLineNumber(node.sourceRange.start)


def _text(node) -> str:
    return str(node).strip()


def _name(tok) -> str:
    return tok.valueText.lstrip("\\")


def metacomment_word(rest: str) -> str | None:
    """The metacomment keyword that the text after a comment's `verilator` begins with (the longest,
    lower case), or None when Verilator reads the comment as an ordinary one (see _META_WORDS)."""
    rest = rest.lstrip().lower()
    hits = [w for w in _META_WORDS if rest.startswith(w)]
    return max(hits, key=len) if hits else None


def check_raw_text(text: str) -> str | None:
    """Lexer-independent refusals on the preprocessed text (see _RAW_FORBIDDEN)."""
    m = _RAW_FORBIDDEN.search(text)
    if m:
        line = text.count("\n", 0, m.start()) + 1
        if m.group(0).startswith("("):
            return f"line {line}: an attribute `(* ... *)` is not allowed in a testbench (even inside a string)"
        return f"line {line}: directive `{m.group(1)} is not allowed (even inside a string)"
    for m in _RAW_META.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        if m.group(1):  # verilator: only a real metacomment counts, and only a harmless one passes
            word = metacomment_word(text[m.end(1):m.end(1) + 200])
            if word is None or word in _HARMLESS_META:
                continue
            return f"line {line}: Verilator metacomment `verilator {word}` is not allowed"
        tool = m.group(0).lstrip("/* \t")
        return f"line {line}: tool metacomment `{tool}` is not allowed"
    return None


def check_host_access(tree) -> None:
    """Raise Unsafe for anything that reaches the host: C++, shell, DPI, files outside the run dir."""
    for tok, trivia in _tokens_and_trivia(tree):
        for tr in trivia:
            if tr.kind == parsing.TriviaKind.Directive:
                d = tr.syntax().directive.valueText
                if d not in _HARMLESS_DIRECTIVES:
                    raise Unsafe(f"line {_line(tree, tr.syntax())}: directive {d} is not allowed")
            elif tr.kind in (parsing.TriviaKind.BlockComment, parsing.TriviaKind.LineComment):
                m = re.match(r"(?:/\*|//)\s*verilator", tr.getRawText(), re.I)
                word = metacomment_word(tr.getRawText()[m.end():]) if m else None
                if word is not None and word not in _HARMLESS_META:
                    raise Unsafe(f"line {tree.sourceManager.getLineNumber(tok.location)}: Verilator metacomment "
                                 f"`verilator {word}` is not allowed")
        if tok.kind == _TK.SystemIdentifier and tok.valueText not in STANDARD_TASKS:
            raise Unsafe(f"line {tree.sourceManager.getLineNumber(tok.location)}: {tok.valueText} is not allowed "
                         "(host code or shell access, or not an IEEE 1800 system task)")
    for node in _nodes(tree):
        if node.kind in (_SK.DPIImport, _SK.DPIExport):
            raise Unsafe(f"line {_line(tree, node)}: DPI {'import' if node.kind == _SK.DPIImport else 'export'} "
                         "is not allowed")
        if node.kind == _SK.BindDirective:
            raise Unsafe(f"line {_line(tree, node)}: bind is not allowed (it would add code inside the DUT)")
        if node.kind in (_SK.ConfigDeclaration, _SK.LibraryDeclaration):
            raise Unsafe(f"line {_line(tree, node)}: configurations and libraries are not allowed")
        if node.kind == _SK.InvocationExpression and node.left.kind == _SK.SystemName:
            task = node.left.systemIdentifier.valueText
            if task in FILE_TASKS:
                _check_file_argument(tree, node, task)


def _check_file_argument(tree, node, task: str) -> None:
    args = list(node.arguments.parameters) if node.arguments else []
    first = args[0].expr if args and hasattr(args[0], "expr") else None
    while first is not None and first.kind in (_SK.SimplePropertyExpr, _SK.SimpleSequenceExpr):
        first = first.expr  # call arguments parse as property expressions
    if first is None or first.kind != _SK.StringLiteralExpression:
        raise Unsafe(f"line {_line(tree, node)}: {task} needs a string-literal file name")
    path = first.literal.valueText
    bad = None
    if not path.strip():
        bad = "an empty file name"
    elif path.startswith(("/", "~", "\\")) or re.match(r"^[A-Za-z]:", path):
        bad = f'an absolute path "{path}"'
    elif ".." in re.split(r"[\\/]", path):
        bad = f'a path leaving the working directory "{path}"'
    elif "\\" in path or "\x00" in path or any(ord(c) < 32 for c in path):
        bad = f"an unusual file name {path!r}"
    if bad:
        raise Unsafe(f"line {_line(tree, node)}: {task} with {bad}; use a file in the working directory")


def _declarations(tree):
    """(node, name) of every module, interface, program, package, primitive and class."""
    for node in _nodes(tree):
        if node.kind in _DESIGN_DECLS:
            yield node, _name(node.header.name if node.kind != _SK.ClassDeclaration else node.name)


def check_design_units(tree, design_units: set[str], instantiated: set[str]) -> None:
    """The testbench may not replace the design or supply modules the design instantiates. (What
    counts as the design's coverage is decided by source file, not by name: execute.score_points.)"""
    protected = design_units | instantiated
    for node, name in _declarations(tree):
        if name in design_units:
            why = f"redefines design unit '{name}'; instantiate the RTL instead"
        elif name in protected:
            why = f"defines module '{name}', which the design instantiates; it would count as the DUT's code"
        else:
            continue
        raise Unsafe(f"line {_line(tree, node)}: the testbench {why}")


def dut_instance_names(tree, design_units: set[str]) -> set[str]:
    """Names of every instance of a design module the testbench creates."""
    names = set()
    for node in _nodes(tree):
        if node.kind == _SK.HierarchyInstantiation and _name(node.type) in design_units:
            for inst in node.instances:
                if getattr(inst, "decl", None) is not None:
                    names.add(_name(inst.decl.name))
    return names


def check_dut_writes(tree, design_modules: set[str]) -> None:
    """Raise Unsafe when the testbench writes through a hierarchical name into a DUT instance
    (an instance of a design module). The fast, well-worded first pass: tree_verdict.judge
    decides the routes a name alone does not show."""
    duts = dut_instance_names(tree, design_modules)
    if not duts:
        return
    writers = _writing_subroutines(tree)
    for node in _nodes(tree):
        targets, what = [], ""
        if node.kind in _ASSIGN_KINDS:
            targets, what = [node.left], "an assignment to"
        elif node.kind in _STEP_KINDS:
            targets, what = [node.operand], "an increment of"
        elif node.kind in _PROC_WRITES:
            targets, what = [node.variable if hasattr(node, "variable") else node.expr], node.keyword.valueText
        elif node.kind in (_SK.NetAlias,):
            targets, what = list(node.nets), "an alias of"
        elif node.kind == _SK.DisableStatement:
            # ends a DUT process or task mid-way: its state stays whatever it was (no write node shows it)
            targets, what = [node.name], "a disable of"
        elif node.kind == _SK.ClockingItem and node.direction is not None \
                and re.search(r"\b(output|inout)\b", _text(node.direction)):
            # `output qq = uut.q` makes every `cb.qq <= v` a write into the DUT.
            targets, what = list(node.decls), "a clocking output to"
        elif node.kind == _SK.InvocationExpression and node.arguments:
            callee = (node.left.systemIdentifier.valueText if node.left.kind == _SK.SystemName
                      else _text(node.left).split(".")[-1].lstrip("\\"))
            read_only = callee in READ_ONLY_TASKS if node.left.kind == _SK.SystemName else callee not in writers
            if not read_only:
                targets, what = [a for a in node.arguments.parameters], f"an output argument of {callee} to"
        for t in targets:
            hit = _dut_path(t, duts)
            if hit:
                raise Unsafe(f"line {_line(tree, node)}: {what} {hit} writes into the DUT's internals; drive its "
                             "ports instead (reading internals is fine; simulator.allow_dut_writes=true permits it)")


def _dut_path(node, duts: set[str]) -> str | None:
    """The first dotted name under `node` that passes through a DUT instance, e.g. `uut.state`."""
    for n in _walk(node):
        if n.kind == _SK.ScopedName:
            parts = [_name(t) for t in _identifier_tokens(n)]
            if any(p in duts for p in parts[:-1]):
                return ".".join(parts)
    return None


def _writing_subroutines(tree) -> set[str]:
    """User tasks/functions with an output, inout or ref formal: their arguments may be written."""
    out = set()
    for node in _nodes(tree):
        if node.kind in (_SK.TaskDeclaration, _SK.FunctionDeclaration):
            text = _text(node)
            if re.search(r"\b(output|inout|ref)\b", text):
                name = node.prototype.name
                out.add(_text(name).split("::")[-1].split(".")[-1].lstrip("\\"))
    return out


# ---------------------------------------------------------------- tree walking (iterative: no recursion limit)

def _walk(root):
    stack = [root]
    while stack:
        n = stack.pop()
        if isinstance(n, parsing.Token) or n is None:
            continue
        yield n
        stack.extend(reversed([c for c in _children(n)]))


def _children(n):
    try:
        return [n[i] for i in range(len(n))]
    except TypeError:
        return []


def _nodes(tree):
    return _walk(tree.root)


def _identifier_tokens(node):
    out = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, parsing.Token):
            if n.kind in (_TK.Identifier, _TK.RootSystemName, _TK.UnitSystemName):
                out.append(n)
            continue
        stack.extend(reversed(_children(n)))
    return out


def _tokens_and_trivia(tree):
    stack = [tree.root]
    while stack:
        n = stack.pop()
        if n is None:
            continue
        if isinstance(n, parsing.Token):
            yield n, n.trivia
            continue
        stack.extend(reversed(_children(n)))


# ---------------------------------------------------------------- whole-source checks used by simulate()

def parse(text: str, name: str):
    return syntax.SyntaxTree.fromText(text, name)


def instantiated_modules(tree) -> set[str]:
    return {_name(n.type) for n in _nodes(tree) if n.kind == _SK.HierarchyInstantiation}


@dataclass(frozen=True)
class DesignUnits:
    """What a testbench is checked against: the units the design declares, the modules it
    instantiates without declaring them, and why its RTL reaches the host (None when it doesn't).
    `modules`: the declared modules and programs, whose instances are DUT instances (an instance
    of a design interface is the testbench's own)."""
    declared: frozenset[str]
    instantiated: frozenset[str]
    host_access: str | None = None
    modules: frozenset[str] = frozenset()


def design_units(rtl_tree) -> DesignUnits:
    declared = frozenset(name for _, name in _declarations(rtl_tree))
    try:
        check_host_access(rtl_tree)
        host = None
    except Unsafe as exc:
        host = str(exc).split(": ", 1)[-1]
    modules = frozenset(_name(n.header.name) for n in _nodes(rtl_tree)
                        if n.kind in (_SK.ModuleDeclaration, _SK.ProgramDeclaration))
    return DesignUnits(declared, frozenset(instantiated_modules(rtl_tree)) - declared, host, modules)


def top_modules(tree) -> list[str]:
    """Modules declared in the tree that none of its modules instantiates, in source order."""
    mods = [_name(n.header.name) for n in _nodes(tree) if n.kind in (_SK.ModuleDeclaration, _SK.ProgramDeclaration)]
    used = instantiated_modules(tree)
    return [m for m in mods if m not in used]


def parse_error(tree) -> str | None:
    """The first syntax error pyslang finds. Code it cannot parse lands in skipped-token trivia
    that no check here reads, so such a testbench is never built."""
    for d in tree.diagnostics:
        if d.isError():
            line = tree.sourceManager.getLineNumber(d.location)
            code = str(d.code).split('(')[-1].rstrip(')')
            if code == "UTF8Char":  # e.g. `\sig_é `: Verilator takes it, IEEE 1800 and pyslang do not
                return (f"line {line}: a non-ASCII character outside a string or comment does not parse as "
                        "SystemVerilog (identifiers, escaped ones too, are printable ASCII; use an ASCII name)")
            return f"line {line}: does not parse as SystemVerilog ({code})"
    return None


def check_testbench(tree, design: DesignUnits, allow_dut_writes: bool = False) -> str | None:
    """Why the preprocessed (and parsed: see parse_error) testbench must not be built, or None."""
    try:
        check_host_access(tree)
        check_design_units(tree, set(design.declared), set(design.instantiated))
        if not allow_dut_writes:
            check_dut_writes(tree, set(design.modules))
    except Unsafe as exc:
        return str(exc)
    return None


def rewrite_stop_as_finish(tree, text: str) -> str:
    """`$stop` ends an xrun batch run; Verilator would ignore it below the error limit."""
    offsets = [t.location.offset for t, _ in _tokens_and_trivia(tree)
               if t.kind == _TK.SystemIdentifier and t.valueText == "$stop"]
    data = text.encode()
    for off in reversed(offsets):
        data = data[:off] + b"$finish" + data[off + len(b"$stop"):]
    return data.decode()
