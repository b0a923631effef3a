"""bench/merge_nesting.py on a synthetic nested pipeline dir: the decomposition recovers known parts."""
import importlib.util
import re
import shutil
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "merge_nesting.py"


def nested_seed_dir(root: Path, tiny_xs: Path) -> Path:
    """stage0 = the tiny model, stage1 = stage0 + D1, stage2 = stage1 + D2, expert_i = stage_i + R_i,
    each part a random perturbation of every tensor, laid out as a pipeline seed dir."""
    s0 = load_file(tiny_xs / "model.safetensors")
    g = torch.Generator().manual_seed(0)
    part = lambda: {k: 0.01 * torch.randn(v.shape, generator=g) for k, v in s0.items()}  # noqa: E731
    d1, d2 = part(), part()
    stages = [s0, {k: s0[k] + d1[k] for k in s0}, {k: s0[k] + d1[k] + d2[k] for k in s0}]
    for i, st in enumerate(stages):
        r = part()
        for where, sd in ((f"sft/stage{i}-x/hf", st), (f"rl/dapo/stage{i}-x/hf", {k: st[k] + r[k] for k in st})):
            shutil.copytree(tiny_xs, root / where)
            save_file(sd, root / where / "model.safetensors", metadata={"format": "pt"})
    return root


def bench():
    spec = importlib.util.spec_from_file_location("merge_nesting", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_soup_and_the_default_means_count_d1_two_thirds_and_the_plain_sums_twice(tiny_xs, tmp_path, monkeypatch,
                                                                                   capsys):
    seed_dir = nested_seed_dir(tmp_path / "seed0", tiny_xs)
    script = bench()
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), str(seed_dir), "--methods", "soup", "task_arithmetic", "dare"])
    script.main()
    out = capsys.readouterr().out
    rows = {m.group(1): [float(x) for x in m.group(2).split(" | ")]
            for m in re.finditer(r"^\| ([a-z_]+(?: [a-z]+=[^ |]+)*) \| ([-0-9. |]+?) \| [0-9.]+ \|$", out, re.M)}
    mean = [2 / 3, 1 / 3, 1 / 3, 1 / 3, 1 / 3, 0.0]  # D1, D2, R0, R1, R2, residual share
    assert rows["soup"] == pytest.approx(mean, abs=1e-3)
    assert rows["task_arithmetic lam=1.0 normalize=True"] == pytest.approx(mean, abs=1e-3)
    assert rows["task_arithmetic lam=0.5 normalize=False"] == pytest.approx([1, 0.5, 0.5, 0.5, 0.5, 0], abs=1e-3)
    assert rows["dare density=0.5 lam=1.0 normalize=True"][:5] == pytest.approx(mean[:5], abs=0.03)
    assert rows["dare density=0.5 lam=1.0 normalize=False"][:5] == pytest.approx([2, 1, 1, 1, 1], abs=0.06)
    assert len(rows) == 5  # three defaults, two former defaults
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), str(seed_dir), "--variant", "ties:normalize=false"])
    with pytest.raises(SystemExit, match=re.escape("ties does not read ['normalize']")):
        script.main()
