"""Accumulator ALUs: an opcode subset with a default arm, flag-conditional opcodes and
privileged opcodes behind a magic key.

The holes: privileged opcodes only act after KEY with one magic operand (2^-width per try);
conditional opcodes act only under rare flag combinations (zero and carry together come
only from an add that wraps to exactly zero); a compare counts only exact matches. Uniform
random stimulus executes every opcode but almost never in the state that makes it act.
"""
from __future__ import annotations

import random

from .common import Design, Port, Stim, a_n, finish_with_reset, hexv, inp, kept_secret, lit, out, pick_names

# difficulty -> (data width, opcode width, key width, plain ops, conditional ops, privileged ops)
LEVELS = {
    "easy": (6, 3, 6, 0, 1, 1),
    "medium": (8, 4, 8, 3, 2, 2),
    "hard": (16, 4, 14, 2, 3, 4),
}

NAMES = {
    "go": ("go", "exec_en", "issue", "start"),
    "op": ("op", "opcode", "cmd"),
    "arg": ("arg", "operand", "data_in"),
    "acc": ("acc", "accum", "result"),
    "zf": ("zf", "zero", "z_flag"),
    "cf": ("cf", "carry", "c_flag"),
    "priv": ("unlocked", "priv", "su_mode"),
    "bad": ("bad_op", "illegal", "fault"),
    "eq": ("eq_cnt", "match_cnt", "hits"),
    "save": ("saved", "shadow", "stash"),
}

# name -> (RTL statements, description). {acc} {arg} {zf} {cf} {priv} {bad} {eq} {W} {H} are filled in.
BASE = {
    "LOAD": ("{acc} <= {arg};\n{zf} <= ({arg} == '0);", "acc = arg; Z = (arg == 0)"),
    "ADD": ("{{{cf}, {acc}}} <= {{1'b0, {acc}}} + {{1'b0, {arg}}};\n{zf} <= ({W}'({acc} + {arg}) == '0);",
            "acc = acc + arg; C = carry out; Z = (new acc == 0)"),
    "SUB": ("{{{cf}, {acc}}} <= {{1'b0, {acc}}} - {{1'b0, {arg}}};\n{zf} <= ({acc} == {arg});",
            "acc = acc - arg; C = borrow (arg > acc); Z = (new acc == 0)"),
    "KEY": ("if ({arg}[{K1}:0] == KEY)\n    {priv} <= 1'b1;\nelse\n    {bad} <= 1'b1;",
            "if the low {K} bits of arg equal the key, enter privileged mode; else set the fault flag"),
    "LOCK": ("{priv} <= 1'b0;", "leave privileged mode"),
}
PLAIN = {
    "AND": ("{acc} <= {acc} & {arg};\n{zf} <= (({acc} & {arg}) == '0);", "acc = acc & arg; Z = (new acc == 0)"),
    "OR": ("{acc} <= {acc} | {arg};\n{zf} <= (({acc} | {arg}) == '0);", "acc = acc \\| arg; Z = (new acc == 0)"),
    "XOR": ("{acc} <= {acc} ^ {arg};\n{zf} <= (({acc} ^ {arg}) == '0);", "acc = acc ^ arg; Z = (new acc == 0)"),
    "NOT": ("{acc} <= ~{acc};\n{zf} <= ({acc} == '1);", "acc = ~acc; Z = (new acc == 0)"),
    "SHL": ("{acc} <= {{{acc}[{W2}:0], 1'b0}};\n{cf} <= {acc}[{W1}];\n{zf} <= ({acc}[{W2}:0] == '0);",
            "acc = acc << 1; C = bit shifted out; Z = (new acc == 0)"),
    "SHR": ("{acc} <= {{1'b0, {acc}[{W1}:1]}};\n{cf} <= {acc}[0];\n{zf} <= ({acc}[{W1}:1] == '0);",
            "acc = acc >> 1; C = bit shifted out; Z = (new acc == 0)"),
}
COND = {
    "CMP": ("{cf} <= ({acc} < {arg});\nif ({acc} == {arg}) begin\n    {zf} <= 1'b1;\n    {eq} <= {eq} + 1'b1;\n"
            "end else begin\n    {zf} <= 1'b0;\nend",
            "compare: Z = (acc == arg), C = borrow of acc - arg, acc unchanged; an exact match increments the "
            "match counter"),
    "CLRZC": ("if ({zf} && {cf})\n    {acc} <= '0;\nelse\n    {cf} <= 1'b0;",
              "if Z and C are both set, clear acc; otherwise clear C"),
    "MOVZ": ("if ({zf}) begin\n    {acc} <= {arg};\n    {zf} <= ({arg} == '0);\nend",
             "if Z is set, acc = arg and Z = (arg == 0); otherwise nothing"),
}
PRIV = {
    "ROL": ("{acc} <= {{{acc}[{W2}:0], {acc}[{W1}]}};", "rotate acc left by one"),
    "ROR": ("{acc} <= {{{acc}[0], {acc}[{W1}:1]}};", "rotate acc right by one"),
    "SWAP": ("{acc} <= {{{acc}[{H1}:0], {acc}[{W1}:{H}]}};", "swap the upper and lower halves of acc"),
    "SAVE": ("{save} <= {acc};", "copy acc into the saved register"),
    "MAXU": ("{acc} <= ({arg} > {acc}) ? {arg} : {acc};", "acc = the larger of acc and arg (unsigned)"),
}


# The staged world's two strategies (issue 27): enter privileged mode with the key the brief gives, or
# sweep KEY over random operands. A `secret` design (easy and medium only) keeps its key out of the spec
# and the brief but never locks out, so only the sweep gets in (by chance: 2^-K per try). A design whose
# key is given locks KEY after three wrong keys, so the sweep shuts itself out and only the exact key
# gets in; hard keys (14 bits) are out of a sweep's reach anyway.
STRATEGIES = ("exact_key", "key_sweep")
SKILLS = {"exact_key": "exact", "key_sweep": "sweep"}  # the skill each strategy exercises (sft_stage.skills)
SWEEP = 300  # the sweep's cycles of KEY on random operands


def build(rng: random.Random, k: int, difficulty: str, staged: bool = False) -> Design:
    w, ow, kw, n_plain, n_cond, n_priv = LEVELS[difficulty]
    secret = kept_secret(rng, difficulty, staged)
    lockout = staged and not secret
    n = pick_names(rng, NAMES)
    plain = rng.sample(sorted(PLAIN), n_plain)
    cond = rng.sample(sorted(COND), n_cond)
    priv = ["SAVE"] + rng.sample(sorted(set(PRIV) - {"SAVE"}), n_priv - 1)
    ops = list(BASE) + plain + cond + priv
    codes = rng.sample(range(1 << ow), len(ops))
    opcode = dict(zip(ops, codes))
    illegal = sorted(set(range(1 << ow)) - set(codes))
    key = rng.randrange(1, (1 << kw) - 1)
    has_eq = "CMP" in cond
    top = f"{rng.choice(('acc_alu', 'mini_alu', 'alu_core', 'op_unit'))}_{k}"
    go, op, arg, acc, zf, cf, pv, bad, eq, sv = (n[x] for x in ("go", "op", "arg", "acc", "zf", "cf", "priv", "bad",
                                                               "eq", "save"))
    fill = {"save": sv, "acc": acc, "arg": arg, "zf": zf, "cf": cf, "priv": pv, "bad": bad, "eq": eq,
            "W": w, "W1": w - 1, "W2": w - 2, "H": w // 2, "H1": w // 2 - 1, "K": kw, "K1": kw - 1}
    table = {**BASE, **PLAIN, **COND, **PRIV}
    if lockout:  # three wrong keys lock KEY until reset
        table["KEY"] = ("if (key_locked) begin\n    {bad} <= 1'b1;\nend else if ({arg}[{K1}:0] == KEY) begin\n"
                        "    {priv} <= 1'b1;\nend else begin\n    {bad} <= 1'b1;\n    if (key_tries == 2'd2)\n"
                        "        key_locked <= 1'b1;\n    else\n        key_tries <= key_tries + 1'b1;\nend",
                        "if KEY is locked, set the fault flag; else if the low {K} bits of arg equal the key, enter "
                        "privileged mode; else set the fault flag and count a wrong key (the third locks KEY until reset)")

    ports = [
        inp(go, 1, "execute the opcode on `" + op + "` this cycle; nothing changes while low."),
        inp(op, ow, "opcode (see the opcode table)."),
        inp(arg, w, "operand."),
        out(acc, w, "accumulator."),
        out(zf, 1, "zero flag Z."),
        out(cf, 1, "carry / borrow flag C."),
        out(pv, 1, "privileged mode is active."),
        out(sv, w, "saved register, written only by the privileged SAVE opcode."),
        out(bad, 1, "sticky fault flag: illegal opcode, wrong key or a privileged opcode outside privileged mode."),
    ]
    if has_eq:
        ports.append(out(eq, 2, "number of exact CMP matches since reset, modulo 4."))
    if lockout:
        ports.append(out("key_locked", 1, "KEY is locked after three wrong keys (until reset)."))

    def indent(text: str, spaces: int) -> str:
        return "\n".join(" " * spaces + ln for ln in text.splitlines())

    arms = []
    for name in ops:
        stmt = table[name][0].format(**fill)
        if name in PRIV:
            stmt = f"if ({pv}) begin\n{indent(stmt, 4)}\nend else begin\n    {bad} <= 1'b1;\nend"
        arms.append(f"                OP_{name}: begin\n{indent(stmt, 20)}\n                end")
    arms.append(f"                default: {bad} <= 1'b1;")
    params_sv = "\n".join(f"    localparam logic [{ow - 1}:0] OP_{name} = {lit(ow, opcode[name])};" for name in ops)
    eq_reset = f"            {eq} <= 2'd0;\n" if has_eq else ""
    if lockout:
        eq_reset += "            key_locked <= 1'b0;\n            key_tries <= 2'd0;\n"
    tries_decl = "    logic [1:0] key_tries;\n" if lockout else ""
    body = f"""{params_sv}
    localparam logic [{kw - 1}:0] KEY = {lit(kw, key)};
{tries_decl}
    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            {acc} <= '0;
            {zf} <= 1'b0;
            {cf} <= 1'b0;
            {pv} <= 1'b0;
            {bad} <= 1'b0;
            {sv} <= '0;
{eq_reset}        end else if ({go}) begin
            case ({op})
{chr(10).join(arms)}
            endcase
        end
    end
"""
    rows = ["| Opcode | Name | Action |", "|---|---|---|"]
    for name in sorted(ops, key=lambda x: opcode[x]):
        doc = table[name][1].format(K=kw)
        if name in PRIV:
            doc = f"privileged: {doc}; outside privileged mode only the fault flag is set"
        rows.append(f"| {opcode[name]} | {name} | {doc} |")
    rows.append(f"| {', '.join(map(str, illegal))} | (illegal) | set the fault flag |")
    description = (
        f"`{top}` is {a_n(w)} {w}-bit accumulator ALU with a {ow}-bit opcode. On a rising clock edge with `{go}` "
        f"high it executes `{op}` on the accumulator `{acc}` and the operand `{arg}`, updating the flags Z (`{zf}`) "
        f"and C (`{cf}`) where the table says so (flags not mentioned keep their value). Privileged mode is entered "
        + (f"with KEY when the low {kw} bits of the operand equal a secret key (a wrong key only sets the fault flag) "
           if secret else f"with KEY when the low {kw} bits of the operand equal {key} ({kw}'h{key:x}) ")
        + f"and left with LOCK. In the table "
        f"acc is `{acc}`, arg is `{arg}`, Z is `{zf}` and C is `{cf}`; every other opcode value is illegal.\n\n"
        + "\n".join(rows))

    # stimulus -----------------------------------------------------------------------------
    ones = (1 << w) - 1
    pat = int("01" * w, 2) & ones  # 0101...
    s = Stim(ports)

    def ex(name: str, value: int | None = None, cycles: int = 1) -> None:
        kw_ = {go: 1, op: opcode[name]}
        if value is not None:
            kw_[arg] = value
        s.step(cycles, **kw_)

    def common() -> None:
        s.note("an opcode with go low, loads of all ones and zero")
        s.step(1, **{op: opcode["LOAD"], arg: ones})
        ex("LOAD", ones)
        ex("LOAD", 0)
        s.note("add: carry, wrap to exactly zero, plain")
        ex("LOAD", ones)
        ex("ADD", 1)
        if "CLRZC" in cond:
            ex("CLRZC")
            ex("LOAD", 1)
            ex("CLRZC")
            ex("LOAD", 0)
            ex("CLRZC")
        ex("ADD", 5)
        s.note("subtract: borrow and zero")
        ex("LOAD", 3)
        ex("SUB", 5)
        ex("LOAD", 7)
        ex("SUB", 7)
        for name in plain:
            s.note(f"{name} on two patterns")
            ex("LOAD", pat)
            ex(name, ones)
            ex("LOAD", ones)
            ex(name, pat)
            ex("LOAD", 0)
            ex(name, 0)

    def conditional() -> None:
        if "CMP" in cond:
            s.note("compare: two exact matches, then greater and less")
            ex("LOAD", pat)
            ex("CMP", pat, 2)
            ex("CMP", ones)
            ex("CMP", 0)
        if "MOVZ" in cond:
            s.note("conditional move with Z set, then with Z clear")
            ex("LOAD", 0)
            ex("MOVZ", pat)
            ex("MOVZ", 1)

    def privileged() -> None:
        s.note("privileged opcodes while locked, a wrong key, the right key")
        for name in priv:
            ex(name, 0)
        ex("KEY", key ^ 1)
        ex("KEY", key)
        for name in priv:
            s.note(f"{name} while privileged")
            ex("LOAD", pat)
            ex(name, ones if name == "MAXU" else 0)
            ex("LOAD", ones ^ 1)
            ex(name, 0, 2)
        ex("LOCK")

    common()
    conditional()
    privileged()
    s.note("an illegal opcode")
    s.step(1, **{op: illegal[0]})
    finish_with_reset(s, **{go: 0})
    strong = s.text()

    s = Stim(ports)
    common()
    s.note("random opcodes and operands")
    s.step(40, **{op: None, arg: None})
    s.step(1, **{go: 0})
    medium = s.text()

    s = Stim(ports)
    s.step(1, **{go: 1, op: opcode["LOAD"], arg: 1})
    s.step(2, **{op: opcode["ADD"]})
    s.step(1, **{go: 0})
    weak = s.text()

    brief, compact = _compact(ports, go, op, arg, w, ow, opcode, key, priv, cond)
    params = {"width": w, "opcode_width": ow, "key": key, "key_width": kw, "opcodes": opcode}
    strategies = {}
    if staged:
        params["secret"] = secret
        sweep = _compact(ports, go, op, arg, w, ow, opcode, None, priv, cond)[1]
        if secret:  # the key is not given: the exact strategy cannot be written from the brief
            brief[0] = f"in1={_val(ow, opcode['KEY'])} with the secret key in in2 enters privileged mode"
            strategies = {"key_sweep": sweep}
        else:
            brief[0] += "; three wrong keys lock KEY until reset"
            compact = _compact(ports, go, op, arg, w, ow, opcode, key, priv, cond, key_first=True)[1]
            strategies = {"exact_key": compact, "key_sweep": sweep}
        compact = sweep if secret else compact  # the teacher's choice
    return Design(top, ports, body, f"{w}-bit accumulator ALU, {len(ops)} opcodes, keyed privileged mode (generated)",
                  description, {"strong": strong, "medium": medium, "weak": weak, "compact": compact}, params,
                  brief=brief, strategies=strategies)


# The compact program's random burst (every input random): it runs every opcode outside privileged
# mode, the fault paths included, and toggles the data bits; the targeted lines and the final reset
# add 13-21 cycles, so the whole stays within COMPACT_CYCLES (uniform random stimulus's budget).
BURST = 460
# The compact program's targeted part, with h = half the range: LOAD h, then CMP (acc == h: exact
# matches), ADD h (wraps to exactly zero: Z and C set), CLRZC (needs Z and C, keeps both), MOVZ
# (needs Z). The conditional opcodes a design has run in this order.
COND_ORDER = ("CMP", "CLRZC", "MOVZ")
COND_FACT = {
    "CMP": "{o} counts exact acc == in2 matches, wrapping after 4",
    "CLRZC": "{o} clears acc only when Z and C are both set",
    "MOVZ": "{o} loads in2 into acc only when Z is set",
}


def _val(width: int, value: int) -> str:
    """A value as Stim writes it, so that the brief's literals are the program's."""
    return str(value) if width <= 3 else hexv(width, value)


def _compact(ports: list[Port], go: str, op: str, arg: str, w: int, ow: int, opcode: dict[str, int], key: int | None,
             priv: list[str], cond: list[str], key_first: bool = False) -> tuple[list[str], str]:
    """The compact spec and the compact program: one random burst, then per fact a few opcode
    lines using the fact's values, then a reset. Draws nothing from rng. key=None: the key sweep,
    SWEEP cycles of KEY on random operands in place of the key (and of as much of the burst).
    key_first: the targeted lines come before the burst (designs that lock KEY after wrong keys)."""
    ones, half = (1 << w) - 1, 1 << (w - 1)

    def o(name: str) -> str:
        return f"in1={_val(ow, opcode[name])}"

    def a(value: int) -> str:
        return f"in2={_val(w, value)}"

    others = [o(name) for name in priv[1:]]
    conds = [c for c in COND_ORDER if c in cond]
    brief = [f"{o('KEY')} with {a(key)} enters privileged mode" if key is not None else "",
             f"privileged, e.g. on {a(ones)}: " + "".join(f"{x}, " for x in others) + f"{o('SAVE')} saves acc",
             f"{o('LOAD')} loads in2, {o('ADD')} adds it; {a(half)} twice wraps to 0",
             *(COND_FACT[c].format(o=o(c)) for c in conds)]

    s = Stim(ports, comments=False)
    if key is None:  # the sweep (staged designs): KEY on random operands instead of most of the burst
        s.burst(BURST - SWEEP)
        s.step(SWEEP, **{go: 1, op: opcode["KEY"], arg: None})
    else:
        if not key_first:
            s.burst(BURST)
        s.step(1, **{go: 1, op: opcode["KEY"], arg: key})
    # Twice each on all ones: MAXU takes the larger operand once, then finds acc as large.
    for name in priv[1:]:
        s.step(2, **{op: opcode[name], arg: ones})
    s.step(1, **{op: opcode["LOAD"], arg: ones})  # all ones, so SAVE (and the final reset) toggles every bit
    s.step(1, **{op: opcode["SAVE"]})
    s.step(1, **{op: opcode["LOAD"], arg: half})
    if "CMP" in conds:
        s.step(4, **{op: opcode["CMP"]})
    s.step(1, **{op: opcode["ADD"]})
    for name in conds:
        if name != "CMP":
            s.step(1, **{op: opcode[name]})
    if key_first:  # the burst after the key: its random wrong keys would lock KEY first
        s.burst(BURST)
    finish_with_reset(s, **{go: 0})
    return brief, s.text()
