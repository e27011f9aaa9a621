"""docs/tutorial.md runs as written and prints what it says (real Fashion-MNIST, slow).

The tutorial's ``bash`` blocks run in order in one shell, in an empty folder, with
``retest`` being this checkout's CLI (``sys.executable``, never PATH) and ``python3``
this interpreter. Each block's output is checked against the results the tutorial
shows; then the project itself is checked: every planted copy excluded, none released.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorial.md"
MARK = "=== tutorial block "


def _blocks() -> list[str]:
    return re.findall(r"```bash\n(.*?)```", TUTORIAL.read_text(), flags=re.S)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, fashion_mnist_dir: Path):  # type: ignore[no-untyped-def]
    pytest.importorskip("torch")
    if fashion_mnist_dir != Path("/usr/share/datasets/fashion-mnist"):
        pytest.skip("the tutorial reads Fashion-MNIST from /usr/share/datasets")
    root = tmp_path_factory.mktemp("tutorial")
    exe = sys.executable
    lines = [
        "set -euo pipefail",
        f"retest() {{ {exe!s} -c 'from retest.cli.main import main; main()' \"$@\"; }}",
        f'python3() {{ {exe!s} "$@"; }}',
    ]
    for i, block in enumerate(_blocks()):
        lines += [f'echo "{MARK}{i} $(date +%s.%N)"', block]
    lines.append(f'echo "{MARK}end $(date +%s.%N)"')
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    env.pop("RETEST_PROJECT", None)
    t0 = time.time()
    p = subprocess.run(
        ["bash", "-c", "\n".join(lines)], cwd=root, env=env, capture_output=True,
        text=True, timeout=3600, check=False,
    )  # fmt: skip
    assert p.returncode == 0, f"{p.stdout[-4000:]}\n{p.stderr[-4000:]}"
    parts = p.stdout.split(MARK)[1:]
    out = {}
    stamps = []
    for part in parts:
        head, _, body = part.partition("\n")
        key, stamp = head.split()
        stamps.append(float(stamp))
        out[key] = body
    steps = [f"{b - a:.0f}s" for a, b in itertools.pairwise(stamps)]
    print(f"tutorial: {time.time() - t0:.0f} s in all; per block: {steps}")
    return root, out, p.stderr


def test_every_block_prints_what_the_tutorial_shows(run) -> None:  # type: ignore[no-untyped-def]
    _, out, err = run
    assert "T-shirt_top" in out["0"] and "notes.txt" in out["0"]
    assert "Created project 'fm'" in out["1"]
    add = out["2"]
    assert re.search(r"new candidates\s+│\s+430 │", add), add
    assert re.search(r"unreadable \(skipped\)\s+│\s+2 │", add), add
    assert "skipped notes.txt: not an image file" in err
    assert "skipped Bag/broken.png" in err and "no image format Pillow knows" in err
    assert "excluded: 20 exact copy, 20 near original" in out["3"]
    assert re.search(
        r"recorded \d+ reviews by ana .* 0 candidate reviews left", out["4"]
    )
    assert "needs 10 more eligible candidates with ≥ 10 valid assignments" in out["5"]
    dry = out["6"]
    assert "10 tasks would be created (dry run)" in dry
    assert "note: 10 classes show fewer than 20 originals" in dry
    assert "50 tasks would be created (dry run)" in dry
    assert "50 tasks created" in out["7"]
    final = out["9"]
    assert "fm-mf: 100 images, valid" in final and "(100, 28, 28)" in final
    feasible = final.split("what each strategy needs")[1].split("└")[0]
    assert "+" not in feasible and feasible.count(" ok ") >= 30, feasible
    ev = out["10"]
    assert re.search(r"│ my_cnn\s+│", ev) and "predictions computed: 22" in ev
    assert "the fit rests on 11 models" in err
    audit = out["11"]  # the new set's labels, with the predictions evaluate cached
    assert re.search(r"\d+ of 100 labels flagged", audit), audit
    assert "reports/label-errors/fm-mf/label_errors.json" in audit


def test_no_planted_copy_is_released(run) -> None:  # type: ignore[no-untyped-def]
    root, _, _ = run
    from retest.datasets.idx import read_idx
    from retest.project import Project, candidate_eligibility

    d = Path("/usr/share/datasets/fashion-mnist")
    test = read_idx(d / "t10k-images-idx3-ubyte.gz")
    released = np.load(root / "release" / "fm-mf_data.npy")
    rows = {r.tobytes() for r in released}
    assert not any(t.tobytes() in rows for t in test)
    with Project.open(root / "fm") as p:
        elig = candidate_eligibility(p)
        planted = {
            c.source_ref: elig.blocking(c.id)
            for c in p.store.candidates.iter()
            if "/test" in c.source_ref or "/shifted" in c.source_ref
        }
    assert len(planted) == 30
    for ref, why in planted.items():
        want = "exact_copy" if "/test" in ref else "near_original"
        assert want in why, (ref, why)
    meta = json.loads((root / "release" / "manifest.json").read_text())
    assert len(meta["images"]) == 100
