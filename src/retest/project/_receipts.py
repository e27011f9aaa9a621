"""Receipts of the web app's writes: the replay key, stored in the event log.

A write from a page carries the page load's submission key. Grid answers and
labels store it in their events' ``assignment_id``, so a resent request finds
them (``EventWriter``). The other writes (an undo, a near-duplicate verdict, a
label-error verdict, a class review, an exclusion) change other rows, so each
appends one receipt event with the key and its result, looked up the same way
(the ``annotations_assignment`` index): a request replayed after a server
restart is answered from the receipt and writes nothing again. Receipts are of
their own kind, with no item and no class, so nothing that counts labels or
votes sees them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retest.store.base import Store
from retest.store.rows import AnnotationEvent

__all__ = ["RECEIPT_KIND", "record_receipt", "stored_receipt"]

RECEIPT_KIND = "web-receipt"


def stored_receipt(store: Store, key: str) -> dict[str, Any] | None:
    """The result stored with ``key`` by :func:`record_receipt`, else None."""
    for ev in store.annotations.list(kind=RECEIPT_KIND, assignment_id=key):
        result = ev.extra.get("result")
        return dict(result) if isinstance(result, Mapping) else {}
    return None


def record_receipt(
    store: Store, key: str, who: str, result: Mapping[str, Any], ui_version: str = ""
) -> None:
    """Store that the write ``key`` was made, with its (JSON) ``result``."""
    store.annotations.add(
        [
            AnnotationEvent(
                who=who,
                kind=RECEIPT_KIND,
                class_id=-1,
                item_id="",
                value=0,
                ui_version=ui_version,
                assignment_id=key,
                extra={"result": dict(result)},
            )
        ]
    )
