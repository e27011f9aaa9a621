"""Bad inputs to the commands that read labels, scores and models from files.

``retest compare``, ``retest label-errors``, ``retest models predict|list`` and
``retest evaluate --predictions``: every file comes missing, empty, truncated,
of the wrong dtype, out of range, of the wrong length, as a directory or as
non-UTF-8 text; every option value outside its range; every output where no
folder can be made. Each must be one ``error:`` line with the right exit code
and, for ``evaluate``, leave the project byte-identical.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from bad_input_helpers import build_project, case_param, invoke, refused

K = 3  # classes of the testbed
N_ORIG, N_NEW = 40, 30


def _predictions(folder: Path, labels: np.ndarray, seed: int) -> None:
    """Three models' top-1 predictions, right on 90/75/60 % of the items."""
    folder.mkdir()
    rng = np.random.default_rng(seed)
    for m, acc in (("m_a", 0.9), ("m_b", 0.75), ("m_c", 0.6)):
        pred = labels.copy()
        wrong = rng.random(len(labels)) > acc
        pred[wrong] = (pred[wrong] + 1) % K
        np.save(folder / f"{m}.npy", pred)


def _files(d: Path) -> None:
    """Good and damaged inputs of this module, written once per session."""
    lo = np.arange(N_ORIG) % K
    ln = np.arange(N_NEW) % K
    np.save(d / "lo.npy", lo)
    np.save(d / "ln.npy", ln)
    _predictions(d / "po", lo, 1)
    _predictions(d / "pn", ln, 2)
    raw = (d / "lo.npy").read_bytes()
    (d / "empty.npy").write_bytes(b"")
    (d / "trunc.npy").write_bytes(raw[:-8])
    np.save(d / "float.npy", lo + 0.5)
    np.save(d / "strings.npy", np.array(["cat"] * N_ORIG))
    np.save(d / "oor.npy", np.where(lo == 0, 7, lo))
    np.save(d / "neg.npy", lo - 1)
    np.save(d / "short.npy", lo[:-1])
    np.save(d / "two_d.npy", np.stack([lo, lo], axis=1))
    (d / "adir.npy").mkdir()
    (d / "latin1.csv").write_bytes(b"label\n0\n1\ncaf\xe9\n")
    (d / "latin1.json").write_bytes(b"[0, 1, \xe9]")
    (d / "trunc.json").write_text("[0, 1, 2, 0, 1")
    (d / "trunc.csv").write_text('label\n0\n"1\n2\n')
    # prediction folders with one damaged file each
    for name, write in {
        "p_short": lambda f: np.save(f, lo[:-3]),
        "p_float": lambda f: np.save(f, lo + 0.25),
        "p_trunc": lambda f: f.write_bytes(raw[:40]),
        "p_oor": lambda f: np.save(f, np.where(lo == 1, 9, lo)),
    }.items():
        shutil.copytree(d / "po", d / name)
        write(d / name / "m_b.npy")
    (d / "p_empty").mkdir()
    (d / "p_json").mkdir()
    (d / "p_json" / "m_a_predictions.json").write_bytes(b"[0, 1, \xff")
    (d / "p_dirfile").mkdir()
    (d / "p_dirfile" / "m_a.npy").mkdir()
    # label-errors: out-of-sample probabilities
    rng = np.random.default_rng(3)
    pp = rng.dirichlet(np.ones(K), size=N_ORIG).astype(np.float32)
    pp[np.arange(N_ORIG), lo] += 1.0
    pp /= pp.sum(axis=1, keepdims=True)
    np.save(d / "pp.npy", pp)
    np.save(d / "pp_short.npy", pp[:-2])
    np.save(d / "pp_1d.npy", pp[:, 0])
    np.save(d / "pp_strings.npy", pp.astype(str))
    nan = pp.copy()
    nan[3, 1] = np.nan
    np.save(d / "pp_nan.npy", nan)
    np.save(d / "pp_k4.npy", np.concatenate([pp, pp[:, :1]], axis=1) / 2)
    pr = (d / "pp.npy").read_bytes()
    (d / "pp_trunc.npy").write_bytes(pr[: len(pr) // 2])
    np.save(d / "img_float.npy", rng.random((N_ORIG, 8, 8, 3)))
    np.save(d / "img_short.npy", rng.integers(0, 256, (5, 8, 8, 3), np.uint8))
    (d / "afile").write_text("x")
    (d / "names_latin1.csv").write_bytes(
        b"prediction_file_model,paper_name\nm_a,caf\xe9\n"
    )
    (d / "names_trunc.csv").write_text('prediction_file_model,paper_name\nm_a,"x\n')
    (d / "model.joblib").write_bytes(b"")
    (d / "trunc.onnx").write_bytes(b"\x08\x07\x12\x04test")


@pytest.fixture(scope="session")
def d(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bad-input-reports")
    _files(folder)
    return folder


def _args(template: str, d: Path, tmp: Path) -> list[str]:
    return template.replace("{d}", str(d)).replace("{tmp}", str(tmp)).split()


CMP = (
    "compare --out {tmp}/out --bootstrap 50 --labels-orig {d}/lo.npy "
    "--labels-new {d}/ln.npy --predictions-orig {d}/po --predictions-new {d}/pn"
)
LE = "label-errors --out {tmp}/le --labels {d}/lo.npy --pred-probs {d}/pp.npy"

# (id, argv, exit code, words the line must name[, xfail reason])
CASES = [
    # compare: labels
    ("cmp-labels-missing", CMP.replace("{d}/lo.npy", "{d}/nope.npy"), 1, ["nope.npy"]),
    ("cmp-labels-empty", CMP.replace("{d}/lo.npy", "{d}/empty.npy"), 1, ["empty.npy"]),
    ("cmp-labels-truncated", CMP.replace("{d}/lo.npy", "{d}/trunc.npy"), 1,
     ["trunc.npy"]),
    ("cmp-labels-float", CMP.replace("{d}/lo.npy", "{d}/float.npy"), 1, ["float.npy"]),
    ("cmp-labels-strings", CMP.replace("{d}/lo.npy", "{d}/strings.npy"), 1,
     ["strings.npy"]),
    ("cmp-labels-out-of-range", CMP.replace("{d}/lo.npy", "{d}/oor.npy")
     + " --num-classes 3", 1, ["oor.npy", "7"]),
    ("cmp-labels-negative", CMP.replace("{d}/lo.npy", "{d}/neg.npy"), 1, ["neg.npy"]),
    ("cmp-labels-short", CMP.replace("{d}/lo.npy", "{d}/short.npy"), 1, ["39"]),
    ("cmp-labels-2d", CMP.replace("{d}/lo.npy", "{d}/two_d.npy"), 1, ["two_d.npy"]),
    ("cmp-labels-directory", CMP.replace("{d}/lo.npy", "{d}/adir.npy"), 1,
     ["adir.npy"]),
    ("cmp-labels-non-utf8-csv", CMP.replace("{d}/lo.npy", "{d}/latin1.csv"), 1,
     ["latin1.csv"]),
    ("cmp-labels-non-utf8-json", CMP.replace("{d}/lo.npy", "{d}/latin1.json"), 1,
     ["latin1.json"]),
    ("cmp-labels-truncated-json", CMP.replace("{d}/lo.npy", "{d}/trunc.json"), 1,
     ["trunc.json"]),
    ("cmp-labels-truncated-csv", CMP.replace("{d}/lo.npy", "{d}/trunc.csv"), 1,
     ["trunc.csv"]),
    # compare: prediction folders
    ("cmp-pred-missing", CMP.replace("{d}/po", "{d}/nope-po"), 1, ["nope-po"]),
    ("cmp-pred-is-file", CMP.replace("{d}/po", "{d}/lo.npy"), 1, ["lo.npy"]),
    ("cmp-pred-empty-folder", CMP.replace("{d}/po", "{d}/p_empty"), 1, ["p_empty"]),
    ("cmp-pred-short", CMP.replace("{d}/po", "{d}/p_short"), 1, ["m_b"]),
    ("cmp-pred-float", CMP.replace("{d}/po", "{d}/p_float"), 1, ["m_b"]),
    ("cmp-pred-truncated", CMP.replace("{d}/po", "{d}/p_trunc"), 1, ["m_b"]),
    ("cmp-pred-out-of-range", CMP.replace("{d}/po", "{d}/p_oor") + " --num-classes 3",
     1, ["m_b"]),
    ("cmp-pred-non-utf8-json", CMP.replace("{d}/po", "{d}/p_json"), 1, ["m_a"]),
    ("cmp-pred-entry-is-dir", CMP.replace("{d}/po", "{d}/p_dirfile"), 1, ["m_a"]),
    # compare: model names, options, output
    ("cmp-names-missing", CMP + " --model-names {d}/nope.csv", 1, ["nope.csv"]),
    ("cmp-names-non-utf8", CMP + " --model-names {d}/names_latin1.csv", 1,
     ["names_latin1.csv"]),
    ("cmp-names-truncated", CMP + " --model-names {d}/names_trunc.csv", 1,
     ["names_trunc.csv"]),
    ("cmp-names-directory", CMP + " --model-names {d}/adir.npy", 1, ["adir.npy"]),
    ("cmp-metric", CMP + " --metric top7", 2, ["top7"]),
    ("cmp-axes", CMP + " --axes cubic", 2, ["cubic"]),
    ("cmp-confidence", CMP + " --confidence 2", 2, ["confidence"]),
    ("cmp-bootstrap-0", CMP + " --bootstrap 0", 2, ["bootstrap"]),
    ("cmp-num-classes-0", CMP + " --num-classes 0", 2, ["num"]),
    ("cmp-num-classes-text", CMP + " --num-classes three", 2, ["--num-classes"]),
    ("cmp-out-is-file", CMP.replace("{tmp}/out", "{d}/afile"), 2, ["afile"]),
    ("cmp-out-under-file", CMP.replace("{tmp}/out", "{d}/afile/sub"), 2, ["afile"]),
    ("cmp-missing-inputs", "compare --out {tmp}/out", 2, ["--labels-orig"]),
    # label-errors
    ("le-labels-missing", LE.replace("lo.npy", "nope.npy"), 1, ["nope.npy"]),
    ("le-labels-empty", LE.replace("lo.npy", "empty.npy"), 1, ["empty.npy"]),
    ("le-labels-truncated", LE.replace("lo.npy", "trunc.npy"), 1, ["trunc.npy"]),
    ("le-labels-float", LE.replace("lo.npy", "float.npy"), 1, ["float.npy"]),
    ("le-labels-out-of-range", LE.replace("lo.npy", "oor.npy"), 1, ["7"]),
    ("le-labels-short", LE.replace("lo.npy", "short.npy"), 1, ["39"]),
    ("le-labels-directory", LE.replace("lo.npy", "adir.npy"), 1, ["adir.npy"]),
    ("le-labels-non-utf8", LE.replace("lo.npy", "latin1.csv"), 1, ["latin1.csv"]),
    ("le-probs-missing", LE.replace("pp.npy", "nope.npy"), 1, ["nope.npy"]),
    ("le-probs-empty", LE.replace("pp.npy", "empty.npy"), 1, ["empty.npy"]),
    ("le-probs-truncated", LE.replace("pp.npy", "pp_trunc.npy"), 1, ["pp_trunc.npy"]),
    ("le-probs-short", LE.replace("pp.npy", "pp_short.npy"), 1, ["38"]),
    ("le-probs-1d", LE.replace("pp.npy", "pp_1d.npy"), 1, ["pp_1d.npy"]),
    ("le-probs-strings", LE.replace("pp.npy", "pp_strings.npy"), 1,
     ["pp_strings.npy"]),
    ("le-probs-nan", LE.replace("pp.npy", "pp_nan.npy"), 1, ["pp_nan.npy"]),
    ("le-probs-directory", LE.replace("pp.npy", "adir.npy"), 1, ["adir.npy"]),
    ("le-true-labels-short", LE + " --true-labels {d}/short.npy", 1, ["short.npy"]),
    ("le-images-float", LE + " --images {d}/img_float.npy", 1, ["img_float.npy"]),
    ("le-images-short", LE + " --images {d}/img_short.npy", 1, ["img_short.npy"]),
    ("le-images-missing", LE + " --images {d}/nope.npy", 1, ["nope.npy"]),
    ("le-predictions-dir-missing", "label-errors --out {tmp}/le --labels {d}/lo.npy "
     "--predictions-dir {d}/nope-po", 1, ["nope-po"]),
    ("le-predictions-dir-is-file", "label-errors --out {tmp}/le --labels {d}/lo.npy "
     "--predictions-dir {d}/lo.npy", 1, ["lo.npy"]),
    ("le-predictions-dir-short", "label-errors --out {tmp}/le --labels {d}/lo.npy "
     "--predictions-dir {d}/p_short", 1, ["m_b"]),
    ("le-no-scores", "label-errors --out {tmp}/le --labels {d}/lo.npy", 1,
     ["pred_probs", "predictions_dir"]),
    ("le-class-names-count", LE + " --class-names a,b", 1, ["lo.npy", "[0, 2)"]),
    ("le-method", LE + " --method guess", 2, ["guess"]),
    ("le-rank-by", LE + " --rank-by vibes", 2, ["vibes"]),
    ("le-top-0", LE + " --top 0", 2, ["--top"]),
    ("le-out-is-file", LE.replace("{tmp}/le", "{d}/afile"), 2, ["afile"]),
    # models
    ("models-list-preset", "models list --preset huge", 2, ["huge"]),
    ("predict-kind", "models predict sklearnn {d}/model.joblib --images {d}/lo.npy "
     "--out {tmp}/p.npy --num-classes 3", 2, ["sklearnn"]),
    ("predict-model-missing", "models predict sklearn {d}/nope.joblib --images "
     "{d}/lo.npy --out {tmp}/p.npy --num-classes 3", 1, ["nope.joblib"]),
    ("predict-model-empty", "models predict sklearn {d}/model.joblib --images "
     "{d}/lo.npy --out {tmp}/p.npy --num-classes 3", 1, ["model.joblib"]),
    ("predict-model-directory", "models predict sklearn {d}/adir.npy --images "
     "{d}/lo.npy --out {tmp}/p.npy --num-classes 3", 1, ["adir.npy"]),
    ("predict-onnx-truncated", "models predict onnx {d}/trunc.onnx --images "
     "{d}/img_short.npy --out {tmp}/p.npy --num-classes 3", 1, ["trunc.onnx"]),
    ("predict-num-classes-0", "models predict sklearn {d}/model.joblib --images "
     "{d}/lo.npy --out {tmp}/p.npy --num-classes 0", 2, ["--num-classes"]),
    ("predict-out-suffix", "models predict sklearn {d}/model.joblib --images "
     "{d}/lo.npy --out {tmp}/p.txt --num-classes 3", 2, ["p.txt"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("template", "code", "culprits"), [case_param(*c) for c in CASES]
)
def test_refused(
    template: str, code: int, culprits: list[str], d: Path, tmp_path: Path
) -> None:
    refused(None, _args(template, d, tmp_path), code, *culprits)
    assert not (tmp_path / "out").exists() and not (tmp_path / "le").exists()


def test_compare_good_inputs_pass(d: Path, tmp_path: Path) -> None:
    """The inputs the refusals damage are good: the unchanged command succeeds."""
    res = invoke(*_args(CMP + " --json", d, tmp_path))
    assert res.exit_code == 0, (res.stderr, res.exception)
    assert json.loads(res.stdout)
    res = invoke(*_args(LE + " --json", d, tmp_path))
    assert res.exit_code == 0, (res.stderr, res.exception)


# ------------------------------------------------------------------- evaluate


@pytest.fixture(scope="session")
def proj_src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("bad-input-evaluate")
    return build_project(base / "proj", base / "inputs")


@pytest.fixture
def proj(proj_src: Path, tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(proj_src, root)
    return root


EVAL_CASES = [
    ("revision-unknown", "evaluate -r nope --model gaussian-nb", 1, ["nope"]),
    ("model-unknown", "evaluate --model nearest-centroiid", 2, ["nearest-centroiid"]),
    ("preset-unknown", "evaluate --preset huge", 2, ["huge"]),
    ("model-file-missing", "evaluate --model-file {d}/nope.pt", 1, ["nope.pt"]),
    ("model-file-directory", "evaluate --model-file onnx:{d}/adir.npy", 1,
     ["adir.npy"]),
    ("model-file-empty", "evaluate --model-file onnx:{d}/model.joblib", 1,
     ["model.joblib"]),
    ("predictions-no-equals", "evaluate --predictions {d}/po", 2, ["--predictions"]),
    ("predictions-unknown-dataset", "evaluate --predictions nope={d}/po", 2,
     ["nope"]),
    ("predictions-folder-missing", "evaluate --predictions original={d}/nope-po "
     "--predictions r1={d}/pn", 1, ["nope-po"]),
    ("predictions-wrong-length", "evaluate --predictions original={d}/po "
     "--predictions r1={d}/pn -r r1", 1, ["15"]),
    ("figure-format", "evaluate --model gaussian-nb --figure gif", 2, ["gif"]),
    ("metric", "evaluate --model gaussian-nb --metric top7", 2, ["top7"]),
    ("axes", "evaluate --model gaussian-nb --axes cubic", 2, ["cubic"]),
    ("confidence", "evaluate --model gaussian-nb --confidence 1.5", 2,
     ["--confidence"]),
    ("bootstrap-0", "evaluate --model gaussian-nb --bootstrap 0", 2,
     ["--bootstrap"]),
    ("layout", "evaluate --model-file onnx:{d}/trunc.onnx --onnx-layout CHWN", 2,
     ["CHWN"]),
    ("test-split", "evaluate --model gaussian-nb --test-split validation", 2,
     ["--test-split", "validation"]),
    ("train-split", "evaluate --model gaussian-nb --train-split dev", 2,
     ["--train-split", "dev"]),
    ("out-is-file", "evaluate --model gaussian-nb --out {d}/afile", 2,
     ["afile"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("template", "code", "culprits"), [case_param(*c) for c in EVAL_CASES]
)
def test_evaluate_refused(
    template: str,
    code: int,
    culprits: list[str],
    d: Path,
    proj: Path,
    tmp_path: Path,
) -> None:
    refused(proj, _args(template, d, tmp_path), code, *culprits)
