"""bench.mem_profile: a module run traced, a snapshot written on SIGUSR1, its places ranked by memory held."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.cluster import Operator
from bench.mem_profile import top
from e2e.helpers import ROOT

HOLDER = """\
import sys, time
held = [bytearray(1024) for _ in range(8192)]  # 8 MiB in 8192 objects, on this line
print("ready", flush=True)
time.sleep(30)
"""


def test_a_snapshot_on_sigusr1_names_the_line_holding_the_memory(tmp_path: Path) -> None:
    (tmp_path / "holder.py").write_text(HOLDER)
    out = tmp_path / "memory.snapshot"
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.mem_profile", "-o", str(out), "-m", "holder"],
        cwd=ROOT,
        env={"PYTHONPATH": f"{ROOT}:{tmp_path}"},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        os.kill(proc.pid, signal.SIGUSR1)
        deadline = time.monotonic() + 60
        while not (tmp_path / "memory.snapshot.done").exists():
            assert time.monotonic() < deadline, "no snapshot written"
            time.sleep(0.1)
    finally:
        proc.kill()
        proc.wait()
    place, mib, count = top(out, limit=1, under=f"{tmp_path.name}/")[0]
    assert place == "holder.py:2" and 8.0 <= mib < 9.5 and count >= 8192, (place, mib, count)


def test_the_operator_runs_traced_only_when_asked_and_never_also_profiled(tmp_path: Path) -> None:
    op = Operator(tmp_path / "kubeconfig", "bench", tmp_path / "log", memory=tmp_path / "m")
    assert op.args[1:7] == ["-m", "bench.mem_profile", "-o", str(tmp_path / "m"), "-m", "trainer"]
    with pytest.raises(ValueError, match="one at a time"):
        Operator(tmp_path / "kubeconfig", "bench", tmp_path / "log", profile=tmp_path / "p", memory=tmp_path / "m")
