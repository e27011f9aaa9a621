"""The overlap-minimising train/test split (CIFAR-10.2 style)."""

from __future__ import annotations

from retest.stages.split._split import (
    SplitResult,
    check_split_out,
    split_pool,
)

__all__ = [
    "SplitResult",
    "check_split_out",
    "split_pool",
]
