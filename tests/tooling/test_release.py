"""``make release``'s stamping, without building anything: one VERSION (pyproject.toml's, or the one given)
reaches the wheel and sdist (through the release tree's pyproject.toml), the chart (``helm package
--version/--app-version``) and the image (its tag and the archive's name); the release tree is the
image's whole build context; a VERSION that is not X.Y.Z stops it first; no checked-in file changes.
The tag: in a git repository of its own holding the Makefile, ``make release`` refuses a tree with
changes or an existing tag before building anything, ``make release-tag`` (the release's last step) makes
the annotated tag ``vVERSION`` on HEAD, and ``TAG=0`` skips both.

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


GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Release Test",
    "GIT_AUTHOR_EMAIL": "release@example.invalid",
    "GIT_COMMITTER_NAME": "Release Test",
    "GIT_COMMITTER_EMAIL": "release@example.invalid",
}


def make(*args: str, check: bool = True, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``make ARGS`` in the repository (or ``cwd``), with no VERSION, DIST, TAG or MAKEFLAGS of the caller's."""
    mine = ("VERSION", "DIST", "RELEASE_TREE", "TAG", "MAKEFLAGS")
    env = {k: v for k, v in os.environ.items() if k not in mine} | GIT_IDENTITY
    proc = subprocess.run(["make", "--no-print-directory", *args], cwd=cwd, env=env, capture_output=True, text=True)
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


def git(repo: Path, *args: str) -> str:
    """``git ARGS`` in ``repo``; its stdout, stripped."""
    env = os.environ | GIT_IDENTITY
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository of its own with this Makefile and pyproject.toml committed: a clean tree."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("Makefile", "pyproject.toml"):
        (repo / name).write_bytes((ROOT / name).read_bytes())
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "release me")
    return repo


def test_the_release_checks_first_and_tags_last(tmp_path: Path) -> None:
    steps = make("-n", "release", "VERSION=9.8.7", f"DIST={tmp_path / 'out'}").stdout.strip().splitlines()

    def first(start: str) -> int:
        return next(i for i, step in enumerate(steps) if step.startswith(start))

    assert first("! git rev-parse --verify -q 'refs/tags/v9.8.7'") < first("rm -rf")
    assert first('test -z "$(git status --porcelain)"') < first("rm -rf")  # refused before anything is built
    assert [step for step in steps if step.startswith("git tag")] == ["git tag -a 'v9.8.7' -m 'trainer 9.8.7'"]
    assert first("git tag") == len(steps) - 2, steps  # after everything is built; then the line that says so
    untagged = make("-n", "release", "VERSION=9.8.7", "TAG=0").stdout
    assert "git tag" not in untagged and "git status" not in untagged


def test_release_tag_makes_the_annotated_tag_of_the_version_on_head(repo: Path) -> None:
    proc = make("release-tag", "VERSION=1.2.3", cwd=repo)
    assert f"tagged v1.2.3 on {git(repo, 'rev-parse', '--short', 'HEAD')}" in proc.stdout
    assert git(repo, "cat-file", "-t", "v1.2.3") == "tag"  # annotated, not a lightweight ref
    assert git(repo, "rev-parse", "v1.2.3^{commit}") == git(repo, "rev-parse", "HEAD")
    assert git(repo, "tag", "-l", "--format=%(contents:subject)", "v1.2.3") == "trainer 1.2.3"
    make("release-tag", cwd=repo)  # VERSION: pyproject.toml's
    assert git(repo, "tag", "-l", f"v{project_version()}") == f"v{project_version()}"


def test_release_refuses_an_existing_tag_before_building(repo: Path) -> None:
    git(repo, "tag", "-a", "v1.2.3", "-m", "earlier")
    proc = make("release", "VERSION=1.2.3", cwd=repo, check=False)
    assert proc.returncode != 0 and "tag v1.2.3 exists already" in proc.stderr, proc.stderr
    assert not (repo / "dist").exists() and not (repo / ".venv").exists() and not (repo / "build").exists()
    assert git(repo, "tag", "-l", "--format=%(contents:subject)", "v1.2.3") == "earlier"


@pytest.mark.parametrize("change", ["edited", "untracked"])
def test_release_refuses_a_tree_with_changes_before_building(repo: Path, change: str) -> None:
    if change == "edited":
        (repo / "pyproject.toml").write_text((repo / "pyproject.toml").read_text() + "\n")
    else:
        (repo / "notes.txt").write_text("not committed")
    proc = make("release", "VERSION=1.2.3", cwd=repo, check=False)
    assert proc.returncode != 0 and "the git tree has changes" in proc.stderr, proc.stderr
    assert not (repo / "dist").exists() and not (repo / ".venv").exists()
    assert git(repo, "tag", "-l") == ""


def test_tag_0_neither_checks_nor_tags(repo: Path) -> None:
    (repo / "notes.txt").write_text("not committed")
    git(repo, "tag", "-a", "v1.2.3", "-m", "earlier")
    make("release-check", "VERSION=1.2.3", "TAG=0", cwd=repo)
    make("release-tag", "VERSION=1.2.4", "TAG=0", cwd=repo)
    assert git(repo, "tag", "-l") == "v1.2.3"
