"""One value check per kind (#23): the CLI and the Python API refuse the same values.

Every case here was accepted, or crashed with a traceback, before the checks in
``retest._validation`` / ``retest.names`` existed (main at aad0cc2): a cluster
address without a port (ValueError), a seed beyond SQLite's 64 bits
(OverflowError), a port outside 1-65535 (OverflowError in bind), a batch size of
0, a reviewer name with a newline, repeated class names, an ONNX layout with no
ONNX model, 1-based true labels (recall 0.004), 1-based labels in
``retest.compare`` (a silent 2.9 % accuracy), a missing onnxruntime (ImportError),
a results row naming another class, and the id prefixes ``dedup-queue`` prints.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np
import pytest
from bad_input_helpers import build_project, invoke, refused

import retest
from retest.errors import ConfigError, InputValidationError, RetestError
from retest.project import Project


@pytest.fixture(scope="session")
def session_project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("value-checks")
    return build_project(base / "proj", base / "inputs"), base / "inputs"


@pytest.fixture
def project(session_project: tuple[Path, Path], tmp_path: Path) -> Path:
    import shutil

    dst = tmp_path / "proj"
    shutil.copytree(session_project[0], dst)
    return dst


@pytest.mark.parametrize(
    "args, culprit",
    [
        (["dedup", "--cluster", "notaurl"], "--cluster"),
        (["dedup", "--cluster", "tcp://host:99999"], "--cluster"),
        (["evaluate", "--cluster", "notaurl", "--preset", "quick"], "--cluster"),
        (
            [
                "sample",
                "--strategy",
                "class-balanced",
                "--seed",
                "99999999999999999999999",
            ],
            "--seed",
        ),
        (["sample", "--strategy", "class-balanced", "--seed", str(2**63)], "--seed"),
        (["split", "--seed", str(2**64)], "--seed"),
        (["crowd", "tasks", "--seed", str(2**63)], "--seed"),
        (["serve", "--port", "99999"], "--port"),
        (["serve", "--port", "-1"], "--port"),
        (["serve", "--port", "0"], "--port"),
        (["evaluate", "--preset", "quick", "--batch-size", "0"], "--batch-size"),
        (
            ["dedup-verdict", "abc", "l2", "--shown", "test:0", "--who", "a\nb"],
            "--who",
        ),
        (["evaluate", "--onnx-layout", "XYZ"], "--onnx-layout"),
        (["evaluate", "--onnx-layout", "NHWC", "--preset", "quick"], "--onnx-layout"),
    ],
    ids=[
        "dedup-cluster-notaurl",
        "dedup-cluster-port",
        "evaluate-cluster",
        "sample-seed-huge",
        "sample-seed-2**63",
        "split-seed",
        "tasks-seed",
        "serve-port-high",
        "serve-port-negative",
        "serve-port-0",
        "evaluate-batch-size-0",
        "verdict-who-newline",
        "onnx-layout-unknown",
        "onnx-layout-without-onnx",
    ],
)
def test_cli_refuses_the_value_in_one_line(
    project: Path, args: list[str], culprit: str
) -> None:
    refused(project, args, 2, culprit)


def test_models_predict_refuses_batch_size_0_and_a_layout_without_onnx(
    tmp_path: Path,
) -> None:
    from sklearn.linear_model import LogisticRegression

    x = np.random.default_rng(0).integers(0, 256, (20, 4, 4), dtype=np.uint8)
    np.save(tmp_path / "x.npy", x)
    import joblib

    model = LogisticRegression().fit(x.reshape(20, -1), np.arange(20) % 2)
    joblib.dump(model, tmp_path / "m.joblib")
    base = ["models", "predict", "sklearn", str(tmp_path / "m.joblib"), "--images",
            str(tmp_path / "x.npy"), "--num-classes", "2", "--out",
            str(tmp_path / "p.json")]  # fmt: skip
    refused(None, [*base, "--batch-size", "0"], 2, "--batch-size")
    refused(None, [*base, "--layout", "NHWC"], 2, "--layout", "ONNX")
    assert not (tmp_path / "p.json").exists()
    res = invoke(*base, "--batch-size", "7")
    assert res.exit_code == 0, res.stderr


def test_label_errors_refuses_repeated_class_names_and_1_based_true_labels(
    tmp_path: Path,
) -> None:
    rng = np.random.default_rng(3)
    y = rng.integers(0, 10, 400)
    np.save(tmp_path / "y.npy", y)
    np.save(tmp_path / "p.npy", rng.dirichlet(np.ones(10), 400).astype(np.float32))
    np.save(tmp_path / "y1.npy", y + 1)  # every class present, numbered 1..10
    base = ["label-errors", "--labels", str(tmp_path / "y.npy"), "--pred-probs",
            str(tmp_path / "p.npy")]  # fmt: skip
    names = "a,b,c,d,e,f,g,h,i,a"
    refused(None, [*base, "--out", str(tmp_path / "o1"), "--class-names", names],
            2, "--class-names", "'a'")  # fmt: skip
    line = refused(None, [*base, "--out", str(tmp_path / "o2"), "--true-labels",
                          str(tmp_path / "y1.npy")], 1, "y1.npy")  # fmt: skip
    assert "1-based" in line
    assert not (tmp_path / "o2" / "report.json").exists()


def test_the_api_refuses_what_the_cli_refuses(project: Path) -> None:
    from retest._validation import check_random_state
    from retest.cluster import cluster_client
    from retest.models.sklearn_runner import SklearnRunner
    from retest.project import record_review
    from retest.stages.label_errors import load_label_error_inputs
    from retest.stages.sample import draw_sample

    with pytest.raises(ConfigError, match="cluster"):
        with cluster_client("notaurl"):
            pass
    with pytest.raises(ConfigError, match=r"2\*\*63"):
        check_random_state(2**63)
    with Project.open(project) as proj:
        with pytest.raises(ConfigError, match="seed"):
            draw_sample(proj, "class-balanced", seed=2**63, per_class=1)
        cand = str(proj.store.candidates.columns(("id",))["id"][0])
        before = len(proj.store.neardup.verdicts())
        with pytest.raises(InputValidationError, match="reviewer name"):
            record_review(proj, cand, "l2", reviewer="a\nb", shown=["test:0"])
        assert len(proj.store.neardup.verdicts()) == before
    from sklearn.dummy import DummyClassifier

    est = DummyClassifier().fit(np.zeros((4, 4)), [0, 1, 0, 1])
    runner = SklearnRunner("d", est, n_classes=2)
    with pytest.raises(ConfigError, match="batch_size"):
        runner.predict(np.zeros((4, 2, 2), np.uint8), batch_size=0)
    with pytest.raises(ConfigError, match="repeat"):
        load_label_error_inputs(
            labels=project / "nope.npy", pred_probs=project / "nope.npy",
            class_names=("a", "b", "a"),
        )  # fmt: skip


def _model(y: np.ndarray, right: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.where(rng.random(y.size) < right, y, (y + 1) % 10)


def test_compare_api_refuses_1_based_labels_like_the_cli() -> None:
    rng = np.random.default_rng(7)
    y_o, y_n = rng.integers(0, 10, 1000), rng.integers(0, 10, 500)
    orig = {f"m{i}": _model(y_o, 0.5 + i / 10, i) for i in range(4)}
    new = {f"m{i}": _model(y_n, 0.4 + i / 10, 10 + i) for i in range(4)}
    ok = retest.compare(y_o, y_n, orig, new, n_boot=200)
    assert ok.fit.slope > 0.5
    with pytest.raises(InputValidationError, match="1-based"):
        retest.compare(y_o, y_n + 1, orig, new, n_boot=200)
    with pytest.raises(InputValidationError, match="1-based"):
        retest.compare(y_o + 1, y_n, orig, new, n_boot=200)
    # labels 1..9 with 10 classes known: class 0 simply never occurs
    y_no0 = np.where(y_n == 0, 1, y_n)
    new_no0 = {m: np.where(p == 0, 1, p) for m, p in new.items()}
    new_no0["m0"][0] = 9
    y_no0[0] = 9
    retest.compare(y_o, y_no0, orig, new_no0, n_boot=200, n_classes=10)


def test_missing_onnxruntime_is_one_line_naming_the_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    np.save(tmp_path / "x.npy", np.zeros((2, 4, 4), np.uint8))
    (tmp_path / "m.onnx").write_bytes(b"not really a model")
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails
    res = invoke("models", "predict", "onnx", tmp_path / "m.onnx", "--images",
                 tmp_path / "x.npy", "--num-classes", "2", "--out",
                 tmp_path / "p.json")  # fmt: skip
    assert res.exit_code == 1, (res.stdout, res.stderr, res.exception)
    assert "Traceback" not in res.stderr + res.stdout
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and "pip install 'retest[onnx]'" in errors[0], res.stderr
    from retest.models.onnx_runner import import_onnxruntime

    with pytest.raises(ImportError):  # still an ImportError for `except ImportError`
        import_onnxruntime()
    with pytest.raises(RetestError):
        import_onnxruntime()


def test_dedup_verdict_takes_the_prefix_dedup_queue_prints(project: Path) -> None:
    with Project.open(project) as proj:
        ids = sorted(proj.store.candidates.columns(("id",))["id"])
    short = ids[0][:16]  # as `retest dedup-queue` shows it
    res = invoke("dedup-verdict", short, "l2", "--shown", "test:0", "--who",
                 "Zoë", "--project", project)  # fmt: skip
    assert res.exit_code == 0, (res.stdout, res.stderr)
    with Project.open(project) as proj:
        got = proj.store.neardup.verdicts(candidate_id=ids[0])
    assert [(v.candidate_id, v.ref_id, v.who) for v in got] == [
        (ids[0], "test:0", "Zoë")
    ]
    # a prefix no candidate has is one line naming it, nothing recorded
    refused(project, ["dedup-verdict", "ffffffffffffffff0", "l2", "--shown",
                      "test:0", "--who", "x"], 1, "ffffffffffffffff0")  # fmt: skip


def _results_csv(path: Path, batch: Path, class_name: str | None) -> None:
    rows = list(csv.DictReader(batch.open(encoding="utf-8")))
    fields = ["AssignmentId", "WorkerId", "AssignmentStatus", "Input.task_id",
              "Input.class_name", "Answer.selected"]  # fmt: skip
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for i, r in enumerate(rows):
            w.writerow({
                "AssignmentId": f"A{i}", "WorkerId": f"W{i}",
                "AssignmentStatus": "Submitted", "Input.task_id": r["task_id"],
                "Input.class_name": class_name if i == 0 and class_name is not None
                else r["class_name"],
                "Answer.selected": r["token_0"],
            })  # fmt: skip


def test_crowd_import_rejects_a_row_naming_another_class(
    project: Path, tmp_path: Path
) -> None:
    res = invoke("crowd", "export", "--out", tmp_path / "batch", "--base-url",
                 "https://example.org/b", "--project", project)  # fmt: skip
    assert res.exit_code == 0, res.stderr
    batch = tmp_path / "batch" / "batch_input.csv"
    first = next(csv.DictReader(batch.open(encoding="utf-8")))
    other = next(c for c in ("a", "b", "c") if c != first["class_name"])
    _results_csv(tmp_path / "res.csv", batch, other)
    res = invoke("crowd", "import", tmp_path / "res.csv", "--project", project,
                 "--json")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    out = res.stdout
    assert f"Input.class_name {other!r}" in out and first["task_id"] in out, out
    with Project.open(project) as proj:
        stored = {e.assignment_id for e in proj.store.annotations.list(kind="task")}
    assert "A0" not in stored and "A1" in stored


def test_cluster_takes_a_scheduler_file(tmp_path: Path) -> None:
    from retest.cluster import cluster_client

    with cluster_client(None, 1) as local:
        local.write_scheduler_file(str(tmp_path / "scheduler.json"))
        with cluster_client(str(tmp_path / "scheduler.json")) as client:
            assert client.submit(sum, [1, 2]).result() == 3
    (tmp_path / "bad.json").write_text("not json")
    with pytest.raises(RetestError, match=r"bad\.json"):
        with cluster_client(str(tmp_path / "bad.json")):
            pass


def test_a_seed_in_retest_toml_is_checked_like_seed(project: Path) -> None:
    toml = project / "retest.toml"
    text = toml.read_text(encoding="utf-8")
    assert "\n[seeds]\n" in text
    toml.write_text(text.replace("\n[seeds]\n", f"\n[seeds]\nsample = {2**64}\n"))
    refused(project, ["sample", "--strategy", "class-balanced"], 2, "[seeds] sample")


def test_bootstrap_resamples_are_bounded(tmp_path: Path) -> None:
    # 2**63 resamples tried to allocate tens of GB (found by the CLI fuzz)
    from retest.evaluate.fits import bootstrap_lines

    refused(None, ["compare", "--example", "--out", str(tmp_path / "c"),
                   "--bootstrap", str(2**63 - 1)], 2, "--bootstrap")  # fmt: skip
    with pytest.raises(ConfigError, match="n_boot"):
        bootstrap_lines([0.1, 0.5, 0.9], [0.2, 0.4, 0.8], n_boot=2**31)
