"""Installed without torch (no CPU build for this Python): the testbed and the demo say so.

``scripts/install.sh`` leaves torch out rather than fetch the CUDA build from an
index; the testbed then lacks ``small-cnn``, and ``retest demo`` prints why.
The run without torch happens in a subprocess where the one check the testbed
makes (``torch_available``) answers no before the testbed is imported; hiding the
package itself would also break scipy, which inspects an imported torch. An install
really without torch was tried by hand (README's set-up section).
"""

from __future__ import annotations

import json
import subprocess
import sys

from retest.models.testbed import preset_models, unavailable_models
from retest.models.torch_runner import torch_available

_WITHOUT_TORCH = """
import json
import retest.models.torch_runner as tr
tr.torch_available = lambda: False
from retest.cli.demo import _left_out_lines
from retest.models.testbed import preset_models, unavailable_models
print(json.dumps({
    "quick": preset_models("quick"),
    "full": preset_models("full"),
    "unavailable": unavailable_models("full"),
    "lines": _left_out_lines("quick"),
}))
"""


def test_without_torch_small_cnn_is_left_out_and_the_demo_says_why() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _WITHOUT_TORCH],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    got = json.loads(out.stdout.splitlines()[-1])
    assert got["unavailable"] == {"small-cnn": "torch is not installed"}
    assert "small-cnn" not in got["quick"] and "small-cnn" not in got["full"]
    assert "mlp" in got["quick"]  # the rest of the testbed is still there
    assert got["lines"] == [
        "small-cnn left out: torch is not installed (scripts/install.sh installs "
        "its CPU build where this machine has the file)"
    ]


def test_with_torch_nothing_is_left_out() -> None:
    if not torch_available():
        assert "small-cnn" in unavailable_models("quick")
        return
    assert unavailable_models("quick") == {} == unavailable_models("full")
    assert "small-cnn" in preset_models("quick")
