#!/usr/bin/env bash
# Install retest and everything it needs on a fresh Debian machine.
#   bash scripts/install.sh        # the package (+ Fashion-MNIST files, torch CPU build)
#   bash scripts/install.sh dev    # also test tools, Chromium for browser tests, optional extras
#
# Python packages go into a virtual environment this script owns, `.venv` in the
# checkout (RETEST_VENV=DIR chooses another), never into the system's Python: a
# stock Debian's python3 is "externally managed" (PEP 668) and pip refuses it.
# The venv is made from the first `python3` on PATH (RETEST_PYTHON=EXE chooses
# another): Debian's, pyenv's, conda's or an activated venv's all work.
# A `retest` launcher goes to /usr/local/bin as root, else to ~/.local/bin.
# Re-running with nothing changed installs nothing; after `git pull` it updates.
set -euo pipefail
cd "$(dirname "$0")/.."
root_dir=$(pwd -P)
mode="${1:-main}"
case "$mode" in
  main | dev) ;;
  *) echo "install.sh: unknown mode '$mode'; expected nothing (main) or 'dev'" >&2; exit 2 ;;
esac

say() { printf 'install.sh: %s\n' "$*"; }
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { say "not root and no sudo: run as root, or install sudo" >&2; exit 1; }
  SUDO="sudo"
fi

python="${RETEST_PYTHON:-python3}"
command -v "$python" >/dev/null 2>&1 || python=/usr/bin/python3
venv="${RETEST_VENV:-$root_dir/.venv}"

# --- Debian packages -------------------------------------------------------
# gcc + libc6-dev build the optional fused SSIM/kNN loops on first use
# (retest/_native.py); python3-venv is what Debian's python3 needs for `-m venv`.
apt_pkgs=(dataset-fashion-mnist gcc libc6-dev)
[ "$mode" = dev ] && apt_pkgs+=(chromium chromium-driver)
if [ ! -x "$venv/bin/python" ] && ! "$python" -c 'import ensurepip, venv' >/dev/null 2>&1; then
  ver=$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
  apt_pkgs+=("python$ver-venv")
fi
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  say "installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# --- the virtual environment -----------------------------------------------
if [ ! -x "$venv/bin/python" ]; then
  say "creating the virtual environment $venv (from $("$python" -c 'import sys; print(sys.executable)'))"
  # A venv made from inside another venv must start from the base interpreter.
  "$python" -m venv "$venv"
fi
vpy="$venv/bin/python"

# Nothing to do when the same files were installed in the same mode before.
stamp="$venv/.retest-install"
want=$(cat pyproject.toml scripts/install.sh | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && grep -qx "$mode $want" "$stamp"; then
  say "up to date ($mode) in $venv"
elif [ "$mode" = main ] && [ -f "$stamp" ] && grep -qx "dev $want" "$stamp"; then
  say "up to date (dev includes main) in $venv"
else
  PIP=("$vpy" -m pip install -q --disable-pip-version-check)
  "${PIP[@]}" --upgrade pip >/dev/null
  # The pinned torch is a CPU build found on this machine's disk (pip's
  # find-links); installing it first keeps any other requirement from pulling the
  # multi-gigabyte CUDA wheels. Where no such file exists torch is left out: the
  # testbed then runs without its CNN (retest says so).
  extras="parquet"
  if "${PIP[@]}" --no-index --no-deps "torch==2.13.0" >/dev/null 2>&1; then
    extras="$extras,torch"
  else
    say "no local CPU build of torch 2.13.0 for this Python: installing without torch (the testbed's CNN is skipped)"
  fi
  [ "$mode" = dev ] && extras="$extras,dev,onnx,faiss"
  say "installing retest[$extras] into $venv"
  "${PIP[@]}" -e ".[$extras]"
  echo "$mode $want" >"$stamp"
fi

# --- the launcher on PATH --------------------------------------------------
launcher_body="#!/bin/sh
# retest launcher written by $root_dir/scripts/install.sh
exec \"$venv/bin/retest\" \"\$@\""
on_path() { case ":$PATH:" in *":$1:"*) return 0 ;; esac; return 1; }
if [ "$(id -u)" -eq 0 ] || ! on_path "$HOME/.local/bin"; then
  bindir=/usr/local/bin
else
  bindir="$HOME/.local/bin"
fi
target="$bindir/retest"
if [ ! -f "$target" ] || [ "$(cat "$target")" != "$launcher_body" ]; then
  if [ -e "$target" ] && ! grep -q 'retest launcher written by' "$target" 2>/dev/null; then
    say "$target exists and is not this script's launcher; left as it is (run $venv/bin/retest)"
  elif [ "$bindir" = /usr/local/bin ] && [ -n "$SUDO" ]; then
    printf '%s\n' "$launcher_body" | $SUDO tee "$target" >/dev/null && $SUDO chmod 755 "$target"
    say "launcher: $target"
  else
    mkdir -p "$bindir"
    printf '%s\n' "$launcher_body" >"$target" && chmod 755 "$target"
    say "launcher: $target"
  fi
fi
on_path "$bindir" || say "$bindir is not on your PATH: add it, or run $venv/bin/retest"
exit 0
