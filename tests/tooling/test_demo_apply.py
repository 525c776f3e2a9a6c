"""``make demo`` applies its sample right after the chart is installed: a webhook the apiserver cannot call
yet is tried again; any other refusal ends the demo with kubectl's words (a cold run once stopped there
with a bare ``CalledProcessError``)."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from localcluster import demo

UNREACHABLE = (
    'Error from server (InternalError): error when creating "x": Internal error occurred: failed calling webhook '
    '"validate-trainingruntime.trainer.kubeflow.org": connect: connection refused'
)


class Kubectl:
    """Answers ``run_kubectl`` with the given (exit code, stderr) in turn; records the calls."""

    def __init__(self, *answers: tuple[int, str]) -> None:
        self.answers, self.calls = list(answers), 0

    def run_kubectl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        self.calls += 1
        code, err = self.answers.pop(0)
        return subprocess.CompletedProcess(list(args), code, "", err)


async def test_a_webhook_not_reachable_yet_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    said: list[str] = []
    monkeypatch.setattr(demo, "say", said.append)
    kubectl = Kubectl((1, UNREACHABLE), (1, UNREACHABLE), (0, ""))
    cluster: Any = kubectl
    await demo.apply_sample(cluster, patience=30)
    assert kubectl.calls == 3
    assert len(said) == 1 and "failed calling webhook" in said[0], said


async def test_another_refusal_ends_the_demo_with_kubectls_words(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo, "say", lambda _m: None)
    cluster: Any = Kubectl((1, 'error: no matches for kind "TrainingRuntime"'))
    with pytest.raises(SystemExit, match='no matches for kind "TrainingRuntime"'):
        await demo.apply_sample(cluster)


async def test_a_webhook_that_stays_unreachable_ends_the_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo, "say", lambda _m: None)
    cluster: Any = Kubectl((1, UNREACHABLE), (1, UNREACHABLE))
    with pytest.raises(SystemExit, match="connection refused"):
        await demo.apply_sample(cluster, patience=0.5)
