"""The README's "Extending retest" examples, run as written through the real product.

Each ```python block of that section is executed as a module; the test then uses
the product the way the README says a user would (the ``retest`` command, the
web app) and checks what the extension changed. Registrations are undone after
each test; the last test installs the four modules as a package with entry points
and runs ``retest`` in a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import types
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import retest.sampling.base as sampling_base
from retest.cli.main import app as cli
from retest.errors import ConfigError
from retest.project import Project, candidate_eligibility, review_targets
from retest.sampling.base import SAMPLERS
from retest.sources.base import CANDIDATE_SOURCES
from retest.stages.dedup import DEDUP_METRICS
from retest.store.rows import content_id
from retest.web.pages import PAGES, register_page

README = Path(__file__).resolve().parents[2] / "README.md"
#: What each block registers, in README order: (registry, name, module name).
BLOCKS = (
    (SAMPLERS, "keyword-spread", "keyword_spread"),
    (DEDUP_METRICS, "contrast", "contrast"),
    (CANDIDATE_SOURCES, "class-arrays", "class_arrays"),
    (PAGES, "sources", "sources_page"),
)
REVIEWER, LABELER = "reviewer-token-1", "labeler-token-1"
runner = CliRunner()


def _blocks() -> list[str]:
    text = README.read_text(encoding="utf-8")
    start = text.index("\n## Extending retest\n")
    end = text.index("\n## ", start + 1)
    return re.findall(r"```python\n(.*?)```", text[start:end], flags=re.S)


@pytest.fixture
def registries() -> Iterator[None]:
    """Undo every registration (and module) a test makes."""
    saved = [(reg, dict(reg._entries)) for reg, _, _ in BLOCKS]
    specs = dict(sampling_base._SPECS)
    modules = set(sys.modules)
    yield
    for reg, entries in saved:
        reg._entries.clear()
        reg._entries.update(entries)
    sampling_base._SPECS.clear()
    sampling_base._SPECS.update(specs)
    for name in set(sys.modules) - modules:
        if name.startswith("readme_"):
            del sys.modules[name]


def _load(i: int) -> types.ModuleType:
    """Run README block ``i`` as the module ``readme_<name>``, as an import would."""
    registry, name, module = BLOCKS[i]
    assert name not in registry
    mod = types.ModuleType(f"readme_{module}")
    sys.modules[mod.__name__] = mod
    exec(compile(_blocks()[i], f"README.md ({name})", "exec"), mod.__dict__)
    assert name in registry
    return mod


def _retest(*args: str, code: int = 0) -> str:
    res = runner.invoke(cli, list(args))
    assert res.exit_code == code, (args, res.output)
    return res.output


def _help_text(*command: str) -> str:
    """``--help`` as one line (rich boxes and wrapping removed)."""
    return " ".join(_retest(*command, "--help").replace("│", " ").split())


def _init(root: Path, classes: str) -> str:
    _retest("init", str(root), "--classes", classes)
    return str(root)


def test_the_section_has_four_short_complete_modules() -> None:
    blocks = _blocks()
    assert len(blocks) == len(BLOCKS)
    for block, (_, name, _) in zip(blocks, BLOCKS, strict=True):
        lines = [ln for ln in block.splitlines() if ln.strip()]
        assert len(lines) <= 25, name
        assert f'"{name}"' in block  # the registration is part of the module
        compile(block, name, "exec")


@pytest.mark.usefixtures("registries")
def test_the_sampler_draws_a_revision_through_retest_sample(tmp_path: Path) -> None:
    assert "keyword-spread" not in _help_text("sample")
    _load(0)
    assert "keyword-spread: per_class images spread over keywords" in _help_text(
        "sample"
    )
    # shirt: 12 plain + 3 striped; bag: 4 of each of three keywords
    kws = ["plain"] * 12 + ["striped"] * 3 + ["tote", "clutch", "backpack"] * 4
    labels = [0] * 15 + [1] * 12
    images = np.random.default_rng(0).integers(0, 256, (27, 8, 8, 3), np.uint8)
    np.savez(tmp_path / "c.npz", images=images, labels=labels, keywords=kws)
    p = _init(tmp_path / "shop", "shirt,bag")
    _retest("source", "add", "arrays", str(tmp_path / "c.npz"), "--project", p)
    with Project.open(p) as proj:
        keyword = {c.id: c.keyword for c in proj.store.candidates.iter()}

    draws = []
    for seed in ("1", "2", "3"):
        out = json.loads(
            _retest("sample", "--strategy", "keyword-spread", "--per-class", "6",
                    "--seed", seed, "--no-dedup", "--project", p, "--json")
        )  # fmt: skip
        assert out["valid"] and out["strategy"] == "keyword-spread"
        by_class = Counter(m["class_name"] for m in out["members"])
        assert by_class == {"shirt": 6, "bag": 6}
        # spread over keywords: a uniform draw would take ~1 striped shirt of 6
        spread = Counter(keyword[m["id"]] for m in out["members"])
        assert spread == {"plain": 3, "striped": 3, "tote": 2, "clutch": 2,
                          "backpack": 2}  # fmt: skip
        draws.append(out)
    assert [d["name"] for d in draws] == [
        "shop-keyword-spread-0",
        "shop-keyword-spread-1",
        "shop-keyword-spread-2",
    ]
    assert len({tuple(sorted(m["id"] for m in d["members"])) for d in draws}) == 3

    again = json.loads(
        _retest("sample", "--strategy", "keyword-spread", "--per-class", "6",
                "--seed", "2", "--no-dedup", "--project", p, "--json")
    )  # fmt: skip
    assert again["members"] == draws[1]["members"]  # the seed decides the draw

    short = json.loads(
        _retest("sample", "--strategy", "keyword-spread", "--per-class", "13",
                "--seed", "1", "--no-dedup", "--project", p, "--json", code=1)
    )  # fmt: skip
    assert not short["valid"]
    assert [(s["class_name"], s["got"]) for s in short["shortfall"]] == [("bag", 12)]
    out = _retest("revisions", "--project", p, "--json")
    assert {r["strategy"] for r in json.loads(out)} == {"keyword-spread"}


def _planted_pool(fashion_mnist_dir: Path, path: Path) -> list[tuple[str, str]]:
    """300 Fashion-MNIST test images plus three of them re-exposed (darker,
    lower contrast, sensor noise): the (copy, original) candidate ids."""
    from retest.datasets.idx import read_idx

    x = read_idx(fashion_mnist_dir / "t10k-images-idx3-ubyte.gz")[:300]
    y = read_idx(fashion_mnist_dir / "t10k-labels-idx1-ubyte.gz")[:300]
    src = [5, 50, 120]
    noise = np.random.default_rng(0).normal(0, 4, x[src].shape)
    copies = np.clip(x[src] * 0.6 + 70 + noise, 0, 255).astype(np.uint8)
    np.savez(path, images=np.concatenate([x, copies]), labels=[*y, *y[src]])
    return [(content_id(c), content_id(x[i])) for c, i in zip(copies, src, strict=True)]


@pytest.mark.usefixtures("registries")
def test_the_dedup_metric_feeds_the_review_queue_and_eligibility(
    tmp_path: Path, fashion_mnist_dir: Path
) -> None:
    _load(1)
    assert "contrast (squared L2 after normalising brightness and contrast)" in (
        _help_text("dedup")
    )
    planted = _planted_pool(fashion_mnist_dir, tmp_path / "c.npz")
    p = _init(tmp_path / "fm", "t-shirt,trouser,pullover,dress,coat,sandal,shirt,"
              "sneaker,bag,ankle-boot")  # fmt: skip
    _retest("source", "add", "arrays", str(tmp_path / "c.npz"), "--project", p)
    _retest("dedup", "--metrics", "l2,contrast", "--against", "pool", "--k", "5",
            "--project", p)  # fmt: skip

    queue = json.loads(_retest("dedup-queue", "--project", p, "--json"))
    pairs = {
        (row["metric"], row["candidate"], ref)
        for row in queue
        for ref in row["references"]
    }
    for copy, orig in planted:
        # the copy and its original list each other under contrast, not under l2
        assert {("contrast", copy, orig), ("contrast", orig, copy)} <= pairs
        assert ("l2", copy, orig) not in pairs
    with Project.open(p) as proj:
        assert review_targets(proj)["contrast"] == pytest.approx(2 * 14 * 14 * 0.01)
        elig = candidate_eligibility(proj)
    for copy, orig in planted:
        assert "unreviewed" in elig.reasons[copy] + elig.reasons[orig]

    for copy, orig in planted:  # a reviewer confirms each pair, both ways
        for cand, ref in ((copy, orig), (orig, copy)):
            _retest("dedup-verdict", cand, "contrast", "--shown", ref, "--who",
                    "ana", "--duplicates", ref, "--project", p)  # fmt: skip
    queue = json.loads(_retest("dedup-queue", "--project", p, "--json"))
    assert not {r["candidate"] for r in queue if r["metric"] == "contrast"} & {
        i for pair in planted for i in pair
    }
    with Project.open(p) as proj:
        elig = candidate_eligibility(proj)
    for pair in planted:  # one image of each copy pair stays, the other is out
        kept = [i for i in pair if elig.is_eligible(i)]
        assert len(kept) == 1, pair
        (out,) = set(pair) - set(kept)
        assert "pool_duplicate" in elig.reasons[out]


@pytest.mark.usefixtures("registries")
def test_the_source_ingests_through_retest_source_add(tmp_path: Path) -> None:
    _load(2)
    assert "class-arrays" in _retest("source", "kinds").split()
    rng = np.random.default_rng(1)
    folder = tmp_path / "arrays"
    folder.mkdir()
    shirts = rng.integers(0, 256, (7, 8, 8, 3), np.uint8)
    bags = rng.integers(0, 256, (5, 8, 8, 3), np.uint8)
    bags[4] = shirts[0]  # an exact copy: the pipeline keeps one
    np.save(folder / "shirt.npy", shirts)
    np.save(folder / "bag.npy", bags)
    p = _init(tmp_path / "shop", "shirt,bag")

    add = ["source", "add", "class-arrays", str(folder), "--project", p, "--json"]
    rep = json.loads(_retest(*add))
    assert (rep["kind"], rep["total"], rep["new"], rep["duplicates"]) == (
        "class-arrays", 12, 11, 1,
    )  # fmt: skip
    with Project.open(p) as proj:
        names = {c.id: c.name for c in proj.store.classes.list()}
        rows = list(proj.store.candidates.iter())
        assert len(rows) == 11
        for row in rows:
            cls, i = row.source_ref.split("/")
            assert names[row.class_id] == cls
            want = (shirts if cls == "shirt" else bags)[int(i)]
            assert np.array_equal(proj.pixels([row.id])[0], want)
    again = json.loads(_retest(*add))  # the same folder again: the same job
    assert again["job"] == rep["job"]
    with Project.open(p) as proj:
        assert proj.store.candidates.count() == 11

    np.save(folder / "coat.npy", rng.random((2, 8, 8, 3)))  # floats: refused
    out = _retest(*add, code=1)
    assert f"{folder}: expected CLASS.npy uint8 images" in " ".join(out.split())
    out = _retest("source", "add", "class-arrays", str(folder), "--class", "bag",
                  "--project", p, code=2)  # fmt: skip
    assert "source kind 'class-arrays' does not take class_name" in out


def _web_app(root: Path, npz: Path) -> tuple[Project, TestClient]:
    from retest.stages.crowd import project_secret
    from retest.web.app import create_app

    _init(root, "shirt,bag")
    _retest("source", "add", "arrays", str(npz), "--name", "shop-photos",
            "--project", str(root))  # fmt: skip
    proj = Project.open(root)
    from retest.labeling.people import token_hash

    proj.store.people.add("lena", "lena", "labeler", token_hash(LABELER))
    web = create_app(proj, reviewer_token=REVIEWER, secret=project_secret(proj))
    return proj, TestClient(web)


def _nav(html: str) -> list[tuple[str, str]]:
    nav = re.search(r"<nav>(.*?)</nav>", html, flags=re.S)
    assert nav is not None
    return re.findall(r'<a href="([^"]+)">([^<]+)</a>', nav.group(1))


@pytest.mark.usefixtures("registries")
def test_the_web_page_is_served_and_linked_in_the_nav(tmp_path: Path) -> None:
    _load(3)
    images = np.random.default_rng(2).integers(0, 256, (9, 8, 8, 3), np.uint8)
    np.savez(tmp_path / "c.npz", images=images, labels=[0, 1, 0, 1, 0, 1, 0, 1, 1])
    proj, client = _web_app(tmp_path / "shop", tmp_path / "c.npz")
    reviewer, labeler = {"x-retest-token": REVIEWER}, {"x-retest-token": LABELER}
    with proj, client:
        page = client.get("/sources", headers=reviewer)
        assert page.status_code == 200
        cells = re.findall(r"<td>([^<\n]*)", page.text)
        assert cells == ["shop-photos", "arrays", "9", "9", "0"]
        builtin = [
            ("/tasks", "Tasks"), ("/neardup", "Near-duplicates"),
            ("/stats", "Selection frequency"), ("/label-errors", "Label errors"),
            ("/quality", "Quality"),
        ]  # fmt: skip
        for url in ("/sources", "/tasks", "/stats", "/label-errors", "/"):
            html = client.get(url, headers=reviewer).text
            assert _nav(html) == [*builtin, ("/sources", "Sources")], url
        # labelers neither see the link nor read the page
        assert _nav(client.get("/tasks", headers=labeler).text) == [builtin[0]]
        assert client.get("/sources", headers=labeler).status_code == 403
        assert client.get("/sources").status_code == 401


@pytest.mark.usefixtures("registries")
def test_a_page_may_not_take_over_a_built_in_url(tmp_path: Path) -> None:
    from fastapi import APIRouter

    from retest.stages.crowd import project_secret
    from retest.web.app import create_app

    router = APIRouter()
    router.add_api_route("/tasks", lambda: {"hijacked": True})
    register_page("tasks-again", router, nav_label="Mine")
    with pytest.raises(ConfigError, match="already registered"):
        register_page("tasks-again", router)
    root = tmp_path / "p"
    _init(root, "shirt,bag")
    with Project.open(root) as proj:
        with pytest.raises(ConfigError, match="GET /tasks is already served by page"):
            create_app(proj, secret=project_secret(proj))


def test_packaged_plugins_are_found_through_entry_points(tmp_path: Path) -> None:
    """The four modules in an installed package, named by entry points only."""
    site = tmp_path / "site"
    pkg = site / "readme_plugins"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    groups = ("retest.samplers", "retest.dedup_metrics", "retest.sources",
              "retest.web_pages")  # fmt: skip
    eps = []
    for block, group, (_, name, module) in zip(_blocks(), groups, BLOCKS, strict=True):
        (pkg / f"{module}.py").write_text(block)
        eps.append(f"[{group}]\n{name} = readme_plugins.{module}\n")
    info = site / "readme_plugins-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: readme-plugins\nVersion: 0.1\n"
    )
    (info / "entry_points.txt").write_text("\n".join(eps))
    script = textwrap.dedent(
        """
        import json, sys
        from typer.testing import CliRunner
        from retest.cli.main import app
        from retest.config import load_config
        from retest.stages.dedup import DEDUP_METRICS
        from retest.sampling.base import run_sampler
        from retest.sampling.eligibility import CandidateInfo
        from retest.sources.base import CANDIDATE_SOURCES
        from retest.web.pages import PAGES

        run = CliRunner().invoke
        pool = [CandidateInfo(f"{k}{i}", k, keyword=str(i % 2)) for k in "ab"
                for i in range(6)]
        print(json.dumps({
            "sample": run(app, ["sample", "--help"]).output,
            "dedup": run(app, ["dedup", "--help"]).output,
            "kinds": run(app, ["source", "kinds"]).output.split(),
            "thresholds": load_config(sys.argv[1]).thresholds,
            # the registered objects themselves, not the modules named
            "drawn": run_sampler("keyword-spread", pool, random_state=0,
                                 per_class=2).class_counts(),
            "target": DEDUP_METRICS.get("contrast").default_target((28, 28, 1)),
            "kind": CANDIDATE_SOURCES.get("class-arrays").kind,
            "nav": [link.label for link in PAGES.get("sources").nav],
        }))
        """
    )
    toml = tmp_path / "retest.toml"  # a plug-in metric's review target override
    toml.write_text(
        'classes = ["a", "b"]\n[project]\nname = "p"\n[thresholds]\ncontrast = 1.5\n'
    )
    # the plug-in's folder first, then whatever makes this checkout importable
    path = os.pathsep.join(x for x in (str(site), os.environ.get("PYTHONPATH")) if x)
    env = {**os.environ, "PYTHONPATH": path, "COLUMNS": "200"}
    res = subprocess.run(
        [sys.executable, "-c", script, str(toml)], capture_output=True, text=True,
        env=env,
        timeout=300, check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert "keyword-spread:" in out["sample"]
    assert "contrast (squared L2" in out["dedup"]
    assert "class-arrays" in out["kinds"]
    assert out["thresholds"] == {"contrast": 1.5}
    assert out["drawn"] == {"a": 2, "b": 2}
    assert out["target"] == pytest.approx(3.92)
    assert (out["kind"], out["nav"]) == ("class-arrays", ["Sources"])


def test_a_plugin_that_fails_to_load_is_named_in_one_line(monkeypatch) -> None:
    from importlib.metadata import EntryPoint

    import retest.registry as registry

    broken = EntryPoint("mine", "no_such_module_for_retest", "retest.things")
    monkeypatch.setattr(registry, "entry_points", lambda group: [broken])
    reg = registry.Registry[object]("thing", entry_point_group="retest.things")
    with pytest.raises(ConfigError, match=r"thing plug-in 'mine' \(entry point "
                       r"'no_such_module_for_retest' in group retest.things\) "
                       r"failed to load: ModuleNotFoundError"):  # fmt: skip
        reg.names()
