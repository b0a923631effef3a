#!/usr/bin/env bash
# Issue 28's one-shot GPU check, part 2, on the GPU machine (offline), in the repo root: install the
# wheels bench/gpu/prepare.sh made, then one bench/gpu_step.py run at 0.44B parameters with Qwen3's
# 151,936-token vocabulary, bf16-mixed: the plain/static generation comparison, two DAPO steps (the
# second measured: MFU, peak memory), a final held-out evaluation on the GPU, and the memory plan
# beside the measured peak. One JSON of results; under 8 minutes.
#   bench/gpu/run.sh [--device cuda|cpu] [--size 0.44b|tiny] [--wheels DIR] [--out FILE]
# (--device cpu --size tiny runs the same path on a CPU: tests/test_gpu_oneshot.py)
set -euo pipefail
cd "$(dirname "$0")/../.."
device=cuda size=0.44b wheels=.whl out="${OUT:-/tmp}/gpu_check.json"
while (( $# )); do
    case $1 in
        --device) device=$2; shift 2 ;;
        --size) size=$2; shift 2 ;;
        --wheels) wheels=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) echo "run.sh: unknown argument $1; use --device, --size, --wheels or --out" >&2; exit 2 ;;
    esac
done
if ! ls "$wheels"/*.whl >/dev/null 2>&1; then
    echo "run.sh: no wheels in $wheels; run bench/gpu/prepare.sh on a machine with PyPI first" >&2
    exit 2
fi
site=$(mktemp -d)/site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "$wheels"/*.whl
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
work=$(mktemp -d)
# best_effort: a GPU image may lack a layer of the sandbox (user namespaces, Landlock, seccomp); the
# programs simulated here are chorus's references and a random model's output
timeout 470 python3 bench/gpu_step.py --size "$size" --vocab 151936 --device "$device" --isolation best_effort \
    --steps 2 --eval 4 --out "$work/run" --json "$out"
echo "run.sh: results in $out"
