"""How often each merge counts the nested SFT changes: decompose merged task vectors onto their parts.

    python bench/merge_nesting.py runs/pipeline/tiny/seed0 [--algo dapo] [--methods dare ...]
        [--variant dare:density=0.2 ...] [--no-before]

The experts start from nested SFT checkpoints: stage1 = stage0 + D1, stage2 = stage1 + D2, and
expert_i = stage_i + R_i (its RL change). Task vectors are taken against stage0 (teacher_pool.base),
so tau_0 = R0, tau_1 = D1 + R1, tau_2 = D1 + D2 + R2. Each method merges the three experts through
chorus.merge at its defaults (conf/consolidation/<method>.yaml over its schema, as a merge
job reads them), then at the former defaults (BEFORE: the papers' plain sums) and at each --variant.
Each merged task vector (merged - stage0, every parameter flattened) is fit by least squares on the
basis [D1, D2, R0, R1, R2]. Printed per merge: the five coefficients, the residual share
||tau - fit||^2 / ||tau||^2 (0 for a linear merge) and the merge's seconds. Soup gives D1 = 2/3,
D2 = 1/3, R_i = 1/3; a sum of task vectors at lam = 1 gives 2, 1, 1, 1, 1 (D1 counted twice).
Randomised and trimming merges are not linear in the parts: their fit is the closest linear
description, the residual what it leaves out.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

import torch
import yaml
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from chorus.config.schema import CONF_DIR, MERGE_SCHEMAS, MergeConf
from chorus.merge.methods import MERGES
from chorus.merge.run import merge_options
from chorus.merge.stream import Checkpoint, merge_checkpoints

METHODS = tuple(MERGES)
# The defaults before consolidation.normalize (the papers' sums; task_arithmetic's yaml had lam 0.5).
BEFORE = ("task_arithmetic:normalize=false,lam=0.5", "dare:normalize=false", "della:normalize=false")
BASIS = ("D1", "D2", "R0", "R1", "R2")


def one_dir(pattern: str, root: Path) -> Path:
    found = sorted(root.glob(pattern))
    if len(found) != 1:
        sys.exit(f"{root}/{pattern}: expected one checkpoint, found {len(found)}; pass a pipeline seed dir "
                 f"holding sft/stage{{0,1,2}}-*/hf and rl/<algo>/stage{{0,1,2}}-*/hf")
    return found[0]


def flat(path: Path) -> torch.Tensor:
    """Every tensor of a checkpoint (one file or sharded), in name order, as one float64 vector."""
    ck = Checkpoint(path)
    return torch.cat([ck.tensor(k).double().flatten() for k in sorted(ck.where)])


def configured(method: str, overrides: dict) -> MergeConf:
    """The method's settings as a merge job composes them: the schema, its yaml's deltas, overrides."""
    doc = yaml.safe_load((CONF_DIR / "consolidation" / f"{method}.yaml").read_text())
    doc.pop("defaults", None)
    try:
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(MERGE_SCHEMAS[method]), doc, overrides))
    except OmegaConfBaseException as err:
        sys.exit(f"{method} {overrides}: {str(err).splitlines()[0]}")


def decompose(tau: torch.Tensor, basis: torch.Tensor) -> tuple[list[float], float]:
    """Least-squares coefficients of tau on the basis' columns, and the unexplained share of ||tau||^2."""
    coef = torch.linalg.solve(basis.T @ basis, basis.T @ tau)
    resid = tau - basis @ coef
    return coef.tolist(), float(resid @ resid / (tau @ tau))


def parse_variant(text: str) -> tuple[str, dict]:
    method, _, sets = text.partition(":")
    if method not in METHODS:
        sys.exit(f"--variant {text!r}: method must be one of {METHODS}, e.g. dare:normalize=false")
    try:
        overrides = {k: yaml.safe_load(v) for k, v in (s.split("=", 1) for s in sets.split(",") if s)}
    except ValueError:
        sys.exit(f"--variant {text!r}: write method:key=value[,key=value], e.g. dare:normalize=false,lam=0.5")
    reads = [f.name for f in dataclasses.fields(MERGE_SCHEMAS[method]) if f.name != "name"]
    unread = sorted(set(overrides) - set(reads))
    if unread:
        sys.exit(f"--variant {text!r}: {method} does not read {unread}; it reads {reads}")
    return method, overrides


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("seed_dir", type=Path, help="a pipeline seed dir, e.g. runs/pipeline/tiny/seed0")
    ap.add_argument("--algo", default="dapo", help="the RL experts' algorithm dir under rl/")
    ap.add_argument("--variant", action="append", default=[],
                    help="method:key=value,... merged besides the defaults (repeatable)")
    ap.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS),
                    help="the methods merged at their defaults and former defaults")
    ap.add_argument("--no-before", action="store_true", help="skip the former defaults " + " ".join(BEFORE))
    args = ap.parse_args()
    before = [parse_variant(v) for v in (() if args.no_before else BEFORE)]
    runs = [(m, {}) for m in args.methods] + [(m, o) for m, o in before if m in args.methods]
    runs += [parse_variant(v) for v in args.variant]
    t0 = time.perf_counter()
    stage = [one_dir(f"sft/stage{i}-*/hf", args.seed_dir) for i in range(3)]
    experts = [one_dir(f"rl/{args.algo}/stage{i}-*/hf", args.seed_dir) for i in range(3)]
    s = [flat(p) for p in stage]
    e = [flat(p) for p in experts]
    basis = torch.stack([s[1] - s[0], s[2] - s[1], e[0] - s[0], e[1] - s[1], e[2] - s[2]], dim=1)
    print(f"{args.seed_dir}: {basis.shape[0]} parameters; |D1|, |D2|, |R0|, |R1|, |R2| = "
          + ", ".join(f"{float(c.norm()):.3g}" for c in basis.T))
    print(f"| merge | {' | '.join(BASIS)} | residual | s |")
    print("|---" * (len(BASIS) + 3) + "|")
    with tempfile.TemporaryDirectory() as tmp:
        for i, (method, overrides) in enumerate(runs):
            cons = configured(method, overrides)
            opts = merge_options(cons)
            t = time.perf_counter()
            try:
                merge_checkpoints(method, experts, Path(tmp) / str(i), base=stage[0], **opts)
            except ValueError as err:
                sys.exit(f"{method} {overrides}: {err}")
            took = time.perf_counter() - t
            coef, resid = decompose(flat(Path(tmp) / str(i)) - s[0], basis)
            label = method + "".join(f" {k}={opts[k]}" for k in sorted(opts) if k not in ("seed", "weights"))
            print(f"| {label} | {' | '.join(f'{c:.3f}' for c in coef)} | {resid:.3f} | {took:.1f} |")
    print(f"total {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
