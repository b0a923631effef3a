"""The complementarity claim rule is calibrated on synthetic experts in the run-record format, and the
power simulation gives the designs it is asked for."""
import numpy as np
import pytest

from chorus.analysis.oracle import headroom_claim
from chorus.analysis.power import Design, claim_rate, max_headroom, minimum_detectable_headroom, pass_rates, \
    sample_table, wilson

SEEDS = range(6)
RUNS = ["e0", "e1", "e2"]


def nested(seed: int) -> np.ndarray:
    """Expert 0 solves a superset of the others' tasks (0.97 inside its set, 0.03 outside): every
    other expert is dominated, so the true headroom is 0."""
    rng = np.random.default_rng(seed)
    T = 60
    order = rng.permutation(T)
    rates = np.full((T, 3), 0.03)
    rates[order[:36], 0] = 0.97
    rates[order[:24], 1] = 0.97
    rates[order[12:30], 2] = 0.97
    return rates


def claims(rates_for, samples: int) -> list[bool]:
    out = []
    for seed in SEEDS:
        rng = np.random.default_rng(1000 + seed)
        rates = rates_for(seed)
        out.append(headroom_claim(sample_table(rates, samples, rng), RUNS, n_boot=1000, seed=seed)["claimed"])
    return out


def test_nested_experts_are_not_called_complementary():
    # the rule issue 27 replaced (lower bound above the identical-experts null's mean) claimed 4 of 6 here
    assert sum(claims(nested, 4)) <= 1


def test_identical_experts_are_not_called_complementary():
    def identical(seed):
        rates = np.random.default_rng(seed).uniform(0.05, 0.95, size=60)
        return np.repeat(rates[:, None], 3, axis=1)
    assert sum(claims(identical, 4)) <= 1


def test_experts_strong_on_their_own_third_are_complementary_on_every_seed():
    def thirds(seed):
        rates = np.full((100, 3), 0.25)
        for e in range(3):
            rates[e * 33:(e + 1) * 33 + (e == 2), e] = 0.85
        return rates  # oracle 0.85, each expert ~0.45: true headroom ~+40 points, far above 20
    def thirds_20(seed):
        rates = np.full((100, 3), 0.45)
        for e in range(3):
            rates[e * 33:(e + 1) * 33 + (e == 2), e] = 0.75
        return rates  # oracle 0.75, experts 0.55: true headroom +20
    r = thirds_20(0)
    assert r.max(axis=1).mean() - r.mean(axis=0).max() == pytest.approx(0.196, abs=0.01)
    assert all(claims(thirds_20, 16)) and all(claims(thirds, 16))


def test_the_claim_is_a_lower_bound_above_zero():
    rng = np.random.default_rng(0)
    rates = np.full((40, 2), 0.5)
    c = headroom_claim(sample_table(rates, 4, rng), ["e0", "e1"], n_boot=200)
    assert c["claimed"] == (c["ci"][0] > 0) and c["ci"][0] <= c["headroom"] <= c["ci"][1]


def test_simulated_experts_have_the_levels_and_headroom_asked_for():
    d = Design(150, 16, (0.20, 0.36, 0.26))
    rates, true = pass_rates(d, 0.05, np.random.default_rng(0))
    assert rates.mean(axis=0) == pytest.approx(d.levels, abs=0.004)
    assert true == pytest.approx(0.05, abs=0.004)
    assert set(np.unique(rates)) == {d.lo, d.hi}
    assert true == pytest.approx(rates.max(axis=1).mean() - rates.mean(axis=0).max())
    with pytest.raises(ValueError, match="out of reach"):
        pass_rates(d, max_headroom(d) + 0.02, np.random.default_rng(0))
    with pytest.raises(ValueError, match="outside"):
        Design(50, 4, (0.95, 0.2)).check()


def test_power_grows_with_the_design_and_the_mde_is_where_power_crosses():
    small = Design(50, 4, (0.20, 0.36, 0.26), hi=0.7, lo=0.08)
    large = Design(150, 16, (0.20, 0.36, 0.26), hi=0.7, lo=0.08)
    assert claim_rate(small, 0.05, n_sims=40)["power"] < claim_rate(large, 0.05, n_sims=40)["power"]
    r = minimum_detectable_headroom(large, n_sims=40)
    tried = {round(c["headroom"], 4): c["power"] for c in r["curve"]}
    assert tried[round(r["mde"], 4)] >= 0.8
    below = [h for h in tried if h < r["mde"] - 1e-9]
    assert below and tried[max(below)] < 0.8  # bisection stopped at the crossing of the grid it tried
    assert r["mde"] <= 0.05  # 150 tasks x 16 samples sees 5 points at these levels


def test_wilson_interval():
    lo, hi = wilson(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-3) and hi == pytest.approx(0.9433, abs=1e-3)
