"""Read and write prediction files, label files and testbed directories.

Prediction formats (chosen by suffix):

``.json``
    CIFAR-10.1 style: a list with the predicted class of each image
    (``[3, 8, 8, …]``), or a list of top-k lists (``[[3, 5, 1], …]``, best first).
``.npy``
    Integer arrays: shape (N,) = top-1, shape (N, k) = top-k ids best first
    (ImageNetV2 style, k = 5). Float arrays of shape (N, K) are class scores:
    entries in [0, 1] with every row summing to 1 (±0.02, the error of float16
    storage; such rows are renormalised) are probabilities, a matrix whose rows
    mostly but not all sum to 1 is refused as damaged, anything else is logits;
    the top-5 ids are derived from the scores. The file size must match its
    header exactly (see :mod:`retest.datasets.npy`).
``.csv``
    A header row, then one row per example, in one of three layouts: a column
    ``prediction`` (top-1); columns ``top1, top2, …`` (top-k, best first); or
    columns ``prob_0 … prob_{K-1}`` (probabilities) / ``score_0 … score_{K-1}``
    (probabilities or logits, decided as for ``.npy``). Other columns (e.g. ``id``)
    are ignored.

A testbed directory holds one file per model; ``<model>_predictions.json``,
``<model>.npy`` and ``<model>.csv`` all give the model name ``<model>``. Labels
files are ``.npy`` (1-d ints), ``.json`` (list of ints) or ``.csv`` (column
``label``, or a single column). Every error names the file.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from retest._atomic import atomic_write_bytes
from retest._validation import check_labels, decode_utf8
from retest.datasets.npy import load_npy
from retest.errors import DataIntegrityError, InputValidationError
from retest.records import Predictions

__all__ = [
    "PREDICTION_SUFFIXES",
    "atomic_write_bytes",
    "list_prediction_files",
    "model_name_from_path",
    "read_labels",
    "read_model_names",
    "read_predictions",
    "read_testbed",
    "write_labels",
    "write_predictions",
    "write_testbed",
]

PREDICTION_SUFFIXES = (".json", ".npy", ".csv")
_PROB_ATOL = 1e-3
_STORED_PROB_ATOL = 0.02  # float16 probabilities as published
PathLike = str | os.PathLike[str]


def model_name_from_path(path: PathLike) -> str:
    """``cudaconvnet_predictions.json`` → ``cudaconvnet``; ``resnet50.npy`` → ``resnet50``."""
    stem = Path(path).stem
    return (
        stem[: -len("_predictions")]
        if stem.endswith("_predictions") and stem != "_predictions"
        else stem
    )


# ----------------------------------------------------------------------------- reading


def _raw(path: Path) -> bytes:
    if not path.is_file():
        raise DataIntegrityError(f"{path}: file not found. Check the path.")
    data = path.read_bytes()
    if not data.strip():
        raise DataIntegrityError(
            f"{path}: file is empty; expected predictions/labels. Re-create or re-download it."
        )
    return data


def _load_json(path: Path) -> Any:
    try:
        return json.loads(_raw(path))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DataIntegrityError(
            f"{path}: not valid JSON ({err}); the file is probably truncated or "
            "corrupt. Re-create or re-download it."
        ) from None


def _load_npy(path: Path) -> NDArray[Any]:
    return load_npy(path, what="predictions/labels array")


def _load_csv(path: Path) -> tuple[list[str], NDArray[np.float64]]:
    text = _raw(path).decode("utf-8", errors="replace")
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as err:
        raise DataIntegrityError(
            f"{path}: not a readable CSV file ({' '.join(str(err).split())}); the file "
            "is probably corrupt. Re-create it."
        ) from None
    header, body = [h.strip() for h in rows[0]], [r for r in rows[1:] if r]
    if not body:
        raise DataIntegrityError(f"{path}: CSV has a header but no rows.")
    bad = [i for i, r in enumerate(body) if len(r) != len(header)]
    if bad:
        raise DataIntegrityError(
            f"{path}: CSV row {bad[0] + 2} has {len(body[bad[0]])} fields, expected "
            f"{len(header)}; the file is probably truncated. Re-create it."
        )
    try:
        values = np.array(
            [[float(v) if v.strip() else np.nan for v in r] for r in body]
        )
    except ValueError as err:
        raise InputValidationError(
            f"{path}: CSV values must be numbers ({err})."
        ) from None
    return header, values


def _scores(arr: ArrayLike, model: str, dataset: str, kind: str, k: int) -> Predictions:
    with np.errstate(invalid="ignore"):  # a signalling NaN: refused just below
        s = np.asarray(arr, dtype=np.float64)
    big = np.finfo(np.float32).max
    if s.size and np.isfinite(s).all() and np.abs(s).max() > big:
        row = int(np.flatnonzero((np.abs(s) > big).reshape(s.shape[0], -1).any(1))[0])
        raise InputValidationError(
            f"scores must be finite float32 values; row {row} holds "
            f"{s.reshape(s.shape[0], -1)[row].max():.3g}. The file is probably damaged."
        )
    if kind == "auto":
        kind = _score_kind(s)
    if kind == "probs" and s.ndim == 2 and np.isfinite(s).all():
        sums = s.sum(axis=1, keepdims=True)
        off = np.abs(sums - 1.0) > _PROB_ATOL
        if (
            off.any()
            and (np.abs(sums - 1.0) <= _STORED_PROB_ATOL).all()
            and (s >= 0).all()
        ):
            s = s / sums  # stored at low precision (float16): renormalise, ranks kept
    return Predictions.from_scores(
        model, dataset, s, k=k, probabilities=kind == "probs"
    )


def _score_kind(s: NDArray[np.float64]) -> str:
    """``probs`` or ``logits`` for an unlabeled score matrix (``.npy``, ``score_`` CSV).

    Probabilities: every row sums to 1 within 0.02 (float16 storage is off by up
    to ~1.5 %; negative entries are then an error of the record). A matrix that looks like
    probabilities in most rows but not in all is refused: a damaged row must not
    silently turn the whole file into logits.
    """
    if s.ndim != 2 or s.size == 0 or not np.isfinite(s).all():
        return "probs"  # the record's own checks give the error
    dev = np.abs(s.sum(axis=1) - 1.0)
    near = dev <= _STORED_PROB_ATOL
    if near.all():
        return "probs"  # negative entries are then refused by the record
    if near.mean() > 0.5 and s.shape[1] > 1:
        row = int(np.flatnonzero(~near)[0])
        raise InputValidationError(
            f"scores look like probabilities ({int(near.sum())} of {s.shape[0]} rows "
            f"sum to 1) but row {row} sums to {s[row].sum():.4f}; the file is "
            "probably damaged. Re-create it."
        )
    return "logits"


def _csv_predictions(
    header: list[str], values: NDArray[np.float64], model: str, dataset: str, k: int
) -> Predictions:
    col = {h: i for i, h in enumerate(header)}
    if "prediction" in col:
        return Predictions.from_labels(model, dataset, values[:, col["prediction"]])
    tops = [f"top{i}" for i in range(1, len(header) + 1) if f"top{i}" in col]
    if tops:
        ids: Any = values[:, [col[t] for t in tops]]  # validated to ints by the record
        return Predictions(model, dataset, ids)
    for prefix, kind in (("prob_", "probs"), ("score_", "auto")):
        n = sum(1 for h in header if h.startswith(prefix))
        if n:
            cols = [f"{prefix}{j}" for j in range(n)]
            if any(c not in col for c in cols):
                raise InputValidationError(
                    f"columns {prefix}0 … {prefix}{n - 1} must all be present."
                )
            return _scores(values[:, [col[c] for c in cols]], model, dataset, kind, k)
    raise InputValidationError(
        "CSV needs a column 'prediction', columns 'top1', 'top2', … or columns "
        f"'prob_0', … / 'score_0', …. Found columns {header}."
    )


def _array_predictions(
    arr: NDArray[Any], model: str, dataset: str, k: int
) -> Predictions:
    if arr.dtype.kind in "iub" or arr.ndim == 1:
        return Predictions(model, dataset, arr)
    if arr.dtype.kind == "f" and arr.ndim == 2:
        return _scores(arr, model, dataset, "auto", k)
    raise InputValidationError(
        f"expected an int array (N,) / (N, k) or a float score matrix (N, K). "
        f"Got {arr.dtype} {arr.shape}."
    )


def read_predictions(
    path: PathLike,
    *,
    model: str | None = None,
    dataset: str = "",
    n_classes: int | None = None,
    k: int = 5,
) -> Predictions:
    """Read one model's predictions from a ``.json``, ``.npy`` or ``.csv`` file.

    Parameters
    ----------
    path : path-like
        The file; the format follows the suffix (see the module docstring).
    model : str, optional
        Model name; default from the file name (:func:`model_name_from_path`).
    dataset : str
        Name of the test set the predictions are on.
    n_classes : int, optional
        If given, every class id must lie in ``[0, n_classes)``.
    k : int
        How many top classes to keep when the file holds a score matrix.

    Raises
    ------
    DataIntegrityError
        Missing, empty, truncated or corrupt file.
    InputValidationError
        Valid file with invalid content (repeated class in a row, NaN, negative
        probabilities, out-of-range ids ...); the message names the file.
    """
    p = Path(path)
    name = model or model_name_from_path(p)
    ds = dataset or p.parent.name
    suffix = p.suffix.lower()
    try:
        if suffix == ".json":
            pred = _json_predictions(_load_json(p), name, ds)
        elif suffix == ".npy":
            pred = _array_predictions(_load_npy(p), name, ds, k)
        elif suffix == ".csv":
            pred = _csv_predictions(*_load_csv(p), name, ds, k)
        else:
            raise InputValidationError(
                f"unknown predictions format {suffix!r}; use one of {PREDICTION_SUFFIXES}."
            )
        if n_classes is not None:
            pred = _with_classes(pred, n_classes)
    except InputValidationError as err:
        if str(err).startswith(str(p)):
            raise
        raise InputValidationError(f"{p}: {err}") from None
    return pred


def _json_predictions(obj: Any, model: str, dataset: str) -> Predictions:
    if not isinstance(obj, list) or not obj:
        raise InputValidationError(
            f"expected a non-empty JSON list of predicted classes. Got {type(obj).__name__}"
            + (" (empty)" if isinstance(obj, list) else "")
            + "."
        )
    if isinstance(obj[0], list):
        lengths = {len(r) for r in obj if isinstance(r, list)}
        if len(lengths) != 1 or not all(isinstance(r, list) for r in obj):
            raise InputValidationError(
                "top-k rows must all be lists of the same length."
            )
    try:
        arr = np.asarray(obj)
    except ValueError as err:
        raise InputValidationError(
            f"not a rectangular list of class ids ({err})."
        ) from None
    if arr.dtype.kind not in "iub":
        if arr.dtype.kind == "f":
            arr = np.asarray(obj, dtype=np.float64)
        else:
            raise InputValidationError(f"class ids must be integers. Got {arr.dtype}.")
    return Predictions(model, dataset, arr)


def _with_classes(pred: Predictions, n_classes: int) -> Predictions:
    return Predictions(
        pred.model, pred.dataset, pred.topk, probs=pred.probs, n_classes=n_classes
    )


def read_model_names(path: PathLike) -> dict[str, str]:
    """Read a ``prediction_file_model,paper_name`` CSV; empty names keep the file name."""
    p = Path(path)
    text = decode_utf8(
        _raw(p),
        f"model-names CSV {p}",
        "save it as UTF-8 (e.g. `iconv -f latin1 -t utf-8`).",
    )
    # strict: an unclosed quote is an error, not a name swallowing the rest of the file
    reader = csv.reader(io.StringIO(text), strict=True)
    records: list[tuple[int, list[str]]] = []
    try:
        for r in reader:
            records.append((reader.line_num, r))
    except csv.Error as err:
        start = records[-1][0] + 1 if records else 1
        raise InputValidationError(
            f"{p}: line {start}: not valid CSV ({err}); a quoted name must close its "
            'quote on the same line (e.g. m_a,"Model A").'
        ) from None
    if not records:
        raise InputValidationError(
            f"{p} is empty; expected a CSV with the header "
            "prediction_file_model,paper_name and one model per line."
        )
    for line, r in records:
        if any("\n" in f or "\r" in f for f in r):
            raise InputValidationError(
                f"{p}: line {line}: a quoted field spans lines (an unclosed quote?); "
                'close the quote on the same line (e.g. m_a,"Model A").'
            )
    header = records[0][1]
    rows = [r for _, r in records[1:]]
    want = ["prediction_file_model", "paper_name"]
    if [h.strip() for h in header[:2]] != want:
        raise InputValidationError(
            f"{p}: model-name CSV must start with the header {','.join(want)}. "
            f"Got {','.join(header)}."
        )
    out: dict[str, str] = {}
    for i, r in enumerate(rows, start=2):
        if not r or not r[0].strip():
            continue
        src = r[0].strip()
        if src in out:
            raise InputValidationError(f"{p}: line {i}: model {src!r} is listed twice.")
        out[src] = r[1].strip() if len(r) > 1 and r[1].strip() else src
    return out


def list_prediction_files(
    directory: PathLike, *, model_names: Mapping[str, str] | None = None
) -> dict[str, Path]:
    """Map model name → prediction file for every supported file in ``directory``.

    Raises
    ------
    DataIntegrityError
        The folder is missing or holds no prediction files.
    InputValidationError
        Two files give the same model name (after ``model_names`` renaming).
    """
    d = Path(directory)
    if not d.is_dir():
        raise DataIntegrityError(f"{d}: predictions folder not found. Check the path.")
    _refuse_project_cache(d)
    candidates = sorted(
        f
        for f in d.iterdir()
        if f.suffix.lower() in PREDICTION_SUFFIXES and not f.name.startswith(".")
    )
    for f in candidates:
        # Neither may silently drop a model from the comparison.
        if not f.is_file():
            raise InputValidationError(
                f"{f} is {'a directory' if f.is_dir() else 'not a regular file'}, "
                "not a prediction file; remove or rename it."
            )
        try:
            f.name.encode("utf-8")
        except UnicodeEncodeError:
            shown = os.fsencode(f.name).decode("utf-8", "backslashreplace")
            raise InputValidationError(
                f"{d}: file name {shown!r} is not valid UTF-8, so it cannot name a "
                "model; rename the file."
            ) from None
    files = candidates
    if not files:
        raise DataIntegrityError(
            f"{d}: no prediction files (*.json, *.npy, *.csv) in this folder."
        )
    out: dict[str, Path] = {}
    for f in files:
        name = model_name_from_path(f)
        name = (model_names or {}).get(name, name)
        if name in out:
            raise InputValidationError(
                f"duplicate model name {name!r}: both {out[name]} and {f} give it. "
                "Remove or rename one of the files (or fix the model-name mapping)."
            )
        out[name] = f
    return out


def _refuse_project_cache(d: Path) -> None:
    """A project's ``arrays/`` (its prediction cache ``arrays/predictions``
    included) holds files named by hashes, not one prediction file per model:
    reading it would fail on the first file with a message about its contents."""
    from retest._output import project_of

    target = d.resolve()
    root = project_of(target)
    if root is None or target.relative_to(root).parts[:1] != ("arrays",):
        return
    raise InputValidationError(
        f"{d} is inside the project's arrays/ ({root}), which holds its pixels "
        "and the prediction cache of `retest evaluate` (files named by hashes), "
        "not one prediction file per model. Audit a revision's labels with those predictions by "
        "`retest label-errors --revision REV` (or --revision original); `retest "
        "evaluate` writes the project's comparison itself."
    )


def read_testbed(
    directory: PathLike,
    *,
    dataset: str = "",
    model_names: Mapping[str, str] | None = None,
    n_classes: int | None = None,
    k: int = 5,
) -> dict[str, Predictions]:
    """Read every prediction file in ``directory`` into ``{model: Predictions}``.

    Parameters
    ----------
    directory : path-like
        A folder with one ``.json``, ``.npy`` or ``.csv`` file per model (the
        CIFAR-10.1 and ImageNetV2 layouts; see the module docstring).
    dataset : str
        Name of the test set; default the folder name.
    model_names : mapping of str to str, optional
        Renames models (file-derived name → display name).
    n_classes : int, optional
        If given, every class id must lie in ``[0, n_classes)``.
    k : int
        Top classes kept from score matrices.

    Returns
    -------
    dict of str to Predictions
        One entry per file, sorted by file name.

    Raises
    ------
    DataIntegrityError
        The folder is missing, holds no prediction files, or a file is damaged.
    InputValidationError
        Invalid file content, or two files giving the same model name.

    Examples
    --------
    >>> from retest import Predictions, read_testbed
    >>> from retest.datasets.predictions import write_testbed
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = write_testbed({"a": Predictions.from_labels("a", "t", [0, 1]),
    ...                        "b": Predictions.from_labels("b", "t", [1, 1])}, d)
    ...     testbed = read_testbed(d)
    >>> {m: p.top1.tolist() for m, p in testbed.items()}
    {'a': [0, 1], 'b': [1, 1]}
    """
    files = list_prediction_files(directory, model_names=model_names)
    ds = dataset or Path(directory).name
    return {
        m: read_predictions(f, model=m, dataset=ds, n_classes=n_classes, k=k)
        for m, f in files.items()
    }


def read_labels(path: PathLike, *, n_classes: int | None = None) -> NDArray[np.int64]:
    """Read class labels from ``.npy`` (1-d ints), ``.json`` (list) or ``.csv``.

    Parameters
    ----------
    path : path-like
        The labels file; a ``.csv`` needs a column ``label`` or a single column.
    n_classes : int, optional
        If given, every label must lie in ``[0, n_classes)``.

    Returns
    -------
    ndarray of int64, shape (n,)

    Raises
    ------
    InputValidationError
        An unknown suffix, or labels that are not whole numbers in range (the
        message names the file).
    DataIntegrityError
        A missing, empty or damaged file.

    Examples
    --------
    >>> from retest import read_labels
    >>> import tempfile
    >>> from pathlib import Path
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = Path(d, "labels.csv").write_text("id,label\\n7,2\\n8,0\\n")
    ...     read_labels(Path(d, "labels.csv")).tolist()
    [2, 0]
    """
    p = Path(path)
    suffix = p.suffix.lower()
    loaders: dict[str, Callable[[Path], Any]] = {
        ".npy": _load_npy,
        ".json": _load_json,
        ".csv": _csv_labels,
    }
    if suffix not in loaders:
        raise InputValidationError(
            f"{p}: unknown labels format {suffix!r}; use .npy, .json or .csv."
        )
    raw = loaders[suffix](p)
    try:
        return check_labels(np.asarray(raw), n_classes=n_classes, name=f"labels in {p}")
    except ValueError as err:
        raise InputValidationError(f"{p}: {err}") from None


def _csv_labels(p: Path) -> NDArray[np.float64]:
    header, values = _load_csv(p)
    if "label" in header:
        return values[:, header.index("label")]
    if values.shape[1] == 1:
        return values[:, 0]
    raise InputValidationError(f"{p}: labels CSV needs a column 'label'. Got {header}.")


# ----------------------------------------------------------------------------- writing


def _npy_bytes(arr: NDArray[Any]) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()


def write_predictions(pred: Predictions, path: PathLike) -> Path:
    """Write ``pred`` atomically in the format of the suffix (see the module docstring).

    ``.json`` and ``.csv`` store the top-k ids (or, for ``.csv`` with scores, the
    ``prob_``/``score_`` columns); ``.npy`` stores the score matrix when there is
    one, else the ids (1-d for top-1).
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".json":
        obj: Any = pred.top1.tolist() if pred.k == 1 else pred.topk.tolist()
        return atomic_write_bytes(p, json.dumps(obj).encode())
    if suffix == ".npy":
        if pred.probs is not None:
            return atomic_write_bytes(p, _npy_bytes(np.asarray(pred.probs)))
        arr = pred.top1 if pred.k == 1 else pred.topk
        return atomic_write_bytes(p, _npy_bytes(np.ascontiguousarray(arr)))
    if suffix == ".csv":
        return atomic_write_bytes(p, _csv_bytes(pred))
    raise InputValidationError(
        f"{p}: unknown predictions format {suffix!r}; use one of {PREDICTION_SUFFIXES}."
    )


def _csv_bytes(pred: Predictions) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    if pred.probs is not None:
        probs = np.asarray(pred.probs, dtype=np.float64)
        is_prob = bool(
            (probs >= 0).all() and np.allclose(probs.sum(1), 1, atol=_PROB_ATOL)
        )
        prefix = "prob_" if is_prob else "score_"
        w.writerow([f"{prefix}{j}" for j in range(probs.shape[1])])
        w.writerows([[repr(float(v)) for v in row] for row in probs])
    elif pred.k == 1:
        w.writerow(["prediction"])
        w.writerows([[int(v)] for v in pred.top1])
    else:
        w.writerow([f"top{i + 1}" for i in range(pred.k)])
        w.writerows(pred.topk.tolist())
    return buf.getvalue().encode()


_TESTBED_NAMES = {".json": "{m}_predictions.json", ".npy": "{m}.npy", ".csv": "{m}.csv"}


def write_testbed(
    testbed: Mapping[str, Predictions], directory: PathLike, *, fmt: str = "json"
) -> dict[str, Path]:
    """Write one file per model: ``<m>_predictions.json``, ``<m>.npy`` or ``<m>.csv``."""
    suffix = "." + fmt.lstrip(".").lower()
    if suffix not in _TESTBED_NAMES:
        raise InputValidationError(
            f"unknown testbed format {fmt!r}; use json, npy or csv."
        )
    d = Path(directory)
    return {
        m: write_predictions(p, d / _TESTBED_NAMES[suffix].format(m=m))
        for m, p in testbed.items()
    }


def write_labels(labels: ArrayLike, path: PathLike) -> Path:
    """Write labels atomically as ``.npy`` (int64), ``.json`` or ``.csv`` (column ``label``)."""
    p = Path(path)
    y = check_labels(labels, name=f"labels for {p}")
    suffix = p.suffix.lower()
    if suffix == ".npy":
        return atomic_write_bytes(p, _npy_bytes(y))
    if suffix == ".json":
        return atomic_write_bytes(p, json.dumps(y.tolist()).encode())
    if suffix == ".csv":
        return atomic_write_bytes(
            p, ("label\n" + "\n".join(map(str, y.tolist())) + "\n").encode()
        )
    raise InputValidationError(
        f"{p}: unknown labels format {suffix!r}; use .npy, .json or .csv."
    )
