"""Parse the text ``retest demo`` prints, independently of its renderer.

Each function reads one part of the output (the table, the near-duplicate line,
the fit, the label errors, the steps, the summary) into numbers, so that a test
can compare every printed figure with the JSON of the same run.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["parse_demo_text"]

_NUM = r"[-+−]?\d+(?:\.\d+)?"
_TITLE = re.compile(r"original \(n=(\d+)\) vs (\S+) \(n=(\d+)\)")
_ND = re.compile(
    r"^near-duplicates \(the project's eligibility rule, squared L2 ≤ ([\d,]+)\): "
    r"(\d+) of the test set, (\d+) of the remaining training set, (\d+) pairs "
    r"within the pool, (\d+) exact copies merged at ingest; (\d+) pool images "
    r"excluded \((\d+) awaiting a near-duplicate review let through: the demo has "
    r"no reviewer\)\.$"
)
_FIT = re.compile(rf"^fit: new = ({_NUM})·orig ([−+]) ({_NUM})  R²=({_NUM})$")
_ERR = re.compile(r"^  #(\d+)\s+test\[(\d+)\]  given '(.+)' → '(.+)' \(p=(\d\.\d\d)\)$")
_STEPS = re.compile(
    r"^steps run: (.*?)(?:; reused: (.*))?; predictions computed: (\d+)$"
)
_SUMMARY = re.compile(
    rf"^summary: mean gap ({_NUM}) points \(2·SE ({_NUM})\); slope ({_NUM}) "
    rf"\[({_NUM}), ({_NUM})\]; (\d+) near-duplicates of the test set found in the "
    r"training pool$"
)
_GAP = re.compile(rf"^({_NUM}) \[({_NUM}), ({_NUM})\]$")


def _f(s: str) -> float:
    return float(s.replace("−", "-"))


def _one(pattern: re.Pattern[str], lines: list[str], what: str) -> re.Match[str]:
    found = [m for ln in lines if (m := pattern.match(ln))]
    assert len(found) == 1, f"{len(found)} {what} lines in:\n" + "\n".join(lines)
    return found[0]


def _table(lines: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    """Header cells and the body rows (``│``-separated cells) of the one table."""
    header = [
        [c.strip() for c in ln.strip().strip("┃").split("┃")]
        for ln in lines
        if ln.startswith("┃")
    ]
    assert len(header) == 1, header
    rows = []
    for ln in lines:
        if not ln.startswith("│"):
            continue
        model, orig, new, gap = (c.strip() for c in ln.strip().strip("│").split("│"))
        g = _GAP.match(gap)
        assert g, ln
        rows.append({"model": model, "orig": _f(orig), "new": _f(new),
                     "gap": _f(g[1]), "gap_lo": _f(g[2]), "gap_hi": _f(g[3])})  # fmt: skip
    return header[0], rows


def parse_demo_text(text: str) -> dict[str, Any]:
    """Every figure of the demo's text output, as numbers (percent where printed so)."""
    lines = text.splitlines()
    top = next(i for i, ln in enumerate(lines) if ln.startswith("┏"))
    # the title is centred over the table, wrapped to its width when longer
    title = _one(_TITLE, [" ".join(" ".join(lines[:top]).split())], "title")
    header, rows = _table(lines)
    nd = _one(_ND, lines, "near-duplicate")
    fit = _one(_FIT, lines, "fit")
    steps = _one(_STEPS, lines, "steps")
    summary = _one(_SUMMARY, lines, "summary")
    sign = -1.0 if fit[2] == "−" else 1.0
    return {
        "title": {
            "orig_n": int(title[1]),
            "revision": title[2],
            "new_n": int(title[3]),
        },
        "header": header,
        "rows": rows,
        "near_duplicates": {
            "threshold_sq_l2": int(nd[1].replace(",", "")),
            **{
                k: int(nd[i])
                for i, k in enumerate(
                    (
                        "test",
                        "train",
                        "pool_pairs",
                        "pool_exact_duplicates",
                        "n_excluded",
                        "unreviewed_included",
                    ),
                    start=2,
                )
            },
        },
        "fit": {"slope": _f(fit[1]), "intercept": sign * _f(fit[3]), "r2": _f(fit[4])},
        "label_errors": [
            {
                "rank": int(m[1]),
                "index": int(m[2]),
                "given_name": m[3],
                "suggested_name": m[4],
                "suggested_prob": _f(m[5]),
            }
            for ln in lines
            if (m := _ERR.match(ln))
        ],
        "steps_run": steps[1].split(", ") if steps[1] not in ("", "-") else [],
        "steps_reused": steps[2].split(", ") if steps[2] else [],
        "predictions_computed": int(steps[3]),
        "summary_line": summary[0].removeprefix("summary: "),
        "summary": {
            "mean_gap": _f(summary[1]),
            "two_se": _f(summary[2]),
            "slope": _f(summary[3]),
            "slope_lo": _f(summary[4]),
            "slope_hi": _f(summary[5]),
            "test_duplicates": int(summary[6]),
        },
    }
