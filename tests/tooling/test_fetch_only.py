"""``fetch_only`` of ``localcluster/go-env.sh`` (``build.sh --fetch``): a component's build run for its
downloads only, against a scratch cache, with its Go commands as dry runs."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GO_ENV = ROOT / "localcluster" / "go-env.sh"

pytestmark = pytest.mark.skipif(shutil.which("go") is None, reason="needs the Go toolchain (localcluster/build.sh)")


def test_a_fetch_runs_the_build_against_a_scratch_cache_and_compiles_nothing(tmp_path: Path) -> None:
    src, real, scratch = tmp_path / "src", tmp_path / "cache", tmp_path / "tmp"
    src.mkdir()
    scratch.mkdir()
    (src / "go.mod").write_text("module local/x\n\ngo 1.22\n")
    (src / "main.go").write_text("package main\n\nfunc main() {}\n")
    script = tmp_path / "build.sh"
    script.write_text(
        f"""set -euo pipefail
cache={real}
log() {{ printf '[build] %s\\n' "$*" >&2; }}
source {GO_ENV}
build_x() {{
  local out="$cache/bin/x"
  mkdir -p "$out"
  echo "$cache" > {tmp_path}/cache-seen
  (cd {src} && go build -o "$out/x" .)
  mv "$out/x" "$out/y"  # fails: the dry run made no binary
  echo "went on" > {tmp_path}/after
  false  # a build that fails ends its fetch, not the fetch of the others
}}
fetch_only x x
echo "fetch ended"
"""
    )
    env = {**os.environ, "TMPDIR": str(scratch), "GOFLAGS": ""}
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "fetch ended" in done.stdout and done.stderr.count("[build] x: modules fetched (") == 2, done
    seen = Path((tmp_path / "cache-seen").read_text().strip())
    assert seen.parent.parent == scratch and seen.name == "x", seen  # <TMPDIR>/trainer-fetch.XXXXXX/x
    assert not real.exists(), "the fetch wrote into the real cache"
    assert list(scratch.iterdir()) == [], "the scratch cache was left behind"
    assert (tmp_path / "after").read_text() == "went on\n", "an error after the dry run stopped the fetch"
