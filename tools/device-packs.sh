#!/usr/bin/env bash
# Packs, for the device tool's GPU machine (Python 3.12, torch, numpy, ml_dtypes), what the suite and the
# verifier need beyond TileLang (../shared/tools/device-tilelang-pack makes .device). A device call may carry
# 64 MiB, so the packs are split by use (tools/device-setup.sh unpacks whichever were carried):
#   .device-min/min.tar.xz       pytest, pytest-xdist, hypothesis, attrs, gguf   (suite: with .device)
#   .device-llvm/llvmlite.tar.xz llvmlite                                          (verify: own call)
#   .device-extra/extra.tar.xz   numba, scipy                                      (verify: own call)
# All three are git-ignored. Run from the checkout root; about three minutes of xz on two cores.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
for d in .device-min .device-llvm .device-extra; do
  grep -qxF "/$d/" .git/info/exclude 2>/dev/null || echo "/$d/" >> .git/info/exclude
done
pack() {  # pack DIR FILE REQUIREMENT...
  local dir=$1 file=$2; shift 2
  [ -f "$dir/$file" ] && { echo "$dir/$file exists"; return; }
  local tmp; tmp="$(mktemp -d)"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform any -d "$tmp/whl" "$@"
  mkdir -p "$tmp/site" "$dir"
  for w in "$tmp"/whl/*.whl; do python3 -m zipfile -e "$w" "$tmp/site"; done
  tar -C "$tmp/site" -cf - . | xz -6 -T2 > "$dir/$file"
  rm -rf "$tmp"
  ls -la "$dir/$file"
}
pack .device-min min.tar.xz pytest pytest-xdist execnet iniconfig pluggy packaging hypothesis \
  sortedcontainers attrs gguf pyyaml
pack .device-llvm llvmlite.tar.xz "llvmlite==$(python3 -c 'import llvmlite; print(llvmlite.__version__)' 2>/dev/null || echo 0.45.1)"
pack .device-extra extra.tar.xz "numba==$(python3 -c 'import numba; print(numba.__version__)' 2>/dev/null || echo 0.62.1)" \
  "scipy==$(python3 -c 'import scipy; print(scipy.__version__)' 2>/dev/null || echo 1.16.3)"
