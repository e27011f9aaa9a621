"""Shared input checks with scikit-learn style messages.

Each check names the offending input (``name``), says what was expected and what
was found, and raises :class:`~retest.errors.InputValidationError` or
:class:`~retest.errors.ConfigError`.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from retest.errors import ConfigError, InputValidationError

__all__ = [
    "MAX_BOOTSTRAP",
    "MAX_SEED",
    "check_applies",
    "check_batch_size",
    "check_choice",
    "check_class_names",
    "check_cluster_address",
    "check_fraction",
    "check_image_batch",
    "check_input_path",
    "check_labels",
    "check_n_boot",
    "check_not_shifted",
    "check_output_dir",
    "check_port",
    "check_pred_probs",
    "check_random_state",
    "check_seed",
    "check_topk",
    "check_writable",
    "decode_utf8",
    "fmt_count",
    "looks_one_based",
    "one_based_message",
]

RandomStateLike = int | np.random.Generator | np.random.SeedSequence | None
#: Class ids at or above this are refused when the class count is unknown: no
#: dataset has 16 million classes, but float bits read as integers look like this.
MAX_CLASS_ID = 1 << 24
#: The largest seed: SQLite stores a revision's seed as a signed 64-bit integer.
MAX_SEED = 2**63 - 1


def _integer(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ConfigError(f"{name} must be an integer. Got {describe(value)}.")
    return int(value)


def check_seed(seed: Any, name: str = "seed") -> int:
    """A seed every consumer accepts: an integer in ``[0, 2**63)``.

    numpy takes any non-negative integer, but a seed is stored with what it drew
    (SQLite: signed 64 bits), so the range is the narrower of the two.

    >>> check_seed(42)
    42
    >>> check_seed(2**63, "--seed")
    Traceback (most recent call last):
    ...
    retest.errors.ConfigError: --seed must be an integer in [0, 2**63 - 1]. Got 9223372036854775808.
    """
    v = _integer(seed, name)
    if not 0 <= v <= MAX_SEED:
        raise ConfigError(f"{name} must be an integer in [0, 2**63 - 1]. Got {v}.")
    return v


#: The most bootstrap resamples a fit takes: 100 times the default, about 0.5 GB
#: of resampled lines; 2**31 would need tens of GB and never finish.
MAX_BOOTSTRAP = 10_000_000


def check_n_boot(n_boot: Any, name: str = "n_boot") -> int:
    """Bootstrap resamples: an integer in ``[1, MAX_BOOTSTRAP]``.

    >>> check_n_boot(100_000)
    100000
    >>> check_n_boot(2**31, "--bootstrap")
    Traceback (most recent call last):
    ...
    retest.errors.ConfigError: --bootstrap must be an integer in [1, 10,000,000] (resamples of the fit). Got 2147483648.
    """
    v = _integer(n_boot, name)
    if not 1 <= v <= MAX_BOOTSTRAP:
        raise ConfigError(
            f"{name} must be an integer in [1, {MAX_BOOTSTRAP:,}] (resamples of the "
            f"fit). Got {v}."
        )
    return v


def check_port(port: Any, name: str = "port") -> int:
    """A TCP port to listen on or connect to: an integer in ``[1, 65535]``.

    >>> check_port(8000)
    8000
    >>> check_port(99999, "--port")
    Traceback (most recent call last):
    ...
    retest.errors.ConfigError: --port must be a TCP port in [1, 65535]. Got 99999.
    """
    v = _integer(port, name)
    if not 1 <= v <= 65535:
        raise ConfigError(f"{name} must be a TCP port in [1, 65535]. Got {v}.")
    return v


def check_batch_size(batch_size: Any, name: str = "batch_size") -> int | None:
    """``None`` (the runner's default) or a whole number of images >= 1.

    >>> check_batch_size(64)
    64
    >>> check_batch_size(0, "--batch-size")
    Traceback (most recent call last):
    ...
    retest.errors.ConfigError: --batch-size must be an integer >= 1 (images per batch). Got 0.
    """
    if batch_size is None:
        return None
    v = _integer(batch_size, name)
    if v < 1:
        raise ConfigError(
            f"{name} must be an integer >= 1 (images per batch). Got {v}."
        )
    return v


_ADDRESS = re.compile(r"(?:(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://)?(?P<rest>.*)")
_HOST = re.compile(r"\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+")


def check_cluster_address(address: Any, name: str = "cluster") -> str:
    """A Dask scheduler: ``tcp://host:port`` (``tls://`` too; no scheme means tcp)
    or the path of an existing scheduler file (``dask scheduler --scheduler-file``).

    Returned unchanged; :func:`retest.cluster._dask.cluster_client` tells the
    two apart by whether the path is a file.

    >>> check_cluster_address("tcp://10.0.0.5:8786")
    'tcp://10.0.0.5:8786'
    >>> check_cluster_address("notaurl", "--cluster")
    Traceback (most recent call last):
    ...
    retest.errors.ConfigError: --cluster 'notaurl' is not a Dask scheduler address: ...
    """
    if not isinstance(address, str):
        raise ConfigError(
            f"{name} must be a scheduler address string. Got {describe(address)}."
        )
    want = (
        "expected tcp://HOST:PORT (e.g. tcp://10.0.0.5:8786, as `dask scheduler` "
        "prints) or an existing scheduler file"
    )
    if address.strip() and Path(address).is_file():
        return address
    m = _ADDRESS.fullmatch(address)
    scheme = (m.group("scheme") or "tcp").lower() if m else ""
    host, sep, port = (m.group("rest") if m else "").rpartition(":")
    why = None
    if scheme not in ("tcp", "tls"):
        why = f"scheme {scheme + '://' if scheme else '(none)'} is not tcp:// or tls://"
    elif not sep or not _HOST.fullmatch(host):
        why = "no HOST:PORT"
    elif not port.isascii() or not port.isdigit():
        why = f"port {port!r} is not a number"
    elif not 1 <= int(port) <= 65535:
        why = f"port {port} is outside [1, 65535]"
    if why is not None:
        raise ConfigError(
            f"{name} {describe(address)} is not a Dask scheduler address: {why}; "
            f"{want}."
        )
    return address


def renamed_keyword(new: Any, old: Any, *, new_name: str, old_name: str) -> Any:
    """The value of a keyword renamed from ``old_name`` to ``new_name``.

    The old, documented name keeps working with a :class:`DeprecationWarning`;
    both at once is a :class:`~retest.errors.ConfigError`. ``None`` is "not given".

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     renamed_keyword(None, 64, new_name="chunk_rows", old_name="chunk_size")
    64
    >>> str(caught[0].message)
    'chunk_size is deprecated: pass chunk_rows (the same value).'
    """
    if old is None:
        return new
    if new is not None:
        raise ConfigError(
            f"pass {new_name} only ({old_name} is its deprecated name). Got both "
            f"{new_name}={new!r} and {old_name}={old!r}."
        )
    warnings.warn(
        f"{old_name} is deprecated: pass {new_name} (the same value).",
        DeprecationWarning,
        stacklevel=3,
    )
    return old


def check_choice(value: Any, choices: Sequence[str], name: str) -> str:
    """``value`` is one of ``choices`` (exact spelling).

    >>> check_choice("NHWC", ("NCHW", "NHWC", "flat"), "--onnx-layout")
    'NHWC'
    >>> check_choice("XYZ", ("NCHW", "NHWC", "flat"), "--onnx-layout")
    Traceback (most recent call last):
    ...
    retest.errors.ConfigError: --onnx-layout must be one of NCHW, NHWC, flat. Got 'XYZ'.
    """
    if value not in choices:
        raise ConfigError(
            f"{name} must be one of {', '.join(choices)}. Got {describe(value)}."
        )
    return str(value)


def check_applies(name: str, subject: str, present: bool) -> None:
    """Refuse an option that only modifies ``subject`` when no such subject is given,
    instead of silently ignoring it.

    >>> check_applies("--onnx-layout", "an ONNX model file", True)
    >>> check_applies("--onnx-layout", "an ONNX model file", False)
    Traceback (most recent call last):
    ...
    retest.errors.ConfigError: --onnx-layout applies to an ONNX model file, and none is given; drop the option or add one.
    """
    if not present:
        raise ConfigError(
            f"{name} applies to {subject}, and none is given; drop the option or "
            "add one."
        )


def check_class_names(names: Any, name: str = "class names") -> tuple[str, ...]:
    """At least two class names, each allowed by
    :func:`retest.names.validate_class_name`, none repeated.

    >>> check_class_names(["cat", "dog"])
    ('cat', 'dog')
    >>> check_class_names(["cat", "dog", "cat"], "--class-names")
    Traceback (most recent call last):
    ...
    retest.errors.ConfigError: --class-names repeat 'cat'; every class needs its own name.
    """
    from retest.names import validate_class_name

    if isinstance(names, str) or not isinstance(names, (list, tuple)):
        raise ConfigError(
            f"{name} must be a list of class names. Got {describe(names)}."
        )
    if len(names) < 2:
        raise ConfigError(
            f"{name} must name at least 2 classes. Got {len(names)}: "
            f"{describe(list(names))}."
        )
    for n in names:
        try:
            validate_class_name(n)
        except InputValidationError as err:
            raise ConfigError(f"{name}: {err}") from None
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise ConfigError(f"{name} repeat {n!r}; every class needs its own name.")
        seen.add(n)
    return tuple(names)


def check_random_state(random_state: RandomStateLike) -> np.random.Generator:
    """Normalise a seed / Generator / SeedSequence into a ``numpy.random.Generator``.

    ``None`` is refused on purpose: every random choice in retest takes a seed.
    """
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(
        random_state, (int, np.integer, np.random.SeedSequence)
    ) and not isinstance(random_state, bool):
        if isinstance(random_state, (int, np.integer)):
            return np.random.default_rng(check_seed(random_state, "random_state"))
        return np.random.default_rng(random_state)
    raise ConfigError(
        "random_state must be an int seed, a numpy.random.Generator or a SeedSequence. "
        f"Got {random_state!r} instead."
    )


def check_fraction(
    value: float,
    name: str,
    *,
    low: float = 0.0,
    high: float = 1.0,
    closed: str = "both",
) -> float:
    """Check ``low <= value <= high`` (bounds open as ``closed`` says)."""
    v = float(value)
    lo_ok = v >= low if closed in ("both", "left") else v > low
    hi_ok = v <= high if closed in ("both", "right") else v < high
    if not (lo_ok and hi_ok) or np.isnan(v):
        lb = "[" if closed in ("both", "left") else "("
        rb = "]" if closed in ("both", "right") else ")"
        raise ConfigError(
            f"{name} must be in {lb}{low}, {high}{rb}. Got {value!r} instead."
        )
    return v


def looks_one_based(labels: NDArray[np.int64], n_classes: int) -> bool:
    """True when integer labels run 1..K instead of 0..K-1 (never 0, max == K).

    >>> looks_one_based(np.array([1, 3, 10]), 10), looks_one_based(np.array([0, 10]), 10)
    (True, False)
    """
    return (
        bool(labels.size) and int(labels.min()) >= 1 and int(labels.max()) == n_classes
    )


def one_based_message(name: str, n_classes: int) -> str:
    """The refusal for a label set that looks 1-based (one line, says what to do)."""
    return (
        f"{name} look 1-based (min 1, max {n_classes} for {n_classes} classes numbered "
        f"0..{n_classes - 1}); subtract 1 from every label."
    )


def check_not_shifted(
    labels: NDArray[np.int64],
    max_predicted: int,
    name: str,
    *,
    hint: str = " If class 0 really never occurs, pass n_classes.",
) -> None:
    """Refuse labels numbered 1..K against predictions numbered 0..K-1.

    When K is not given it is inferred from the labels, so 1-based labels pass
    every range check and give each model a near-zero accuracy. The tell: class 0
    never occurs among the labels and the largest label is one more than the
    largest predicted class. Call it only when the class count was not given.

    >>> check_not_shifted(np.array([0, 1, 2]), 2, "labels")
    >>> check_not_shifted(np.array([1, 2, 3]), 2, "labels")
    Traceback (most recent call last):
    ...
    retest.errors.InputValidationError: labels look 1-based (min 1, max 3 for 3 classes numbered 0..2); subtract 1 from every label (the predictions use classes 0..2). ...
    """
    y = np.asarray(labels)
    if max_predicted < 0 or y.size == 0 or y.dtype.kind not in "iu":
        return
    if int(y.min()) < 1 or int(y.max()) != max_predicted + 1:
        return
    raise InputValidationError(
        one_based_message(name, max_predicted + 1)[:-1]
        + f" (the predictions use classes 0..{max_predicted}).{hint}"
    )


def check_labels(
    labels: ArrayLike, *, n_classes: int | None = None, name: str = "labels"
) -> NDArray[np.int64]:
    """Return labels as a 1-d int64 array in ``[0, n_classes)``.

    The one label check every loader and command uses, so a float label is never
    truncated (9.5 would silently become class 9): floats are accepted only when
    every value is a whole number, and a set that looks 1-based (min 1, max ==
    ``n_classes``) is refused with that diagnosis rather than a bare range error.
    """
    try:
        arr = np.asarray(labels)
    except (ValueError, TypeError) as err:
        raise InputValidationError(
            f"{name} must be a flat list of integer class ids ({err})."
        ) from None
    if arr.ndim != 1:
        raise InputValidationError(
            f"{name} must be 1-dimensional. Got shape {arr.shape}."
        )
    if arr.size == 0:
        raise InputValidationError(f"{name} is empty; expected at least one label.")
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr) | (arr != np.round(arr))
        if bad.any():
            raise InputValidationError(
                f"{name} must hold integer class ids. Got non-integer values such as "
                f"{arr[bad][:3].tolist()} ({int(bad.sum())} of {arr.size}); a float "
                "label is never rounded."
            )
        if np.abs(arr).max() > 2**62:
            raise InputValidationError(
                f"{name} must be class ids. Got a value of {np.abs(arr).max():.3g}."
            )
    elif arr.dtype.kind == "u" and arr.dtype.itemsize == 8 and arr.max() > 2**62:
        raise InputValidationError(
            f"{name} must be class ids. Got a value of {int(arr.max())}."
        )
    elif arr.dtype.kind not in "iub":
        raise InputValidationError(
            f"{name} must hold integer class ids. Got dtype {arr.dtype}."
        )
    out = arr.astype(np.int64)
    lo, hi = int(out.min()), int(out.max())
    if n_classes is not None and hi >= n_classes and looks_one_based(out, n_classes):
        raise InputValidationError(one_based_message(name, n_classes))
    if n_classes is None and hi >= MAX_CLASS_ID:
        raise InputValidationError(
            f"{name} hold class id {hi}, far beyond any class count (limit "
            f"{MAX_CLASS_ID:,}); the file is probably damaged or not a labels file."
        )
    if lo < 0 or (n_classes is not None and hi >= n_classes):
        bad_ids = out[
            (out < 0) | (out >= n_classes if n_classes is not None else False)
        ]
        want = (
            f"class ids in [0, {n_classes})"
            if n_classes is not None
            else "non-negative class ids"
        )
        raise InputValidationError(
            f"{name} must be {want}. Got values "
            f"{np.unique(bad_ids)[:5].tolist()} (min {lo}, max {hi})."
        )
    return out


def check_input_path(
    path: str | os.PathLike[str], what: str, *, kind: str | None = None
) -> Path:
    """An input the user named exists (as a file or a folder when ``kind`` says).

    Checked before a project is touched, so a typo is one line naming the path
    instead of an error deep inside a reader that names some other file.
    """
    p = Path(path)
    if not p.exists():
        raise InputValidationError(
            f"{what} {p} does not exist. Check the path (relative paths start at "
            "the current folder)."
        )
    if kind == "file" and not p.is_file():
        found = "a directory" if p.is_dir() else "not a regular file"
        raise InputValidationError(
            f"{what} {p} is {found}; a file is expected. Pass the file itself."
        )
    if kind == "dir" and not p.is_dir():
        raise InputValidationError(
            f"{what} {p} is a file; a folder is expected. Pass the folder holding it."
        )
    return p


def decode_utf8(
    data: bytes,
    what: str,
    advice: str,
    *,
    error: type[InputValidationError | ConfigError] = InputValidationError,
) -> str:
    r"""``data`` as UTF-8 text (a leading byte-order mark dropped), else one
    :class:`InputValidationError` (``error``: a settings file's is a
    :class:`ConfigError`): ``what`` (the file as the user knows it) is not UTF-8,
    where the first bad byte is, then ``advice``. Every reader of a text file a
    user hands over decodes through here.

    >>> decode_utf8("\ufeffcat".encode(), "f.txt", "save it as UTF-8.")
    'cat'
    >>> decode_utf8(b"ok\nTr\xe8s", "keywords file k.txt", "save it as UTF-8.")
    Traceback (most recent call last):
    ...
    retest.errors.InputValidationError: keywords file k.txt is not UTF-8 text (byte 0xe8 on line 2); save it as UTF-8.
    """
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise error(
            f"{what} is not UTF-8 text (byte 0x{data[err.start]:02x} on line "
            f"{line}); {advice}"
        ) from None


def check_output_dir(path: str | os.PathLike[str], option: str = "--out") -> Path:
    """An output folder that exists as a folder or can be created.

    Checked before any work starts, so a typo in ``--out`` costs nothing and is
    reported as one line naming the path instead of an OS traceback at the end.
    """
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ConfigError(
            f"{option} {p} is a file, not a folder; pass a folder (it is created when "
            "missing)."
        )
    blocker = next((q for q in p.absolute().parents if q.exists()), None)
    if blocker is not None and not blocker.is_dir():
        raise ConfigError(
            f"{option} {p}: {blocker} is a file, so the folder cannot be created; "
            "pass another folder."
        )
    check_writable(p, option)
    return p


def check_writable(path: str | os.PathLike[str], option: str = "--out") -> Path:
    """The folder an output goes to (``path`` itself or the nearest existing parent)
    can be written, so a read-only place fails before any work, naming the option."""
    p = Path(path)
    here = next((q for q in (p.absolute(), *p.absolute().parents) if q.exists()), None)
    if here is not None and here.is_dir() and not os.access(here, os.W_OK | os.X_OK):
        raise InputValidationError(
            f"{option} {p}: the folder {here} is not writable. Choose another "
            f"{option} or make it writable (chmod u+w)."
        )
    return p


def check_pred_probs(
    pred_probs: ArrayLike,
    *,
    n_samples: int | None = None,
    name: str = "pred_probs",
    require_normalized: bool = False,
    atol: float = 1e-3,
) -> NDArray[np.float32]:
    """Return an (n, K) float32 matrix of scores without NaN (and rows summing to 1 if asked)."""
    arr = np.asarray(pred_probs)
    if arr.ndim != 2:
        raise InputValidationError(
            f"{name} must have shape (n_samples, n_classes). Got {arr.shape}."
        )
    if arr.dtype.kind not in "fiu":
        raise InputValidationError(f"{name} must be numeric. Got dtype {arr.dtype}.")
    out = arr.astype(np.float32, copy=False)
    if n_samples is not None and out.shape[0] != n_samples:
        raise InputValidationError(
            f"{name} has {out.shape[0]} rows but {n_samples} were expected (one per example)."
        )
    if not np.all(np.isfinite(out)):
        rows = np.flatnonzero(~np.isfinite(out).all(axis=1))
        raise InputValidationError(
            f"{name} contains NaN or infinite values (rows {rows[:5].tolist()})."
        )
    if require_normalized:
        if (out < 0).any():
            rows = np.flatnonzero((out < 0).any(axis=1))
            raise InputValidationError(
                f"{name} contains negative probabilities (rows {rows[:5].tolist()})."
            )
        sums = out.sum(axis=1, dtype=np.float64)
        bad = np.flatnonzero(np.abs(sums - 1.0) > atol)
        if bad.size:
            raise InputValidationError(
                f"{name} rows must sum to 1 (tolerance {atol}). Row {int(bad[0])} sums to "
                f"{sums[bad[0]]:.4f} ({bad.size} rows off). Apply a softmax first."
            )
    return out


def check_topk(
    topk: ArrayLike, *, n_classes: int | None = None, name: str = "predictions"
) -> NDArray[np.int64]:
    """Return an (n, k) int64 array of distinct class ids per row, best first."""
    arr = np.asarray(topk)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[1] == 0:
        raise InputValidationError(
            f"{name} must have shape (n_samples, k). Got {arr.shape}."
        )
    n_rows, k = int(arr.shape[0]), int(arr.shape[1])
    out = check_labels(arr.reshape(-1), n_classes=n_classes, name=name).reshape(
        n_rows, k
    )
    if k > 1:
        s = np.sort(out, axis=1)
        dup = np.flatnonzero((s[:, 1:] == s[:, :-1]).any(axis=1))
        if dup.size:
            raise InputValidationError(
                f"{name}: each row must list distinct classes, but row {int(dup[0])} is "
                f"{out[dup[0]].tolist()} ({dup.size} rows repeat a class)."
            )
    return out


def describe(value: Any) -> str:
    """Short repr for messages."""
    r = repr(value)
    return r if len(r) <= 60 else r[:57] + "..."


def fmt_count(n: int) -> str:
    """A count as every message shows it: thousands grouped by commas.

    >>> fmt_count(10_000_000), fmt_count(999)
    ('10,000,000', '999')
    """
    return f"{n:,}"


def check_image_batch(images: ArrayLike, name: str) -> NDArray[Any]:
    """A batch of images as (n, H, W, C): numeric, finite; (n, H, W) gains C = 1."""
    a = np.asarray(images)
    if a.ndim == 3:
        a = a[..., None]
    if a.ndim != 4:
        raise InputValidationError(
            f"{name} must have shape (n, H, W) or (n, H, W, C). Got {a.shape}."
        )
    if a.dtype.kind not in "uif":
        raise InputValidationError(f"{name} must be numeric. Got dtype {a.dtype}.")
    if a.dtype.kind == "f" and not np.isfinite(a).all():
        raise InputValidationError(f"{name} contain NaN or infinite pixels.")
    return a
