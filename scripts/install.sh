#!/usr/bin/env bash
# Install retest and everything it needs on a fresh Debian machine.
#   bash scripts/install.sh        # the package (+ Fashion-MNIST files, torch CPU build)
#   bash scripts/install.sh dev    # also test tools, Chromium for browser tests, optional extras
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-main}"

# gcc + libc6-dev build the optional fused SSIM loop on first use (retest/_native.py)
apt_pkgs=(dataset-fashion-mnist gcc libc6-dev)
[ "$mode" = dev ] && apt_pkgs+=(chromium chromium-driver)

missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PIP=(python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore)
# The pinned torch is a local CPU build; installing it first keeps any other
# requirement from pulling the multi-gigabyte CUDA wheels.
"${PIP[@]}" "torch==2.13.0"
if [ "$mode" = dev ]; then
  "${PIP[@]}" -e ".[dev,parquet,onnx,faiss,torch]"
else
  "${PIP[@]}" -e ".[parquet,torch]"
fi
