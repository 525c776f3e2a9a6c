"""The SDK, the CLI and the dashboard stand on :mod:`trainer.api` and ``trainer.framework`` only: importing them
loads no module of the operator's job layers, kinds, admission or status server (so the SDK installs
and imports without them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
OPERATOR = (
    "trainer.jobs",
    "trainer.trainjob",
    "trainer.mpijob",
    "trainer.webhook",
    "trainer.statusserver",
    "trainer.main",
)


def loaded(module: str) -> list[str]:
    """The modules of ``trainer`` loaded once ``module`` is imported in a fresh interpreter."""
    code = f"import json, sys, {module}; print(json.dumps(sorted(m for m in sys.modules if m.startswith('trainer'))))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120, check=True
    )
    names: list[str] = json.loads(done.stdout)
    return names


@pytest.mark.parametrize("module", ["trainer.client", "trainer.cli", "trainer.dashboard.server"])
def test_the_sdk_cli_and_dashboard_load_no_operator_module(module: str) -> None:
    names = loaded(module)
    assert module in names
    assert [m for m in names if m in OPERATOR or m.startswith(tuple(f"{p}." for p in OPERATOR))] == []
