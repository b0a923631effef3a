"""Code-lock state machines: the unlocked state is reached only through one symbol sequence.

The hole: OPEN (and DONE behind it) lies at the end of an L-symbol sequence, each symbol
delivered on a valid cycle without an abort in between; a wrong symbol throws the machine
back and counts a failure, three failures lock it in ALARM. Uniform random stimulus aborts
every other cycle and guesses each symbol with probability 2^-width, so it stalls in the
first states.
"""
from __future__ import annotations

import random

from .common import (COMPACT_CYCLES, Design, Stim, a_n, finish_with_reset, hexv, inp, kept_secret, lit, out,
                     pick_names)

# difficulty -> (sequence lengths, symbol width, dwell range)
LEVELS = {
    "easy": ((1, 2), 2, (3, 4)),
    "medium": ((3,), 3, (5, 9)),
    "hard": ((4, 5), 4, (12, 24)),
}

NAMES = {
    "valid": ("valid", "sym_valid", "strobe", "key_valid"),
    "sym": ("sym", "key", "code_in", "digit"),
    "abort": ("cancel", "flush", "clear_seq"),
    "state": ("state_o", "state_out", "cur_state"),
    "open": ("unlocked", "is_open", "granted"),
    "alarm": ("alarm", "lockout", "tamper"),
    "fails": ("fails", "fail_cnt", "miss_cnt"),
    "done": ("done", "finished", "served"),
}


# The staged world's two strategies (issue 27): type the unlock sequence the brief gives, or sweep random
# symbols with the valid strobe held high. A `secret` design (easy and medium only) keeps its code out
# of the spec and the brief but forgives wrong symbols (no ALARM): only the sweep opens it. A design
# whose code is given has an ALARM behind two failures wherever it has one (a sequence of >= 2): the
# sweep runs into it, so only the exact sequence opens it. A one-symbol code without ALARM: either.
STRATEGIES = ("exact", "sweep")
SKILLS = {"exact": "exact", "sweep": "sweep"}  # the skill each strategy exercises (sft_stage.skills)
STAGED_LENGTHS = {"easy": (1, 2), "medium": (2,), "hard": (4, 5)}  # a sweep finds 2 symbols of 3 bits


def build(rng: random.Random, k: int, difficulty: str, staged: bool = False) -> Design:
    lengths, sw, (dlo, dhi) = LEVELS[difficulty]
    secret = kept_secret(rng, difficulty, staged)
    if staged:
        lengths = STAGED_LENGTHS[difficulty]
    length = rng.choice(lengths)
    nsym = 1 << sw
    c0 = rng.randrange(nsym)
    code = [c0] + [rng.choice([v for v in range(nsym) if v != c0]) for _ in range(length - 1)]
    close = rng.randrange(nsym)
    dwell = rng.randint(dlo, dhi)
    dwb = dwell.bit_length()
    has_alarm = length >= 2 and not secret
    names = ["IDLE"] + [f"GOT{i}" for i in range(1, length)] + ["OPEN"] + (["ALARM"] if has_alarm else []) + ["DONE"]
    nst = len(names)
    sb = max(1, (nst - 1).bit_length())
    codes = rng.sample(range(nst), nst)
    enc = dict(zip(names, codes))
    n = pick_names(rng, NAMES)
    top = f"{rng.choice(('code_lock', 'seq_unlock', 'pin_fsm', 'door_seq'))}_{k}"
    v, s, ab = n["valid"], n["sym"], n["abort"]

    ports = [
        inp(v, 1, f"a symbol is presented on `{s}` this cycle."),
        inp(s, sw, "the symbol."),
        inp(ab, 1, "returns the machine to IDLE from any state and clears the failure count and dwell timer; "
                   "has priority over everything else."),
        out(n["state"], sb, "current state code (see the state table)."),
        out(n["open"], 1, "the machine is in OPEN."),
    ]
    if has_alarm:
        ports.append(out(n["alarm"], 1, "the machine is in ALARM."))
        ports.append(out(n["fails"], 2, f"wrong symbols since the last `{ab}` or reset (at most 2)."))
    ports.append(out(n["done"], 1, "one-cycle pulse, the cycle after DONE."))

    def nxt(i: int) -> str:  # state after the i-th code symbol is accepted
        return names[i + 1] if i + 1 < length else "OPEN"

    arms = [f"                IDLE: if ({v} && {s} == {lit(sw, c0)}) state <= {nxt(0)};"]
    for i in range(1, length):
        wrong = (f"""else if ({n['fails']} == 2'd2)
                        state <= ALARM;
                    else begin
                        state <= IDLE;
                        {n['fails']} <= {n['fails']} + 1'b1;
                    end""" if has_alarm else """else
                        state <= IDLE;""")
        arms.append(f"""                GOT{i}: if ({v}) begin
                    if ({s} == {lit(sw, code[i])})
                        state <= {nxt(i)};
                    else if ({s} == {lit(sw, c0)})
                        state <= {nxt(0)};
                    {wrong}
                end""")
    arms.append(f"""                OPEN: begin
                    if ({v} && {s} == {lit(sw, close)}) begin
                        state <= IDLE;
                        dwell <= '0;
                    end else if ({v} && dwell == DWELL) begin
                        state <= DONE;
                    end else if (!{v} && dwell != DWELL) begin
                        dwell <= dwell + 1'b1;
                    end
                end""")
    if has_alarm:
        arms.append("                ALARM: state <= ALARM;")
    arms.append(f"""                DONE: begin
                    state <= IDLE;
                    dwell <= '0;
                    {n['done']} <= 1'b1;
                end""")
    enum = ",\n".join(f"        {nm} = {lit(sb, enc[nm])}" for nm in names)
    fails_reset = f"            {n['fails']} <= 2'd0;\n" if has_alarm else ""
    alarm_assign = f"    assign {n['alarm']} = (state == ALARM);\n" if has_alarm else ""
    body = f"""    typedef enum logic [{sb - 1}:0] {{
{enum}
    }} state_t;

    localparam logic [{dwb - 1}:0] DWELL = {lit(dwb, dwell)};

    state_t state;
    logic [{dwb - 1}:0] dwell;

    assign {n['state']} = state;
    assign {n['open']} = (state == OPEN);
{alarm_assign}
    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            state <= IDLE;
            dwell <= '0;
{fails_reset}            {n['done']} <= 1'b0;
        end else if ({ab}) begin
            state <= IDLE;
            dwell <= '0;
{fails_reset}            {n['done']} <= 1'b0;
        end else begin
            {n['done']} <= 1'b0;
            case (state)
{chr(10).join(arms)}
            endcase
        end
    end
"""
    sym_text = (lambda i: f"code symbol {i + 1}") if secret else (lambda i: str(code[i]))
    table = [f"| State | Code | Behaviour on a cycle without `{ab}` |", "|---|---|---|",
             f"| IDLE | {enc['IDLE']} | a valid symbol {sym_text(0)} moves to {nxt(0)}; anything else stays |"]
    for i in range(1, length):
        wrong = (f"a failure - ALARM if `{n['fails']}` is already 2, else IDLE with `{n['fails']}` + 1"
                 if has_alarm else "IDLE")
        table.append(f"| GOT{i} | {enc[f'GOT{i}']} | no valid symbol: stay. Valid {sym_text(i)}: {nxt(i)}. "
                     f"Valid {sym_text(0)} (when not {sym_text(i)}): {nxt(0)}. Any other valid symbol: {wrong} |")
    table.append(f"| OPEN | {enc['OPEN']} | valid {close}: IDLE (dwell cleared). Otherwise a valid symbol after the "
                 f"dwell timer reached {dwell}: DONE. Each cycle without a valid symbol advances the dwell timer "
                 f"(up to {dwell}) |")
    if has_alarm:
        table.append(f"| ALARM | {enc['ALARM']} | stays until `{ab}` |")
    table.append(f"| DONE | {enc['DONE']} | IDLE on the next cycle (dwell cleared), `{n['done']}` pulses |")
    seq = ", ".join(str(c) for c in code)
    told = (f"The unlock sequence is a secret {length}-symbol code; a wrong symbol only returns the machine to "
            "IDLE (there is no lockout)" if secret else f"The unlock sequence is {seq} (decimal, first symbol first)")
    description = (
        f"`{top}` is {a_n(nst)} {nst}-state code lock. Symbols ({sw}-bit) are taken on cycles where `{v}` is high. "
        f"{told}; after the last symbol the machine is in "
        f"OPEN. `{ab}` returns to IDLE from any state and clears the dwell timer"
        + (" and the failure count" if has_alarm else "") + ".\n\n" + "\n".join(table))

    # stimulus -----------------------------------------------------------------------------
    def other(*avoid: int) -> int:
        return next(x for x in range(nsym) if x not in avoid)

    def feed(st: Stim, symbols: list[int]) -> None:
        for x in symbols:
            st.step(1, **{v: 1, s: x})

    def abort(st: Stim) -> None:
        st.step(1, **{ab: 1, v: 0}).step(1, **{ab: 0})

    def approach(s_: Stim) -> None:
        s_.note("idle, then a wrong symbol in IDLE")
        s_.step(2).step(1, **{v: 1, s: nsym - 1 if c0 != nsym - 1 else 1}).step(1, **{v: 0})
        for i in range(1, length):
            s_.note(f"reach GOT{i}, wait, restart with {c0}, abort")
            feed(s_, code[:i])
            s_.step(1, **{v: 0})
            feed(s_, [c0])
            abort(s_)
        if has_alarm:
            for i in range(1, length):
                s_.note(f"three wrong symbols in GOT{i}: two failures, then ALARM; abort")
                for _ in range(3):
                    feed(s_, code[:i] + [other(code[i], c0)])
                if i == 1:
                    s_.step(2, **{v: 1, s: code[1]})
                abort(s_)

    def first_open(s_: Stim) -> None:
        s_.note("unlock, wait, a non-closing symbol, close")
        feed(s_, code)
        s_.step(2, **{v: 0})
        s_.step(1, **{v: 1, s: other(close)}).step(1, **{s: close}).step(1, **{v: 0})

    s_ = Stim(ports)
    approach(s_)
    first_open(s_)
    s_.note(f"unlock, dwell {dwell} cycles, then a symbol: DONE")
    feed(s_, code)
    s_.step(dwell + 2, **{v: 0})
    s_.step(1, **{v: 1, s: other(close)}).step(2, **{v: 0})
    s_.note("unlock and abort while open")
    feed(s_, code)
    s_.step(1, **{v: 0})
    abort(s_)
    finish_with_reset(s_, **{v: 0})
    strong = s_.text()

    s_ = Stim(ports)
    approach(s_)
    first_open(s_)
    s_.note("random symbols")
    s_.step(20, **{v: None, s: None})
    s_.step(1, **{v: 0})
    medium = s_.text()

    s_ = Stim(ports)
    s_.step(3, **{v: 1, s: other(c0)})
    weak = s_.text()

    brief, compact = _compact(ports, code, close, dwell, has_alarm)

    params = {"states": nst, "sequence": code, "symbol_width": sw, "close": close, "dwell": dwell,
              "encoding": enc}
    strategies = {}
    if staged:
        params["secret"] = secret
        sweep = sweep_program(ports, close, dwell)
        if secret:  # the code is not given: the exact strategy cannot be written from the brief
            brief[0] = (f"unlock code: a secret {length}-symbol sequence; a wrong symbol returns to IDLE, "
                        "never to ALARM")
            strategies = {"sweep": sweep}
        else:
            strategies = {"exact": compact, "sweep": sweep}
        compact = sweep if secret else compact  # the teacher's choice
    return Design(top, ports, body, f"{nst}-state code lock, {length}-symbol sequence (generated)", description,
                  {"strong": strong, "medium": medium, "weak": weak, "compact": compact}, params, brief,
                  strategies=strategies)


SWEEP_ROUNDS = 4


def sweep_program(ports: list, close: int, dwell: int) -> str:
    """The sweep: rounds of random symbols with the valid strobe held high and the abort low (any
    code of a few symbols comes up by chance; with an ALARM the wrong ones run into it), each round
    followed by a pause one cycle past the dwell time and a valid non-closing symbol, which ends a
    round that left the lock OPEN in DONE."""
    valid, sym, ab = (p.name for p in ports[:3])
    sw = ports[1].width
    s = Stim(ports, comments=False)
    go = next(x for x in range(1 << sw) if x != close)
    tail = dwell + 1 + 2
    per = (COMPACT_CYCLES - 4) // SWEEP_ROUNDS - tail
    for _ in range(SWEEP_ROUNDS):
        s.step(per, **{valid: 1, sym: None, ab: 0})
        s.step(dwell + 1, **{valid: 0, sym: go})
        s.step(2, **{valid: 1})
    finish_with_reset(s, **{valid: 0})
    return s.text()


def _compact(ports: list, code: list[int], close: int, dwell: int, has_alarm: bool) -> tuple[list[str], str]:
    """The compact spec and program: a random burst, then one unlock that waits out the dwell
    timer into DONE. No rng draws, so the design stays byte-identical.

    The burst holds the abort (in2) at 0: random aborts every other cycle would keep the
    failure count from ever reaching ALARM. Relocking with the close symbol is left out: it
    needs a second unlock (a line per symbol) for one branch."""
    valid, sym, ab = (p.name for p in ports[:3])  # declared in this order in build()
    sw = ports[1].width
    s = Stim(ports, comments=False)
    iv, isym, iab = (s.alias[n] for n in (valid, sym, ab))

    def val(x: int) -> str:  # a symbol as Stim writes it
        return str(x) if sw <= 3 else hexv(sw, x)

    go = next(x for x in range(1 << sw) if x != close)  # any symbol but close ends OPEN in DONE
    brief = [f"unlock sequence: {', '.join(f'{isym}={val(x)}' for x in code)} while {iv}=1",
             f"{isym}={val(close)} with {iv}=1 relocks the unlocked lock",
             f"unlocked: after {dwell} cycles of {iv}=0, {iv}=1 finishes it",
             f"{iab}=1 returns to IDLE from any state" + (", ALARM included" if has_alarm else "")]
    # the cycles after the burst: abort 1, unlock L + a pause 1, go 1, dwell + 1, DONE 2, finish 4
    s.burst(COMPACT_CYCLES - (len(code) + dwell + 10), **{ab: 0})
    s.step(1, **{ab: 1})
    for x in code[:-1]:
        s.step(1, **{valid: 1, sym: x, ab: 0})
    s.step(1, **{valid: 0, ab: 0})  # a pause before the last symbol: the deepest GOT state waits
    s.step(1, **{valid: 1, sym: code[-1]})
    s.step(1, **{sym: go})  # a valid symbol before the dwell ran out: OPEN stays
    s.step(dwell + 1, **{valid: 0})  # one cycle more than the dwell: the timer holds at its top
    s.step(2, **{valid: 1})  # DONE, then its pulse
    finish_with_reset(s)
    return brief, s.text()
