"""Errors, registry, records and validation: the contracts every layer relies on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retest import (
    InputValidationError,
    LabeledSet,
    Predictions,
    Registry,
    UnknownNameError,
)
from retest._validation import check_pred_probs, check_random_state, check_topk
from retest.errors import ConfigError

SRC = Path(__file__).resolve().parents[2] / "src" / "retest"


def test_registry_suggests_close_names() -> None:
    reg: Registry[int] = Registry("sampler")
    reg.add("matched-frequency", 1)
    reg.add("threshold", 2)
    with pytest.raises(UnknownNameError, match="Did you mean 'matched-frequency'"):
        reg.get("matched-frequncy")
    with pytest.raises(KeyError):  # also a KeyError for callers that expect one
        reg.get("zzz")
    with pytest.raises(ConfigError, match="already registered"):
        reg.add("threshold", 3)
    reg.add("threshold", 3, replace=True)
    assert reg.get("threshold") == 3
    reg.add("model10", 0)
    reg.add("model9", 0)
    assert reg.names("model*") == ["model9", "model10"]  # natural sort


def test_predictions_validate_rows_and_ranges() -> None:
    with pytest.raises(InputValidationError, match=r"row 1 is \[2, 2\]"):
        Predictions("m", "d", np.array([[0, 1], [2, 2]]))
    with pytest.raises(InputValidationError, match=r"in \[0, 3\)"):
        Predictions("m", "d", np.array([[0], [3]]), n_classes=3)
    with pytest.raises(InputValidationError, match="negative"):
        Predictions.from_scores("m", "d", np.array([[1.2, -0.2], [0.5, 0.5]]))
    with pytest.raises(InputValidationError, match="NaN"):
        Predictions.from_scores(
            "m", "d", np.array([[np.nan, 1.0]]), probabilities=False
        )
    p = Predictions.from_scores(
        "m", "d", np.array([[0.1, 0.6, 0.3], [0.5, 0.5, 0.0]]), k=2
    )
    assert p.topk.tolist() == [[1, 2], [0, 1]]  # tie → lower class id first
    assert p.n_classes == 3 and not p.topk.flags.writeable


def test_labeled_set_checks_lengths() -> None:
    with pytest.raises(InputValidationError, match="3 images but 2 labels"):
        LabeledSet("x", np.array([0, 1]), images=np.zeros((3, 2, 2), np.uint8))
    ls = LabeledSet("x", [0, 1, 1], class_names=("a", "b"))
    assert ls.n == 3 and ls.n_classes == 2


def test_validation_helpers() -> None:
    assert check_topk([1, 2, 0]).shape == (3, 1)
    with pytest.raises(ConfigError):
        check_random_state(None)  # type: ignore[arg-type]
    g = check_random_state(3)
    assert check_random_state(g) is g
    with pytest.raises(InputValidationError, match="sum to 1"):
        check_pred_probs([[0.2, 0.2]], require_normalized=True)


# Layers and the import graph: tests/unit/test_import_graph.py.
