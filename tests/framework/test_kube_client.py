"""``Kube``'s transport against a real aiohttp server on 127.0.0.1, reached through ``Kube.connect`` and a
kubeconfig written to a temporary directory: 429/5xx answers with ``Retry-After`` are retried as client-go
does, other failures are not, and no request takes a thread-pool hop."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from kubernetes_asyncio import client, config

from tests.http_double import TOKEN, HttpDouble, status_response, without_proxies, write_kubeconfig
from trainer.api.kinds import CONFIGMAPS
from trainer.framework.kube.client import ApiError, Kube, retry_after

PATH = CONFIGMAPS.path("n", "x")
Answer = tuple[int, dict[str, str]]
"""A scripted answer: status and headers."""
Apiserver = HttpDouble[Answer]


async def configmap_x(server: Apiserver, request: web.Request) -> web.StreamResponse:
    """The next scripted answer: an error status with a ``Status`` body, a watch's one ADDED event (then
    its end), or else ConfigMap n/x."""
    status, headers = server.next_answer()
    if status >= 300:
        return status_response(status, "TooManyRequests", "try later", headers)
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "n"}}
    if request.query.get("watch") == "true":
        return web.Response(text=json.dumps({"type": "ADDED", "object": obj}) + "\n", headers=headers)
    return web.json_response(obj, status=status, headers=headers)


def configmap_server() -> Apiserver:
    return HttpDouble(configmap_x, script=[(200, {})])


@pytest.fixture
async def apiserver() -> AsyncIterator[Apiserver]:
    async with configmap_server() as server:
        yield server


@pytest.fixture
def no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy variables from the machine running the tests."""
    without_proxies(monkeypatch)


class Observed(list[tuple[str, str]]):
    """A request observer that keeps ``(method, code)`` of every report."""

    def __call__(self, method: str, code: str, host: str, verb: str, resource: str) -> None:
        self.append((method, code))


@pytest.fixture
def observed() -> Observed:
    return Observed()


@pytest.fixture
async def kube(apiserver: Apiserver, tmp_path: Path, no_proxy_env: None, observed: Observed) -> AsyncIterator[Kube]:
    k = await Kube.connect(write_kubeconfig(tmp_path, apiserver.url))
    k.observe = observed
    yield k
    await k.close()


async def test_429_with_retry_after_is_retried_after_the_wait(
    kube: Kube, apiserver: Apiserver, observed: Observed
) -> None:
    apiserver.script = [(429, {"Retry-After": "1"}), (200, {})]
    start = time.monotonic()
    obj = await kube.get(CONFIGMAPS, "n", "x")
    elapsed = time.monotonic() - start
    assert obj["metadata"]["name"] == "x"
    assert observed == [("GET", "429"), ("GET", "200")]
    assert [(r.method, r.path, r.headers.get("Authorization")) for r in apiserver.received] == [
        ("GET", PATH, f"Bearer {TOKEN}")
    ] * 2
    assert elapsed >= 0.99  # the second send waited for Retry-After (lower bound only)


async def test_post_is_retried_too_with_the_same_body(kube: Kube, apiserver: Apiserver, observed: Observed) -> None:
    """A 429 means the request was not processed: client-go resends POST as well."""
    apiserver.script = [(429, {"Retry-After": "0"}), (201, {})]
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"k": "v"}}
    await kube.create(CONFIGMAPS, "n", body)
    assert observed == [("POST", "429"), ("POST", "201")]
    assert [json.loads(r.body) for r in apiserver.received] == [body, body]


async def test_429_forever_gives_up_after_the_bounded_attempts(
    kube: Kube, apiserver: Apiserver, observed: Observed
) -> None:
    apiserver.script = [(429, {"Retry-After": "0"})]
    with pytest.raises(ApiError) as caught:
        await kube.get(CONFIGMAPS, "n", "x")
    assert caught.value.status == 429
    assert kube.max_attempts == 5
    assert len(apiserver.received) == 5
    assert observed == [("GET", "429")] * 5


async def test_each_wait_is_capped(kube: Kube, apiserver: Apiserver, observed: Observed) -> None:
    """An hour-long Retry-After waits ``max_retry_wait`` only (the wait_for guards against a hang)."""
    apiserver.script = [(429, {"Retry-After": "3600"}), (200, {})]
    kube.max_retry_wait = 0.05
    start = time.monotonic()
    await asyncio.wait_for(kube.get(CONFIGMAPS, "n", "x"), timeout=120)
    assert time.monotonic() - start >= 0.04
    assert observed == [("GET", "429"), ("GET", "200")]


@pytest.mark.parametrize(
    ("answer", "sends"),
    [
        ((500, {}), 1),  # a 5xx without Retry-After is final
        ((429, {}), 1),  # client-go needs Retry-After for a 429 too
        ((429, {"Retry-After": "Fri, 31 Dec 1999 23:59:59 GMT"}), 1),  # seconds only, as client-go
        ((409, {"Retry-After": "0"}), 1),  # only 429 and 5xx
        ((503, {"Retry-After": "0"}), 2),  # a 5xx with Retry-After is retried, as client-go
    ],
)
async def test_which_answers_are_retried(
    kube: Kube, apiserver: Apiserver, observed: Observed, answer: Answer, sends: int
) -> None:
    apiserver.script = [answer, (200, {})]
    if sends == 1:
        with pytest.raises(ApiError) as caught:
            await kube.get(CONFIGMAPS, "n", "x")
        assert caught.value.status == answer[0]
    else:
        await kube.get(CONFIGMAPS, "n", "x")
    assert len(apiserver.received) == sends
    assert [code for _, code in observed] == [str(answer[0]), "200"][:sends]


async def test_watch_is_opened_again_after_429(kube: Kube, apiserver: Apiserver, observed: Observed) -> None:
    apiserver.script = [(429, {"Retry-After": "0"}), (200, {})]
    events = [e async for e in kube.watch(CONFIGMAPS, "n", "1")]
    assert [(t, o["metadata"]["name"]) for t, o in events] == [("ADDED", "x")]
    assert observed == [("GET", "429"), ("GET", "200")]


def test_retry_after_parsing() -> None:
    assert retry_after(429, {"Retry-After": "2"}) == 2
    assert retry_after(504, {"Retry-After": " 3 "}) == 3
    assert retry_after(429, {"Retry-After": "-1"}) == 0
    assert retry_after(429, {"Retry-After": "1.5"}) is None
    assert retry_after(200, {"Retry-After": "1"}) is None


def count_executor_calls(monkeypatch: pytest.MonkeyPatch) -> list[Callable[..., Any]]:
    """Every function the running loop hands to a thread pool from now on (``asyncio.to_thread`` too)."""
    loop = asyncio.get_running_loop()
    calls: list[Callable[..., Any]] = []
    original = loop.run_in_executor

    def counting(executor: Any, func: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        calls.append(func)
        return original(executor, func, *args)

    monkeypatch.setattr(loop, "run_in_executor", counting)
    return calls


async def test_no_thread_pool_hop_per_request(
    apiserver: Apiserver, tmp_path: Path, no_proxy_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = 20
    path = write_kubeconfig(tmp_path, apiserver.url)
    kube = await Kube.connect(path)
    try:
        calls = count_executor_calls(monkeypatch)
        for _ in range(n):
            await kube.get(CONFIGMAPS, "n", "x")
        assert calls == []
    finally:
        await kube.close()
    assert all(r.headers.get("Authorization") == f"Bearer {TOKEN}" for r in apiserver.received)

    # the counter does see kubernetes_asyncio's stock session (trust_env=True): ~/.netrc and proxies per request
    cfg = client.Configuration()
    await config.load_kube_config(config_file=path, client_configuration=cfg)
    stock = Kube(client.ApiClient(configuration=cfg))
    try:
        calls.clear()
        for _ in range(n):
            await stock.get(CONFIGMAPS, "n", "x")
        assert len(calls) >= n
    finally:
        await stock.close()


async def test_proxy_from_the_environment_is_read_once_and_honoured(
    apiserver: Apiserver, tmp_path: Path, no_proxy_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = configmap_server()
    await proxy.start()
    try:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)  # the apiserver is served over http here
        kube = await Kube.connect(write_kubeconfig(tmp_path, apiserver.url))
        monkeypatch.delenv("HTTP_PROXY")  # read at connect, not per request
        try:
            await kube.get(CONFIGMAPS, "n", "x")
        finally:
            await kube.close()
        assert len(proxy.received) == 1
        assert apiserver.received == []

        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        kube = await Kube.connect(write_kubeconfig(tmp_path, apiserver.url))
        try:
            await kube.get(CONFIGMAPS, "n", "x")
        finally:
            await kube.close()
        assert len(proxy.received) == 1
        assert len(apiserver.received) == 1

        # the kubeconfig's proxy-url wins over the environment, as in kubernetes_asyncio
        kube = await Kube.connect(write_kubeconfig(tmp_path, apiserver.url, proxy=proxy.url))
        try:
            await kube.get(CONFIGMAPS, "n", "x")
        finally:
            await kube.close()
        assert len(proxy.received) == 2
    finally:
        await proxy.stop()


async def paged_configmaps(server: HttpDouble[int], request: web.Request) -> web.StreamResponse:
    """A list of 5 ConfigMaps served ``limit`` at a time with ``continue`` tokens (an offset)."""
    limit, start = int(request.query["limit"]), int(request.query.get("continue") or 0)
    names = [f"cm-{i}" for i in range(5)][start : start + limit]
    meta: dict[str, Any] = {"resourceVersion": "77"}
    if start + limit < 5:
        meta["continue"] = str(start + limit)
    items = [{"metadata": {"name": n, "namespace": "n"}} for n in names]
    return web.json_response({"kind": "ConfigMapList", "metadata": meta, "items": items})


async def test_lists_are_read_in_pages_following_continue_tokens(tmp_path: Path, no_proxy_env: None) -> None:
    async with HttpDouble(paged_configmaps) as server:
        kube = await Kube.connect(write_kubeconfig(tmp_path, server.url))
        try:
            pages = [(len(items), rv) async for items, rv in kube.list_pages(CONFIGMAPS, "n", limit=2)]
            assert pages == [(2, "77"), (2, "77"), (1, "77")]
            items, rv = await kube.list(CONFIGMAPS, "n")
            assert [i["metadata"]["name"] for i in items] == [f"cm-{i}" for i in range(5)] and rv == "77"
            assert all(i["kind"] == "ConfigMap" and i["apiVersion"] == "v1" for i in items)
            queries = [dict(r.query) for r in server.received]
            assert queries[:3] == [{"limit": "2"}, {"limit": "2", "continue": "2"}, {"limit": "2", "continue": "4"}]
            assert queries[3] == {"limit": "500"}
        finally:
            await kube.close()
