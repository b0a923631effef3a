"""The procedural task generator (tasks=generated): determinism, well-formed tasks, designs that
build, and reference programs whose coverage is graded strong > medium > weak > random."""
import pytest

from chorus.stimulus.aliases import alias_map
from chorus.stimulus.formats import render, score
from chorus.stimulus.program import parse_vectors, random_program, render_vectors
from chorus.tasks import load_tasks
from chorus.tasks.generated.common import COMPACT_CYCLES, vector_cycles
from chorus.tasks.generated import DIFFICULTIES, FAMILIES, MIXED, calibrate_targets, generate_task, generate_tasks
from chorus.tasks.generated import alu, counter, fsm, mux_cmp, shift_lfsr
from chorus.tasks.generated.shift_lfsr import MAXIMAL_TAPS, lfsr_period



def test_same_seed_same_tasks_and_longer_lists_extend():
    a = generate_tasks(seed=3, per_family=2, difficulty="medium")
    b = generate_tasks(seed=3, per_family=2, difficulty="medium")
    assert [t.to_dict() for t in a] == [t.to_dict() for t in b]
    assert len(a) == 2 * len(FAMILIES)
    more = generate_tasks(seed=3, per_family=3, difficulty="medium")
    assert [t.to_dict() for t in more if t.meta["index"] < 2] == [t.to_dict() for t in a]


def test_different_seeds_and_indices_give_different_designs():
    a = generate_tasks(seed=0, per_family=2, difficulty="hard")
    b = generate_tasks(seed=1, per_family=2, difficulty="hard")
    for x, y in zip(a, b):
        assert x.rtl != y.rtl, x.id
    assert len({str(t.rtl) for t in a}) == len(a)


def test_bad_family_or_difficulty_is_a_one_line_error():
    with pytest.raises(ValueError, match="unknown difficulty 'extreme'; choose one of") as info:
        generate_tasks(difficulty="extreme")
    assert "\n" not in str(info.value) and "medium" in str(info.value)
    with pytest.raises(ValueError, match=r"unknown generated family \['cpu'\]; choose from") as info:
        generate_tasks(families=["counter", "cpu"])
    assert "shift_lfsr" in str(info.value)


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_tasks_are_well_formed(difficulty):
    tasks = generate_tasks(seed=5, per_family=4, difficulty=difficulty)
    assert len({t.id for t in tasks}) == len(tasks)
    for t in tasks:
        k = t.meta["index"]
        assert t.id == f"gen_{t.family}_{k}_s5_{difficulty}"
        assert (t.source, t.difficulty, t.instance, t.meta["seed"]) == ("generated", difficulty, "uut", 5)
        assert t.split == {3: "test", 2: "validation"}.get(k % 4, "train")
        assert list(t.rtl) == [f"rtl/{t.top}.sv"] and f"module {t.top} (" in t.rtl[f"rtl/{t.top}.sv"]
        assert f"instantiate `{t.top}` with the instance name `uut`" in t.spec
        assert t.target == 100.0  # the placeholder until calibrate_targets measures the real one
        assert t.brief.startswith("Key facts:\n- ") and t.brief.count("\n- ") <= 6, t.id
        src = t.rtl[f"rtl/{t.top}.sv"]
        assert "initial" not in src and "$display" not in src
        amap = alias_map(t)
        assert amap.clock.port == "clk" and amap.reset.alias == "rst_n" and not amap.unmapped
        assert all(a.description for a in amap.inputs + amap.outputs), t.id  # every port is in the spec
        for grade in ("strong", "medium", "weak"):
            program = parse_vectors(t.meta["programs"][grade], amap)
            assert not program.is_empty
        assert "module chorus_tb" in t.reference_tb and f"{t.top} uut (" in t.reference_tb


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_compact_programs_fit_the_random_budget_and_use_only_the_briefs_values(difficulty):
    for t in generate_tasks(seed=9, per_family=4, difficulty=difficulty):
        text = t.meta["programs"]["compact"]
        assert not parse_vectors(text, alias_map(t)).is_empty
        assert vector_cycles(text) <= COMPACT_CYCLES, t.id  # no longer than uniform random stimulus
        assert len(text.splitlines()) <= 16 and "#" not in text, t.id
        brief = t.brief.split("\n", 1)[1]
        # every specific value the program drives (beyond 0/1 and random) is a fact the brief states
        values = {v for tok in text.split() if "=" in tok and (v := tok.split("=", 1)[1]) != "?" and int(v, 0) > 1}
        missing = sorted(v for v in values if v not in brief)
        assert not missing, f"{t.id}: {missing} not in the brief:\n{t.brief}\n{text}"


def test_suite_loader_passes_options_through():
    tasks = load_tasks("generated", seed=2, per_family=4, difficulty="easy", families=["fsm"], split="test")
    assert [t.id for t in tasks] == ["gen_fsm_3_s2_easy"]


@pytest.mark.parametrize("width", sorted(MAXIMAL_TAPS))
def test_lfsr_taps_are_maximal(width):
    for mask in MAXIMAL_TAPS[width]:
        assert lfsr_period(width, mask) == (1 << width) - 1, hex(mask)


@pytest.mark.parametrize("difficulty", ["easy", "hard"])
def test_every_family_builds(difficulty, sim_cfg):
    # medium designs are built by test_reference_programs_are_graded
    for family in FAMILIES:
        t = generate_task(family, 1, seed=0, difficulty=difficulty, with_reference_tb=False)
        r = score("vectors", t, t.meta["programs"]["weak"], sim_cfg)
        assert r.status == "ok", f"{t.id}: {r.reason}\n{r.build_log[-2000:]}"


@pytest.mark.parametrize("family", FAMILIES)
def test_reference_programs_are_graded(family, sim_cfg):
    t = generate_task(family, 0, seed=0, difficulty="medium", with_reference_tb=False)
    calibrate_targets([t], workers=1, cache_dir=sim_cfg.cache_dir)
    got = {}
    for grade in ("strong", "compact", "medium", "weak"):
        r = score("vectors", t, t.meta["programs"][grade], sim_cfg)
        assert r.status == "ok", f"{t.id} {grade}: {r.reason}\n{r.build_log[-2000:]}"
        got[grade] = r.overall
    rand = score("vectors", t, render_vectors(random_program(alias_map(t), cycles=500, seed=0)), sim_cfg)
    got["random"] = rand.overall
    # the measured target lies between random stimulus and the references, and the compact program,
    # in random's cycle budget, reaches it
    assert got["strong"] >= got["compact"] >= t.target > got["random"], (t.target, got)
    assert got["strong"] > got["medium"] > got["weak"], got
    assert got["random"] <= got["strong"] - 10, got


def test_strong_program_scores_the_same_in_every_format(sim_cfg):
    t = generate_task("fsm", 0, seed=0, difficulty="medium")
    program = parse_vectors(t.meta["programs"]["strong"], alias_map(t))
    assert t.reference_tb == render("testbench", t, program)
    vec = score("vectors", t, t.meta["programs"]["strong"], sim_cfg)
    body = score("body", t, render("body", t, program), sim_cfg)
    tb = score("testbench", t, t.reference_tb, sim_cfg)
    assert vec.status == body.status == tb.status == "ok", (body.reason, tb.reason)
    assert vec.report.counts == body.report.counts == tb.report.counts
    assert vec.overall == pytest.approx(body.overall) == pytest.approx(tb.overall)


def test_the_mixed_world_cycles_levels_and_gives_counters_two_strategies():
    tasks = generate_tasks(seed=5, per_family=6, difficulty=MIXED)
    for t in tasks:
        k = t.meta["index"]
        assert t.id == f"gen_{t.family}_{k}_s5_mixed" and t.difficulty == DIFFICULTIES[k % 3]
        assert t.split == {3: "test", 2: "validation"}.get(k % 4, "train")
        strategies = t.meta["strategies"]  # every family offers strategies in the mixed world
        assert t.meta["programs"]["compact"] in strategies.values()  # the teacher's choice is one of them
        brief = t.brief.split("\n", 1)[1]
        for name, text in strategies.items():
            assert vector_cycles(text) <= COMPACT_CYCLES, (t.id, name)
            assert len(text.splitlines()) <= 16 and "#" not in text, (t.id, name)  # short enough to write
            values = {v for tok in text.split() if "=" in tok and (v := tok.split("=", 1)[1]) != "?" and int(v, 0) > 1}
            assert all(v in brief for v in values), (t.id, name, values)
        if t.family == "counter":
            assert set(strategies) == set(counter.STRATEGIES)
            certified = t.meta["params"]["certified"]
            assert ("loaded" in t.rtl[f"rtl/{t.top}.sv"]) == certified and (("stops at" in t.brief) == certified)
            assert not (certified and t.difficulty == "hard")
        elif t.family == "alu":
            secret, key = t.meta["params"]["secret"], t.meta["params"]["key"]
            # a secret key is in neither the spec nor the brief (and KEY never locks); a given one locks
            assert (f"equal {key} (" in t.spec) != secret and ("secret key" in t.brief) == secret
            assert set(strategies) == ({"key_sweep"} if secret else set(alu.STRATEGIES))
            assert ("key_locked" in t.rtl[f"rtl/{t.top}.sv"]) != secret and not (secret and t.difficulty == "hard")
        elif t.family == "mux_cmp":
            secret, magic = t.meta["params"]["secret"], t.meta["params"]["magic"]
            assert (f"matches when it equals {magic}." in t.spec) != secret and ("key is secret" in t.brief) == secret
            assert set(strategies) == ({"key_sweep"} if secret else set(mux_cmp.STRATEGIES))
            assert ("key_locked" in t.rtl[f"rtl/{t.top}.sv"]) != secret and not (secret and t.difficulty == "hard")
            assert magic < 128 or not secret  # a secret key a sweep can find
        elif t.family == "shift_lfsr":
            secret, bits = t.meta["params"]["secret"], t.meta["params"]["pattern_bits"]
            told = format(t.meta["params"]["pattern"], f"0{bits}b")
            assert (f"compared with {told}" in t.spec) != secret and ("secret" in t.brief) == secret
            assert set(strategies) == ({"bit_sweep"} if secret else set(shift_lfsr.STRATEGIES))
            assert ("pat_locked" in t.rtl[f"rtl/{t.top}.sv"]) != secret and not (secret and bits > 7)
        else:
            secret, code = t.meta["params"]["secret"], t.meta["params"]["sequence"]
            # a secret code is in neither the spec nor the brief, and only the sweep can be written for it
            told = f"The unlock sequence is {', '.join(map(str, code))} (decimal"
            assert (told in t.spec) != secret and ("secret" in t.brief) == secret
            assert set(strategies) == ({"sweep"} if secret else set(fsm.STRATEGIES))
            assert not (secret and t.difficulty == "hard") and ("ALARM" in t.rtl[f"rtl/{t.top}.sv"]) == (
                len(code) >= 2 and not secret)
    # the plain difficulties' designs do not change with the mixed world beside them
    assert generate_task("counter", 2, 5, "hard").to_dict() == generate_task("counter", 2, 5, "hard").to_dict()
    assert "strategies" not in generate_task("counter", 2, 5, "hard").meta


@pytest.mark.slow
def test_counter_strategies_reach_different_tasks(sim_cfg):
    """Simulated: a hard design (MAX beyond the budget from 0, a short climb above its wide load) is
    reached only by load_climb; a certified one (a load caps the count below MAX) only by zero_climb;
    the others by both. So each strategy is a skill some tasks need."""
    tasks = calibrate_targets(generate_tasks(seed=0, per_family=12, difficulty=MIXED, families=["counter"]),
                              workers=2, cache_dir=sim_cfg.cache_dir)
    seen = set()
    for t in tasks:
        cal, reaches = t.meta["calibration"], t.meta["reaches"]
        expected = (["load_climb"] if t.difficulty == "hard" else ["zero_climb"] if t.meta["params"]["certified"]
                    else ["load_climb", "zero_climb"])
        assert reaches == expected, (t.id, cal, t.targets)
        assert set(cal["strategies"]) == set(counter.STRATEGIES) and cal["strong"] >= max(cal["strategies"].values())
        seen.add(tuple(reaches))
    assert seen == {("load_climb",), ("zero_climb",), ("load_climb", "zero_climb")}


@pytest.mark.slow
def test_fsm_strategies_reach_different_tasks(sim_cfg):
    """Simulated: a lock whose code is given and which has an ALARM is opened only by typing the code
    (the sweep runs into the ALARM); a secret code can only be swept (the sweep succeeds by chance,
    ~1 in 2 rounds for 2 symbols of 3 bits, so not on every design); hard locks are exact-only."""
    tasks = calibrate_targets(generate_tasks(seed=0, per_family=24, difficulty=MIXED, families=["fsm"]),
                              workers=2, cache_dir=sim_cfg.cache_dir)
    seen = {}
    for t in tasks:
        p, reaches = t.meta["params"], t.meta["reaches"]
        if t.difficulty == "hard" or (len(p["sequence"]) >= 2 and not p["secret"]):
            assert reaches == ["exact"], (t.id, t.meta["calibration"], t.targets)
        if p["secret"]:
            assert "exact" not in reaches
        seen[tuple(reaches)] = seen.get(tuple(reaches), 0) + 1
    assert seen.get(("exact",), 0) >= 8 and seen.get(("sweep",), 0) >= 4, seen


@pytest.mark.slow
def test_alu_strategies_reach_different_tasks(sim_cfg):
    """Simulated: an ALU whose key is given locks KEY after three wrong keys, so the key sweep shuts
    itself out there and the exact key (typed before the random burst) gets in; a secret key can only
    be swept (by chance: not on every design); hard keys (14 bits) are exact-only."""
    tasks = calibrate_targets(generate_tasks(seed=0, per_family=24, difficulty=MIXED, families=["alu"]),
                              workers=2, cache_dir=sim_cfg.cache_dir)
    seen = {}
    for t in tasks:
        reaches = t.meta["reaches"]
        if t.difficulty == "hard":
            assert reaches == ["exact_key"], (t.id, t.meta["calibration"], t.targets)
        if t.meta["params"]["secret"]:
            assert "exact_key" not in reaches
        seen[tuple(reaches)] = seen.get(tuple(reaches), 0) + 1
    assert seen.get(("exact_key",), 0) >= 8 and seen.get(("key_sweep",), 0) >= 3, seen


@pytest.mark.slow
@pytest.mark.parametrize("family, exact, sweep", [("mux_cmp", "exact_key", "key_sweep"),
                                                  ("shift_lfsr", "exact_pattern", "bit_sweep")])
def test_key_and_pattern_strategies_reach_different_tasks(sim_cfg, family, exact, sweep):
    """Simulated: a mux whose key is given (or an LFSR whose pattern is) locks after wrong tries, so the
    sweep shuts itself out and only the exact strategy, first thing after reset, reaches the target; a
    secret key or pattern (7 bits at most) can only be swept. The key (pattern) gates the pair flag and
    the streak (the recovery and the step counter), so neither strategy reaches without it."""
    tasks = calibrate_targets(generate_tasks(seed=0, per_family=12, difficulty=MIXED, families=[family]),
                              workers=2, cache_dir=sim_cfg.cache_dir)
    seen = {}
    for t in tasks:
        reaches = t.meta["reaches"]
        assert reaches == ([sweep] if t.meta["params"]["secret"] else [exact]), (t.id, t.meta["calibration"])
        seen[tuple(reaches)] = seen.get(tuple(reaches), 0) + 1
    assert seen.get((exact,), 0) >= 4 and seen.get((sweep,), 0) >= 3, seen
