"""The admission webhook's HTTP side (trainer/webhook/server.py): what it reads, what it refuses before
any rule runs, and how long it waits for a client.

A real aiohttp server on 127.0.0.1:0 (plain HTTP: the certificates are trainer/framework/tls.py's
business, tested apart) answers real posts; slow clients are raw sockets.
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
from collections.abc import AsyncIterator
from typing import Any, cast

import aiohttp
import pytest
from aiohttp import web

from tests.kube_double import RecordingKube
from tests.webhook.test_admission import facts, tj
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import Kube
from trainer.framework.metrics import Metrics
from trainer.webhook import server as webhook
from trainer.webhook.server import MAX_REVIEW_BYTES, WebhookServer, WebhookSettings


async def serve(metrics: Metrics | None = None) -> AsyncIterator[str]:
    kube = cast(Kube, RecordingKube())  # never called here
    hooks = WebhookServer(kube, WebhookSettings(port=0), facts(), metrics)
    runner = hooks.runner()
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = next(a[1] for a in runner.addresses if isinstance(a, tuple))
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@pytest.fixture
async def base() -> AsyncIterator[str]:
    async for url in serve():
        yield url


def review(obj: JSON, old: JSON | None = None) -> JSON:
    request: JSON = {"uid": "u-1", "operation": "UPDATE" if old is not None else "CREATE", "object": obj}
    if old is not None:
        request["oldObject"] = old
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


async def post(base: str, body: bytes, path: str = "/validate-trainjob") -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.post(base + path, data=body) as resp:
        return resp.status, await resp.json(content_type=None)


async def test_a_body_or_request_that_is_not_an_object_is_400_with_a_message(base: str) -> None:
    cases = {
        b'{"request": []}': "request is array, not an object",
        b'{"request": "x"}': "request is string, not an object",
        b'{"kind": "AdmissionReview"}': "request is null, not an object",
        b"[1, 2]": "the body is a JSON array, not an object",
        b"3": "the body is a JSON number, not an object",
        b"{nope": "the body is not JSON",
    }
    for body, message in cases.items():
        code, answer = await post(base, body)
        assert code == 400, (body, answer)
        assert message in answer["error"] and answer["error"].startswith("not an AdmissionReview"), answer
    # An object field that is not an object: refused in the review's answer, naming the field.
    code, answer = await post(base, json.dumps(review(tj(), old=[])).encode())  # type: ignore[arg-type]
    assert code == 200 and answer["response"]["allowed"] is False
    assert answer["response"]["status"]["message"] == "request.oldObject: a JSON array, not an object"


async def test_an_update_review_of_two_large_objects_is_read_and_answered(base: str) -> None:
    obj = tj(trainer={"env": [{"name": f"SETTING_{i}", "value": "v" * 140} for i in range(10_000)]})
    body = json.dumps(review(obj, copy.deepcopy(obj))).encode()
    assert 3 << 20 < len(body) < MAX_REVIEW_BYTES, len(body)
    code, answer = await post(base, body)
    assert code == 200, answer
    assert answer["response"] == {"uid": "u-1", "allowed": True}

    too_big = json.dumps(review(tj(), tj()) | {"padding": "x" * MAX_REVIEW_BYTES}).encode()
    code, answer = await post(base, too_big)
    assert code == 413 and str(MAX_REVIEW_BYTES) in answer["error"]


async def test_a_slow_body_is_408_and_a_silent_connection_is_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(webhook, "READ_TIMEOUT", 0.3)
    monkeypatch.setattr(webhook, "IDLE_TIMEOUT", 0.5)
    async for base in serve():
        host, port = base.removeprefix("http://").split(":")
        # Headers, then a tenth of the body, then nothing.
        reader, writer = await asyncio.open_connection(host, int(port))
        head = f"POST /validate-trainjob HTTP/1.1\r\nHost: {host}\r\nContent-Length: 100\r\n\r\n"
        writer.write(head.encode() + b'{"request"')
        start = time.monotonic()
        answer = await asyncio.wait_for(reader.read(), 5)
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert b"did not arrive within 0.3 s" in answer
        assert time.monotonic() - start < 3
        writer.close()

        # A connection that sends no request at all is closed.
        reader, writer = await asyncio.open_connection(host, int(port))
        start = time.monotonic()
        assert await asyncio.wait_for(reader.read(), 5) == b""
        assert 0.3 < time.monotonic() - start < 4
        writer.close()


async def test_answers_are_counted_by_path_and_http_status_with_their_latency() -> None:
    """controller-runtime's webhook metrics: a refusal in the review is a 200, a body that is no
    AdmissionReview a 400; nothing is in flight once answered."""
    metrics = Metrics()
    sample = metrics.registry.get_sample_value
    async for url in serve(metrics):
        assert sample("controller_runtime_webhook_requests_in_flight", {"webhook": "/validate-mpijob"}) == 0
        await post(url, json.dumps(review(tj())).encode())
        await post(url, json.dumps(review(tj(), old=[])).encode())  # type: ignore[arg-type]
        await post(url, b"[1, 2]")
        await post(url, b"{}", path="/mutate-pod")
    requests = "controller_runtime_webhook_requests_total"
    assert sample(requests, {"webhook": "/validate-trainjob", "code": "200"}) == 2
    assert sample(requests, {"webhook": "/validate-trainjob", "code": "400"}) == 1
    assert sample(requests, {"webhook": "/mutate-pod", "code": "400"}) == 1
    latency = "controller_runtime_webhook_latency_seconds_count"
    assert sample(latency, {"webhook": "/validate-trainjob", "code": "200"}) == 2
    assert sample("controller_runtime_webhook_requests_in_flight", {"webhook": "/validate-trainjob"}) == 0
