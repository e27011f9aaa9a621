"""``retest check``: is the project intact, and what did crashes leave behind?"""

from __future__ import annotations

from retest.stages.check._check import (
    CheckReport,
    Problem,
    check_project,
)

__all__ = [
    "CheckReport",
    "Problem",
    "check_project",
]
