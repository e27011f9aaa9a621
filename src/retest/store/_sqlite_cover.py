"""How far each metric's neighbour lists cover the candidates (schema 8).

The stale-candidate check asks which candidates lack a list of some metric. A
probe per candidate costs about 3 µs, so at 10 M candidates the check took a
minute even when one new candidate was stale. The store keeps, per metric, a
mark ``upto`` and a few gaps: every candidate with ``seq <= upto`` has a list of
the metric except the gap rows, so only the gaps and the candidates after the
mark need a probe.

The mark is never assumed, only measured: :func:`advance` probes the gaps and
the candidates since the last mark and records what it finds, so it holds
whoever wrote the lists and whatever a dedup run left out (blacklisted or
interrupted). It stays true afterwards because

- candidates are never deleted or re-keyed and ``seq`` only grows (as the
  candidate tiers also rely on), so a new candidate is always after every mark;
- a list is never deleted by retest; the triggers below reset the metric's mark
  if one is deleted or moved all the same (a hand-edited database), and register
  every metric that gets a list, so "which metrics have lists" is a read of
  ``neighbour_cover`` instead of an index scan. ``INSERT OR REPLACE`` of a list
  keeps it (SQLite fires no delete trigger for the replaced row unless
  ``recursive_triggers`` is on, which retest never sets; if it were, a replace
  would reset the mark: slower, never wrong).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from retest.store._sqlite_columns import _ID

__all__ = ["GAPS_MIN", "advance", "create_triggers", "fill", "mark", "top_seq"]

GAPS_MIN = 1024
"""A mark moves past at most this many candidates without a list, or past half
of the candidates it moves over if that is more; otherwise it stays (the lists
are still being written: the gaps would be most of the pool)."""

_RESET = """
  DELETE FROM neighbour_gaps WHERE metric = OLD.metric;
  UPDATE neighbour_cover SET upto = 0 WHERE metric = OLD.metric;
  DELETE FROM neighbour_cover WHERE metric = OLD.metric
    AND NOT EXISTS (SELECT 1 FROM neighbours WHERE metric = OLD.metric);"""

_TRIGGERS = (
    # no conflict can arise (WHEN), so the outer INSERT OR REPLACE's policy,
    # which a trigger's statements inherit, never replaces a row with a mark
    """CREATE TRIGGER IF NOT EXISTS neighbours_cover_insert AFTER INSERT ON neighbours
WHEN NOT EXISTS (SELECT 1 FROM neighbour_cover WHERE metric = NEW.metric)
BEGIN INSERT INTO neighbour_cover(metric, upto) VALUES (NEW.metric, 0); END""",
    f"""CREATE TRIGGER IF NOT EXISTS neighbours_cover_delete AFTER DELETE ON neighbours
BEGIN {_RESET}
END""",
    f"""CREATE TRIGGER IF NOT EXISTS neighbours_cover_update
AFTER UPDATE OF candidate_id, metric ON neighbours
BEGIN {_RESET}
  INSERT INTO neighbour_cover(metric, upto) SELECT NEW.metric, 0
    WHERE NOT EXISTS (SELECT 1 FROM neighbour_cover WHERE metric = NEW.metric);
END""",
)

# the candidate (``FROM candidates``, its key) has no list of metric ?1
_LACKS = (
    f"NOT EXISTS (SELECT 1 FROM neighbours WHERE candidate_id = {_ID} AND metric = ?1)"
)


def create_triggers(c: Any) -> None:
    """The triggers that keep ``neighbour_cover`` exact (idempotent)."""
    for sql in _TRIGGERS:
        c.execute(sql)


def advance(c: Any, metric: str, top: int) -> bool:
    """Move ``metric``'s mark to ``top`` (a ``MAX(seq)`` read in this write
    transaction ``c``): drop the gaps that got a list, probe the candidates
    after the old mark, record those without one. False when the metric has no
    list at all or too many candidates lack one (:data:`GAPS_MIN`): the mark
    then stays where it was (its gaps pruned)."""
    row = c.execute("SELECT upto FROM neighbour_cover WHERE metric = ?", (metric,))
    upto = row.fetchone()
    if upto is None:
        return False
    upto = int(upto[0])
    c.execute(
        "DELETE FROM neighbour_gaps WHERE metric = ?1 AND seq IN (SELECT seq FROM "
        "candidates WHERE seq IN (SELECT seq FROM neighbour_gaps WHERE metric = ?1) "
        f"AND NOT ({_LACKS}))",
        (metric,),
    )
    if top <= upto:
        return True
    n0 = c.total_changes
    c.execute(
        "INSERT INTO neighbour_gaps(metric, seq) SELECT ?1, seq FROM candidates "
        f"WHERE seq > ?2 AND seq <= ?3 AND {_LACKS}",
        (metric, upto, top),
    )
    if c.total_changes - n0 > max(GAPS_MIN, (top - upto) // 2):
        c.execute(
            "DELETE FROM neighbour_gaps WHERE metric = ? AND seq > ?", (metric, upto)
        )
        return False
    c.execute("UPDATE neighbour_cover SET upto = ? WHERE metric = ?", (top, metric))
    return True


def top_seq(c: Any) -> int:
    """The last candidate's ``seq`` (0 without candidates)."""
    return int(c.execute("SELECT COALESCE(MAX(seq), 0) FROM candidates").fetchone()[0])


def mark(c: Any, metrics: Sequence[str]) -> dict[str, bool]:
    """:func:`advance` every metric of ``metrics`` to the last candidate."""
    top = top_seq(c)
    return {m: advance(c, m, top) for m in dict.fromkeys(metrics)}


def fill(c: Any) -> None:
    """After the migration to schema 8: register the metrics that have lists (one
    scan of the list index) and mark each (one probe per candidate and metric,
    once)."""
    create_triggers(c)
    c.execute(
        "INSERT OR IGNORE INTO neighbour_cover(metric, upto) "
        "SELECT DISTINCT metric, 0 FROM neighbours"
    )
    metrics = [r[0] for r in c.execute("SELECT metric FROM neighbour_cover")]
    mark(c, metrics)
