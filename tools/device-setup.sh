#!/usr/bin/env bash
# On the GPU machine of the device tool: unpack whatever packs this call carried into one site
# directory outside the checkout (it survives between calls while the machine stays warm), and
# print the PYTHONPATH to use. Packs: .device/tilelang-site.tar.xz (../shared/tools/device-tilelang-pack),
# .device-llvm/llvmlite.tar.xz and .device-extra/extra.tar.xz (numba, scipy, pytest, hypothesis, attrs,
# gguf, pyyaml for Python 3.12; see the README's "GPU machine" notes).
set -euo pipefail
SITE=/root/intent-trace-site
mkdir -p "$SITE"
for pack in .device/tilelang-site.tar.xz .device-min/min.tar.xz .device-llvm/llvmlite.tar.xz .device-extra/extra.tar.xz; do
  if [ -f "$pack" ]; then tar -C "$SITE" -xJf "$pack"; echo "unpacked $pack" >&2; fi
done
echo "$SITE"
