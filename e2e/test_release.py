"""``make release VERSION=...`` as a maintainer runs it, then what it built, used as a user would.

The target builds the wheel and sdist, the chart package and the operator image (buildah, from the
Dockerfile) into a directory of the test's; then the wheel is installed with its dependencies from the
configured package index into a fresh venv, whose ``trainer`` and ``trainer-operator`` commands must run
(``--help``) and report VERSION (``trainer --version``); ``helm show chart`` of the package must say
VERSION for the chart and the app; the image archive must be named ``trainer-operator:VERSION`` and
carry the distribution at VERSION. No cluster: the module's operator is not started. ``TAG=0``: the
working tree is not tagged (``tests/tooling/test_release.py`` tests the tag in a repository of its own).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest
import yaml

from localcluster.binaries import ensure
from tests.tooling.test_release import make

pytestmark = [pytest.mark.e2e, pytest.mark.builds("helm")]
VERSION = "0.0.7"
"""Not pyproject.toml's, so the override is what is tested."""


@pytest.fixture(scope="module", autouse=True)
def operator() -> Iterator[None]:
    """No operator and no cluster: nothing here talks to Kubernetes."""
    yield None


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("release")
    make("release", f"VERSION={VERSION}", f"DIST={work / 'dist'}", f"RELEASE_TREE={work / 'tree'}", "TAG=0")
    return work / "dist"


def test_dist_holds_the_four_files_of_version(dist: Path) -> None:
    assert sorted(p.name for p in dist.iterdir()) == [
        f"trainer-{VERSION}.tgz",
        f"trainer-operator-{VERSION}.tar",
        f"trainjob_operator-{VERSION}-py3-none-any.whl",
        f"trainjob_operator-{VERSION}.tar.gz",
    ]
    with tarfile.open(dist / f"trainjob_operator-{VERSION}.tar.gz") as sdist:
        member = sdist.extractfile(f"trainjob_operator-{VERSION}/PKG-INFO")
        assert member is not None
        info = member.read().decode()
    assert "\nName: trainjob-operator\n" in info and f"\nVersion: {VERSION}\n" in info


def test_the_wheel_installs_with_its_dependencies_and_its_commands_run(dist: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    wheel = dist / f"trainjob_operator-{VERSION}-py3-none-any.whl"
    install = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", str(wheel)], capture_output=True, text=True, timeout=900
    )
    assert install.returncode == 0, install.stderr
    for command in ("trainer", "trainer-operator"):
        run = subprocess.run([str(venv / "bin" / command), "--help"], capture_output=True, text=True, cwd=tmp_path)
        assert run.returncode == 0, f"{command} --help exited {run.returncode}:\n{run.stderr}"
        assert "usage" in run.stdout.lower(), run.stdout
    version = subprocess.run([str(venv / "bin" / "trainer"), "--version"], capture_output=True, text=True, cwd=tmp_path)
    assert (version.returncode, version.stdout) == (0, f"trainer {VERSION}\n"), version.stderr
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import trainer.main; print(trainer.main.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    assert where.stdout.startswith(str(venv)), where.stdout  # the installed package, not this checkout


def test_the_chart_package_carries_version(dist: Path) -> None:
    helm = ensure("helm")["helm"]
    shown = subprocess.run([str(helm), "show", "chart", str(dist / f"trainer-{VERSION}.tgz")], capture_output=True)
    assert shown.returncode == 0, shown.stderr
    chart = yaml.safe_load(shown.stdout)
    assert (chart["name"], chart["version"], chart["appVersion"]) == ("trainer", VERSION, VERSION)


def test_the_image_archive_is_named_and_built_at_version(dist: Path) -> None:
    with tarfile.open(dist / f"trainer-operator-{VERSION}.tar") as archive:

        def blob(name: str) -> IO[bytes]:
            member = archive.extractfile(name)
            assert member is not None, name
            return member

        index = json.load(blob("index.json"))
        [entry] = index["manifests"]
        assert entry["annotations"]["org.opencontainers.image.ref.name"].endswith(f"/trainer-operator:{VERSION}")
        manifest = json.load(blob("blobs/sha256/" + entry["digest"].split(":", 1)[1]))
        installed = set()
        for layer in manifest["layers"]:
            with tarfile.open(fileobj=blob("blobs/sha256/" + layer["digest"].split(":", 1)[1])) as files:
                installed |= {m for m in files.getnames() if re.search(r"/trainjob_operator-[^/]+\.dist-info$", m)}
    assert [Path(p).name for p in installed] == [f"trainjob_operator-{VERSION}.dist-info"], installed
