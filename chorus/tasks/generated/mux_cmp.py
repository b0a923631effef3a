"""Registered muxes and comparators with magic-value, window and equality holes.

The holes: a key input must equal a magic constant (alone and together with one select
value), an operand pair must equal a magic pair, an operand must fall inside a narrow
window, and the two operands must stay equal for several consecutive cycles. Uniform random
operands satisfy each with probability 2^-width per cycle, and the equality streak never.
The brief states those values on the aliases; the compact program is a random burst, then one
step for each, then a reset.
"""
from __future__ import annotations

import random

from .common import Design, Stim, finish_with_reset, hexv, inp, kept_secret, lit, out, pick_names

# difficulty -> (data width, key width, select width, number of mux arms, window size, streak length)
LEVELS = {
    "easy": (6, 6, 2, 3, 3, 3),
    "medium": (10, 10, 3, 6, 2, 4),
    "hard": (12, 12, 3, 7, 1, 9),
}

NAMES = {
    "sel": ("sel", "mux_sel", "route"),
    "a": ("a", "op_a", "lhs", "x"),
    "b": ("b", "op_b", "rhs", "y_in"),
    "key": ("key", "tag", "code"),
    "y": ("y", "dout", "mux_out"),
    "eq": ("eq", "same", "equal"),
    "lt": ("lt", "less", "below"),
    "win": ("in_win", "in_range", "window_hit"),
    "hit": ("key_hit", "tag_hit", "armed"),
    "pair": ("pair_seen", "combo_seen", "pair_hit"),
    "stable": ("stable", "eq_hold", "steady"),
    "cap": ("captured", "held_val", "snap"),
}

# mux arms: (RTL expression, description)
ARMS = [
    ("{a}", "`{a}`"),
    ("{b}", "`{b}`"),
    ("{a} ^ {b}", "`{a} ^ {b}`"),
    ("({a} > {b}) ? {a} : {b}", "the larger of `{a}` and `{b}` (unsigned)"),
    ("key_ok ? ~{a} : {a}", "`~{a}` when the key matches, else `{a}`"),
    ("{a} + {b}", "`{a} + {b}` (truncated)"),
    ("{a} & ~{b}", "`{a} & ~{b}`"),
    ("{{{a}[{H1}:0], {b}[{W1}:{H}]}}", "the low half of `{a}` above the high half of `{b}`"),
]


# The staged world's two strategies (issue 27), as the ALU's: present the key the brief gives with the
# hit select before any random cycle, or sweep the key with the hit select held. A `secret` design
# (easy and medium only) keeps its key out of the spec and the brief but never locks, so only the sweep
# hits (by chance: 2^-K per cycle); a design whose key is given locks the key after three wrong keys
# under the hit select, so the sweep, and any random burst before the key, shut it out.
STRATEGIES = ("exact_key", "key_sweep")
SKILLS = {"exact_key": "exact", "key_sweep": "sweep"}  # the skill each strategy exercises (sft_stage.skills)
SWEEP = 300  # the sweep's cycles of random keys under the hit select


def build(rng: random.Random, k: int, difficulty: str, staged: bool = False) -> Design:
    w, kw, sw, narms, wsize, need = LEVELS[difficulty]
    n = pick_names(rng, NAMES)
    a, b, key, sel, y = n["a"], n["b"], n["key"], n["sel"], n["y"]
    ones = (1 << w) - 1
    magic = rng.randrange(1, (1 << kw) - 1)
    lo = rng.randrange(1, ones - wsize)
    hi = lo + wsize - 1
    ma, mb = rng.randrange(ones + 1), rng.randrange(ones + 1)
    arm_ids = [0, 1, 4] + rng.sample([2, 3, 5, 6, 7], narms - 3)
    rng.shuffle(arm_ids)
    sel_codes = rng.sample(range(1 << sw), narms)
    key_sel = rng.choice(sel_codes)
    has_default = narms < (1 << sw)
    sb = need.bit_length()
    top = f"{rng.choice(('mux_cmp', 'sel_compare', 'route_match', 'cmp_unit'))}_{k}"
    secret = kept_secret(rng, difficulty, staged)
    lockout = staged and not secret
    if secret:  # a key a sweep can find: 7 bits (300 random tries hit one value with chance 0.9)
        kw = min(kw, 7)
        magic = 1 + magic % ((1 << kw) - 2)
    key_text = "a secret value" if secret else f"{magic} ({kw}'h{magic:x})"
    # staged designs: the pair flag and the equality streak count only once the key has hit, so the key
    # decides most of what targeted stimulus adds over random (without it no strategy reaches the target)
    armed = f", once `{n['hit']}` is set" if staged else ""
    gate, ungate = (f"{n['hit']} && ", f" || !{n['hit']}") if staged else ("", "")
    fill = {"a": a, "b": b, "H": w // 2, "H1": w // 2 - 1, "W1": w - 1}

    ports = [
        inp(sel, sw, "selects what `" + y + "` registers (see the select table)."),
        inp(a, w, "operand A."),
        inp(b, w, "operand B."),
        inp(key, kw, f"key; matches when equal to {key_text}."),
        out(y, w, "registered mux output."),
        out(n["eq"], 1, f"registered `{a} == {b}`."),
        out(n["lt"], 1, f"registered `{a} < {b}` (unsigned)."),
        out(n["win"], 1, f"registered: `{a}` lies in the window {lo} to {hi} inclusive."),
        out(n["hit"], 1, f"sticky: the key matched in a cycle where `{sel}` was {key_sel}."),
        out(n["pair"], 1, f"sticky: `{a}` was {ma} and `{b}` was {mb} in the same cycle{armed}."),
        out(n["stable"], 1, f"`{a} == {b}` has held for at least {need} consecutive cycles{armed}."),
        out(n["cap"], w, f"registers `{a}` on every cycle where `{n['stable']}` is high; holds otherwise."),
    ]
    if lockout:
        ports.append(out("key_locked", 1, f"the key is locked after three wrong keys while `{sel}` was {key_sel} "
                                          "(until reset); a locked key never hits."))
    arms = [f"                {lit(sw, c)}: {y} <= {ARMS[i][0].format(**fill)};" for c, i in zip(sel_codes, arm_ids)]
    hit_rtl = (f"            if (key_ok && {sel} == {lit(sw, key_sel)})\n                {n['hit']} <= 1'b1;\n")
    lock_decl = lock_reset = ""
    if lockout:  # three wrong keys under the hit select lock it until reset
        hit_rtl = (f"            if ({sel} == {lit(sw, key_sel)} && !key_locked) begin\n"
                   f"                if (key_ok)\n                    {n['hit']} <= 1'b1;\n"
                   "                else if (key_tries == 2'd2)\n                    key_locked <= 1'b1;\n"
                   "                else\n                    key_tries <= key_tries + 1'b1;\n            end\n")
        lock_decl = "    logic [1:0] key_tries;\n"
        lock_reset = "            key_tries <= '0;\n            key_locked <= 1'b0;\n"
    if has_default:
        arms.append(f"                default: {y} <= '0;")
    body = f"""    localparam logic [{kw - 1}:0] MAGIC = {lit(kw, magic)};
    localparam logic [{w - 1}:0] LO = {lit(w, lo)};
    localparam logic [{w - 1}:0] HI = {lit(w, hi)};
    localparam logic [{w - 1}:0] PAIR_A = {lit(w, ma)};
    localparam logic [{w - 1}:0] PAIR_B = {lit(w, mb)};
    localparam logic [{sb - 1}:0] NEED = {lit(sb, need)};

    logic key_ok;
    logic [{sb - 1}:0] streak;
{lock_decl}
    assign key_ok = ({key} == MAGIC);
    assign {n['stable']} = (streak == NEED);

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            {y} <= '0;
            {n['eq']} <= 1'b0;
            {n['lt']} <= 1'b0;
            {n['win']} <= 1'b0;
            {n['hit']} <= 1'b0;
            {n['pair']} <= 1'b0;
            streak <= '0;
            {n['cap']} <= '0;
{lock_reset}        end else begin
            case ({sel})
{chr(10).join(arms)}
            endcase
            {n['eq']} <= ({a} == {b});
            {n['lt']} <= ({a} < {b});
            {n['win']} <= ({a} >= LO) && ({a} <= HI);
{hit_rtl}            if ({gate}{a} == PAIR_A && {b} == PAIR_B)
                {n['pair']} <= 1'b1;
            if ({n['stable']})
                {n['cap']} <= {a};
            if ({a} != {b}{ungate})
                streak <= '0;
            else if (streak != NEED)
                streak <= streak + 1'b1;
        end
    end
"""
    rows = [f"| `{sel}` | `{y}` on the next edge |", "|---|---|"]
    for c, i in sorted(zip(sel_codes, arm_ids)):
        rows.append(f"| {c} | {ARMS[i][1].format(**fill)} |")
    if has_default:
        rows.append("| any other | 0 |")
    description = (
        f"`{top}` registers one of several functions of the {w}-bit operands `{a}` and `{b}` into `{y}`, chosen by "
        f"`{sel}`, and registers comparison flags every cycle. The key `{key}` matches when it equals {'a secret value' if secret else magic}. "
        + (f"While `{sel}` is {key_sel}, a wrong key counts as a failed try; the third locks the key until reset "
           "(`key_locked`), and a locked key never hits. " if lockout else "") +
        f"An internal counter counts consecutive cycles with `{a} == {b}` (cleared by any cycle where they differ, "
        f"saturating at {need}); `{n['stable']}` is high while it is at {need}."
        + (f" The pair flag and the counter count only once the key has hit (`{n['hit']}` set)." if staged else "")
        + "\n\n" + "\n".join(rows))

    # stimulus -----------------------------------------------------------------------------
    pat = int("01" * w, 2) & ones
    other_sel = next(c for c in sel_codes if c != key_sel)

    def arms_pass(s: Stim) -> None:
        s.note("every select value with A above B and with A below B")
        for c in sorted(sel_codes) + ([next(v for v in range(1 << sw) if v not in sel_codes)] if has_default else []):
            s.step(1, **{sel: c, a: ones, b: pat}).step(1, **{a: pat ^ ones, b: ones})
        s.step(1, **{a: 0, b: 0})

    s = Stim(ports)
    arms_pass(s)
    s.note("the key: with the key-dependent select, with the hit select, and with another select")
    key_arm = sel_codes[arm_ids.index(4)]
    s.step(1, **{sel: key_arm, key: magic, a: pat})
    s.step(1, **{sel: key_sel}).step(1, **{key: magic ^ 1}).step(1, **{sel: other_sel, key: magic})
    s.step(1, **{key: ((1 << kw) - 1) ^ magic}).step(1, **{key: 0})
    s.note(f"A == B for {need + 2} cycles (stable), change both together, then apart")
    s.step(need + 2, **{a: pat, b: pat}).step(2, **{a: pat ^ ones, b: pat ^ ones}).step(1, **{b: pat})
    s.note("the window: inside at both ends and just outside")
    s.step(1, **{a: lo}).step(1, **{a: hi}).step(1, **{a: lo - 1}).step(1, **{a: hi + 1}).step(1, **{a: lo})
    s.note("the magic pair, and each half alone")
    s.step(1, **{a: ma, b: mb}).step(1, **{b: mb ^ 1}).step(1, **{a: ma ^ 1, b: mb})
    finish_with_reset(s)
    strong = s.text()

    s = Stim(ports)
    arms_pass(s)
    s.note("equal operands briefly, near the window, random")
    s.step(max(1, need // 2), **{a: pat, b: pat})
    s.step(1, **{a: lo - 1})
    s.step(30, **{a: None, b: None, key: None, sel: None})
    medium = s.text()

    s = Stim(ports)
    s.step(3, **{sel: sel_codes[0], a: 1, b: 2})
    weak = s.text()

    # compact: a random burst, then one step per brief fact (the key with its two selects, the pair
    # with A alone first so the condition's A-only row is hit too, the window, an equality streak at
    # all ones so every `captured` bit toggles), then a reset. No rng draws: designs stay identical.
    s = Stim(ports, comments=False)

    def on(name: str, v: int) -> str:  # `in1=0x3f` exactly as Stim writes it
        return f"{s.alias[name]}={v if s.width[name] <= 3 else hexv(s.width[name], v)}"

    def compact_program(strategy: str = "", key_first: bool = False) -> str:
        s = Stim(ports, comments=False)
        if strategy == "key_sweep":  # random keys under the hit select in place of most of the burst
            s.burst(400 - SWEEP)
            s.step(SWEEP, **{sel: key_sel, key: None})
            s.step(1, **{sel: key_arm})
        else:
            if not key_first:
                s.burst(400)
            s.step(1, **{sel: key_sel, key: magic}).step(1, **{sel: key_arm})
            if key_first:  # the burst after the hit: its random wrong keys would lock the key first
                s.burst(400)
        s.step(1, **{a: ma}).step(1, **{b: mb})
        s.step(1, **{a: lo})
        s.step(need + 1, **{a: ones, b: ones})
        finish_with_reset(s, **{key: 0})  # the key leaves its magic value, so key_ok falls too
        return s.text()

    compact = compact_program()
    key_fact = f"{on(key, magic)} is the key: sticky hit when {on(sel, key_sel)}"
    if secret:
        key_fact = f"the key is secret: sticky hit when it matches with {on(sel, key_sel)}"
    elif lockout:
        key_fact += "; three wrong keys there lock it until reset"
    if staged:
        key_fact += "; the pair flag and the streak count only after a hit"
    brief = [key_fact,
             f"{on(sel, key_arm)} outputs ~{s.alias[a]} while the key matches",
             f"{on(a, ma)} with {on(b, mb)} sets a sticky pair flag",
             f"window: {on(a, lo)} to {on(a, hi)}",
             f"{s.alias[a]}=={s.alias[b]} for {need} cycles raises stable, e.g. both {hexv(w, ones)}"]

    params = {"width": w, "magic": magic, "window": [lo, hi], "pair": [ma, mb], "streak": need,
              "select": dict(zip(map(str, sel_codes), arm_ids))}
    strategies = {}
    if staged:
        params["secret"] = secret
        sweep = compact_program("key_sweep")
        strategies = ({"key_sweep": sweep} if secret else
                      {"exact_key": compact_program(key_first=True), "key_sweep": sweep})
        compact = sweep if secret else strategies["exact_key"]  # the teacher's choice
    return Design(top, ports, body, f"{w}-bit registered mux and comparators with magic values (generated)",
                  description, {"strong": strong, "medium": medium, "weak": weak, "compact": compact}, params,
                  brief=brief, strategies=strategies)
