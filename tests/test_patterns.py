"""The study's primary statistic (chorus.analysis.patterns): the noise-corrected pattern dissimilarity,
the across-minus-within contrast, the splits its permutation test enumerates, the exact and sampled
p-values, and their calibration on simulated studies with between-seed heterogeneity."""
import math

import numpy as np
import pandas as pd
import pytest

from chorus.analysis.patterns import (MAX_EXACT, N_DRAWS, Rates, SeedPatterns, contrast, cross_mean,
                                      dissimilarity, pooled_p, seed_patterns, splits)

NINE = [s for s in ("stage0", "stage1", "stage2") for _ in range(3)]  # 3 stages x 3 RL seeds
FIVE = ["stage0", "stage1", "stage2", "stage2", "stage2"]  # v1's design: stage 2 has three RL seeds


def test_dissimilarity_by_hand():
    # 2 tasks x 2 experts; expert 0 has 4 samples a task, expert 1 has 5.
    #   p0 = [0.5, 1.0] -> mean 0.75, centred c0 = [-0.25, +0.25]
    #   p1 = [0.2, 0.2] -> mean 0.2,  centred c1 = [0, 0]
    #   mean over tasks of (c0 - c1)^2 = 0.0625
    #   noise: p (1 - p) / (n - 1), averaged over tasks, times (1 - 1/T) = 1/2:
    #     expert 0: mean(0.25/3, 0/3) / 2 = 1/48;  expert 1: mean(0.16/4, 0.16/4) / 2 = 0.02
    #   D01 = 0.0625 - 1/48 - 0.02 = 0.0216667 -> x 1e4 = 216.67 points^2
    p = np.array([[0.5, 0.2], [1.0, 0.2]])
    n = np.array([[4, 5], [4, 5]], dtype=float)
    d = dissimilarity(p, n)
    want = 1e4 * (0.0625 - 1 / 48 - 0.02)
    assert d == pytest.approx(np.array([[0.0, want], [want, 0.0]]))
    # a constant level difference is no pattern: p1 = p0 - 0.25 has the same centred pattern, and
    # D01 is minus the two noise terms (the raw distance is 0)
    p = np.array([[0.5, 0.25], [1.0, 0.75]])
    d = dissimilarity(p, np.full((2, 2), 4.0))
    assert d[0, 1] == pytest.approx(-1e4 * (1 / 48 + (0.1875 / 3) / 2))


def test_the_noise_correction_makes_d_and_s_unbiased():
    # identical true patterns (up to a level) give D ~ 0 where the raw distance is ~550 points^2; a
    # stage pattern of variance s_u^2 gives S = 2 s_u^2 (1 - 1/T) (x 1e4). Rates stay inside
    # [0.09, 0.91] (uniform patterns), so nothing is clipped. 100 simulated seeds of 300 tasks x 8
    # samples: the means are within 4 Monte-Carlo standard errors of the truth.
    rng = np.random.default_rng(0)
    T, n, labels = 300, 8, [s for s in range(3) for _ in range(3)]
    su, sw = 0.17, 0.14  # uniform(-a, a): variance a^2 / 3
    ds, ss = [], []
    for _ in range(100):
        q = rng.uniform(0.2, 0.8, (T, 1))
        k = rng.binomial(n, np.c_[q, q + 0.1])
        ds.append(dissimilarity(k / n, np.full((T, 2), float(n)))[0, 1])
        p = (0.5 + np.repeat(rng.uniform(-su, su, (T, 3)), 3, axis=1) + rng.uniform(-sw, sw, (T, 9))
             + rng.uniform(-0.1, 0.1, (1, 9)))
        ss.append(contrast(dissimilarity(rng.binomial(n, p) / n, np.full((T, 9), float(n))), labels))
    ds, ss = np.array(ds), np.array(ss)
    assert abs(ds.mean()) < 4 * ds.std(ddof=1) / 10
    want = 2 * su ** 2 / 3 * (1 - 1 / T) * 1e4  # 192
    assert abs(ss.mean() - want) < 4 * ss.std(ddof=1) / 10


def test_contrast_is_across_minus_within_and_refuses_labels_without_both():
    # experts 0, 1 in stage a, expert 2 in b: within {D01 = 1}, across {D02 = 5, D12 = 7}: 6 - 1 = 5
    d = np.array([[0.0, 1.0, 5.0], [1.0, 0.0, 7.0], [5.0, 7.0, 0.0]])
    assert contrast(d, ["a", "a", "b"]) == pytest.approx(5.0)
    assert cross_mean(d, ["a", "a", "b"]) == pytest.approx(6.0)
    with pytest.raises(ValueError, match="pairs within a stage and pairs across"):
        contrast(d, ["a", "a", "a"])  # no across-stage pair
    with pytest.raises(ValueError, match="pairs within a stage and pairs across"):
        contrast(d, ["a", "b", "c"])  # no within-stage pair


def as_partition(split) -> frozenset:
    return frozenset(frozenset(i for i, g in enumerate(split) if g == h) for h in set(split))


@pytest.mark.parametrize("labels, count", [
    (NINE, 280),  # 9! / (3!^3 3!): three unlabelled groups of three
    (FIVE, 10),  # 5! / (3! 1! 1! 2!): the two singletons are unlabelled too
    (["a", "a", "b", "b"], 3),
    (["a", "a", "b", "b", "b", "b"], 15),  # 6! / (2! 4!)
])
def test_splits_are_every_distinct_grouping_of_the_design_sizes(labels, count):
    got = splits(labels)
    assert len(got) == count
    sizes = sorted(pd.Series(labels).value_counts().tolist())
    for s in got:
        assert len(s) == len(labels) and sorted(np.bincount(s).tolist()) == sizes
        first = list(dict.fromkeys(s))  # canonical: groups numbered by first appearance
        assert first == list(range(len(first)))
    assert len({as_partition(s) for s in got}) == count  # no split twice under another numbering
    assert as_partition(labels) in {as_partition(s) for s in got}  # the observed split is one of them


@pytest.mark.parametrize("rl_seeds", [4, 5])
def test_splits_of_larger_crossed_designs_come_quickly(rl_seeds):
    # 3 stages x 4 (x 5) RL seeds: (3R)! / (R!^3 3!) = 5775 (126126) splits; enumerating the labels'
    # (3R)! orderings instead took ~70 s for R = 4 and would never end for R = 5
    labels = [s for s in range(3) for _ in range(rl_seeds)]
    want = math.factorial(3 * rl_seeds) // (math.factorial(rl_seeds) ** 3 * 6)
    got = splits(labels)
    assert len(got) == len(set(got)) == want and {tuple(sorted(np.bincount(s))) for s in got} == {(rl_seeds,) * 3}


def test_splits_refuses_a_design_too_large_to_enumerate():
    with pytest.raises(ValueError, match="too many splits"):
        splits([s for s in range(3) for _ in range(6)])  # 18! / 6!^3 = 17 million orderings


def distinct_stages(labels, T: int = 30, n: int = 8) -> Rates:
    """Experts of a stage identical, stages with strongly different patterns (each stage solves its
    own third of the tasks): RL seeds add nothing."""
    stages = list(dict.fromkeys(labels))
    p = np.full((T, len(labels)), 0.1)
    for e, s in enumerate(labels):
        p[stages.index(s)::len(stages), e] = 0.9
    return Rates(list(range(T)), [f"e{i}" for i in range(len(labels))], p, np.full(p.shape, float(n)))


def test_the_exact_p_of_a_seed_is_one_over_the_splits_when_only_the_design_fits():
    sp = seed_patterns(distinct_stages(NINE), NINE)
    assert sp.p == pytest.approx(1 / 280) and len(sp.null) == 280 and sp.n_tasks == 30
    assert sp.statistic == pytest.approx(sp.null.max()) and (sp.null >= sp.statistic - 1e-9).sum() == 1
    # identical experts within a stage: within-stage D is minus both noise terms, each
    # 0.09 / 7 (p (1 - p) / (n - 1) at p = 0.1 or 0.9) x (1 - 1/30), so S exceeds D_cross by that
    within = -2e4 * 0.09 / 7 * 29 / 30  # -248.6 points^2
    assert sp.d[0, 1] == pytest.approx(within) and sp.d[3, 5] == pytest.approx(within)
    assert sp.statistic == pytest.approx(cross_mean(sp.d, NINE) - within)
    assert sp.share == pytest.approx(sp.statistic / cross_mean(sp.d, NINE)) and sp.share > 1
    assert seed_patterns(distinct_stages(FIVE), FIVE).p == pytest.approx(1 / 10)


def test_pooled_p_exact_path_by_hand():
    # two seeds, ten splits each (100 <= MAX_EXACT: every pair enumerated). Seed A's null is 0..9 with
    # S = 9, seed B's 0..9 with S = 5: the mean 7 is reached by pairs with a + b >= 14:
    # a = 9: b >= 5 (5), a = 8: 4, a = 7: 3, a = 6: 2, a = 5: 1 -> 15 of 100
    null = np.arange(10.0)
    a, b = (SeedPatterns(s, 0.0, 0.0, null, np.zeros((5, 5)), 10) for s in (9.0, 5.0))
    assert pooled_p([a, b]) == pytest.approx(0.15)
    assert pooled_p([a, a]) == pytest.approx(0.01)  # both at their maximum: 1 of 100
    # from data: two seeds of v1's design, each at its one maximal split of ten -> 1/100
    seeds = [seed_patterns(distinct_stages(FIVE, T=30 + 3 * i), FIVE) for i in range(2)]
    assert 10 * 10 <= MAX_EXACT and pooled_p(seeds) == pytest.approx(1 / 100)


def test_pooled_p_sampled_path():
    # three seeds of 280 splits: 280^3 = 22 million > MAX_EXACT, so N_DRAWS sampled products with the
    # observed one counted. Each seed at its one maximum: the exact p, 1 / 280^3 = 4.6e-8, is below
    # what N_DRAWS draws resolve; a draw hits all three maxima with chance 0.5 %, hence <= 2 / (N+1)
    seeds = [seed_patterns(distinct_stages(NINE, T=30 + 3 * i), NINE) for i in range(3)]
    assert 280 ** 3 > MAX_EXACT
    p = pooled_p(seeds)
    assert 1 / (N_DRAWS + 1) <= p <= 2 / (N_DRAWS + 1)
    # against the exact value where it is computable: null 0..279 per seed, S = 270, 260, 250; the
    # exact share of triples with a + b + c >= 780 from the convolution of three uniform counts
    null = np.arange(280.0)
    seeds = [SeedPatterns(s, 0.0, 0.0, null, np.zeros((9, 9)), 10) for s in (270.0, 260.0, 250.0)]
    counts = np.convolve(np.convolve(np.ones(280), np.ones(280)), np.ones(280))  # sum 0..837
    exact = counts[780:].sum() / 280 ** 3
    sampled = pooled_p(seeds, seed=3)
    sd = math.sqrt(exact * (1 - exact) / N_DRAWS)  # ~0.00025 at exact ~0.007
    assert abs(sampled - exact) < 4 * sd + 1 / N_DRAWS


def test_rates_from_a_per_sample_table():
    rows = [("e0", "t0", 1), ("e0", "t0", 0), ("e1", "t0", 1), ("e1", "t0", 1), ("e1", "t0", 1),
            ("e0", "t1", 0), ("e0", "t1", 0), ("e1", "t1", 0), ("e1", "t1", 1),
            ("e0", "t2", 1), ("e0", "t2", 1), ("x", "t0", 1)]  # t2: e1 never ran it; x: not an expert
    table = pd.DataFrame(rows, columns=["run", "task_id", "passed"])
    r = Rates.from_table(table, ["e1", "e0"])
    assert r.tasks == ["t0", "t1"] and r.experts == ["e1", "e0"]
    assert r.p == pytest.approx(np.array([[1.0, 0.5], [0.5, 0.0]]))
    assert r.n.tolist() == [[3.0, 2.0], [2.0, 2.0]]
    with pytest.raises(ValueError, match=">= 2 samples"):
        Rates.from_table(table.drop(index=5), ["e1", "e0"])  # e0 with one sample of t1
    with pytest.raises(ValueError, match="share no held-out task"):
        Rates.from_table(table.assign(task_id=np.where(table["run"] == "e0", "a", "b")), ["e1", "e0"])


# --- calibration: simulated studies of 3 seeds x 9 experts (3 stages x 3 RL seeds) ---

def seed_rates(rng, stage_sd: float, T: int = 60, n: int = 8) -> Rates:
    """One seed's experts on the logit scale: task difficulty + a seed-specific shift (a level and a
    seed-wide task pattern, shared by its experts) + an RL-seed pattern (its sd drawn per seed: the
    seeds differ in how much RL seeds spread) + a small expert level + a stage pattern (sd stage_sd,
    scaled per seed in [0.5, 1.5]); pass counts binomial over n samples."""
    logit = (rng.normal(0, 1.5, (T, 1)) + rng.normal(0, 0.5) + rng.normal(0, 0.7, (T, 1))
             + rng.normal(0, rng.uniform(0.7, 1.3), (T, 9)) + rng.normal(0, 0.3, (1, 9))
             + np.repeat(rng.normal(0, stage_sd * rng.uniform(0.5, 1.5), (T, 3)), 3, axis=1))
    k = rng.binomial(n, 1 / (1 + np.exp(-logit)))
    return Rates(list(range(T)), [f"e{i}" for i in range(9)], k / n, np.full((T, 9), float(n)))


def pooled_p_values(n_studies: int, stage_sd: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.array([pooled_p([seed_patterns(seed_rates(rng, stage_sd), NINE) for _ in range(3)],
                              seed=int(rng.integers(2 ** 31))) for _ in range(n_studies)])


def test_calibration_without_a_stage_effect():
    # No stage pattern: a seed's experts are exchangeable, so the test is exact whatever the seeds'
    # heterogeneity; p <= 0.05 in at most 5 % of studies (3.5 % here: the per-seed p is discrete).
    # 200 studies: binomial sd sqrt(0.05 * 0.95 / 200) = 1.5 %, so 10 % is > 3 sd above nominal.
    p = pooled_p_values(200, 0.0, seed=0)
    assert (p <= 0.05).mean() <= 0.10
    assert p.min() > 0 and (p > 0.5).mean() > 0.3  # not piled up at 0: roughly uniform


def test_power_with_a_planted_stage_pattern():
    # a stage pattern of sd 1.2 on the logit scale (as large as an RL seed's own, x 0.5-1.5 per seed):
    # p <= 0.05 in every one of 100 simulated studies here; >= 80 % asserted (binomial sd 4 %)
    assert (pooled_p_values(100, 1.2, seed=1) <= 0.05).mean() >= 0.8
