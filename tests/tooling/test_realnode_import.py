"""A real node's image import: a failed ``ctr images import`` is tried again, and the last failure says why."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from localcluster.realnode import node as realnode


class Node(realnode.RealNode):
    """A real node whose ``ctr`` answers from ``answers`` (return code, stderr) and records each call."""

    answers: list[tuple[int, str]]
    calls: list[tuple[str, ...]]

    def ctr(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        self.calls.append(args)
        if args[:2] == ("images", "ls"):
            return subprocess.CompletedProcess(args, 0, "REF TYPE DIGEST\n", "")
        code, err = self.answers.pop(0)
        return subprocess.CompletedProcess(args, code, "", err)


def node(tmp_path: Path, answers: list[tuple[int, str]]) -> Node:
    made = Node("realnode-0", 0, tmp_path)
    made.answers, made.calls = answers, []
    return made


def test_an_import_that_fails_once_is_tried_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr("localcluster.realnode.node.time.sleep", slept.append)
    one = node(tmp_path, [(1, "ctr: unexpected EOF"), (0, "")])
    one.import_images([("docker.io/library/x:1", tmp_path / "x.tar")])
    imports = [c for c in one.calls if c[:2] == ("images", "import")]
    assert imports == [("images", "import", str(tmp_path / "x.tar"))] * 2
    assert slept == [2]


def test_the_last_failure_names_the_node_the_archive_and_ctrs_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("localcluster.realnode.node.time.sleep", lambda seconds: None)
    one = node(tmp_path, [(1, "ctr: first")] * (realnode.IMPORT_ATTEMPTS - 1) + [(1, "ctr: no space left on device")])
    failed = r"realnode-0: ctr images import .*x\.tar failed 3 times, last: ctr: no space"
    with pytest.raises(RuntimeError, match=failed):
        one.import_images([("docker.io/library/x:1", tmp_path / "x.tar")])
    assert one.answers == []
