"""A pixel array whose header is gone: the error tells a user what to do.

Users meet it from any command reading pixels of a project whose
``arrays/NAME.json`` was deleted; the line names the file and the way out
(a backup, ``retest check``), not a Python method to call.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retest.errors import StoreError
from retest.store.artifacts import PixelArray


def test_missing_header_says_what_to_do(tmp_path: Path) -> None:
    arr = PixelArray.create(tmp_path, "candidates_8x8", shape=(8, 8))
    arr.append(np.zeros((2, 8, 8), np.uint8))
    (tmp_path / "candidates_8x8.json").unlink()
    with pytest.raises(StoreError) as info:
        PixelArray(tmp_path, "candidates_8x8")
    msg = str(info.value)
    assert "candidates_8x8.json" in msg and "()" not in msg, msg
    assert "backup" in msg and "`retest check`" in msg, msg
