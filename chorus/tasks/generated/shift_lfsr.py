"""LFSRs with seed loading, a shift mode, lock-up recovery, a period counter and a serial
pattern detector.

The holes: the period marker and the upper bits of the step counter need 2^N - 1 LFSR steps
without a load or a mode change; the lock-up state needs the all-zero seed (or N zeros
shifted in) followed by a step; the pattern detector needs one exact P-bit serial sequence.
Uniform random stimulus loads every other cycle and shifts random bits.
"""
from __future__ import annotations

import random

from .common import (COMPACT_CYCLES, Design, Port, Stim, a_n, finish_with_reset, hexv, inp, kept_secret, lit,
                     out, pick_names)

# Feedback masks giving a maximal-length sequence for `q <= {q[N-2:0], ^(q & MASK)}`.
MAXIMAL_TAPS = {
    4: (0x9, 0xC), 5: (0x12, 0x14, 0x17, 0x1B), 6: (0x21, 0x30, 0x33, 0x2D),
    7: (0x41, 0x44, 0x48, 0x60), 8: (0xC3, 0x95, 0xB1, 0xE1), 9: (0x108, 0x110, 0x143, 0x10D),
    10: (0x204, 0x240, 0x213, 0x20D), 11: (0x402, 0x500, 0x40B, 0x423), 12: (0x883, 0xA03, 0x829, 0x891),
}

# difficulty -> (LFSR widths, pattern length)
LEVELS = {
    "easy": ((4, 5), 4),
    "medium": ((8, 9), 10),
    "hard": ((11, 12), 14),
}

NAMES = {
    "en": ("en", "step", "advance"),
    "load": ("load", "seed_we", "ld"),
    "seed": ("seed", "seed_val", "init"),
    "mode": ("shift_mode", "ser_mode", "mode"),
    "sin": ("sin", "ser_in", "bit_in"),
    "q": ("q", "state", "lfsr"),
    "locked": ("locked", "all_zero", "stuck"),
    "seen": ("lock_seen", "stuck_seen", "zero_seen"),
    "period": ("period_done", "wrap", "cycle_end"),
    "pat": ("pat_hit", "pattern_seen", "match"),
    "recov": ("recoveries", "recov_cnt", "restarts"),
}


def lfsr_period(width: int, mask: int, seed: int = 1) -> int:
    """Steps until `seed` comes back (what the RTL computes), for checking the taps table."""
    full, s, steps = (1 << width) - 1, seed, 0
    while True:
        s = ((s << 1) | (bin(s & mask).count("1") & 1)) & full
        steps += 1
        if s == seed or steps > full + 1:
            return steps


# The staged world's two strategies (issue 27): shift in the pattern the brief gives, first thing after
# reset, or sweep random serial bits. A `secret` design (easy and medium only; its pattern at most 7
# bits) keeps the pattern out of the spec and the brief and compares every shift, so only the sweep
# finds it (by chance: 2^-P per shift); a design whose pattern is given compares once per P-bit frame
# since reset and locks the detector after the first wrong frame, so the sweep, and any random burst
# before the pattern, shut it out. In staged designs a lock-up recovers only once the pattern was
# seen, so the pattern gates the recovery counter as well.
STRATEGIES = ("exact_pattern", "bit_sweep")
SKILLS = {"exact_pattern": "exact", "bit_sweep": "sweep"}  # the skill each strategy exercises (sft_stage.skills)
SWEEP = 300  # the sweep's cycles of random serial bits in shift mode


def build(rng: random.Random, k: int, difficulty: str, staged: bool = False) -> Design:
    widths, p = LEVELS[difficulty]
    nw = rng.choice(widths)
    taps = rng.choice(MAXIMAL_TAPS[nw])
    full = (1 << nw) - 1
    default = rng.randrange(1, full)
    pattern = rng.randrange(1, (1 << p) - 1)
    n = pick_names(rng, NAMES)
    en, ld, seed, mode, sin, q = n["en"], n["load"], n["seed"], n["mode"], n["sin"], n["q"]
    top = f"{rng.choice(('lfsr_unit', 'prbs_gen', 'shift_lfsr', 'scrambler'))}_{k}"
    secret = kept_secret(rng, difficulty, staged)
    lockout = staged and not secret
    if secret:  # a pattern a sweep can find: 7 bits at most (300 random shifts find it with chance 0.9)
        p = min(p, 7)
        pattern = 1 + pattern % ((1 << p) - 2)
    pat, fb = n["pat"], max(1, (p - 1).bit_length())

    ports = [
        inp(en, 1, "advance one step (LFSR step, or a serial shift in shift mode)."),
        inp(ld, 1, f"load `{seed}` into the register; has priority over stepping."),
        inp(seed, nw, "seed value."),
        inp(mode, 1, "1: shift mode (serial input), 0: LFSR mode."),
        inp(sin, 1, "serial input bit, used in shift mode."),
        out(q, nw, "register contents."),
        out(n["locked"], 1, "the register is all zeros (the LFSR lock-up state)."),
        out(n["seen"], 1, "sticky: the register has been all zeros since reset (set the cycle after)."),
        out(n["period"], 1, f"one-cycle pulse after {full} consecutive LFSR steps since the last load, "
                            "mode-change step or recovery."),
        out(n["pat"], 1, f"sticky: a frame of {p} serial input bits matched the pattern." if lockout else
            f"sticky: the last {p} serial input bits matched the {'secret ' if secret else ''}pattern."),
        out(n["recov"], 2, "number of lock-up recoveries since reset, modulo 4."),
    ]
    if lockout:
        ports.append(out("pat_locked", 1, "the pattern detector is locked after a frame that did not match "
                                          "(until reset)."))
    # staged designs: no recovery before the pattern; lockout designs: one comparison per frame
    recover_if = f" && {pat}" if staged else ""
    gate, only_armed = (f"{pat} && ", f"if ({pat}) ") if staged else ("", "")
    slide = "" if lockout else f"            if (hist == PATTERN)\n                {pat} <= 1'b1;\n"
    decl = frame = reset = ""
    if lockout:
        decl = f"    logic [{fb - 1}:0] frame;\n"
        reset = "            frame <= '0;\n            pat_locked <= 1'b0;\n"
        frame = (f"                if (frame == {lit(fb, p - 1)}) begin\n                    frame <= '0;\n"
                 f"                    if (!pat_locked && !{pat}) begin\n"
                 f"                        if ({{hist[{p - 2}:0], {sin}}} == PATTERN)\n"
                 f"                            {pat} <= 1'b1;\n"
                 "                        else\n                            pat_locked <= 1'b1;\n"
                 "                    end\n                end else begin\n"
                 "                    frame <= frame + 1'b1;\n                end\n")
    tap_bits = [i for i in range(nw) if taps >> i & 1]
    body = f"""    localparam logic [{nw - 1}:0] DEFAULT_SEED = {lit(nw, default)};
    localparam logic [{nw - 1}:0] LAST_STEP = {lit(nw, full - 1)};
    localparam logic [{p - 1}:0] PATTERN = {lit(p, pattern)};

    logic [{nw - 1}:0] steps;
    logic [{p - 1}:0] hist;
    logic feedback;
{decl}
    assign feedback = {' ^ '.join(f'{q}[{i}]' for i in reversed(tap_bits))};
    assign {n['locked']} = ({q} == '0);

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            {q} <= DEFAULT_SEED;
            steps <= '0;
            hist <= '0;
            {n['seen']} <= 1'b0;
            {n['period']} <= 1'b0;
            {n['pat']} <= 1'b0;
            {n['recov']} <= 2'd0;
{reset}        end else begin
            {n['period']} <= 1'b0;
            if ({n['locked']})
                {n['seen']} <= 1'b1;
{slide}            if ({ld}) begin
                {q} <= {seed};
                steps <= '0;
            end else if ({en} && {mode}) begin
                {q} <= {{{q}[{nw - 2}:0], {sin}}};
                hist <= {{hist[{p - 2}:0], {sin}}};
                steps <= '0;
{frame}            end else if ({en} && {n['locked']}{recover_if}) begin
                {q} <= DEFAULT_SEED;
                {n['recov']} <= {n['recov']} + 1'b1;
                steps <= '0;
            end else if ({en}) begin
                {q} <= {{{q}[{nw - 2}:0], feedback}};
                if ({gate}steps == LAST_STEP) begin
                    steps <= '0;
                    {n['period']} <= 1'b1;
                end else {only_armed}begin
                    steps <= steps + 1'b1;
                end
            end
        end
    end
"""
    pat_bits = format(pattern, f"0{p}b")
    description = (
        f"`{top}` is {a_n(nw)} {nw}-bit Fibonacci LFSR with a serial shift mode. In LFSR mode each enabled step shifts "
        f"`{q}` left by one and inserts the XOR of bits {', '.join(map(str, tap_bits))} of the old value "
        f"(mask {nw}'h{taps:x}); from any non-zero value the sequence repeats after {full} steps. Reset loads "
        f"{default} ({nw}'h{default:x}).\n\n"
        f"Priority on each rising edge: `{ld}` loads `{seed}`; else in shift mode an enabled step shifts `{sin}` "
        f"in at bit 0; else, if the register is all zeros (lock-up), an enabled step reloads {default} and "
        f"increments `{n['recov']}`; else an enabled step is an LFSR step. A step counter counts LFSR steps and "
        f"restarts at 0 on a load, a shift or a recovery; after {full} steps it returns to 0 and "
        f"`{n['period']}` pulses.\n\n"
        f"The serial bits shifted in are also collected in a {p}-bit history (newest bit at the bottom); "
        + (f"`{pat}` is set once the history equals a secret {p}-bit pattern." if secret else
           f"The history is compared with {pat_bits} (first bit first) after every {p}-th shift since reset (a frame): "
           f"a match sets `{pat}`; the first frame that does not match locks the detector (`pat_locked`) until "
           "reset." if lockout else
           f"`{n['pat']}` is set once the history equals {pat_bits} (first bit first).")
        + (f" A lock-up recovers, and the step counter counts, only once `{pat}` is set; until then an enabled "
           "step in lock-up leaves the register at zero." if staged else ""))

    # stimulus -----------------------------------------------------------------------------
    pat_seq = [int(c) for c in pat_bits]

    def start(s: Stim) -> None:
        s.note("hold, load all ones and a seed, a few LFSR steps")
        s.step(1, **{seed: full}).step(1, **{ld: 1}).step(1, **{seed: 1}).step(1, **{ld: 0})
        s.step(4, **{en: 1}).step(1, **{en: 0})

    def lockup(s: Stim, times: int) -> None:
        for _ in range(times):
            s.note("load zero: lock-up, wait, then a step recovers")
            s.step(1, **{ld: 1, seed: 0}).step(2, **{ld: 0}).step(1, **{en: 1}).step(1, **{en: 0})

    def serial(s: Stim, bits: list[int]) -> None:
        for b in bits:
            s.step(1, **{sin: b})

    s = Stim(ports)
    if staged:
        s.note("the pattern first: the detector's first frame, and what recovery and the counter wait for")
        s.step(1, **{mode: 1, en: 1, sin: pat_seq[0]})
        serial(s, pat_seq[1:])
        s.step(1, **{en: 0, mode: 0})
    start(s)
    s.note(f"a full period: {full} LFSR steps from a fresh seed")
    s.step(1, **{ld: 1, seed: default}).step(full + 2, **{ld: 0, en: 1}).step(1, **{en: 0})
    lockup(s, 2)
    s.note(f"shift mode: ones, the {p}-bit pattern, then zeros down to an all-zero register")
    s.step(1, **{mode: 1, en: 1})
    serial(s, [1] * max(p, nw) + pat_seq + [0] * max(p, nw))
    s.step(2, **{en: 0})
    s.note("back to LFSR mode from all zeros: one more recovery")
    s.step(1, **{mode: 0, en: 1}).step(1, **{en: 0})
    finish_with_reset(s, **{en: 0})
    strong = s.text()

    s = Stim(ports)
    start(s)
    s.note("half a period")
    s.step(1, **{ld: 1, seed: default}).step(full // 2, **{ld: 0, en: 1}).step(1, **{en: 0})
    lockup(s, 1)
    s.note("shift random bits")
    s.step(1, **{mode: 1, en: 1}).step(max(p, nw), **{sin: None}).step(1, **{en: 0, mode: 0, sin: 0})
    medium = s.text()

    s = Stim(ports)
    s.step(3, **{en: 1})
    weak = s.text()

    brief, compact = compact_program(ports, en, ld, seed, mode, sin, nw, pat_bits)

    params = {"width": nw, "taps": taps, "default_seed": default, "pattern": pattern, "pattern_bits": p}
    strategies = {}
    if staged:
        params["secret"] = secret
        sweep = compact_program(ports, en, ld, seed, mode, sin, nw, pat_bits, order="sweep")[1]
        if secret:
            brief[1] = f"a secret {p}-bit pattern on {Stim(ports).alias[sin]} in shift mode sets the pattern flag"
            strategies = {"bit_sweep": sweep}
        else:
            brief[1] += f"; compared per {p}-bit frame from reset, a wrong frame locks it"
            strategies = {"exact_pattern": compact_program(ports, en, ld, seed, mode, sin, nw, pat_bits,
                                                           order="pattern_first")[1], "bit_sweep": sweep}
        brief[0] += " (only once the pattern was seen)"
        brief[2] += " (counted only once the pattern was seen)"
        compact = sweep if secret else strategies["exact_pattern"]  # the teacher's choice
    return Design(top, ports, body, f"{nw}-bit LFSR with shift mode, lock-up recovery and pattern detect (generated)",
                  description, {"strong": strong, "medium": medium, "weak": weak, "compact": compact}, params,
                  brief=brief, strategies=strategies,
                  reset_desc=f"asynchronous active-low reset; loads {default} and clears the counters and flags.")


# The compact program's random burst: long enough for what uniform stimulus covers (seed bits,
# the priority combinations, LFSR and shift steps), short enough to leave the period run room.
COMPACT_BURST = 100
COMPACT_LOCKUPS = 16  # cycles of random loads of the zero seed with stepping on: a few recoveries


def compact_program(ports: list[Port], en: str, ld: str, seed: str, mode: str, sin: str, nw: int,
                    pat_bits: str, order: str = "plain") -> tuple[list[str], str]:
    """The brief (lock-up, the serial pattern, the period) and the short program that acts on it:
    a burst, random zero-seed loads while stepping, the pattern shifted in, then LFSR steps for
    the rest of the cycle budget (the final reset's 4 cycles included, it spans COMPACT_CYCLES).
    order=pattern_first: the pattern before the burst (a frame-locking detector); sweep: random serial
    bits for SWEEP cycles in place of the pattern, before the lock-ups (staged designs recover only
    after the pattern)."""
    s = Stim(ports, comments=False)
    a = s.alias
    full = (1 << nw) - 1
    zero = hexv(nw, 0)
    brief = [f"{a[ld]}=1 loads {a[seed]}; loaded {a[seed]}={zero} locks up; {a[en]}=1 then recovers",
             f"pattern {pat_bits} on {a[sin]}, first bit first, while {a[mode]}=1 {a[en]}=1 {a[ld]}=0",
             f"{a[en]}=1 steps with {a[ld]}=0 {a[mode]}=0: period marker after {full} steps"]
    def pattern() -> None:  # (the plain program's lock-ups left en at 1)
        s.step(1, **{ld: 0, **({en: 1} if order != "plain" else {}), mode: 1, sin: int(pat_bits[0])})
        for b in pat_bits[1:]:
            s.step(1, **{sin: int(b)})

    if order == "pattern_first":
        pattern()
    s.burst(COMPACT_BURST)
    if order == "sweep":
        s.step(SWEEP, **{ld: 0, en: 1, mode: 1, sin: None})
    s.step(COMPACT_LOCKUPS, **{en: 1, ld: None, seed: 0, mode: 0})
    if order == "plain":
        pattern()
    # LFSR steps for the rest of the budget (the same rule at every width): the narrow periods pulse,
    # the wide ones (511 steps and up) do not fit, but the step counter's lower bits still toggle.
    s.step(COMPACT_CYCLES - s.total - 4, **{mode: 0, **({ld: 0} if order != "plain" else {})})  # (plain: the
    # pattern's lines already set ld=0; after the lock-ups' random loads it must be set here)
    finish_with_reset(s, **{en: 0})
    return brief, s.text()
