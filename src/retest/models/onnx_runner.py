"""ONNX models as runners (onnxruntime, CPU).

onnxruntime is optional (``pip install 'retest[onnx]'``) and imported only when an
ONNX runner is used. The session is created lazily from the file, single-threaded
by default and with sequential execution, so results are reproducible and the
runner pickles to Dask workers.
"""

from __future__ import annotations

import hashlib
import importlib
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from retest.errors import (
    ConfigError,
    DataIntegrityError,
    InputValidationError,
    MissingDependencyError,
)
from retest.models.base import RUNNER_KINDS, BatchedRunner, softmax

__all__ = ["OnnxRunner"]

_HINT = (
    "onnxruntime is needed for ONNX models: pip install 'retest[onnx]' "
    "(or bash scripts/install.sh dev)"
)
ONNX_LAYOUTS = ("NCHW", "NHWC", "flat")
_LAYOUTS = ONNX_LAYOUTS


def import_onnxruntime() -> Any:
    """Import onnxruntime or fail with an install hint."""
    try:
        return importlib.import_module("onnxruntime")
    except ImportError as err:  # pragma: no cover - installed in CI
        raise MissingDependencyError(f"{_HINT} ({err}).") from err


class OnnxRunner(BatchedRunner):
    """Run an ONNX classifier with one image input and one score output.

    Parameters
    ----------
    name : str
        Model name.
    path : str
        The ``.onnx`` file.
    n_classes : int
        Number of classes the output must have.
    layout : {"NCHW", "NHWC", "flat"}
        How uint8 images are fed (after scaling to [0, 1]); "flat" gives (N, H·W·C).
    outputs : {"logits", "probs"}
        What the graph returns; logits go through a softmax.
    mean, std : float, optional
        Input normalisation after scaling.
    threads : int
        onnxruntime intra-op threads.
    """

    default_batch_size = 512

    def __init__(
        self,
        name: str,
        path: str | Path,
        *,
        n_classes: int,
        layout: str = "NCHW",
        outputs: str = "logits",
        mean: float | None = None,
        std: float | None = None,
        threads: int | None = 1,
    ) -> None:
        super().__init__(name, n_classes=n_classes, threads=threads)
        if layout not in _LAYOUTS:
            raise ConfigError(f"layout must be one of {_LAYOUTS}. Got {layout!r}.")
        if outputs not in ("logits", "probs"):
            raise ConfigError(f"outputs must be 'logits' or 'probs'. Got {outputs!r}.")
        p = Path(path)
        if not p.is_file():
            raise DataIntegrityError(f"ONNX model file {p} does not exist.")
        self.path = str(p)
        self.source_sha256 = hashlib.sha256(p.read_bytes()).hexdigest()
        self.layout, self.outputs, self.mean, self.std = layout, outputs, mean, std
        self.fitted = True
        self._session: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_session"] = None  # sessions do not pickle; rebuilt from the file
        return state

    def describe(self) -> dict[str, Any]:
        return {
            "runner": "onnx",
            "source_sha256": self.source_sha256,
            "layout": self.layout,
            "outputs": self.outputs,
            "mean": self.mean,
            "std": self.std,
        }

    def _get_session(self) -> Any:
        if self._session is None:
            ort = import_onnxruntime()
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = int(self.threads or 1)
            opts.inter_op_num_threads = 1
            opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            try:
                self._session = ort.InferenceSession(
                    self.path, sess_options=opts, providers=["CPUExecutionProvider"]
                )
            except Exception as err:
                raise DataIntegrityError(
                    f"cannot load ONNX model {self.path} ({type(err).__name__}: {err})."
                ) from err
        return self._session

    def _input(self, batch: NDArray[Any]) -> NDArray[np.float32]:
        x = np.asarray(batch)
        if x.dtype == np.uint8:
            x = x.astype(np.float32) / np.float32(255.0)
            if x.ndim == 3:
                x = x[..., None]
            if self.layout == "NCHW":
                x = x.transpose(0, 3, 1, 2)
            elif self.layout == "flat":
                x = x.reshape(x.shape[0], -1)
        out: NDArray[np.float32] = np.ascontiguousarray(x, dtype=np.float32)
        if self.mean is not None:
            out = out - np.float32(self.mean)
        if self.std is not None:
            out = out / np.float32(self.std)
        return out

    def _scores(self, batch: NDArray[Any]) -> NDArray[Any]:
        sess = self._get_session()
        inp = sess.get_inputs()[0]
        try:
            (out,) = sess.run(
                [sess.get_outputs()[0].name], {inp.name: self._input(batch)}
            )
        except Exception as err:
            raise InputValidationError(
                f"ONNX model {self.name!r} rejected a batch of shape {np.shape(batch)} "
                f"(input {inp.name!r} expects {inp.shape}): {str(err).splitlines()[0]}"
            ) from err
        arr = np.asarray(out)
        if (
            arr.ndim == 2
            and arr.shape[1] == self.n_classes
            and self.outputs == "logits"
        ):
            return softmax(arr)
        return arr


def load_onnx(path: str, *, name: str, n_classes: int, **options: Any) -> OnnxRunner:
    """Runner kind "onnx"."""
    import_onnxruntime()
    return OnnxRunner(name, path, n_classes=n_classes, **options)


if "onnx" not in RUNNER_KINDS:
    RUNNER_KINDS.add("onnx", load_onnx)
