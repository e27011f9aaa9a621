"""The "what each strategy needs" table that ``retest status`` and ``retest
plan`` print (one table, from :mod:`retest.stages.sample._feasibility`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["print_feasibility"]


def print_feasibility(feasible: Sequence[Any], per_class: int) -> None:
    """Per class: what the project has (eligible candidates, those with enough
    valid assignments, annotated originals, originals its tasks show) and, per
    strategy, ``ok`` or how many more of what it needs; then, per strategy, the
    first short class in words."""
    from retest.cli._console import console, print_table
    from retest.stages.sample import STRATEGIES

    if not feasible:
        return
    f0 = feasible[0]
    cols = [
        "class",
        f"eligible (need {per_class})",
        f"annotated ≥ {f0.min_annotations} (need {per_class})",
        f"originals ≥ 10 (need {f0.originals_needed})",
        "originals in tasks",
        *STRATEGIES,
    ]
    rows = [
        [f.class_name, f.eligible, f.annotated_eligible, f.originals_annotated,
         "" if f.originals_in_tasks is None else f.originals_in_tasks,
         *(f.cell(s) for s in STRATEGIES)]
        for f in feasible
    ]  # fmt: skip
    print_table(cols, rows, title=f"what each strategy needs, {per_class} per class")
    for s in STRATEGIES:
        short = [(f.class_name, f.missing(s)) for f in feasible if f.missing(s)]
        if short:
            cls, why = short[0]
            more = f" (and {len(short) - 1} more classes)" if len(short) > 1 else ""
            console.print(
                f"{s}: {cls} needs {'; '.join(why)}{more}",
                soft_wrap=True,
                markup=False,
                highlight=False,
            )
