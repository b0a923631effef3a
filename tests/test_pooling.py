"""Random-effects pooling over seeds (DerSimonian-Laird tau^2, floored Hartung-Knapp interval), TOST,
Holm and the one-sided p that matches the interval: hand-computed cases and a calibration check."""
import math

import numpy as np
import pytest
from scipy import stats

from chorus.analysis.pooling import Pooled, equivalent, holm, p_one_sided, random_effects

# t_{0.975, 2}, the interval's quantile with 3 seeds. On 2 df the t quantile has a closed form,
# (2p - 1) / sqrt(2 p (1 - p)) = 0.95 / sqrt(0.04875) = 4.3026527297494638...; the often quoted
# 4.302652729911275 is off in the 11th digit (scipy agrees with the closed form).
T975_2 = 0.95 / math.sqrt(2 * 0.975 * 0.025)
Z975 = 1.959963984540054  # scipy.stats.norm.ppf(0.975)


def test_the_quantiles_the_hand_examples_use():
    assert stats.t.ppf(0.975, 2) == pytest.approx(T975_2, rel=1e-12)
    assert T975_2 == pytest.approx(4.302652729749464, rel=1e-14)
    assert stats.norm.ppf(0.975) == pytest.approx(Z975, rel=1e-12)


def test_equal_variances_spread_seeds_hand_computed():
    # y = [1, 2, 6], v = [1, 1, 1]: weights w = 1, fixed mean 3, Cochran's Q = 4 + 1 + 9 = 14 on 2 df;
    # DerSimonian-Laird tau^2 = (Q - (k-1)) / (sum w - sum w^2 / sum w) = (14 - 2) / (3 - 3/3) = 6.
    # Random-effects weights 1 / (1 + 6) = 1/7 each, so mu = 3. Hartung-Knapp:
    # q = sum w* (y - mu)^2 / (k - 1) = (4 + 1 + 9) / 7 / 2 = 1.0, floored max(1, q) = 1;
    # se = sqrt(q* / sum w*) = sqrt(1 / (3/7)) = sqrt(7/3); half-width t_{0.975, 2} * sqrt(7/3).
    # I^2 = (Q - 2) / Q = 12/14.
    p = random_effects([1.0, 2.0, 6.0], [1.0, 1.0, 1.0])
    half = T975_2 * math.sqrt(7 / 3)
    assert p.estimate == pytest.approx(3.0)
    assert (p.lo, p.hi) == pytest.approx((3 - half, 3 + half))
    assert (p.q, p.tau2, p.i2, p.k) == (pytest.approx(14.0), pytest.approx(6.0), pytest.approx(6 / 7), 3)
    assert p.row() == {"estimate": p.estimate, "lo": p.lo, "hi": p.hi}


def test_unequal_variances_where_hartung_knapps_q_exceeds_one_hand_computed():
    # y = [0, 0, 12], v = [1, 1, 3] (exact fractions):
    #   w = [1, 1, 1/3], sum w = 7/3, fixed mean = 4 / (7/3) = 12/7;
    #   Q = 2 (12/7)^2 + (1/3) (72/7)^2 = 288/49 + 1728/49 = 288/7;
    #   sum w - sum w^2 / sum w = 7/3 - (19/9) / (7/3) = 10/7;  tau^2 = (288/7 - 2) / (10/7) = 137/5 = 27.4;
    #   w* = 1 / (v + 27.4) = [5/142, 5/142, 5/152], sum w* = 1115/10792;
    #   mu = 12 (5/152) / (1115/10792) = 852/223;
    #   q = sum w* (y - mu)^2 / 2 = 360/223 (> 1: the floor does not bind);
    #   se^2 = q / sum w* = (360/223) (10792/1115) = 777024/49729;  I^2 = (Q - 2) / Q = 274/288.
    p = random_effects([0.0, 0.0, 12.0], [1.0, 1.0, 3.0])
    half = T975_2 * math.sqrt(777024 / 49729)
    assert p.estimate == pytest.approx(852 / 223)
    assert (p.lo, p.hi) == pytest.approx((852 / 223 - half, 852 / 223 + half))
    assert (p.q, p.tau2, p.i2) == pytest.approx((288 / 7, 27.4, 274 / 288))


def test_the_floor_keeps_the_seeds_own_noise_when_they_agree_closer_than_it():
    # y = [2, 2, 2], v = [1, 2, 4]: Q = 0, tau^2 = 0, Hartung-Knapp's q = 0 -> floored to 1, so
    # se = sqrt(1 / sum(1/v)) = sqrt(1 / 1.75): the interval keeps the width the variances give
    p = random_effects([2.0, 2.0, 2.0], [1.0, 2.0, 4.0])
    half = T975_2 * math.sqrt(1 / 1.75)
    assert p.estimate == pytest.approx(2.0) and (p.lo, p.hi) == pytest.approx((2 - half, 2 + half))
    assert (p.q, p.tau2, p.i2) == (0.0, 0.0, 0.0)
    # y = [0.5, 1, 1.5], v = 1: Q = 0.5 < 2 df -> tau^2 = 0 (fixed-effects weights), I^2 = 0;
    # q = 0.5 / 2 = 0.25 -> floored to 1; se = sqrt(1/3)
    p = random_effects([0.5, 1.0, 1.5], [1.0, 1.0, 1.0])
    half = T975_2 * math.sqrt(1 / 3)
    assert p.estimate == pytest.approx(1.0) and (p.lo, p.hi) == pytest.approx((1 - half, 1 + half))
    assert (p.q, p.tau2, p.i2) == (pytest.approx(0.5), 0.0, 0.0)
    # unfloored, q = 0.25 would have halved the width: the floored interval is never narrower than
    # the fixed-effects one with the t quantile
    assert p.hi - p.lo > 2 * T975_2 * math.sqrt(0.25 / 3)


def test_tau2_zero_with_unequal_variances_is_the_inverse_variance_mean():
    # y = [1, 3], v = [1, 3]: w = [1, 1/3], fixed = (1 + 1) / (4/3) = 1.5; Q = 0.25 + (1/3) 2.25 = 1 = k - 1,
    # so tau^2 = 0 exactly; q = 1 / 1 = 1; se = sqrt(1 / (4/3)); t on 1 df
    p = random_effects([1.0, 3.0], [1.0, 3.0])
    half = stats.t.ppf(0.975, 1) * math.sqrt(3 / 4)
    assert p.tau2 == pytest.approx(0.0, abs=1e-12) and p.estimate == pytest.approx(1.5)
    assert (p.lo, p.hi) == pytest.approx((1.5 - half, 1.5 + half)) and p.k == 2


def test_one_seed_is_its_own_normal_interval():
    p = random_effects([3.0], [4.0])
    assert (p.estimate, p.k, p.tau2) == (3.0, 1, 0.0)
    assert (p.lo, p.hi) == pytest.approx((3 - 2 * Z975, 3 + 2 * Z975))
    p90 = random_effects([3.0], [4.0], alpha=0.10)  # premise rows: 90 %
    assert p90.hi - p90.lo == pytest.approx(4 * stats.norm.ppf(0.95))


def test_alpha_sets_the_t_quantile():
    p = random_effects([1.0, 2.0, 6.0], [1.0, 1.0, 1.0], alpha=0.10)
    assert p.hi - p.lo == pytest.approx(2 * stats.t.ppf(0.95, 2) * math.sqrt(7 / 3))


def test_a_seed_without_noise_does_not_take_every_weight_or_divide_by_zero():
    p = random_effects([1.0, 2.0, 6.0], [0.0, 1.0, 1.0])
    assert all(np.isfinite([p.estimate, p.lo, p.hi])) and p.lo < p.estimate < p.hi


@pytest.mark.parametrize("estimates, variances", [
    ([1.0, float("nan"), 2.0], [1.0, 1.0, 1.0]),
    ([1.0, 2.0, 3.0], [1.0, float("nan"), 1.0]),
    ([1.0, 2.0, 3.0], [1.0, -0.5, 1.0]),
    ([1.0, float("inf"), 3.0], [1.0, 1.0, 1.0]),
    ([1.0, 2.0, 3.0], [1.0, 1.0]),
    ([], []),
    ([[1.0, 2.0]], [[1.0, 1.0]]),
])
def test_bad_input_is_refused(estimates, variances):
    with pytest.raises(ValueError, match="random_effects needs"):
        random_effects(estimates, variances)


def simulated_lower_bounds(n: int, tau2: float, effect: float, rng) -> np.ndarray:
    """Lower bounds of n simulated 3-seed studies: per-seed variances drawn in [0.5, 2] (as the
    module's docstring), seed effects N(0, tau2), estimates = effect + seed effect + noise."""
    v = rng.uniform(0.5, 2.0, (n, 3))
    y = effect + rng.normal(0, math.sqrt(tau2), (n, 3)) + rng.normal(0, np.sqrt(v))
    return np.array([random_effects(a, b).lo for a, b in zip(y, v)])


@pytest.mark.parametrize("tau2", [0.0, 1.0, 3.0, 10.0])
def test_calibration_under_no_effect(tau2):
    # Nominal one-sided error 2.5 %; the module's simulation gives 0.0 / 0.1 / 0.4 / 1.5 % for
    # tau^2 = 0 / 1 / 3 / 10 (a mean seed variance ~1.25). With 3000 studies a share of 2.5 % has a
    # binomial sd of sqrt(0.025 * 0.975 / 3000) = 0.29 %: a bound of 3.5 % is >3 sd above nominal
    # and far above what the floored interval gives, so Monte-Carlo noise cannot fail it.
    lo = simulated_lower_bounds(3000, tau2, 0.0, np.random.default_rng(1))
    assert (lo > 0).mean() <= 0.035


def test_power_for_a_true_effect_of_six_seed_sds():
    # A true effect of 6 (seed sds ~0.7-1.4) at tau^2 = 0: claimed in ~98 % of studies (at 4: ~84 %,
    # as the docstring says). Binomial sd at 0.9 with 3000 studies: 0.55 %.
    rng = np.random.default_rng(2)
    assert (simulated_lower_bounds(3000, 0.0, 6.0, rng) > 0).mean() >= 0.9
    assert (simulated_lower_bounds(3000, 0.0, 4.0, rng) > 0).mean() >= 0.78


def test_holm_steps_down_and_stops_at_the_first_failure():
    # sorted: a 0.01 <= 0.05/3 = 0.0167 rejects; c 0.03 <= 0.05/2 = 0.025 fails -> stop: b is not
    # rejected although 0.04 <= 0.05/1
    assert holm({"a": 0.01, "b": 0.04, "c": 0.03}) == {"a": True, "b": False, "c": False}
    # a 0.001 <= 0.0167, b 0.02 <= 0.025, c 0.04 <= 0.05: all rejected (Bonferroni would keep b, c)
    assert holm({"a": 0.001, "b": 0.02, "c": 0.04}) == {"a": True, "b": True, "c": True}
    assert holm({"a": 0.02, "b": 0.001}) == {"a": True, "b": True}  # order given does not matter
    assert holm({"a": 0.02, "b": 0.03}, alpha=0.01) == {"a": False, "b": False}
    assert holm({"a": 0.05}) == {"a": True}  # <= alpha rejects
    assert holm({}) == {}


def test_tost_equivalence_needs_the_whole_interval_inside_the_margin():
    assert equivalent(-4.9, 4.9, 5.0)
    assert not equivalent(-5.0, 1.0, 5.0) and not equivalent(-1.0, 5.0, 5.0)  # strictly inside
    assert not equivalent(-6.0, 1.0, 5.0) and not equivalent(-1.0, 7.0, 5.0)
    assert not equivalent(-8.0, 8.0, 5.0)  # a wide interval around 0 shows nothing


def test_the_one_sided_p_matches_the_interval():
    # [1, 2, 6]: mu = 3, se = sqrt(7/3), t on 2 df
    p = random_effects([1.0, 2.0, 6.0], [1.0, 1.0, 1.0])
    assert p_one_sided(p) == pytest.approx(stats.t.sf(3 / math.sqrt(7 / 3), 2))
    one = random_effects([3.0], [1.0])  # one seed: normal
    assert p_one_sided(one) == pytest.approx(stats.norm.sf(3.0))
    assert p_one_sided(Pooled(1.0, 1.0, 1.0, 0, 0, 0, 3)) == 0.0  # no width: the sign decides
    assert p_one_sided(Pooled(-1.0, -1.0, -1.0, 0, 0, 0, 3)) == 1.0
    # p < alpha/2 exactly when the (1 - alpha) interval's lower bound is above 0, for random studies
    rng = np.random.default_rng(3)
    for _ in range(300):
        k = int(rng.integers(1, 5))
        y, v = rng.normal(1.5, 2, k), rng.uniform(0.1, 3, k)
        for alpha in (0.05, 0.10):
            r = random_effects(y, v, alpha)
            if abs(r.lo) > 1e-9:  # not on the boundary
                assert (p_one_sided(r, alpha) < alpha / 2) == (r.lo > 0)
