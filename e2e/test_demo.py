"""The README's first screen, run as written: ``make demo`` trains the digits sample through the
Helm-installed operator on a local cluster with two real nodes and prints its progress and held-out
accuracy; ``python -m localcluster.demo --down`` then stops what it left running. ``make test``, the
block's other line, is what runs this test. The demo first says what it does to the host, each with
its undo (:mod:`localcluster.host_changes`), times the job from its creation and ends with a table of
each step's time.

Needs real nodes (:func:`localcluster.realnode.node.unavailable`); skipped where they cannot run or with
``TRAINER_E2E_REAL=0``. The demo runs on its own cluster (its default directory), not the session's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from e2e import doc_blocks
from e2e.helpers import ROOT
from localcluster.realnode.node import unavailable

WHY_NOT = "TRAINER_E2E_REAL=0" if os.environ.get("TRAINER_E2E_REAL") == "0" else unavailable()
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(WHY_NOT is not None, reason=f"make demo: {WHY_NOT}")]


@pytest.fixture(scope="module", autouse=True)
def operator() -> Iterator[None]:
    """No operator process on the session's cluster: the demo installs its own, on its own cluster."""
    yield None


def test_make_demo_trains_as_the_readme_says() -> None:
    written = doc_blocks.commands((ROOT / "README.md").read_text(), "try")
    assert written == ["make demo", "make test"], written
    try:
        (ran,) = doc_blocks.run(
            written, lambda c: c if c == "make demo" else None, dict(os.environ), ROOT, timeout=1800
        )
        print(ran.output)
    finally:
        down = subprocess.run(
            [sys.executable, "-m", "localcluster.demo", "--down"], cwd=ROOT, capture_output=True, text=True
        )
        print(down.stdout + down.stderr)
    assert ran.rc == 0, ran.output
    assert "state Complete" in ran.output and "held-out accuracy" in ran.output, ran.output
    said = ran.output.index("what this does to the host")
    assert said < ran.output.index("cluster up"), ran.output
    assert "undo: python -m localcluster.demo --down" in ran.output and "containerd.service" in ran.output
    assert "(from its creation)" in ran.output and "time per step" in ran.output, ran.output
    assert down.returncode == 0
