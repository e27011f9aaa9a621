#!/usr/bin/env bash
# Install retest and everything it needs on a fresh Debian machine.
#   bash scripts/install.sh        # the package (+ Fashion-MNIST files, torch CPU build)
#   bash scripts/install.sh dev    # also test tools, Chromium for browser tests, optional extras
#
# Python packages go into a virtual environment this script owns, `.venv` in the
# checkout (RETEST_VENV=DIR chooses another), never into the system's Python: a
# stock Debian's python3 is "externally managed" (PEP 668) and pip refuses it.
# The venv is made from the first `python3` on PATH (RETEST_PYTHON=EXE chooses
# another): Debian's, pyenv's, conda's or an activated venv's all work; with no
# python3 at all, Debian's is installed.
# A `retest` launcher goes to /usr/local/bin as root (or through sudo), to
# ~/.local/bin for a user whose PATH has it; RETEST_BIN_DIR=DIR chooses the folder.
# sudo is used only for what needs root: missing Debian packages, /usr/local/bin.
# Re-running with nothing changed installs nothing; after `git pull` it updates.
set -euo pipefail
cd "$(dirname "$0")/.."
root_dir=$(pwd -P)
mode="${1:-main}"
case "$mode" in
  main | dev) ;;
  *) echo "error: scripts/install.sh: unknown mode '$mode'; expected no argument (main) or 'dev'" >&2; exit 2 ;;
esac

say() { printf 'install.sh: %s\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }
is_root() { [ "$(id -u)" -eq 0 ]; }
# Runs a command as root: directly when root, else through sudo, asked for only
# when some step needs it.
as_root() {
  if is_root; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    die "'$*' needs root and sudo is not installed: run this script as root, or install sudo"
  fi
}

# cron, `env -i` and some CI runners start without HOME; the account's is meant.
[ -n "${HOME:-}" ] || export HOME="$(getent passwd "$(id -u)" | cut -d: -f6)"
venv="${RETEST_VENV:-$root_dir/.venv}"
python="${RETEST_PYTHON:-python3}"
if [ -n "${RETEST_PYTHON:-}" ] && ! command -v "$python" >/dev/null 2>&1; then
  die "RETEST_PYTHON=$python is not an executable Python; expected a path or a command on PATH such as python3.12"
fi

# --- Debian packages -------------------------------------------------------
# gcc + libc6-dev build the optional fused SSIM/kNN loops on first use
# (retest/_native.py); python3-venv is what Debian's python3 needs for `-m venv`.
apt_pkgs=(dataset-fashion-mnist gcc libc6-dev)
[ "$mode" = dev ] && apt_pkgs+=(chromium chromium-driver)
apt_updated=""
apt_install() {
  say "installing Debian packages: $*"
  if [ -z "$apt_updated" ]; then
    as_root apt-get update -qq
    apt_updated=1
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}
if [ ! -x "$venv/bin/python" ]; then
  # A minimal Debian has no python3 at all: Debian's own is the one to use.
  if ! command -v "$python" >/dev/null 2>&1; then
    [ -x /usr/bin/python3 ] || apt_install python3 python3-venv
    python=/usr/bin/python3
  fi
  "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
    die "$(command -v "$python") is Python $("$python" -c 'import platform; print(platform.python_version())'); retest needs Python >= 3.11: put a newer python3 first on PATH, or set RETEST_PYTHON=EXE"
  # Debian's python3 creates venvs only with python3.X-venv installed.
  if ! "$python" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    apt_pkgs+=("python$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')-venv")
  fi
fi
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ "${#missing[@]}" -eq 0 ] || apt_install "${missing[@]}"

# --- the virtual environment -----------------------------------------------
if [ ! -x "$venv/bin/python" ]; then
  # From inside an activated venv, `-m venv` starts from that venv's base
  # interpreter, which is the one named here.
  say "creating the virtual environment $venv (from $("$python" -c 'import sys; print(getattr(sys, "_base_executable", sys.executable))'))"
  "$python" -m venv "$venv"
fi
vpy="$venv/bin/python"

# Nothing to do when the same files of the same checkout were installed in the
# same mode before (the checkout counts: RETEST_VENV may be shared by two).
stamp="$venv/.retest-install"
want=$( (cat pyproject.toml scripts/install.sh && echo "$root_dir") | sha256sum | cut -c1-16)
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
# Root, and a user whose PATH lacks ~/.local/bin but who has sudo, get the
# launcher in /usr/local/bin (on every PATH); other users get ~/.local/bin.
if [ -n "${RETEST_BIN_DIR:-}" ]; then
  bindir="$RETEST_BIN_DIR"
elif is_root || { ! on_path "$HOME/.local/bin" && command -v sudo >/dev/null 2>&1; }; then
  bindir=/usr/local/bin
else
  bindir="$HOME/.local/bin"
fi
target="$bindir/retest"
if [ ! -f "$target" ] || [ "$(cat "$target")" != "$launcher_body" ]; then
  if [ -e "$target" ] && ! grep -q 'retest launcher written by' "$target" 2>/dev/null; then
    say "$target exists and is not this script's launcher; left as it is (run $venv/bin/retest)"
  elif mkdir -p "$bindir" 2>/dev/null && [ -w "$bindir" ]; then
    printf '%s\n' "$launcher_body" >"$target" && chmod 755 "$target"
    say "launcher: $target"
  else
    printf '%s\n' "$launcher_body" | as_root tee "$target" >/dev/null && as_root chmod 755 "$target"
    say "launcher: $target"
  fi
fi
on_path "$bindir" || say "$bindir is not on your PATH: add it, or run $venv/bin/retest"
exit 0
