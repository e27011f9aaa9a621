"""The curated ``retest`` API: cheap import, documented names, thin correct wrappers."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import retest
from figure_checks import assert_png  # type: ignore[import-not-found]
from retest.dedup.ssim import structural_similarity
from retest.errors import ConfigError, InputValidationError, UnknownNameError
from retest.sampling.eligibility import CandidateInfo

PUBLIC = [n for n in retest.__all__ if n != "__version__"]
FUNCTIONS = [n for n in PUBLIC if inspect.isfunction(getattr(retest, n))]


# -- the package itself


def test_import_loads_no_submodule_and_no_numpy() -> None:
    code = (
        "import sys, retest; "
        "print(sorted(m for m in sys.modules if m.startswith('retest'))); "
        "print('numpy' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert out[0] == "['retest']"
    assert out[1] == "False"


def test_first_use_loads_only_what_it_needs() -> None:
    code = (
        "import sys, retest; retest.knn; "
        "print(any(m.startswith(('retest.project', 'retest.stages')) for m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "False"


@pytest.mark.parametrize("name", PUBLIC)
def test_each_name_is_the_defining_modules_object(name: str) -> None:
    obj = getattr(retest, name)
    module = retest._EXPORTS[name]
    assert obj.__module__ == module
    assert getattr(sys.modules[module], name) is obj


def test_all_dir_and_table_agree() -> None:
    assert set(retest.__all__) == set(retest._EXPORTS)
    assert retest.__version__ == importlib.import_module("retest._version").__version__
    assert retest.__all__ == sorted(retest.__all__, key=lambda n: (n[0].islower(), n))
    assert set(retest.__all__) <= set(dir(retest))
    for name in (
        "compare",
        "find_label_errors",
        "knn",
        "ssim",
        "sample",
        "open_project",
    ):
        assert name in retest.__all__


def test_retest_itself_imports_each_name_from_its_defining_module() -> None:
    """The top-level names are for users; inside the package the layering test
    only sees an import's real module, so none may go through ``retest``."""
    src = Path(retest.__file__).parent
    offenders = []
    for path in sorted(src.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "retest":
                lazy = [a.name for a in node.names if a.name in retest._EXPORTS]
                if lazy:
                    offenders.append(f"{path.relative_to(src)}: {lazy}")
    assert offenders == [], offenders


def test_unknown_names_fail_like_a_module() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'comapre'"):
        retest.comapre  # noqa: B018
    with pytest.raises(ImportError):
        from retest import comapre  # type: ignore[attr-defined]  # noqa: F401


# -- docstrings


def _section(doc: str, title: str) -> str:
    m = re.search(rf"^{title}\n-+\n(.*?)(?=^\w[\w ]*\n-+\n|\Z)", doc, re.M | re.S)
    return m.group(1) if m else ""


def _documented(params: str) -> set[str]:
    names: set[str] = set()
    for line in params.splitlines():
        if line and not line[0].isspace():
            names.update(n.strip() for n in line.split(" : ")[0].split(","))
    return names


@pytest.mark.parametrize("name", FUNCTIONS)
def test_functions_have_numpydoc_with_every_parameter(name: str) -> None:
    fn = getattr(retest, name)
    doc = inspect.getdoc(fn) or ""
    for title in ("Parameters", "Returns", "Raises", "Examples"):
        assert _section(doc, title).strip(), f"{name}: no {title} section"
    assert ">>>" in _section(doc, "Examples"), f"{name}: no runnable example"
    documented = _documented(_section(doc, "Parameters"))
    for p in inspect.signature(fn).parameters.values():
        shown = "**" + p.name if p.kind is p.VAR_KEYWORD else p.name
        assert shown in documented, f"{name}: parameter {shown} is not documented"


@pytest.mark.parametrize("name", [n for n in PUBLIC if n not in FUNCTIONS])
def test_classes_are_documented(name: str) -> None:
    obj = getattr(retest, name)
    doc = inspect.getdoc(obj) or ""
    assert doc.strip()
    if not issubclass(obj, Exception):
        assert _section(doc, "Parameters").strip(), f"{name}: no Parameters section"


# -- compare and linear_fit


def _testbed(rng: np.random.Generator, y: np.ndarray, skills: list[float]) -> dict:
    out = {}
    for i, s in enumerate(skills):
        wrong = rng.random(y.size) > s
        out[f"m{i}"] = np.where(wrong, (y + 1 + rng.integers(0, 3, y.size)) % 4, y)
    return out


def _clopper_pearson(k: int, n: int, conf: float = 0.95) -> tuple[float, float]:
    """The exact interval from the beta quantiles (scipy), the textbook formula."""
    a = 1 - conf
    lo = stats.beta.ppf(a / 2, k, n - k + 1) if k > 0 else 0.0
    hi = stats.beta.ppf(1 - a / 2, k + 1, n - k) if k < n else 1.0
    return float(lo), float(hi)


def test_compare_against_counts_scipy_and_a_least_squares_line(
    tmp_path: Path,
) -> None:
    """Every number of the table and fit from an independent computation: counts
    of right answers, scipy's beta quantiles (Clopper-Pearson) and scipy's
    least-squares line."""
    rng = np.random.default_rng(3)
    y_o, y_n = rng.integers(0, 4, 800), rng.integers(0, 4, 300)
    skills = [0.6, 0.7, 0.8, 0.9]
    orig = _testbed(rng, y_o, skills)
    new = _testbed(rng, y_n, [s - 0.1 for s in skills])
    res = retest.compare(y_o, y_n, orig, new, n_boot=500, random_state=1, out=tmp_path)
    k_o = {m: int(np.sum(p == y_o)) for m, p in orig.items()}
    k_n = {m: int(np.sum(p == y_n)) for m, p in new.items()}
    assert res.table.models == tuple(sorted(k_o, key=k_o.__getitem__, reverse=True))
    assert res.table.models == ("m3", "m2", "m1", "m0")  # by original accuracy
    for r in res.table.rows:
        assert (r.orig.k, r.orig.n, r.new.k, r.new.n) == (k_o[r.model], 800,
                                                          k_n[r.model], 300)  # fmt: skip
        assert (r.orig.lo, r.orig.hi) == pytest.approx(_clopper_pearson(r.orig.k, 800))
        assert (r.new.lo, r.new.hi) == pytest.approx(_clopper_pearson(r.new.k, 300))
        assert r.gap == pytest.approx(k_o[r.model] / 800 - k_n[r.model] / 300)
        assert r.gap_lo < r.gap < r.gap_hi
    x = [100 * k_o[m] / 800 for m in res.table.models]  # percent, as plotted
    y = [100 * k_n[m] / 300 for m in res.table.models]
    line = stats.linregress(x, y)
    assert res.fit.slope == pytest.approx(line.slope)
    assert res.fit.intercept == pytest.approx(line.intercept)
    assert res.fit.r2 == pytest.approx(line.rvalue**2)
    lo, hi = res.fit.slope_ci
    assert lo < res.fit.slope < hi
    assert res.paths["fit"] == tmp_path / "fit.json"
    assert_png(res.paths["png"], min_side=400)
    assert retest.compare(y_o, y_n, orig, new, n_boot=10).paths == {}


def test_compare_takes_score_matrices_and_topk() -> None:
    y = np.array([0, 1, 2, 0, 1, 2])
    scores = np.eye(3)[[0, 1, 2, 0, 1, 1]] * 5.0  # logits: the last one is wrong
    topk = np.array([[1, 0], [1, 2], [2, 0], [0, 1], [2, 1], [2, 0]])  # 4 right
    top1 = np.array([0, 1, 0, 0, 1, 2])
    tb = {"s": scores, "t": topk, "u": top1}
    res = retest.compare(y, y, tb, tb, n_boot=10)
    assert {r.model: r.orig.k for r in res.table.rows} == {"s": 5, "t": 4, "u": 5}
    assert res.table.row("s").orig.n == 6
    # Two ranked classes of unknown K cannot answer top5, and say so.
    with pytest.raises(InputValidationError, match="needs 5 ranked classes"):
        retest.compare(y, y, tb, tb, metric="top5", n_boot=10)


def test_compare_errors_name_the_problem() -> None:
    y = np.array([0, 1, 1, 0])
    two = {"a": y, "b": 1 - y}
    with pytest.raises(InputValidationError, match="at least 3 models"):
        retest.compare(y, y, two, two, n_boot=10)
    with pytest.raises(InputValidationError, match="5 predictions but 4 labels"):
        retest.compare(y, y, {"a": [0, 1, 1, 0, 1]}, {"a": y}, n_boot=10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(InputValidationError, match="no model has predictions"):
            retest.compare(y, y, {"a": y}, {"b": y}, n_boot=10)


def test_linear_fit_is_least_squares_on_the_chosen_axes() -> None:
    """Against scipy: the probit axes are the normal quantile function, the fit
    ordinary least squares; the bootstrap interval holds the slope and a fixed
    seed repeats it."""
    o, n = [0.8, 0.85, 0.9, 0.95], [0.7, 0.79, 0.85, 0.94]
    a = retest.linear_fit(o, n, axes="probit", n_boot=300, random_state=2)
    line = stats.linregress(stats.norm.ppf(o), stats.norm.ppf(n))
    assert (a.slope, a.intercept) == pytest.approx((line.slope, line.intercept))
    np.testing.assert_allclose(a.x, stats.norm.ppf(o))
    lin = retest.linear_fit(o, n, n_boot=300, random_state=2)
    assert lin.slope == pytest.approx(stats.linregress(o, n).slope)
    assert a.slope_ci[0] < a.slope < a.slope_ci[1]
    again = retest.linear_fit(o, n, axes="probit", n_boot=300, random_state=2)
    assert again.slope_ci == a.slope_ci


# -- ssim / dssim


def test_ssim_pairs_equal_single_image_ssim() -> None:
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (3, 12, 12, 3), dtype=np.uint8)
    b = np.clip(a.astype(int) + rng.integers(-40, 40, a.shape), 0, 255).astype(np.uint8)
    got = retest.ssim(a, b)
    want = [structural_similarity(a[i], b[i], channel_axis=-1) for i in range(3)]
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert got.max() < 0.99  # the noise is visible
    crossed = retest.ssim(a, b, pairs=([0, 2], [1, 1]))
    np.testing.assert_allclose(
        crossed,
        [structural_similarity(a[k], b[1], channel_axis=-1) for k in (0, 2)],
        atol=1e-6,
    )
    np.testing.assert_allclose(retest.dssim(a, b), (1 - got) / 2, atol=1e-7)


def test_ssim_matches_skimage_with_a_gaussian_window() -> None:
    skm = pytest.importorskip("skimage.metrics", reason="scikit-image (dev extra)")
    rng = np.random.default_rng(1)
    a = rng.random((2, 20, 20))
    b = np.clip(a + rng.normal(0, 0.1, a.shape), 0, 1)
    got = retest.ssim(a, b, gaussian_weights=True, data_range=1.0)
    want = [
        skm.structural_similarity(a[i], b[i], gaussian_weights=True, data_range=1.0)
        for i in range(2)
    ]
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_ssim_refuses_batches_that_do_not_pair() -> None:
    x = np.zeros((2, 8, 8), np.uint8)
    with pytest.raises(
        InputValidationError, match="images1 has 2 images and images2 3"
    ):
        retest.ssim(x, np.zeros((3, 8, 8), np.uint8))
    with pytest.raises(ConfigError, match="data_range"):
        retest.dssim(x.astype(float), x.astype(float))


# -- sample


def _pool() -> list[CandidateInfo]:
    return [
        CandidateInfo(f"{c}{i}", c, frequency=i / 8, n_assignments=10)
        for c in ("cat", "dog")
        for i in range(8)
    ]


def test_sample_runs_the_named_sampler() -> None:
    """Checked against what each sampler must draw from the pool by hand: the
    threshold sampler's four candidates per class at or above 0.5 are the only
    ones it may take; class-balanced draws 3 distinct ones per class, seeded."""
    got = retest.sample(_pool(), "threshold", threshold=0.5, per_class=4,
                        random_state=4)  # fmt: skip
    assert got.is_valid and got.strategy == "threshold"
    assert sorted(got.ids) == [f"{c}{i}" for c in ("cat", "dog") for i in (4, 5, 6, 7)]
    short = retest.sample(_pool(), "threshold", threshold=0.5, per_class=5,
                          random_state=4)  # fmt: skip
    assert not short.is_valid and short.class_counts() == {"cat": 4, "dog": 4}
    bal = retest.sample(_pool(), "class-balanced", per_class=3, random_state=4)
    assert bal.is_valid and bal.strategy == "class-balanced"
    assert bal.class_counts() == {"cat": 3, "dog": 3} and len(set(bal.ids)) == 6
    assert all(m.id.startswith(m.class_name) for m in bal.members)
    again = retest.sample(_pool(), "class-balanced", per_class=3, random_state=4)
    assert again == bal
    others = {
        tuple(sorted(retest.sample(_pool(), "class-balanced", per_class=3,
                                   random_state=s).ids))
        for s in range(8)
    }  # fmt: skip
    assert len(others) > 1  # the seed decides the draw


def test_sample_refuses_inputs_the_sampler_does_not_take() -> None:
    with pytest.raises(ConfigError, match="'class-balanced' does not take threshold"):
        retest.sample(_pool(), "class-balanced", threshold=0.5, random_state=0)
    with pytest.raises(UnknownNameError, match="class-balanced"):
        retest.sample(_pool(), "class-balance", random_state=0)


# -- projects


def test_projects_open_by_path_and_report_status(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    retest.init_project(root, classes=["cat", "dog"]).close()
    with retest.open_project(root / "reports") as project:  # found from a subfolder
        assert project.root == root.resolve()
        by_handle = retest.status(project)
    by_path = retest.status(root)
    assert by_handle == by_path
    assert [c.name for c in by_path.classes] == ["cat", "dog"]
    assert by_path.project == "proj" and by_path.revision is None
    with pytest.raises(ConfigError, match="is not a retest project"):
        retest.open_project(tmp_path)


# -- doctest collection without the optional extras

_HIDE_EXTRAS = """
import sys
HIDDEN = {"torch", "torchvision", "onnxruntime", "onnx", "faiss"}

class Hide:
    def __init__(self, inner):
        self.inner = inner

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            return None
        return self.inner.find_spec(name, path, target)

    def __getattr__(self, attr):
        return getattr(self.inner, attr)

sys.meta_path[:] = [Hide(f) for f in sys.meta_path]
import pytest
sys.exit(pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "src/retest"]))
"""


@pytest.mark.slow
def test_doctests_collect_without_optional_extras() -> None:
    repo = Path(__file__).resolve().parents[2]
    run = subprocess.run(
        [sys.executable, "-c", _HIDE_EXTRAS],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "retest.api.compare" in run.stdout


@pytest.mark.parametrize("name", PUBLIC)
def test_examples_run_when_pasted_after_import_retest(name: str) -> None:
    """Each public name has an example (the README says so), and each example
    imports what it uses: it runs in an empty namespace."""
    import doctest

    obj = getattr(retest, name)
    tests = doctest.DocTestFinder(recurse=False).find(obj, name, globs={})
    assert sum(len(t.examples) for t in tests) >= 1, f"{name} has no >>> example"
    for test in tests:
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
        result = runner.run(test, out=lambda _: None)
        assert result.failed == 0, f"{name}: {result}"
