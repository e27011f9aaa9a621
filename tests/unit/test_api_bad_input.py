"""Wrong inputs to the public ``retest`` API: one retest error naming the input.

Each call here once ended in a bare Python error, or silently did the wrong
thing (a str of classes split into letters, a project made inside a folder of
other files). Every one must raise ``InputValidationError`` (wrong type or
shape) or ``ConfigError`` (a bad option value) with a one-line message naming
the input, and must leave nothing behind.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import retest
from retest.cli.main import app
from retest.errors import ConfigError, InputValidationError


def _one_line(err: pytest.ExceptionInfo[BaseException]) -> str:
    msg = str(err.value)
    assert "\n" not in msg, msg
    return msg


# -- project creation: classes


@pytest.mark.parametrize(
    ("classes", "error", "words"),
    [
        ("cat,dog", InputValidationError, ["classes", "'cat,dog'", "['cat', 'dog']"]),
        ("cat", InputValidationError, ["classes", "'cat'"]),
        (b"cat", InputValidationError, ["classes"]),
        (3, InputValidationError, ["classes", "3"]),
        ({"cat", "dog"}, InputValidationError, ["classes"]),
        (["cat", 1], InputValidationError, ["classes", "1", "int"]),
        (["cat", None], InputValidationError, ["classes", "None"]),
        ([], ConfigError, ["classes is empty", "classes_from"]),
        (["cat", ""], ConfigError, ["classes", "non-empty"]),
        (["cat", "dog", "cat"], ConfigError, ["classes", "'cat'", "more than once"]),
    ],
)
def test_init_project_refuses_bad_classes(
    tmp_path: Path, classes: object, error: type[Exception], words: list[str]
) -> None:
    root = tmp_path / "p"
    with pytest.raises(error) as err:
        retest.init_project(root, classes=classes)  # type: ignore[arg-type]
    msg = _one_line(err)
    for w in words:
        assert w in msg, (w, msg)
    assert not root.exists()  # refused before anything is created


def test_classes_and_classes_from_together_are_refused_even_as_a_str(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError, match="either classes or classes_from"):
        retest.init_project(tmp_path / "p", classes="cat", classes_from="cifar10")


def test_a_tuple_of_classes_keeps_its_order(tmp_path: Path) -> None:
    with retest.init_project(tmp_path / "p", classes=("dog", "cat", "bird")) as p:
        assert p.class_names == ("dog", "cat", "bird")
        assert [c.name for c in p.store.classes.list()] == ["dog", "cat", "bird"]


# -- project creation: the folder


def test_init_refuses_a_folder_holding_other_files(tmp_path: Path) -> None:
    (tmp_path / "thesis.tex").write_text("x")
    (tmp_path / "data").mkdir()
    with pytest.raises(ConfigError) as err:
        retest.init_project(tmp_path, classes=["a", "b"])
    msg = _one_line(err)
    assert str(tmp_path) in msg and "--force" in msg and "thesis.tex" in msg
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "thesis.tex"]
    with retest.init_project(tmp_path, classes=["a", "b"], force=True) as p:
        assert p.root == tmp_path.resolve() and p.class_names == ("a", "b")
    assert (tmp_path / "thesis.tex").read_text() == "x"


def test_init_accepts_hidden_files_and_its_own_leftovers(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".DS_Store").write_text("")
    (tmp_path / "arrays").mkdir()  # an interrupted init: empty data folders
    (tmp_path / "images").mkdir()
    with retest.init_project(tmp_path, classes=["a"]) as p:
        assert p.class_names == ("a",)


def test_init_refuses_a_data_folder_that_is_not_empty(tmp_path: Path) -> None:
    """``images/`` with files in it is somebody's data, not an init's leftover."""
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "cat.jpg").write_bytes(b"\xff\xd8")
    with pytest.raises(ConfigError, match=r"holds images\b.*--force"):
        retest.init_project(tmp_path, classes=["a"])


def test_init_on_a_file_is_input_error(tmp_path: Path) -> None:
    f = tmp_path / "notes.txt"
    f.write_text("x")
    with pytest.raises(InputValidationError) as err:
        retest.init_project(f, classes=["a"])
    assert "notes.txt" in _one_line(err) and "is a file" in str(err.value)


def test_cli_init_refuses_a_parent_folder_unless_forced(tmp_path: Path) -> None:
    """``retest init ../x/..`` names the folder it resolves to, not a new one."""
    (tmp_path / "other-project").mkdir()
    (tmp_path / "x").mkdir()
    runner = CliRunner()
    res = runner.invoke(app, ["init", str(tmp_path / "x" / ".."), "--classes", "a,b"])
    assert res.exit_code == 2
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "--force" in lines[0] and str(tmp_path) in lines[0]
    assert not (tmp_path / "retest.toml").exists()
    forced = ["init", str(tmp_path), "--classes", "a,b", "--force"]
    assert runner.invoke(app, forced).exit_code == 0
    assert (tmp_path / "retest.toml").is_file()


@pytest.mark.parametrize("path", [42, b"/tmp", 1.5])
def test_open_and_init_refuse_a_non_path(path: object, tmp_path: Path) -> None:
    with pytest.raises(InputValidationError) as err:
        retest.open_project(path)  # type: ignore[arg-type]
    assert repr(path) in _one_line(err) and "path" in str(err.value)
    with pytest.raises(InputValidationError, match=repr(path)):
        retest.init_project(path, classes=["a"])  # type: ignore[arg-type]


# -- core functions


def _vectors() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.random((5, 4), np.float32), rng.random((6, 4), np.float32)


def test_knn_refuses_empty_queries_in_one_line() -> None:
    a, b = _vectors()
    with pytest.raises(InputValidationError, match="queries are empty"):
        retest.knn(a[:0], b, k=1)


@pytest.mark.parametrize("k", ["3", 2.7, 3.0, True, None])
def test_knn_refuses_a_k_that_is_not_an_int(k: object) -> None:
    a, b = _vectors()
    with pytest.raises(ConfigError) as err:
        retest.knn(a, b, k=k)  # type: ignore[arg-type]
    assert "k must be a positive integer" in _one_line(err) and repr(k) in str(
        err.value
    )


def test_knn_takes_numpy_integers() -> None:
    a, b = _vectors()
    got = retest.knn(a, b, k=np.int64(2))
    want = retest.knn(a, b, k=2)
    assert np.array_equal(got.indices, want.indices) and got.indices.shape == (5, 2)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ([[0, 1], [1, 1]], ["predictions[0]", "list", "Predictions.from_labels"]),
        (np.zeros((2, 2)), ["predictions must be a list", "ndarray"]),
        (5, ["predictions must be a list", "int"]),
    ],
)
def test_ensemble_refuses_raw_arrays(value: object, words: list[str]) -> None:
    with pytest.raises(InputValidationError) as err:
        retest.ensemble_pred_probs(value)  # type: ignore[arg-type]
    msg = _one_line(err)
    assert all(w in msg for w in words), msg


def test_ensemble_refuses_a_single_predictions() -> None:
    one = retest.Predictions.from_labels("a", "t", [0, 1])
    with pytest.raises(InputValidationError, match="a list of Predictions"):
        retest.ensemble_pred_probs(one)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("pool", "words"),
    [
        ([1, 2, 3], ["pool[0]", "int", "CandidateInfo"]),
        ("cat-1", ["pool must be a list", "str"]),
        (7, ["pool must be a list", "int"]),
        ([], ["pool is empty", "classes="]),
    ],
)
def test_sample_refuses_a_pool_that_is_not_candidates(
    pool: object, words: list[str]
) -> None:
    with pytest.raises(InputValidationError) as err:
        retest.sample(pool, "class-balanced", random_state=0, per_class=2)  # type: ignore[arg-type]
    msg = _one_line(err)
    assert all(w in msg for w in words), msg


def test_sample_of_an_empty_pool_with_classes_reports_every_class_short() -> None:
    got = retest.sample(
        [], "class-balanced", random_state=0, per_class=2, classes=["cat", "dog"]
    )
    assert not got.is_valid and got.ids == []
    assert [(s.class_name, s.needed, s.got) for s in got.shortfall] == [
        ("cat", 2, 0),
        ("dog", 2, 0),
    ]


@pytest.mark.parametrize(
    ("orig", "new", "words"),
    [
        (5, 6, ["original testbed must be", "int"]),
        ([[0, 1]], [[0, 1]], ["original testbed[0]", "list", "Predictions"]),
        ({"a": [0, 1]}, "ab", ["new testbed must be", "str"]),
    ],
)
def test_compare_refuses_predictions_of_the_wrong_type(
    orig: object, new: object, words: list[str]
) -> None:
    with pytest.raises(InputValidationError) as err:
        retest.compare([0, 1], [0, 1], orig, new)  # type: ignore[arg-type]
    msg = _one_line(err)
    assert all(w in msg for w in words), msg
