"""The numerics probe (tests/conftest.py, `pytest --numerics-probe=threads2|seed`), applied in every
Python process the suite starts (chorus.train and friends run as subprocesses in many tests).

It changes the floating-point path the way another CPU would, so that a test resting on one CPU's
numerics shows itself here:
- threads2: every torch.set_num_threads(n) sets 2 (a different reduction order in matmuls);
- seed: every torch.manual_seed(s) seeds s + 1009 (transformers' and Lightning's seeding call it).
A test that fails only under the probe checks an accident of numerics, not a property.
"""
import os

PROBE = os.environ.get("CHORUS_NUMERICS_PROBE", "")


def apply(probe: str) -> None:
    if not probe:
        return
    import torch

    if getattr(torch, "_chorus_probe", None) == probe:
        return
    if probe == "threads2":
        set_threads = torch.set_num_threads
        torch.set_num_threads = lambda n: set_threads(2)
        set_threads(2)
    elif probe == "seed":
        manual_seed = torch.manual_seed
        torch.manual_seed = lambda s: manual_seed(int(s) + 1009)
        torch.random.manual_seed = torch.manual_seed
    else:
        raise ValueError(f"unknown numerics probe {probe!r}; choose threads2 or seed")
    torch._chorus_probe = probe


apply(PROBE)
