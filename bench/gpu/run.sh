#!/usr/bin/env bash
# The one-shot GPU check, part 2, on the GPU machine (offline), in the repo root: install the wheels
# bench/gpu/prepare.sh made, then bench/gpu/check.py: at Qwen3-4B's configuration (random weights, no
# hub), bf16-mixed, fused AdamW, rows per pass from the memory plan for the card found (2 of 8 rows of
# 8,192 tokens on an 80 GB H100, 8 on a 141 GB H200): the update's memory against the plan, two-sided
# (A), the device's free memory for vLLM's wake-up after the gradients are freed (B), lean vs full
# log-probs and the first mini-batch's PPO ratio (C), fp32-autocast vs bf16 decode speed (D), two RL
# steps of chorus's RLModule through Lightning's loop with the fused AdamW clipped at 1.0 (L), then the
# simulator's tools and a held-out evaluation (E). One JSON of checks, each with its threshold,
# rewritten after every phase (a run cut short keeps what it finished); a verdict line per check.
#   bench/gpu/run.sh [--device cuda|cpu] [--size 4b|tiny] [--wheels DIR] [--out FILE] [--eval N]
# (--device cpu --size tiny runs the same path on a CPU in well under a minute: tests/test_gpu_oneshot.py)
# Time at 4b, ESTIMATED from FLOPs (check.py's docstring; no GPU has run it): ~3.5-5.5 minutes on an H200,
# less on an H100 (fewer rows), the install and imports included; check.py stops at 450 s so the whole
# run stays under 8 minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."
device=cuda size=4b wheels=.whl out="${OUT:-/tmp}/gpu_check.json" eval=()
while (( $# )); do
    case $1 in
        --device) device=$2; shift 2 ;;
        --size) size=$2; shift 2 ;;
        --wheels) wheels=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --eval) eval=(--eval "$2"); shift 2 ;;
        *) echo "run.sh: unknown argument $1; use --device, --size, --wheels, --out or --eval" >&2; exit 2 ;;
    esac
done
if ! ls "$wheels"/*.whl >/dev/null 2>&1; then
    echo "run.sh: no wheels in $wheels; run bench/gpu/prepare.sh on a machine with PyPI first" >&2
    exit 2
fi
site=$(mktemp -d)/site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "$wheels"/*.whl
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
rc=0
timeout 450 python3 bench/gpu/check.py --device "$device" --size "$size" --out "$out" --work "$(mktemp -d)" \
    "${eval[@]}" || rc=$?
if (( rc == 124 )); then
    echo "run.sh: check.py ran past 450 s and was stopped; the phases it finished are in $out" >&2
fi
echo "run.sh: results in $out"
exit "$rc"
