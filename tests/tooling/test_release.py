"""``make release``'s stamping, without building anything: one VERSION (pyproject.toml's, or the one given)
reaches the wheel and sdist (through the release tree's pyproject.toml), the chart (``helm package
--version/--app-version``) and the image (its tag and the archive's name); the release tree is the
image's whole build context; a VERSION that is not X.Y.Z stops it first; no checked-in file changes.

``e2e/test_release.py`` runs the whole target and installs what it built.
"""

from __future__ import annotations

import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from localcluster import operator_image

ROOT = Path(__file__).resolve().parents[2]


def make(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``make ARGS`` in the repository, with no VERSION, DIST or MAKEFLAGS of the caller's."""
    env = {k: v for k, v in os.environ.items() if k not in ("VERSION", "DIST", "RELEASE_TREE", "MAKEFLAGS")}
    proc = subprocess.run(["make", "--no-print-directory", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    if check:
        assert proc.returncode == 0, f"make {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}{proc.stdout}"
    return proc


def project_version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def stamps(dry_run: str, version: str, dist: str) -> None:
    """``make -n release``'s commands stamp ``version`` on the chart and the image into ``dist``."""
    assert f"--version {version} --app-version {version} -d {dist}" in dry_run, dry_run
    assert f"-m localcluster.operator_image {version} " in dry_run, dry_run
    assert f"{dist}/trainer-operator-{version}.tar" in dry_run, dry_run
    assert f"-m build --outdir {ROOT / dist} ." in dry_run, dry_run  # ROOT / an absolute path: that path
    assert f'version = "{version}"' in dry_run, dry_run  # the release tree's pyproject.toml


def test_the_default_version_is_pyprojects() -> None:
    stamps(make("-n", "release").stdout, project_version(), "dist")


def test_a_given_version_stamps_all_three(tmp_path: Path) -> None:
    dist = str(tmp_path / "out")
    stamps(make("-n", "release", "VERSION=9.8.7", f"DIST={dist}").stdout, "9.8.7", dist)


def test_the_release_tree_is_the_build_context_with_the_version_stamped(tmp_path: Path) -> None:
    before = (ROOT / "pyproject.toml").read_text()
    tree = tmp_path / "tree"
    make("release-tree", "VERSION=9.8.7", f"RELEASE_TREE={tree}")
    assert (ROOT / "pyproject.toml").read_text() == before
    stamped = (tree / "pyproject.toml").read_text()
    assert tomllib.loads(stamped)["project"]["version"] == "9.8.7"
    assert stamped == before.replace(f'version = "{project_version()}"', 'version = "9.8.7"', 1)
    for path in operator_image.context_files():  # what the image build reads, the same but the version
        rel = path.relative_to(ROOT)
        assert (tree / rel).is_file(), f"{rel} is not in the release tree: add it to RELEASE_FILES"
        if rel != Path("pyproject.toml"):
            assert (tree / rel).read_bytes() == path.read_bytes(), rel
    assert (tree / "localcluster" / "operator_image.py").is_file()
    assert not list(tree.rglob("__pycache__"))


@pytest.mark.parametrize("bad", ["1.2", "v1.2.3", "1.2.3rc1", "1.2.3-rc.1", "x"])
def test_a_version_that_is_not_x_y_z_stops_before_anything_is_built(tmp_path: Path, bad: str) -> None:
    tree = tmp_path / "tree"
    proc = make("release-tree", f"VERSION={bad}", f"RELEASE_TREE={tree}", check=False)
    assert proc.returncode != 0 and f"VERSION must be X.Y.Z, not '{bad}'" in proc.stderr, proc.stderr
    assert not tree.exists()
