"""localcluster.prebuild builds everything the suite's modules would otherwise build on first use."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from localcluster import binaries, prebuild
from localcluster.realnode import images

ROOT = Path(__file__).resolve().parents[2]


def functions(script: Path) -> set[str]:
    """The components a build script knows: its ``build_<name>()`` functions."""
    return set(re.findall(r"^build_(\w+)\(\) \{", script.read_text(), re.MULTILINE))


def test_every_component_of_both_build_scripts_is_prebuilt() -> None:
    assert set(prebuild.COMPONENTS) == functions(ROOT / "localcluster" / "build.sh")
    assert set(prebuild.NODE_BINARIES) == functions(ROOT / "localcluster" / "realnode" / "build.sh") - {
        "node_command"  # the helper of kubelet and kube_proxy
    }


def test_every_real_node_image_but_the_sandbox_is_prebuilt_in_the_image_lane() -> None:
    """The sandbox image wraps the pause binary of the Go lane: the real nodes make it when they start."""
    assert set(prebuild.IMAGES) == set(images.BUILDERS) - {"pause"}


def test_what_is_built_first_is_what_every_cluster_runs() -> None:
    assert set(prebuild.CLUSTER) == {component for _, component in binaries.BINARIES.values()}
    assert prebuild.BESIDE[:2] == ("volcano", "kueue"), "the session cluster's (e2e/conftest.py) come first"
    assert set(prebuild.CLUSTER) | set(prebuild.BESIDE) == set(prebuild.COMPONENTS)
    assert not set(prebuild.CLUSTER) & set(prebuild.BESIDE)


@pytest.fixture
def script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Path]:
    """A stand-in for localcluster/build.sh with body ``body`` (``$1`` is the component); what it
    writes goes to ``tmp_path``, the directory it is run in is returned."""

    def write(body: str) -> Path:
        path = tmp_path / "build.sh"
        path.write_text(f"cd {tmp_path}\n{body}\n")
        monkeypatch.setattr(prebuild, "BUILD_SCRIPT", path)
        monkeypatch.setattr(prebuild, "BESIDE", ("one", "two"))
        return tmp_path

    return write


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_a_command_runs_while_the_other_components_build_beside_it_at_the_lowest_priority(
    script: Callable[[str], Path],
) -> None:
    where = script('awk \'{print $19}\' /proc/self/stat > "$1.nice"; echo $$ > "$1.pid"; exec sleep 60')
    timings: dict[str, float] = {}
    began = time.monotonic()
    # The command waits for the first build to start: it then sees it under way.
    command = ["bash", "-c", f"while [ ! -s {where}/one.pid ]; do sleep 0.1; done"]
    assert prebuild.meanwhile(command, timings) == 0
    assert time.monotonic() - began < 30, "the build beside the command was not stopped with it"
    assert (where / "one.nice").read_text().strip() == "19"
    pid = int((where / "one.pid").read_text())
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pid), "the build's process group outlived the command"
    assert not (where / "two.pid").exists(), "a build started after the command ended"


def test_the_command_is_told_what_builds_beside_it(
    script: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    where = script("exit 0")
    monkeypatch.setattr(prebuild, "missing_components", lambda components: [c for c in components if c == "two"])
    told = where / "told"
    assert prebuild.meanwhile(["bash", "-c", f'printf %s "${prebuild.BUILDING_BESIDE}" > {told}'], {}) == 0
    assert told.read_text() == "two"


def test_the_command_s_failure_is_the_exit_status(script: Callable[[str], Path]) -> None:
    script("exit 0")
    assert prebuild.meanwhile(["bash", "-c", "exit 7"], {}) == 7


def test_a_build_beside_a_passing_command_that_fails_makes_the_run_fail(script: Callable[[str], Path]) -> None:
    where = script('touch "$1.ran"; exit 3')
    timings: dict[str, float] = {}
    assert (
        prebuild.meanwhile(["bash", "-c", f"while [ ! -e {where}/one.ran ]; do sleep 0.1; done; sleep 1"], timings) == 1
    )
    assert not (where / "two.ran").exists(), "the lane went on after a failed build"


def test_an_unknown_argument_is_refused() -> None:
    assert prebuild.main(["--now"]) == 2


def test_the_fetch_lane_downloads_for_what_is_not_built_in_the_builds_order(
    script: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    where = script('echo "$*" >> "$(dirname "$0")/calls"')
    monkeypatch.setattr(images, "BUILD_SCRIPT", where / "build.sh")
    monkeypatch.setattr(prebuild, "missing_components", lambda components: [c for c in components if c != "two"])
    monkeypatch.setattr(prebuild, "component_dir", lambda component: where / component)  # no kubelet built
    timings: dict[str, float] = {}
    fetch = prebuild.Fetch(timings, real=True).start()
    fetch._thread.join(30)
    fetch.stop()
    calls = (where / "calls").read_text().splitlines()
    assert calls == ["--fetch kubernetes", "--fetch kubelet", "--fetch kube_proxy", "--fetch coredns", "--fetch one"]
    assert set(timings) == {f"{c} modules" for c in ("kubernetes", "kubelet", "kube_proxy", "coredns", "one")}


def test_without_real_nodes_or_once_built_nothing_more_is_fetched(
    script: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    where = script('echo "$*" >> "$(dirname "$0")/calls"')
    monkeypatch.setattr(prebuild, "missing_components", lambda components: [])
    monkeypatch.setattr(prebuild, "component_dir", lambda component: where / component)
    fetch = prebuild.Fetch({}, real=False).start()
    fetch.stop()
    assert not fetch._thread.is_alive() and not (where / "calls").exists()
