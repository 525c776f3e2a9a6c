"""``compile_commands`` of ``localcluster/build.sh``: the commands of one component in one ``go build``.

The function is read out of the script and run by bash on a module of two empty commands, with ``go`` on
``PATH`` behind a wrapper that logs each invocation: the missing commands are built by one invocation,
land under the names asked for, and one already built is neither rebuilt nor named to ``go``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD_SH = ROOT / "localcluster" / "build.sh"

pytestmark = pytest.mark.skipif(shutil.which("go") is None, reason="needs the Go toolchain (localcluster/build.sh)")


def function(name: str) -> str:
    """The text of shell function ``name`` in ``localcluster/build.sh``."""
    found = re.search(rf"^{name}\(\) {{\n.*?^}}\n", BUILD_SH.read_text(), re.S | re.M)
    assert found, f"{name} is not defined in {BUILD_SH}"
    return found.group(0)


def module(tmp_path: Path) -> Path:
    """A module ``example.com/two`` with the commands ``cmd/alpha`` and ``cmd/beta``."""
    root = tmp_path / "mod"
    for cmd in ("alpha", "beta"):
        (root / "cmd" / cmd).mkdir(parents=True, exist_ok=True)
        (root / "cmd" / cmd / "main.go").write_text("package main\n\nfunc main() {}\n")
    (root / "go.mod").write_text("module example.com/two\n\ngo 1.22\n")
    return root


def run(tmp_path: Path, out: Path, *pairs: str) -> list[str]:
    """Run ``compile_commands OUT PAIR... -- -trimpath`` in the module; returns the ``go`` invocations."""
    calls = tmp_path / "go-calls"
    wrapper = tmp_path / "wrap"
    wrapper.mkdir(exist_ok=True)
    (wrapper / "go").write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec {shutil.which("go")} "$@"\n')
    (wrapper / "go").chmod(0o755)
    script = "\n".join(
        [
            "set -euo pipefail",
            'log() { printf "%s\\n" "$*" >&2; }',
            function("compile_commands"),
            'compile_commands "$@"',
        ]
    )
    env = {**os.environ, "PATH": f"{wrapper}:{os.environ['PATH']}", "GOFLAGS": "-buildvcs=false", "CGO_ENABLED": "0"}
    subprocess.run(
        ["bash", "-c", script, "build", str(out), *pairs, "--", "-trimpath"],
        cwd=module(tmp_path),
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return calls.read_text().splitlines() if calls.exists() else []


def test_the_missing_commands_are_built_by_one_go_build_under_their_names(tmp_path: Path) -> None:
    out = tmp_path / "bin"
    out.mkdir()
    calls = run(tmp_path, out, "vc-alpha=./cmd/alpha", "vc-beta=./cmd/beta")
    assert len(calls) == 1, calls
    assert calls[0].startswith("build -trimpath -o ") and calls[0].endswith("./cmd/alpha ./cmd/beta"), calls
    assert sorted(p.name for p in out.iterdir()) == ["vc-alpha", "vc-beta"]  # no staging directory left
    assert all(os.access(p, os.X_OK) for p in out.iterdir())


def test_a_command_already_built_is_neither_rebuilt_nor_named(tmp_path: Path) -> None:
    out = tmp_path / "bin"
    out.mkdir()
    kept = out / "vc-alpha"
    kept.write_text("#!/bin/sh\n")
    kept.chmod(0o755)
    calls = run(tmp_path, out, "vc-alpha=./cmd/alpha", "vc-beta=./cmd/beta")
    assert len(calls) == 1 and "./cmd/alpha" not in calls[0], calls
    assert kept.read_text() == "#!/bin/sh\n"
    assert (out / "vc-beta").stat().st_size > 1000
    assert run(tmp_path, out, "vc-alpha=./cmd/alpha", "vc-beta=./cmd/beta") == calls  # nothing left: no go at all
