"""The blocking :class:`TrainerClient` is the asyncio client's methods run on a loop of its own: the same
names, docstrings and signatures, results and errors; ``get_job_logs`` an iterator; the old positional
forms warned about at the caller's line. No cluster needed: the client runs over the in-memory Kube
double."""

from __future__ import annotations

import inspect
import pydoc
from collections.abc import Iterator
from typing import Any, cast

import pytest
import yaml

from tests.client.test_client_shapes import put_done_job
from tests.conftest import SAMPLES
from tests.kube_double import RecordingKube
from trainer.client import AsyncTrainerClient, NotFoundError, TrainerClient, trainjob_status
from trainer.framework.kube.client import Kube

WRAPPED = [
    name
    for name, value in vars(TrainerClient).items()
    if not name.startswith("_") and inspect.isfunction(value) and hasattr(value, "__wrapped__")
]


@pytest.fixture
def kube() -> RecordingKube:
    double = RecordingKube()
    double.put(yaml.safe_load((SAMPLES / "torch-distributed.yaml").read_text()))
    return double


@pytest.fixture
def sync(kube: RecordingKube, monkeypatch: pytest.MonkeyPatch) -> Iterator[TrainerClient]:
    async def connect(cls: type[AsyncTrainerClient], *_: Any) -> AsyncTrainerClient:
        return cls(cast(Kube, kube), "team-a")

    monkeypatch.setattr(AsyncTrainerClient, "connect", classmethod(connect))
    with TrainerClient(namespace="team-a") as client:
        yield client


def test_each_method_is_the_async_ones_with_its_docstring_and_arguments() -> None:
    assert len(WRAPPED) == 26  # 17 of TrainJobs, 9 of OptimizationJobs
    for name in WRAPPED:
        method, coroutine = getattr(TrainerClient, name), getattr(AsyncTrainerClient, name)
        assert method.__doc__ == coroutine.__doc__ and method.__doc__, name
        assert inspect.signature(method).parameters == inspect.signature(coroutine).parameters, name
        assert method.__qualname__ == f"TrainerClient.{name}"
        assert coroutine.__doc__.split("\n")[0] in pydoc.render_doc(method)
    assert str(inspect.signature(TrainerClient.get_job_logs).return_annotation) == "Iterator[str]"


def test_the_methods_return_and_raise_what_the_async_ones_do(sync: TrainerClient, kube: RecordingKube) -> None:
    assert [r.name for r in sync.list_runtimes()] == ["torch-distributed"]
    name = sync.train("torch-distributed")
    assert sync.get_job(name).name == name
    assert [j.name for j in sync.list_jobs(sync.get_runtime("torch-distributed"))] == [name]
    with pytest.raises(NotFoundError):
        sync.get_job("missing")
    sync.delete_job(name)
    assert sync.list_jobs() == []


def test_old_positional_arguments_warn_at_the_callers_line(
    sync: TrainerClient, kube: RecordingKube, monkeypatch: pytest.MonkeyPatch
) -> None:
    put_done_job(kube, monkeypatch)
    seen: list[str] = []
    with pytest.warns(DeprecationWarning, match="polling_interval") as warned:
        job = sync.wait_for_job_status("done", {"Complete"}, 5, [lambda j: seen.append(trainjob_status(j))])
    assert (job.name, seen, warned[0].filename) == ("done", ["Complete"], __file__)
    with pytest.warns(DeprecationWarning, match="follow") as warned:
        lines = sync.get_job_logs("missing", "node", 1, pod_timeout=1)
    assert warned[0].filename == __file__
    with pytest.raises(NotFoundError):
        list(lines)
