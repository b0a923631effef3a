"""Up/down counters with a narrow load, a wrap point at a random MAX and sticky flags.

The hole: the load port is narrower than the counter, so the top of the range (MAX, the wrap,
the saturation, the events that only happen at MAX and the upper count bits) is reached only
by counting up without interruption for hundreds or thousands of cycles. Uniform random
stimulus loads or reverses every few cycles and never gets there.
"""
from __future__ import annotations

import random

from .common import COMPACT_CYCLES, Design, Stim, a_n, finish_with_reset, hexv, inp, lit, out, pick_names

# difficulty -> (MAX range, load width rule, number of top-of-range event flags)
LEVELS = {
    "easy": ((9, 30), lambda w: w - 1, (0, 1)),
    "medium": ((130, 500), lambda w: w - 4, (1, 2)),
    "hard": ((1100, 3500), lambda w: 4, (3, 3)),
}

NAMES = {
    "en": ("en", "enable", "cnt_en", "tick"),
    "up": ("up", "count_up", "dir_up", "inc"),
    "load": ("load", "ld", "load_en"),
    "val": ("load_val", "ld_value", "din", "preset"),
    "wrap": ("wrap_en", "allow_wrap", "roll_en"),
    "clr": ("clr_flags", "clear", "flag_clr", "ack"),
    "count": ("count", "cnt", "value", "q"),
}

# Events that can only happen while the counter sits at MAX: (name stem, condition, meaning).
EVENTS = [
    ("ld_at_top", "{load} && at_max", "a load arrived while the count was at MAX"),
    ("turn_at_top", "{en} && !{load} && !{up} && at_max", "the counter stepped down from MAX"),
    ("clr_at_top", "{clr} && saturated", "flags were cleared while `saturated` was set"),
]


# The staged world's two strategies (issue 27): climb to MAX from the largest load, or count up from 0
# without ever loading. Which one reaches a design's target depends on its parameters: a `certified`
# design records top-of-range flags only in a run with no load since reset, and a hard design's MAX
# lies beyond the cycle budget from 0 but a short climb above its (wide) largest load.
STRATEGIES = ("load_climb", "zero_climb")
SKILLS = {"load_climb": "climb", "zero_climb": "climb"}  # the skill each strategy exercises (sft_stage.skills)


def build(rng: random.Random, k: int, difficulty: str, staged: bool = False) -> Design:
    (lo, hi), load_rule, (ev_lo, ev_hi) = LEVELS[difficulty]
    mx = rng.randint(lo, hi)
    w = mx.bit_length()
    lw = max(2, load_rule(w))
    certified = False
    if staged:
        # hard designs are never certified: their MAX is out of reach from 0, so one would be out of reach
        certified = difficulty != "hard" and rng.random() < 0.5
        if difficulty == "hard":  # a wide load, MAX a short climb above it
            lw = w - 1
            mx = (1 << lw) - 1 + rng.randint(60, 360)
    ldmax = (1 << lw) - 1
    mx = max(mx, ldmax + 3)  # at least a few steps between the largest load and MAX
    thr = rng.randint(ldmax + 1, mx - 1)
    n = pick_names(rng, NAMES)
    events = sorted(rng.sample(range(len(EVENTS)), rng.randint(ev_lo, ev_hi)))
    top = f"{rng.choice(('wrap_counter', 'updown_cnt', 'event_counter', 'tick_counter'))}_{k}"

    ports = [
        inp(n["en"], 1, "count enable; when high and no load is requested the count moves one step."),
        inp(n["up"], 1, "direction: 1 counts up, 0 counts down."),
        inp(n["load"], 1, f"synchronous load of `{n['val']}`; has priority over counting."),
        inp(n["val"], lw, f"value loaded into the low {lw} bits of the count (upper bits become 0)."),
        inp(n["wrap"], 1, "at MAX counting up wraps to 0 when high, holds at MAX when low."),
        inp(n["clr"], 1, "clears the sticky flags `wrapped`, `underflow` and `saturated`."),
        out(n["count"], w, "current count, 0 to MAX."),
        out("at_max", 1, "count equals MAX."),
        out("at_zero", 1, "count equals 0."),
        out("above", 1, f"count is at least the threshold {thr}."),
        out("wrapped", 1, "sticky: the counter wrapped from MAX to 0."),
        out("underflow", 1, "sticky: a down step was requested at 0 (the count stays 0)."),
        out("saturated", 1, "sticky: an up step at MAX was refused because wrapping was disabled."),
        out("wraps", 2, "number of wraps since reset, modulo 4 (not cleared by the flag clear)."),
    ]
    fmt = {key: n[key] for key in ("en", "up", "load", "clr")}
    for i in events:
        stem, _, meaning = EVENTS[i]
        ports.append(out(stem, 1, f"sticky until reset: {meaning}."))

    c, en, up, ld, val, wr, clr = n["count"], n["en"], n["up"], n["load"], n["val"], n["wrap"], n["clr"]
    if certified:
        ports.append(out("loaded", 1, "sticky until reset: a load happened; top-of-range flags then stay as they are."))
    gate = " && !loaded" if certified else ""
    ev_lines = "".join(f"            if ({EVENTS[i][1].format(**fmt)}{gate})\n                {EVENTS[i][0]} <= 1'b1;\n"
                       for i in events)
    ev_reset = "".join(f"            {EVENTS[i][0]} <= 1'b0;\n" for i in events)
    loaded_reset = "            loaded <= 1'b0;\n" if certified else ""
    # after a load, a certified counter counts up no further than THR (it holds there)
    cap = ("if (loaded && above) begin\n                    // a loaded count holds at the threshold\n"
           "                end else ") if certified else ""
    loaded_set = "\n                loaded <= 1'b1;" if certified else ""
    if certified:  # the flags record a top of range reached by counting alone
        wrap_flags = ("\n                    if (!loaded) begin\n                        wrapped <= 1'b1;\n"
                      "                        wraps <= wraps + 1'b1;\n                    end")
        sat_flag = "\n                    if (!loaded)\n                        saturated <= 1'b1;"
    else:
        wrap_flags = "\n                    wrapped <= 1'b1;\n                    wraps <= wraps + 1'b1;"
        sat_flag = "\n                    saturated <= 1'b1;"
    body = f"""    localparam logic [{w - 1}:0] MAX = {lit(w, mx)};
    localparam logic [{w - 1}:0] THR = {lit(w, thr)};

    assign at_max  = ({c} == MAX);
    assign at_zero = ({c} == '0);
    assign above   = ({c} >= THR);

    always_ff @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            {c} <= '0;
            wrapped <= 1'b0;
            underflow <= 1'b0;
            saturated <= 1'b0;
            wraps <= 2'd0;
{ev_reset}{loaded_reset}        end else begin
            if ({clr}) begin
                wrapped <= 1'b0;
                underflow <= 1'b0;
                saturated <= 1'b0;
            end
{ev_lines}            if ({ld}) begin
                {c} <= {w}'({val});{loaded_set}
            end else if ({en} && {up}) begin
                {cap}if (!at_max) begin
                    {c} <= {c} + 1'b1;
                end else if ({wr}) begin
                    {c} <= '0;{wrap_flags}
                end else begin{sat_flag}
                end
            end else if ({en}) begin
                if (!at_zero)
                    {c} <= {c} - 1'b1;
                else
                    underflow <= 1'b1;
            end
        end
    end
"""
    description = (
        f"`{top}` is {a_n(w)} {w}-bit up/down counter with a fixed wrap point MAX = {mx} "
        f"({w}'h{mx:x}). The count never exceeds MAX.\n\n"
        f"On each rising clock edge: if `{ld}` is high the count takes the {lw}-bit value `{val}` "
        f"(zero-extended); otherwise, if `{en}` is high, the count steps up (`{up}` = 1) or down (`{up}` = 0). "
        f"Counting up at MAX wraps to 0 when `{wr}` is high (setting `wrapped` and incrementing `wraps`), "
        f"and otherwise holds at MAX and sets `saturated`. Counting down at 0 holds at 0 and sets `underflow`. "
        f"`{clr}` clears `wrapped`, `underflow` and `saturated`; a flag set in the same cycle stays set.")
    if events:
        description += "\n\nEvent flags (sticky until reset) record situations at the top of the range: " + "; ".join(
            f"`{EVENTS[i][0]}` = {EVENTS[i][2]}" for i in events) + "."
    if certified:
        description += ("\n\n`loaded` is set by any load and stays set until reset. While it is set, the count "
                        f"steps up no further than the threshold {thr} (an up step there holds), and `wrapped`, "
                        "`wraps`, `saturated` and the event flags keep their values: MAX and its flags are "
                        "reached only by counting up from reset without a load.")
    all_ports = ports

    def base(s: Stim) -> None:
        s.note("loads toggle every load bit; a down step at 0 underflows")
        s.step(1, **{ld: 1, val: ldmax}).step(1, **{val: 0}).step(1, **{ld: 0, en: 1, up: 0})
        s.step(1, **{clr: 1}).step(1, **{clr: 0, en: 0})
        s.note("short walk up and down")
        s.step(3, **{en: 1, up: 1}).step(1, **{up: 0}).step(1, **{en: 0})

    # strong
    s = Stim(all_ports)
    if staged:
        s.note(f"count up from 0 to MAX ({mx} steps) without a load: saturate, turn, clear, wrap twice")
        s.step(mx + 1, **{en: 1, up: 1, wr: 0}).step(1, **{up: 0}).step(1, **{up: 1})
        s.step(1, **{en: 0, clr: 1}).step(2 * (mx + 1), **{en: 1, wr: 1, clr: 0}).step(1, **{en: 0, ld: 1})
        s.step(1, **{ld: 0})
    base(s)
    run = mx - ldmax
    s.note(f"load {ldmax}, then count up {run} steps to MAX with wrapping off: saturate")
    s.step(1, **{ld: 1, val: ldmax}).step(run + 2, **{ld: 0, en: 1, up: 1, wr: 0})
    if 1 in events:
        s.note("step down from MAX and back up")
        s.step(1, **{up: 0}).step(1, **{up: 1})
    s.note("clear the flags while saturated at MAX")
    s.step(1, **{en: 0, clr: 1}).step(1, **{clr: 0})
    s.note("wrap once from MAX")
    s.step(1, **{en: 1, wr: 1})
    if 0 in events:
        s.note("count back to MAX, then load while at MAX")
        s.step(1, **{ld: 1}).step(run, **{ld: 0}).step(1, **{en: 0, ld: 1})
    s.note("second wrap, then the threshold from above")
    s.step(1, **{ld: 1, val: ldmax}).step(run + 1, **{ld: 0, en: 1, up: 1}).step(2, **{wr: 0})
    finish_with_reset(s, **{en: 0})
    strong = s.text()

    # medium: the basics and half the climb, then random
    s = Stim(all_ports)
    base(s)
    s.note("part of the climb")
    s.step(1, **{ld: 1, val: ldmax}).step(max(2, run // 2), **{ld: 0, en: 1, up: 1, wr: 1})
    s.note("random control")
    s.step(40, **{en: None, up: None, ld: None, val: None, clr: None, wr: None})
    medium = s.text()

    s = Stim(all_ports)
    s.step(3, **{en: 1, up: 1})
    weak = s.text()

    brief, compact = compact_program(all_ports, n, mx, ldmax, lw, [EVENTS[i][0] for i in events])

    params = {"max": mx, "width": w, "load_width": lw, "threshold": thr,
              "events": [EVENTS[i][0] for i in events]}
    strategies = {}
    if staged:
        params["certified"] = certified
        a = Stim(all_ports).alias
        brief.insert(3, f"MAX is {mx} up steps above 0")
        if certified:
            brief.append(f"{a[n['load']]}=1 sets loaded: after any load the count stops at {thr} and never reaches MAX")
        strategies = {"load_climb": compact, "zero_climb": zero_climb_program(all_ports, n, mx, ldmax)}
        compact = strategies["zero_climb" if certified else "load_climb"]  # the teacher's choice
    return Design(top, ports, body, f"{w}-bit up/down counter, wrap at {mx}, {lw}-bit load (generated)",
                  description, {"strong": strong, "medium": medium, "weak": weak, "compact": compact},
                  params, brief=brief, strategies=strategies)


def zero_climb_program(ports: list, n: dict[str, str], mx: int, ldmax: int) -> str:
    """The other strategy: count up from 0 without a load (MAX + 1 steps saturate), step down and back
    and clear at MAX, wrap (two laps when they fit, ending on MAX), load at MAX; only then the load
    cases (a load of 0 and a down step at 0, the largest load) and a random burst with what is left.
    Past the budget (MAX too far from 0) the climb takes every cycle."""
    s = Stim(ports, comments=False)
    room = COMPACT_CYCLES - 4  # finish_with_reset
    climb = min(mx + 1, room)
    s.step(climb, **{n["en"]: 1, n["up"]: 1})
    left = room - climb
    if left >= 3:
        s.step(1, **{n["up"]: 0}).step(1, **{n["up"]: 1}).step(1, **{n["en"]: 0, n["clr"]: 1})
        left -= 3
        laps = min(2, max(0, left - 6) // (mx + 1))
        wrap = laps * (mx + 1) if laps else min(1, left)
        s.step(wrap, **{n["en"]: 1, n["wrap"]: 1, n["clr"]: 0})
        left -= wrap
        if left >= 5:
            s.step(1, **{n["load"]: 1})  # at MAX
            s.step(1, **{n["up"]: 0, n["val"]: 0}).step(1, **{n["load"]: 0})  # load 0, then a down step at 0
            s.step(1, **{n["load"]: 1, n["val"]: ldmax}).step(1, **{n["load"]: 0, n["en"]: 0})
            left -= 5
        s.burst(left)
    finish_with_reset(s, **{n["en"]: 0, n["load"]: 0})
    return s.text()


# The compact program's cycles besides the burst and the two counts: the load of 0 and the down
# step at 0, the load before the climb, the step down and back up at MAX, the clear at MAX, the
# final load, and finish_with_reset (2 + 2).
COMPACT_FIXED = 11
BURST_CYCLES = 40  # the random burst when the climb leaves room: enough for loads, clears, underflow


def compact_program(ports: list, n: dict[str, str], mx: int, ldmax: int, lw: int,
                    events: list[str]) -> tuple[list[str], str]:
    """The brief and the compact program: a random burst, a down step at 0 (random loads keep the
    count off 0), one climb from the largest load to MAX (saturating there), a step down and back
    and a clear while saturated, then wraps (ending on MAX again when the budget allows) and a load.
    Hard designs' MAX lies beyond the 500 cycles: there the climb takes every cycle the burst
    leaves, which still reaches count bits random stimulus never sets."""
    s = Stim(ports, comments=False)
    a = s.alias
    run = mx - ldmax  # up steps from the largest load to MAX
    room = COMPACT_CYCLES - COMPACT_FIXED
    # The burst gives way (down to 8 cycles) to a climb that fits; one that cannot fit (hard
    # designs) takes what a full burst leaves.
    least = min(BURST_CYCLES, room - run - 2) if run + 2 + 8 <= room else BURST_CYCLES
    climb = min(run + 1, room - least - 1)  # one cycle more than `run` saturates at MAX
    # Counting on after the wrap: each lap of MAX + 1 cycles wraps once and ends on MAX again, so
    # the final load happens at MAX; two laps carry `wraps` to 2. The burst gets what is left.
    laps = min(2, (room - least - climb - 1) // (mx + 1)) if climb == run + 1 else 0
    wrap = laps * (mx + 1) if laps else 1
    burst = room - climb - wrap
    ld_text = ldmax if lw <= 3 else hexv(lw, ldmax)
    up = f"{a[n['en']]}=1 {a[n['up']]}=1"
    brief = [f"{a[n['up']]}=0 with {a[n['en']]}=1 at count 0 sets underflow",
             f"{a[n['load']]}=1 loads {a[n['val']]}; the largest load is {a[n['val']]}={ld_text}",
             f"MAX is {run} up steps ({up}) above {a[n['val']]}={ld_text}",
             f"at MAX, {up} saturates if {a[n['wrap']]}=0, wraps if {a[n['wrap']]}=1",
             f"at MAX, {a[n['up']]}=0 steps down; {a[n['clr']]}=1 clears saturated"]
    if events:
        brief.append("flags " + ", ".join(events) + " record events at MAX")
    s.burst(burst)
    s.step(1, **{n["en"]: 1, n["up"]: 0, n["load"]: 1, n["val"]: 0, n["wrap"]: 0, n["clr"]: 0})
    s.step(1, **{n["load"]: 0})
    s.step(1, **{n["up"]: 1, n["load"]: 1, n["val"]: ldmax})
    s.step(climb, **{n["load"]: 0})
    s.step(1, **{n["up"]: 0}).step(1, **{n["up"]: 1})
    s.step(1, **{n["en"]: 0, n["clr"]: 1})
    s.step(wrap, **{n["en"]: 1, n["wrap"]: 1, n["clr"]: 0})
    s.step(1, **{n["load"]: 1})
    finish_with_reset(s, **{n["en"]: 0, n["load"]: 0})
    return brief, s.text()
