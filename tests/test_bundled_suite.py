"""Every bundled reference testbench reaches its target under chorus's own measurement.

One parametrised test per family, so each family gets real Verilator runs of its own."""
import pytest

from chorus.sim.pool import evaluate_many
from chorus.tasks import load_bundled

FAMILIES = sorted({t.family for t in load_bundled()})


@pytest.mark.parametrize("family", FAMILIES)
def test_reference_testbenches_reach_their_targets(family, sim_cfg):
    tasks = [t for t in load_bundled() if t.family == family]
    results = evaluate_many([(t, t.reference_tb) for t in tasks], sim_cfg, workers=2)
    failures = [f"{t.id}: {r.status} overall={r.overall} target={t.target} {r.reason}"
                for t, r in zip(tasks, results) if not r.passed(t.target, strict_instance=True)]
    assert not failures, "\n".join(failures)
