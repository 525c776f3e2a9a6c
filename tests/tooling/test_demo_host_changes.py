"""``make demo`` says what it does to the host before doing it (:mod:`localcluster.host_changes`), with
an undo for each, and docs/development.md lists the same; its step times each count one step."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from localcluster import demo, host_changes, operator_image
from localcluster.cluster import SERVICE_CIDR
from localcluster.realnode import host
from localcluster.realnode.node import BRIDGE, PACKAGES, installed

ROOT = Path(__file__).resolve().parents[2]
SECTION = "### What the demo changes on the host\n"


def documented() -> str:
    text = (ROOT / "docs" / "development.md").read_text()
    start = text.index(SECTION)
    end = text.find("\n#", start + len(SECTION))
    return text[start:end]


def test_every_package_the_demo_installs_is_listed_with_its_undo() -> None:
    assert set(host_changes.packages()) == {*PACKAGES, *operator_image.PACKAGES}
    assert {"buildah", "containerd", "runc", "busybox-static", "conntrack"} <= set(host_changes.packages())
    first, service, *_ = host_changes.changes(True, lambda package: package == "runc")
    missing = [p for p in host_changes.packages() if p != "runc"]
    assert all(p in first.what for p in host_changes.packages())
    assert first.what.endswith(f"missing now: {', '.join(missing)}")
    assert first.undo == f"apt-get purge {' '.join(missing)} && apt-get autoremove --purge"
    assert "containerd.service" in service.what and "(now)" in service.what
    assert service.undo == "systemctl disable --now containerd.service"


def test_nothing_to_purge_when_every_package_was_there() -> None:
    first, service, *_ = host_changes.changes(True, lambda package: True)
    assert first.what.endswith("missing now: none") and first.undo == "nothing to undo"
    assert "installed already: no change" in service.what


def test_the_network_sysctls_and_iptables_are_listed_with_down_as_their_undo() -> None:
    text = "\n".join(host_changes.lines(True, lambda package: True))
    for name in (BRIDGE, SERVICE_CIDR, "KUBE-*", "CNI-*", *(s.replace("/", ".") for s in host.SYSCTLS)):
        assert name in text, name
    for log_dir in host.LOG_DIRS:
        assert str(log_dir) in text
    assert text.count("undo: python -m localcluster.demo --down") >= 4
    assert f"undo: python -m localcluster.demo --down, then rm -rf {host_changes.NODES_DIR}" in text


def test_on_kwok_nodes_only_the_cache_and_processes_are_the_demos() -> None:
    (only,) = host_changes.changes(False, lambda package: False)
    assert "rm -rf" in only.undo and "--down" in only.undo and "apt" not in only.what


def test_the_docs_list_the_same_changes() -> None:
    section = documented()
    for name in (
        *host_changes.packages(),
        "containerd.service",
        "systemctl disable --now containerd.service",
        "apt-get purge",
        BRIDGE,
        SERVICE_CIDR,
        "python -m localcluster.demo --down",
        *(s.replace("/", ".") for s in host.SYSCTLS),
        *(str(d) for d in host.LOG_DIRS),
        operator_image.BASE.name,
        str(host_changes.NODES_DIR),
    ):
        assert f"`{name}" in section, name
    assert "counts from its creation" in section


def test_the_step_table_lists_each_step_with_its_own_time() -> None:
    timings = demo.Timings()
    timings.add("cluster up", 3.25)
    assert timings.add("TrainJob digits-x, created to Complete", 21.0) == 21.0
    out = io.StringIO()
    Console(file=out, width=120).print(timings.table(70.0))
    rows = [line for line in out.getvalue().splitlines() if "│" in line]
    assert any("cluster up" in r and "3.2" in r for r in rows), out.getvalue()
    assert any("created to Complete" in r and "21.0" in r for r in rows)
    assert any("wall time" in r and "70.0" in r for r in rows)


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="no dpkg")
def test_a_package_removed_but_not_purged_is_not_installed(tmp_path: Path) -> None:
    """``apt-get remove containerd`` leaves its configuration and dpkg status ``rc`` (``dpkg -s`` exits 0):
    the demo must install it again, not start nodes without containerd."""
    stanza = "Package: {}\nStatus: {}\nPriority: optional\nSection: admin\nArchitecture: amd64\nVersion: 1.0\n"
    (tmp_path / "status").write_text(
        "\n".join(
            [stanza.format("containerd", "deinstall ok config-files"), stanza.format("runc", "install ok installed")]
        )
    )
    (tmp_path / "info").mkdir()
    (tmp_path / "updates").mkdir()
    assert installed("runc", tmp_path)
    assert not installed("containerd", tmp_path)
    assert not installed("no-such-package", tmp_path)


def test_the_image_store_named_is_the_one_buildah_uses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "storage.conf"
    conf.write_text('[storage]\ndriver = "overlay"\ngraphroot = "/srv/images"\n')
    monkeypatch.setenv("CONTAINERS_STORAGE_CONF", str(conf))
    assert host_changes.image_store() == "/srv/images"
    assert any("buildah's image store (/srv/images)" in line for line in host_changes.lines(True, lambda p: True))
    conf.write_text("[storage]\n")  # no graphroot: containers-storage's default for root
    assert host_changes.image_store() == host_changes.GRAPHROOT == "/var/lib/containers/storage"
    monkeypatch.setenv("CONTAINERS_STORAGE_CONF", str(tmp_path / "absent.conf"))
    assert host_changes.image_store() == host_changes.GRAPHROOT
