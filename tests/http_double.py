"""A local HTTP server on 127.0.0.1 that speaks just enough of the Kubernetes apiserver's protocol for
tests of the client side: :class:`~trainer.framework.kube.client.Kube`'s transport, leader election, informers.

Each test module says how requests are answered with a handler, usually one that takes answers from a
script in order; the server records every request it receives and the status it answered. It is not a
fake apiserver for controllers: it keeps no objects of its own (a handler keeps what a test needs).
Reconciler tests use :class:`tests.kube_double.RecordingKube`, end-to-end tests the real apiserver.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Generic, TypeVar

import pytest
import yaml
from aiohttp import web

from trainer.framework.json_codec import JSON

A = TypeVar("A")
Handler = Callable[["HttpDouble[A]", web.Request], Awaitable[web.StreamResponse]]
"""Answers one request: called with the server (for its script and :meth:`HttpDouble.watch`) and the
request, whatever its method and path."""

TOKEN = "t0ken"
"""The bearer token of :func:`write_kubeconfig`'s user."""
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "request_method")


@dataclass
class Received:
    """One request as the server received it."""

    method: str
    path: str
    """The URL's path, without the query."""
    query: Mapping[str, str]
    headers: Mapping[str, str]
    """Case-insensitive, as HTTP's."""
    body: bytes
    status: int | None = None
    """The status answered, set as the answer's headers go out (a watch's at once, while it stays
    open); None until then."""

    @property
    def watch(self) -> bool:
        """Whether the request opens a watch (``?watch=true``)."""
        return self.query.get("watch") == "true"


RECEIVED = web.RequestKey("received", Received)


class HttpDouble(Generic[A]):
    """An HTTP server on 127.0.0.1 answering every request with ``handler(server, request)``.

    :param handler: answers each request, after it is recorded in :attr:`received`.
    :param script: answers of the handler's own type ``A``, taken in order with :meth:`next_answer`.
    :param port: 0 (the default) listens on an ephemeral port chosen by :meth:`start`; another port
        (see :func:`free_port`) makes :attr:`url` known, and connections to it refused, before then.
    """

    def __init__(self, handler: Handler[A], script: Sequence[A] = (), port: int = 0) -> None:
        self.handler = handler
        self.script: list[A] = list(script)
        """May be replaced at any time; :meth:`next_answer` goes on counting from where it was."""
        self.answered = 0
        """How many answers :meth:`next_answer` has given."""
        self.received: list[Received] = []
        """Every request, in the order received."""
        self.port = port
        self._runner: web.AppRunner | None = None
        self._stopped = asyncio.Event()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``; raises RuntimeError before :meth:`start` if no port was given."""
        if not self.port:
            raise RuntimeError("no port yet: start the server first, or give it one")
        return f"http://127.0.0.1:{self.port}"

    def next_answer(self) -> A:
        """The next scripted answer: the n-th call gives ``script[n - 1]``, the last entry repeating.
        Raises LookupError if the script is empty."""
        if not self.script:
            raise LookupError("no scripted answers")
        answer = self.script[min(self.answered, len(self.script) - 1)]
        self.answered += 1
        return answer

    async def watch(self, request: web.Request, events: Iterable[tuple[str, JSON]] = ()) -> web.StreamResponse:
        """Answer ``request`` as an open watch: status 200, each ``(type, object)`` event sent at once
        as a JSON line, then nothing more until :meth:`stop`."""
        response = web.StreamResponse()
        await response.prepare(request)
        for kind, obj in events:
            await response.write(json.dumps({"type": kind, "object": obj}).encode() + b"\n")
        await self._stopped.wait()
        return response

    async def start(self) -> None:
        """Listen on 127.0.0.1 (:attr:`port`, or an ephemeral port that :attr:`port` is then set to)."""
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        app.on_response_prepare.append(self._answering)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        """End open watches and stop listening; nothing to do if never started."""
        self._stopped.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> HttpDouble[A]:
        await self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        received = Received(request.method, request.path, request.query, request.headers, await request.read())
        request[RECEIVED] = received
        self.received.append(received)
        return await self.handler(self, request)

    async def _answering(self, request: web.Request, response: web.StreamResponse) -> None:
        received = request.get(RECEIVED)
        if received is not None:
            received.status = response.status


def status_response(
    code: int, reason: str, message: str | None = None, headers: Mapping[str, str] | None = None
) -> web.Response:
    """A failure as the apiserver answers it: HTTP ``code`` with a ``Status`` object as the body
    (without ``message`` when it is None)."""
    body: JSON = {"kind": "Status", "code": code, "reason": reason}
    if message is not None:
        body["message"] = message
    return web.json_response(body, status=code, headers=headers)


def free_port() -> int:
    """A port of 127.0.0.1 nothing listens on now (the system's choice, let go at once): connections
    to it are refused until a server starts on it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def write_kubeconfig(directory: Path, server: str, proxy: str | None = None) -> str:
    """A kubeconfig for ``server`` (a URL) with :data:`TOKEN` as bearer token and, if given, ``proxy``
    as the cluster's ``proxy-url``, written to ``directory/kubeconfig``; returns its path."""
    cluster: dict[str, str] = {"server": server}
    if proxy:
        cluster["proxy-url"] = proxy
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": {"token": TOKEN}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
    }
    path = directory / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def without_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset the proxy variables (either case) of the machine running the tests, for this test."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
