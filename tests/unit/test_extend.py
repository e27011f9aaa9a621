"""``retest.extend``: the one module plug-ins import from."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import retest.extend as extend

README = Path(__file__).resolve().parents[2] / "README.md"


def _extension_blocks() -> list[str]:
    text = README.read_text(encoding="utf-8")
    start = text.index("\n## Extending retest\n")
    end = text.index("\n## ", start + 1)
    return re.findall(r"```python\n(.*?)```", text[start:end], flags=re.S)


def test_the_readme_extension_guide_imports_only_retest_extend() -> None:
    blocks = _extension_blocks()
    assert len(blocks) == 4
    used: set[str] = set()
    for block in blocks:
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "retest"
            ):
                assert node.module == "retest.extend", node.module
                used |= {a.name for a in node.names}
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("retest") for a in node.names)
    assert used <= set(extend.__all__)


def test_every_name_is_the_defining_object() -> None:
    from retest.sampling.base import SAMPLERS, register_sampler
    from retest.stages.dedup._metrics import DedupMetric
    from retest.web.pages import register_page

    for name in extend.__all__:
        assert getattr(extend, name) is not None, name
    assert extend.SAMPLERS is SAMPLERS and extend.register_sampler is register_sampler
    assert extend.DedupMetric is DedupMetric and extend.register_page is register_page


def test_a_sampler_plugin_does_not_load_the_web_app() -> None:
    code = (
        "import sys; from retest.extend import register_sampler, SAMPLERS; "
        "print('fastapi' in sys.modules, 'retest.web.pages' in sys.modules)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert r.stdout.split() == ["False", "False"]
