"""The SDK raises its own errors: the apiserver's refusals reach a caller of :class:`AsyncTrainerClient`,
:class:`AsyncJobClient` and :class:`TrainerClient` as :class:`ApiServerError` and its subclasses by status,
with status, reason, message and causes as attributes and the transport's error as ``__cause__``; the
CLI's messages and exit codes stay as they were. The client talks HTTP to the apiserver double."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

import trainer.client
from tests.conftest import SAMPLES
from tests.http_double import HttpDouble, status_response, without_proxies, write_kubeconfig
from trainer.cli import errors as cli_errors
from trainer.client import (
    AlreadyExistsError,
    ApiServerError,
    AsyncJobClient,
    AsyncTrainerClient,
    Cause,
    ConflictError,
    ForbiddenError,
    InvalidError,
    NotFoundError,
    TrainerClient,
    TrainerClientError,
    TrainerError,
)
from trainer.client.errors import from_api_error, translates_api_errors
from trainer.client.types import MPIJOB
from trainer.framework.kube.client import ApiError

INVALID: dict[str, Any] = {
    "kind": "Status",
    "code": 422,
    "reason": "Invalid",
    "message": 'TrainJob.trainer.kubeflow.org "j" is invalid: spec.trainer.numNodes: Invalid value: 0',
    "details": {
        "name": "j",
        "kind": "TrainJob",
        "causes": [{"field": "spec.trainer.numNodes", "reason": "FieldValueInvalid", "message": "Invalid value: 0"}],
    },
}


async def refuse(server: HttpDouble[web.Response], request: web.Request) -> web.StreamResponse:
    return server.next_answer()


@pytest.fixture
async def refusing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[HttpDouble[Any], str]]:
    without_proxies(monkeypatch)
    async with HttpDouble(refuse) as server:
        yield server, write_kubeconfig(tmp_path, server.url)


def test_the_public_errors_are_exported_and_share_one_base() -> None:
    assert TrainerError is TrainerClientError
    for name in ("ApiServerError", "NotFoundError", "ConflictError", "ForbiddenError", "InvalidError", "Cause"):
        assert name in trainer.client.__all__
    for refusal in (NotFoundError, ConflictError, AlreadyExistsError, ForbiddenError, InvalidError):
        assert issubclass(refusal, ApiServerError) and issubclass(refusal, TrainerError)
    assert issubclass(ApiServerError, RuntimeError) and issubclass(InvalidError, ValueError)
    assert issubclass(NotFoundError, LookupError) and issubclass(AlreadyExistsError, ConflictError)


@pytest.mark.parametrize(
    ("status", "reason", "kind"),
    [(403, "Forbidden", ForbiddenError), (409, "Conflict", ConflictError), (400, "BadRequest", ApiServerError)],
)
async def test_a_refusal_is_the_error_of_its_status(
    refusing: tuple[HttpDouble[Any], str], status: int, reason: str, kind: type[ApiServerError]
) -> None:
    server, kubeconfig = refusing
    server.script = [status_response(status, reason, "no, because")]
    async with await AsyncTrainerClient.connect(kubeconfig, "team-a") as client:
        with pytest.raises(ApiServerError) as caught:
            await client.list_jobs()
    error = caught.value
    assert type(error) is kind
    assert (error.status, error.reason, error.message, error.causes) == (status, reason, "no, because", ())
    assert str(error) == f"the apiserver refused: {status} {reason}: no, because"
    assert isinstance(error.__cause__, ApiError) and error.__cause__.status == status


async def test_invalid_carries_the_apiservers_causes(refusing: tuple[HttpDouble[Any], str]) -> None:
    server, kubeconfig = refusing
    server.script = [web.json_response(INVALID, status=422)]
    async with await AsyncTrainerClient.connect(kubeconfig, "team-a") as client:
        with pytest.raises(InvalidError) as caught:
            await client.create_job(SAMPLES / "trainjob.yaml")
    assert caught.value.causes == (Cause("spec.trainer.numNodes", "FieldValueInvalid", "Invalid value: 0"),)
    assert caught.value.message == INVALID["message"] and isinstance(caught.value, ValueError)
    assert [r.method for r in server.received] == ["POST"]


async def test_a_404_names_what_the_apiserver_names(refusing: tuple[HttpDouble[Any], str]) -> None:
    server, kubeconfig = refusing
    body = {"kind": "Status", "code": 404, "reason": "NotFound", "message": "the server could not find it"}
    server.script = [web.json_response({**body, "details": {"kind": "mpijobs", "name": "m"}}, status=404)]
    async with await AsyncTrainerClient.connect(kubeconfig, "team-a") as client:
        jobs = AsyncJobClient(client.kube, client.namespace, MPIJOB)
        with pytest.raises(NotFoundError) as caught:
            await jobs.list_jobs()
    assert (caught.value.kind, caught.value.name, caught.value.status) == ("mpijobs", "m", 404)
    assert isinstance(caught.value.__cause__, ApiError)


async def test_an_existing_name_is_already_exists_with_its_cause(refusing: tuple[HttpDouble[Any], str]) -> None:
    server, kubeconfig = refusing
    server.script = [status_response(409, "AlreadyExists", 'trainjobs.trainer.kubeflow.org "j" already exists')]
    async with await AsyncTrainerClient.connect(kubeconfig, "team-a") as client:
        with pytest.raises(AlreadyExistsError) as caught:
            await client.create_job(SAMPLES / "trainjob.yaml")
    assert caught.value.status == 409 and str(caught.value).endswith("already exists")
    assert isinstance(caught.value.__cause__, ApiError)


async def test_the_blocking_client_raises_the_same(refusing: tuple[HttpDouble[Any], str]) -> None:
    server, kubeconfig = refusing
    server.script = [status_response(403, "Forbidden", "trainjobs is forbidden")]
    client = await asyncio.to_thread(TrainerClient, kubeconfig=kubeconfig, namespace="team-a")
    try:
        with pytest.raises(ForbiddenError) as caught:
            await asyncio.to_thread(client.list_runtimes)
        assert isinstance(caught.value.__cause__, ApiError)
    finally:
        await asyncio.to_thread(client.close)


async def test_an_async_generator_method_translates_too() -> None:
    @translates_api_errors
    class Lines:
        async def lines(self) -> AsyncGenerator[str, None]:
            yield "first"
            raise ApiError(403, {"reason": "Forbidden", "message": "pods/log is forbidden"})

    got: list[str] = []
    with pytest.raises(ForbiddenError) as caught:
        async for line in Lines().lines():
            got.append(line)
    assert got == ["first"] and caught.value.message == "pods/log is forbidden"


def test_the_cli_says_what_it_said_before() -> None:
    refused = ApiError(422, {"reason": "Invalid", "message": "spec.runtimeRef: Invalid value"})
    translated = from_api_error(refused)
    assert cli_errors.error_message(translated) == cli_errors.error_message(refused)
    assert cli_errors.error_message(translated) == "the apiserver refused: 422 Invalid: spec.runtimeRef: Invalid value"
    assert cli_errors.exit_code(translated) == cli_errors.EXIT_ERROR
    assert isinstance(translated, cli_errors.HANDLED)
    assert cli_errors.error_message(NotFoundError("TrainJob", "ns", "j")) == "TrainJob ns/j not found"
    assert cli_errors.error_message(AlreadyExistsError("TrainJob", "ns", "j")) == "TrainJob ns/j already exists"


def test_code_that_handles_the_transports_error_handles_the_sdks_alike() -> None:
    missing = from_api_error(ApiError(404, {"reason": "NotFound", "message": "the server could not find it"}))
    assert isinstance(missing, ApiError) and missing.not_found and missing.body["reason"] == "NotFound"
    assert NotFoundError("TrainJob", "ns", "j").not_found and AlreadyExistsError("TrainJob", "ns", "j").conflict
    assert from_api_error(ApiError(422, INVALID)).invalid
