"""bench.cpu_profile: a module run as with ``python -m``, its statistics written, timed by CPU time."""

from __future__ import annotations

import pstats
import subprocess
import sys
from pathlib import Path

from e2e.helpers import ROOT


def test_the_module_runs_with_its_arguments_and_its_statistics_are_written(tmp_path: Path) -> None:
    out = tmp_path / "stats"
    script = "import sys, time; t = time.process_time(); time.sleep(0.3); print(sys.argv[1:], time.process_time() - t)"
    (tmp_path / "sleeper.py").write_text(script)
    run = subprocess.run(
        [sys.executable, "-m", "bench.cpu_profile", "-o", str(out), "-m", "sleeper", "--flag", "x"],
        cwd=ROOT,
        env={"PYTHONPATH": f"{ROOT}:{tmp_path}"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert run.stdout.startswith("['--flag', 'x']"), run.stdout
    stats = pstats.Stats(str(out))
    sleeps = [v for k, v in stats.stats.items() if "sleep" in k[2]]  # type: ignore[attr-defined]
    assert sleeps, sorted(k[2] for k in stats.stats)  # type: ignore[attr-defined]
    # the 0.3 s asleep is wall time, not CPU: a wall-clock profile would charge it to time.sleep
    assert all(cumulative < 0.1 for _, _, _, cumulative, _ in sleeps), sleeps
