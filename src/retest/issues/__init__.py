"""Label errors with confident learning (SPEC §9): finders, ranking, noise, ensembles.

Pure core: arrays and records in, arrays and records out; no files, no printing.
"""

from retest.issues.crossval import FoldCache, cross_val_pred_probs
from retest.issues.ensemble import Ensemble, ensemble_pred_probs
from retest.issues.finders import (
    LABEL_ERROR_METHODS,
    ConfidentJoint,
    ProbabilitySumWarning,
    check_label_error_inputs,
    compute_confident_joint,
    find_label_errors,
)
from retest.issues.noise import (
    SPEC_NOISE_AMOUNTS,
    SPEC_SPARSITIES,
    generate_noise_matrix,
    generate_noisy_labels,
    noise_matrix_of,
    spec_trace,
)
from retest.issues.ranking import (
    DetectionReport,
    LabelError,
    NoiseEstimate,
    detection_report,
    estimate_noise,
    label_quality_scores,
    rank_label_errors,
)

__all__ = [
    "LABEL_ERROR_METHODS",
    "SPEC_NOISE_AMOUNTS",
    "SPEC_SPARSITIES",
    "ConfidentJoint",
    "DetectionReport",
    "Ensemble",
    "FoldCache",
    "LabelError",
    "NoiseEstimate",
    "ProbabilitySumWarning",
    "check_label_error_inputs",
    "compute_confident_joint",
    "cross_val_pred_probs",
    "detection_report",
    "ensemble_pred_probs",
    "estimate_noise",
    "find_label_errors",
    "generate_noise_matrix",
    "generate_noisy_labels",
    "label_quality_scores",
    "noise_matrix_of",
    "rank_label_errors",
    "spec_trace",
]
