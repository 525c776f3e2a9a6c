"""The MPIJob CRD check (:mod:`trainer.mpijob.crd`): one error line naming the CRD, the versions it serves
and the fix when it does not serve ``v2beta1`` (training-operator v1's serves ``v1`` only); nothing when it
does, when there is none, or when it cannot be read."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from trainer.api.kinds import Resource
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError
from trainer.mpijob import crd


def mpijob_crd(*versions: str) -> JSON:
    return {"metadata": {"name": crd.CRD_NAME}, "spec": {"versions": [{"name": v, "served": True} for v in versions]}}


class CrdKube:
    """Answers the one GET of :func:`trainer.mpijob.crd.check`."""

    def __init__(self, answer: JSON | Exception | None) -> None:
        self.answer = answer
        self.asked: list[tuple[str, str | None, str]] = []

    async def get_or_none(self, res: Resource, namespace: str | None, name: str) -> JSON | None:
        self.asked.append((res.plural, namespace, name))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


async def test_a_v1_only_mpijob_crd_is_said_in_one_error_line_with_the_fix() -> None:
    kube = CrdKube(mpijob_crd("v1"))
    with capture_logs() as logs:
        message = await crd.check(kube)  # type: ignore[arg-type]
    assert kube.asked == [("customresourcedefinitions", None, "mpijobs.kubeflow.org")]
    assert message is not None and "mpijobs.kubeflow.org serves v1, not v2beta1" in message
    assert "kubectl delete crd mpijobs.kubeflow.org" in message and "charts/trainer/crds/" in message
    errors = [e for e in logs if e["log_level"] == "error"]
    assert len(errors) == 1 and errors[0]["event"] == message and errors[0]["served"] == ["v1"]


@pytest.mark.parametrize(
    "answer",
    [mpijob_crd("v2beta1"), mpijob_crd("v1", "v2beta1"), None, ApiError(403, {"message": "forbidden"}), OSError()],
)
async def test_a_served_absent_or_unreadable_mpijob_crd_says_nothing(answer: JSON | Exception | None) -> None:
    with capture_logs() as logs:
        assert await crd.check(CrdKube(answer)) is None  # type: ignore[arg-type]
    assert [e for e in logs if e["log_level"] == "error"] == []


def test_served_versions_only() -> None:
    spec = {"spec": {"versions": [{"name": "v1", "served": False}, {"name": "v2beta1", "served": True}]}}
    assert crd.served(spec) == ["v2beta1"] and crd.problem(spec) is None
    assert crd.problem({"spec": {"versions": []}}) is not None
