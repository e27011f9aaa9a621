"""``scripts/install.sh`` with stand-ins for python3, pip, dpkg, apt-get and sudo.

The script runs from a copy of the checkout (it hashes ``pyproject.toml`` and
itself into its stamp) with a ``PATH`` of only fake commands and a few real tools,
so nothing is installed and the machine's ``/usr/local/bin`` is left alone
(``RETEST_BIN_DIR``, or a non-root user's ``~/.local/bin``). Every fake command
appends its arguments to one log, which is what the tests read: a re-run with
nothing changed must not call pip, sudo or apt-get. The real installs (Debian
12 and 13, root, sudo, pyenv, activated venv) are too slow for the suite and
are tried by hand; see the README's set-up section.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "install.sh"
REAL_TOOLS = ("bash", "cat", "grep", "sha256sum", "cut", "mkdir", "chmod", "dirname",
              "tee", "env", "sh", "cp")  # fmt: skip

# A python3 that answers the script's questions and fakes `-m venv` and `-m pip`.
# FAKE_PY_VERSION sets its version; FAKE_TORCH=1 makes the local torch wheel exist.
FAKE_PYTHON = r"""#!/bin/bash
echo "python $*" >>"$FAKE_LOG"
ver="${FAKE_PY_VERSION:-3.11.2}"
case "$1" in
  -c)
    case "$2" in
      *"version_info < (3, 11)"*)
        IFS=. read -r ma mi _ <<<"$ver"; [ "$ma" -gt 3 ] || [ "$mi" -ge 11 ]; exit ;;
      *platform*) echo "$ver" ;;
      *_base_executable*) echo /usr/bin/python3 ;;
    esac ;;
  -m)
    case "$2" in
      venv)
        mkdir -p "$3/bin" && cp "$0" "$3/bin/python"
        printf '#!/bin/sh\necho "retest ran: $*"\n' >"$3/bin/retest"
        chmod 755 "$3/bin/retest" ;;
      pip)
        case " $* " in *" torch==2.13.0 "*) [ "${FAKE_TORCH:-0}" = 1 ]; exit ;; esac ;;
    esac ;;
esac
exit 0
"""
FAKE_LOGGER = """#!/bin/bash
echo "{name} $* [DEBIAN_FRONTEND=${{DEBIAN_FRONTEND:-}}]" >>"$FAKE_LOG"
{tail}
"""


def _fake(bin_dir: Path, name: str, text: str) -> None:
    p = bin_dir / name
    p.write_text(text)
    p.chmod(0o755)


@pytest.fixture
def box(tmp_path: Path) -> dict[str, Path]:
    """A checkout copy, a PATH folder of fakes and real tools, a home, a log."""
    co = tmp_path / "checkout"
    (co / "scripts").mkdir(parents=True)
    shutil.copy2(SCRIPT, co / "scripts" / "install.sh")
    shutil.copy2(REPO / "pyproject.toml", co / "pyproject.toml")
    bin_dir = tmp_path / "path"
    bin_dir.mkdir()
    for tool in REAL_TOOLS:
        found = shutil.which(tool)
        assert found, f"{tool} is needed to run install.sh"
        (bin_dir / tool).symlink_to(found)
    _fake(bin_dir, "python3", FAKE_PYTHON)
    # dpkg -s says a package is installed unless it is listed in FAKE_MISSING.
    _fake(bin_dir, "dpkg", FAKE_LOGGER.format(
        name="dpkg", tail='case " ${FAKE_MISSING:-} " in *" $2 "*) exit 1 ;; esac'))  # fmt: skip
    _fake(bin_dir, "apt-get", FAKE_LOGGER.format(name="apt-get", tail=""))
    home = tmp_path / "home"
    home.mkdir()
    return {"co": co, "bin": bin_dir, "home": home, "log": tmp_path / "calls.log",
            "launchers": tmp_path / "launchers"}  # fmt: skip


def _run(
    box: dict[str, Path], *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    base = {
        "PATH": str(box["bin"]),
        "HOME": str(box["home"]),
        "FAKE_LOG": str(box["log"]),
        "RETEST_BIN_DIR": str(box["launchers"]),
        "LANG": "C.UTF-8",
    }
    base.update(env)
    base = {k: v for k, v in base.items() if v != "-"}  # "-" unsets
    return subprocess.run(
        ["bash", str(box["co"] / "scripts" / "install.sh"), *args],
        env=base,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _calls(box: dict[str, Path]) -> list[str]:
    log = box["log"]
    lines = log.read_text().splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    return lines


def _pip_calls(calls: list[str]) -> list[str]:
    return [c for c in calls if c.startswith("python -m pip ")]


def _as_user(box: dict[str, Path], sudo: bool) -> None:
    """Makes the script see uid 1000, with or without a sudo (which logs, then runs)."""
    (box["bin"] / "id").unlink(missing_ok=True)
    _fake(box["bin"], "id", '#!/bin/sh\n[ "$1" = -u ] && echo 1000 || echo alice\n')
    if sudo:
        _fake(box["bin"], "sudo", FAKE_LOGGER.format(name="sudo", tail='exec "$@"'))


def test_the_script_parses() -> None:
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True, timeout=30)


def test_an_unknown_mode_is_one_error_line_and_exit_2(box: dict[str, Path]) -> None:
    r = _run(box, "bogus")
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("error: ") and "'bogus'" in lines[0]
    assert "'dev'" in lines[0]
    assert _calls(box) == []  # refused before doing anything


def test_install_then_rerun_is_a_no_op_and_an_upgrade_reinstalls(
    box: dict[str, Path],
) -> None:
    venv = box["co"] / ".venv"
    r = _run(box)
    assert r.returncode == 0, r.stderr
    calls = _calls(box)
    assert f"python -m venv {venv}" in calls
    pips = _pip_calls(calls)
    # No local torch wheel here: torch is left out, not fetched from an index.
    assert any("--no-index --no-deps torch==2.13.0" in c for c in pips)
    assert pips[-1].endswith("-e .[parquet]"), pips
    assert "installing without torch" in r.stdout
    assert not [c for c in calls if c.startswith(("apt-get", "sudo"))]
    launcher = box["launchers"] / "retest"
    assert str(venv / "bin" / "retest") in launcher.read_text()
    ran = subprocess.run([str(launcher), "demo", "--quick"], capture_output=True,
                         text=True, check=True, timeout=30)  # fmt: skip
    assert ran.stdout.strip() == "retest ran: demo --quick"

    # Nothing changed: no venv, no pip, the launcher is not rewritten.
    mtime = launcher.stat().st_mtime_ns
    r = _run(box)
    assert r.returncode == 0, r.stderr
    calls = _calls(box)
    assert not [c for c in calls if " -m " in c], calls
    assert f"up to date (main) in {venv}" in r.stdout
    assert launcher.stat().st_mtime_ns == mtime

    # `git pull` changed pyproject.toml: the same command installs again.
    with (box["co"] / "pyproject.toml").open("a") as f:
        f.write("\n# a new release\n")
    r = _run(box)
    assert r.returncode == 0, r.stderr
    assert _pip_calls(_calls(box))[-1].endswith("-e .[parquet]")
    r = _run(box)
    assert not _pip_calls(_calls(box))


def test_dev_then_main_is_up_to_date_and_torch_comes_only_from_the_local_file(
    box: dict[str, Path],
) -> None:
    r = _run(box, "dev", FAKE_TORCH="1")
    assert r.returncode == 0, r.stderr
    pips = _pip_calls(_calls(box))
    assert pips[-1].endswith("-e .[parquet,torch,dev,onnx,faiss]"), pips
    r = _run(box)
    assert r.returncode == 0, r.stderr
    assert not _pip_calls(_calls(box))
    assert "up to date (dev includes main)" in r.stdout


def test_a_shared_venv_used_by_another_checkout_is_reinstalled(
    box: dict[str, Path], tmp_path: Path
) -> None:
    venv = tmp_path / "shared-venv"
    assert _run(box, RETEST_VENV=str(venv)).returncode == 0
    other = tmp_path / "other-checkout"
    shutil.copytree(box["co"], other)
    box["co"] = other
    _calls(box)
    r = _run(box, RETEST_VENV=str(venv))
    assert r.returncode == 0, r.stderr
    assert _pip_calls(_calls(box))[-1].endswith("-e .[parquet]")


def test_a_user_without_sudo_installs_into_local_bin_when_nothing_needs_root(
    box: dict[str, Path],
) -> None:
    _as_user(box, sudo=False)
    local_bin = box["home"] / ".local" / "bin"
    r = _run(box, RETEST_BIN_DIR="-", PATH=f"{box['bin']}:{local_bin}")
    assert r.returncode == 0, r.stderr
    assert f"launcher: {local_bin / 'retest'}" in r.stdout
    assert (local_bin / "retest").is_file()


def test_without_home_the_account_home_gets_the_launcher(
    box: dict[str, Path],
) -> None:
    _as_user(box, sudo=False)
    _fake(
        box["bin"],
        "getent",
        f"#!/bin/sh\necho 'alice:x:1000:1000::{box['home']}:/bin/sh'\n",
    )
    local_bin = box["home"] / ".local" / "bin"
    r = _run(box, HOME="-", RETEST_BIN_DIR="-", PATH=f"{box['bin']}:{local_bin}")
    assert r.returncode == 0, r.stderr
    assert (local_bin / "retest").is_file()


def test_a_user_with_sudo_uses_it_only_for_missing_debian_packages(
    box: dict[str, Path],
) -> None:
    _as_user(box, sudo=True)
    r = _run(box, FAKE_MISSING="gcc")
    assert r.returncode == 0, r.stderr
    calls = _calls(box)
    sudo = [c.split(" [")[0] for c in calls if c.startswith("sudo ")]
    assert sudo == [
        "sudo apt-get update -qq",
        "sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc",
    ]
    # sudo's environment reset must not lose the non-interactive front end.
    assert "apt-get install -y -qq gcc [DEBIAN_FRONTEND=noninteractive]" in calls
    r = _run(box)
    assert r.returncode == 0, r.stderr
    assert not [c for c in _calls(box) if c.startswith(("sudo", "apt-get"))]


def test_a_user_without_sudo_who_needs_it_gets_one_error_line(
    box: dict[str, Path],
) -> None:
    _as_user(box, sudo=False)
    r = _run(box, FAKE_MISSING="gcc")
    assert r.returncode == 1
    assert r.stderr.splitlines()[-1].startswith(
        "error: 'apt-get update -qq' needs root"
    )
    assert not (box["co"] / ".venv").exists()


def test_a_python_older_than_3_11_is_refused_before_making_a_venv(
    box: dict[str, Path],
) -> None:
    r = _run(box, FAKE_PY_VERSION="3.9.2")
    assert r.returncode == 1
    err = r.stderr.strip()
    assert err.startswith("error: ") and "3.9.2" in err and ">= 3.11" in err
    assert "\n" not in err
    assert not (box["co"] / ".venv").exists()


def test_a_missing_retest_python_is_one_error_line(box: dict[str, Path]) -> None:
    r = _run(box, RETEST_PYTHON="python3.99")
    assert r.returncode == 1
    assert r.stderr.strip() == (
        "error: RETEST_PYTHON=python3.99 is not an executable Python; expected a "
        "path or a command on PATH such as python3.12"
    )
