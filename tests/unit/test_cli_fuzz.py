"""A seeded fuzz of every ``retest`` command (#23): no traceback, an exit code of
0, 1 or 2, and a project left as it was unless the command's job is to change it.

The commands and their parameters come from the Typer app itself
(``typer.main.get_command``), so a new command or option is fuzzed without
touching this file. Each call gets its required parameters and a few optional
ones, valued from the parameter's type (int, float, str, path, flag) plus edge
cases: empty, huge, negative, unicode, control characters, and paths into the
project (its root, ``retest.db``, ``retest.toml``, ``arrays/``, ``images/``).

Calls run in-process (``CliRunner``) so 2,000 of them fit in the normal suite.
Commands that serve, download or start a long job are skipped (``SKIP``), and the
options that would start a long job (training the testbed, a Dask cluster) are
never drawn (``NEVER``). Commands whose job is to change the project
(``WRITERS``) get a fresh copy per call and ``retest check`` must find it
consistent afterwards; every other command runs on one shared copy whose
``retest.db``, ``retest.toml``, ``arrays/`` and ``images/`` must stay
byte-identical.

Output paths (``OUTPUTS``) are drawn outside the project only: which places a
command may write is the output guard's rule, tested on its own against every
path-writing option and the project's files.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args, get_origin

import numpy as np
import pytest
import typer
import typer.testing
from bad_input_helpers import build_project, invoke, snapshot

from retest.cli.main import app

SEED = 2023
N_CALLS = int(os.environ.get("FUZZ_N", 2000))
#: Serve, download, or run for minutes by design.
SKIP = {"serve", "demo", "datasets fetch", "flickr search", "flickr download"}
#: (command, option) pairs never drawn: they start long work, not check values.
NEVER = {
    ("evaluate", "--preset"),
    ("evaluate", "--model"),
    ("evaluate", "--workers"),
    ("dedup", "--workers"),
}
#: Commands whose documented job is to change the project.
WRITERS = {
    "dedup", "dedup-verdict", "sample", "split", "export", "init", "evaluate",
    "crowd tasks", "crowd export", "crowd import", "reference add",
    "reference keywords", "review queue-label-errors", "source add", "plan",
    "people add", "people link", "people revoke", "people exclude", "people include",
}  # fmt: skip
#: Parameters naming a place to write.
OUTPUTS = {"--out", "--dir", "directory"}

INTS = ["0", "1", "2", "3", "-1", "10", "65535", "65536", str(2**31), str(2**63),
        str(2**63 - 1), "99999999999999999999999", "", "x", "1.5", " 1", "٣",
        "-99999999999999999999999"]  # fmt: skip
FLOATS = ["0", "0.5", "0.95", "1", "-1", "1e308", "-1e308", "nan", "inf", "-inf",
          "", "x", "1e-300", "0.6"]  # fmt: skip
STRS = ["", " ", "x", "r1", "l2", "test:0", "train:3", "a,b,a", "a" * 300,
        "é漢字🙂", "\x01\x1b[31m", "\t", "a\nb", "../x", "-x", "--", "tcp://",
        "notaurl", "tcp://host:99999", "NCHW", "XYZ", "quick", "top1", "top5",
        "class-balanced", "arrays", "sklearn", "0", "-1", "99999999999999999999999",
        "x=1", "a=0.5", "original=nowhere", "l2,dssim", "npy", "cifar", "a,b,c"]  # fmt: skip
PLAUSIBLE: dict[str, list[str]] = {
    "--strategy": ["class-balanced", "matched-frequency", "random", "nope"],
    "--metrics": ["l2", "l2,dssim", "warp", "nope", ""],
    "--against": ["original-test", "original-train,original-test", "x"],
    "--format": ["npy", "cifar", "imagefolder", "parquet", "x"],
    "--split": ["train", "test", "x"],
    "--method": ["argmax", "both", "prune-by-class", "x"],
    "--rank-by": ["self_confidence", "normalized_margin", "x"],
    "--metric": ["top1", "top5", "x"],
    "--axes": ["linear", "probit", "logit", "x"],
    "--policy": ["x", "stratified"],
    "--embedder": ["pixels", "x"],
    "--shards": ["auto", "path", "send", "x"],
    "--rule": ["proportional", "x"],
    "kind": ["arrays", "folder", "idx", "sklearn", "onnx", "torchscript", "x"],
    "revision": ["r1", "r2", "nope", ""],
    "a": ["r1", "x"],
    "b": ["r1", "x"],
    "metric": ["l2", "x"],
    "name": ["fashion-mnist", "cifar10", "x"],
    "--classes": ["a,b,c", "a,a", "", "x"],
}


def _leaves(cmd: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    subs = getattr(cmd, "commands", None)
    if subs is None:
        yield " ".join(path), cmd
        return
    for name, sub in sorted(subs.items()):
        yield from _leaves(sub, (*path, name))


def _kind(param: Any) -> str:
    """int, float, path, bool or str, from the parameter's annotation."""
    ann = param.type_descriptor.annotation
    if get_origin(ann) is not None:  # list[str], X | None
        args = [a for a in get_args(ann) if a is not type(None)]
        ann = args[0] if args else str
        if get_origin(ann) is list:
            ann = get_args(ann)[0]
    if ann is bool:
        return "bool"
    if ann is int:
        return "int"
    if ann is float:
        return "float"
    if isinstance(ann, type) and issubclass(ann, os.PathLike):
        return "path"
    return "str"


class Places:
    """The paths values are drawn from: the project's own and the user's."""

    def __init__(self, root: Path, inputs: Path, user: Path) -> None:
        self.root, self.inputs, self.user = root, inputs, user
        self.n = 0

    def project_paths(self, root: Path) -> list[str]:
        u8 = sorted((root / "arrays").glob("*.u8"))
        return [str(p) for p in (root, root / "retest.db", root / "retest.toml",
                                 root / "arrays", root / "images", *u8[:1])]  # fmt: skip

    def inputs_for(self, root: Path) -> list[str]:
        i, u = self.inputs, self.user
        return [*self.project_paths(root), str(i / "cand.npz"), str(i / "train.npz"),
                str(i / "labels.npy"), str(i / "probs.npy"), str(u / "notes.txt"),
                str(u), "", "/", "/nonexistent/x", "é/漢字", str(i / "export-r1")]  # fmt: skip

    def output(self) -> str:
        self.n += 1
        u = self.user
        return [str(u / f"out-{self.n}"), str(u / f"out-{self.n}.json"), str(u),
                str(u / "notes.txt"), "", str(u / "notes.txt" / "x")][self.n % 6]  # fmt: skip


def _value(
    rng: np.random.Generator, cmd: str, param: Any, places: Places, root: Path
) -> str:
    name = param.opts[0] if param.param_type_name == "option" else param.name
    if name in OUTPUTS:
        return places.output()
    if name == "--project":
        pool = [str(root)] * 6 + places.project_paths(root)[1:] + [str(places.user)]
        return str(rng.choice(pool))
    kind = _kind(param)
    pools = {"int": INTS, "float": FLOATS, "str": STRS}
    if kind == "path":
        pool = places.inputs_for(root)
    else:
        pool = pools[kind]
    plausible = PLAUSIBLE.get(name)
    if plausible and rng.random() < 0.6:
        pool = plausible
    return str(rng.choice(pool))


def _argv(
    rng: np.random.Generator, cmd: str, command: Any, places: Places, root: Path
) -> list[str]:
    argv = cmd.split()
    params = [
        p
        for p in command.params
        if p.name != "help" and (cmd, getattr(p, "opts", [""])[0]) not in NEVER
    ]
    positional = [p for p in params if p.param_type_name == "argument"]
    options = [p for p in params if p.param_type_name == "option"]
    picked = [p for p in options if p.required or p.opts[0] == "--project"]
    extra = [p for p in options if p not in picked]
    n_extra = int(rng.integers(0, min(4, len(extra)) + 1)) if extra else 0
    picked += [extra[i] for i in rng.choice(len(extra), n_extra, replace=False)]
    for p in positional:
        if p.required or rng.random() < 0.5:
            argv.append(_value(rng, cmd, p, places, root))
    for p in picked:
        if _kind(p) == "bool":
            argv.append(p.opts[0])
            continue
        for _ in range(1 + int(p.multiple and rng.random() < 0.3)):
            argv += [p.opts[0], _value(rng, cmd, p, places, root)]
    return argv


def _plan(
    rng: np.random.Generator, n: int, commands: list[tuple[str, Any]]
) -> list[int]:
    """Every command at least 20 times, the rest at random."""
    order = [i for i in range(len(commands)) for _ in range(20)]
    order += list(rng.integers(0, len(commands), max(0, n - len(order))))
    rng.shuffle(order)
    return order


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> Places:
    base = tmp_path_factory.mktemp("cli-fuzz")
    root = build_project(base / "proj", base / "inputs")
    rng = np.random.default_rng(SEED)
    np.save(base / "inputs" / "labels.npy", np.arange(20) % 3)
    np.save(
        base / "inputs" / "probs.npy",
        rng.dirichlet(np.ones(3), 20).astype(np.float32),
    )
    user = base / "user"
    user.mkdir()
    (user / "notes.txt").write_text("a user's file\n")
    return Places(root, base / "inputs", user)


def test_fuzz_every_command(
    places: Places, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RETEST_PROJECT", raising=False)
    monkeypatch.chdir(places.user)
    click_app = typer.main.get_command(app)
    # CliRunner rebuilds every command from the Typer app on each call: 95 % of a
    # refused call's time; built once, 2,000 calls fit in the normal suite
    monkeypatch.setattr(typer.testing, "_get_command", lambda _app: click_app)
    commands = [(name, c) for name, c in _leaves(click_app) if name not in SKIP]
    assert len(commands) >= 30, [n for n, _ in commands]
    rng = np.random.default_rng(SEED)
    shared = tmp_path / "shared"
    shutil.copytree(places.root, shared)
    user_before = {p: p.read_bytes() for p in [places.user / "notes.txt"]}
    before = snapshot(shared)
    problems: list[str] = []
    n_writes = 0
    plan = _plan(rng, N_CALLS, commands)
    for i, k in enumerate(plan):
        cmd, command = commands[k]
        writer = cmd in WRITERS
        root = shared
        if writer:
            root = tmp_path / f"w{i}"
            shutil.copytree(places.root, root)
        argv = _argv(rng, cmd, command, places, root)
        if cmd == "check" and "--repair" in argv:
            writer = True
        res = invoke(*argv)
        out = res.stdout + res.stderr
        if res.exception is not None and not isinstance(res.exception, SystemExit):
            problems.append(f"{argv!r}: uncaught {res.exception!r}")
        elif res.exit_code not in (0, 1, 2):
            problems.append(f"{argv!r}: exit {res.exit_code}: {out[-300:]!r}")
        elif "Traceback" in out:
            problems.append(f"{argv!r}: traceback: {out[-300:]!r}")
        if writer and root != shared:
            n_writes += 1
            if n_writes % 4 == 0:  # a sample: `check` costs as much as a call
                chk = invoke("check", "--project", root)
                if chk.exit_code != 0:
                    problems.append(f"{argv!r}: check then says {chk.stderr!r}")
            shutil.rmtree(root, ignore_errors=True)
        elif snapshot(shared) != before:
            problems.append(f"{argv!r}: changed the project")
            shutil.rmtree(shared)
            shutil.copytree(places.root, shared)
        for p, data in user_before.items():
            if not p.is_file() or p.read_bytes() != data:
                if "--overwrite" in argv:  # replacing it is what was asked
                    p.write_bytes(data)
                    continue
                problems.append(f"{argv!r}: changed the user's file {p}")
                p.write_bytes(data)
        if len(problems) >= 25:
            break
    assert not problems, "\n".join(problems)
    assert len(plan) >= N_CALLS
