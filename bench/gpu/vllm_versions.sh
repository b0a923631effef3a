#!/usr/bin/env bash
# The gpu_path tests under vLLM's library versions. Installed beside vLLM (0.10.2 or 0.11.0) on a GPU
# machine, chorus runs on the torch and transformers that vLLM pins (torch 2.8.0, transformers 4.57),
# while the suite itself runs on constraints.txt's (torch 2.13, transformers 5.x): this script builds a
# fresh virtual environment with constraints.txt's pins overlaid by constraints-vllm.txt's, installs
# chorus into it (no vLLM: it needs CUDA), prints the versions, then runs `pytest -m gpu_path` (the
# files tests/conftest.py's GPU_PATH names: what a GPU run does differently, run on the CPU) and exits
# with pytest's status.
#   bench/gpu/vllm_versions.sh [--venv DIR] [PYTEST_ARGS...]
#     --venv DIR    build the environment in DIR, or reuse it if DIR/bin/python exists (default: a new
#                   temporary folder, removed at exit); PYTEST_ARGS go to pytest after -m gpu_path
# What it takes: python3 (3.10 or later) and PyPI. PyPI's Linux x86_64 torch 2.8.0 is the CUDA build
# (with its nvidia-* wheels and triton the venv is 8 GB; no GPU is used). Measured on the project's 2-core
# machine, where only PyPI answers (the script prints its own): the install 135-169 s into a new venv,
# the tests 518 s (182 selected), about 11.5 minutes in all.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv="" pytest_args=()
while (( $# )); do
    case $1 in
        --venv) venv=$2; shift 2 ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        *) pytest_args+=("$1"); shift ;;
    esac
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
venv=${venv:-$work/venv}

# constraints.txt with the names constraints-vllm.txt pins taken out, then constraints-vllm.txt: the
# only differences from the suite's own environment are the ones vLLM forces
python3 - "$work/constraints.txt" <<'PY'
import re
import sys

def name(line):
    spec = line.split("#")[0].strip()
    return re.split(r"[<>=!~;\[ ]", spec, maxsplit=1)[0].lower().replace("_", "-") if spec else None

moved = [line for line in open("constraints-vllm.txt").read().splitlines() if name(line)]
names = {name(line) for line in moved}
kept = [line for line in open("constraints.txt").read().splitlines() if name(line) and name(line) not in names]
open(sys.argv[1], "w").write("\n".join(kept + moved) + "\n")
PY

start=$SECONDS
if [[ ! -x $venv/bin/python ]]; then
    python3 -m venv "$venv"
fi
# shellcheck disable=SC1091
source "$venv/bin/activate"
python -m pip install -q --upgrade pip
# torch from PyPI: on Linux x86_64 its 2.8.0 is the CUDA build (no GPU is used); an index of CPU builds
# can be added with PIP_EXTRA_INDEX_URL where one is reachable
pip install -q -e '.[dev]' -c "$work/constraints.txt"
install_s=$((SECONDS - start))

python - <<'PY'
from importlib.metadata import version

for name in ("torch", "transformers", "lightning", "peft", "tokenizers", "accelerate", "huggingface_hub",
             "safetensors"):
    print(f"{name:16s} {version(name)}")
PY

start=$SECONDS
rc=0
python -m pytest -q -m gpu_path "${pytest_args[@]}" || rc=$?
tests_s=$((SECONDS - start))
echo "vllm_versions.sh: install ${install_s} s, tests ${tests_s} s, pytest exit status ${rc} (venv: $venv)"
exit "$rc"
