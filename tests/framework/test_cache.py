"""Informers through apiserver failures: how long they wait before trying again (the client-go
reflector's backoff, but prompt for a (re)starting apiserver), whether they say they are watching, and
the manager's readiness built on that. Waits are observed through an injected sleep and clock; nothing
here measures wall-clock time."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import structlog
import structlog.testing
from aiohttp import web

from tests.http_double import HttpDouble, free_port, status_response, without_proxies, write_kubeconfig
from tests.kube_double import RecordingKube
from trainer.api.kinds import CONFIGMAPS, TRAINJOBS
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import NOT_FOUND_GRACE, TRANSIENT_WAIT, Backoff, Informer
from trainer.framework.kube.client import ApiError, Kube
from trainer.framework.probes import probes_app, serve
from trainer.wiring import Settings, new_manager

NS = "n"


def cm(name: str, rv: str) -> JSON:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS, "resourceVersion": rv}}


class Clock:
    """A fake monotonic clock and the sleep that moves it (recording each wait)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.waits: list[float] = []
        self.on_sleep: Callable[[int], Awaitable[None]] | None = None
        """Called with the number of waits so far, at each sleep (e.g. to bring a server up)."""

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds
        if self.on_sleep is not None:
            await self.on_sleep(len(self.waits))
        await asyncio.sleep(0)


async def until(probe: Callable[[], object], what: str) -> None:
    """Yield to the loop until ``probe()`` is truthy (a guard of 10 s against a hang, not a measure)."""
    async with asyncio.timeout(10):
        while not probe():
            await asyncio.sleep(0.001)


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# ----------------------------------------------------------------------------- the backoff


def test_backoff_is_the_reflectors_doubling_to_a_cap_and_resets_after_a_quiet_period() -> None:
    clock = Clock()
    b = Backoff(clock=clock, rand=lambda: 0.0)
    waits = []
    for _ in range(8):
        waits.append(b.next())
        clock.now += 1
    assert waits == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]
    clock.now += 121  # two minutes without a wait: start over
    assert b.next() == 0.8
    jittered = Backoff(clock=clock, rand=lambda: 0.999)
    assert 0.8 < jittered.next() < 1.6  # up to 100 % jitter on top


# ----------------------------------------------------------------------------- a real HTTP server


ListAnswer = tuple[int, str | None]
"""A scripted answer to a list: status and Retry-After."""
Apiserver = HttpDouble[ListAnswer]


async def configmaps(server: Apiserver, request: web.Request) -> web.StreamResponse:
    """A list takes the next scripted answer (an error status with a ``Status`` body, or ConfigMap a);
    a watch streams one ADDED event (ConfigMap b) and stays open."""
    if request.query.get("watch") == "true":
        return await server.watch(request, [("ADDED", cm("b", "6"))])
    status, wait = server.next_answer()
    if status != 200:
        headers = {"Retry-After": wait} if wait else {}
        return status_response(status, "TooManyRequests", "storage is (re)initializing", headers)
    return web.json_response({"kind": "ConfigMapList", "metadata": {"resourceVersion": "5"}, "items": [cm("a", "5")]})


def seen(server: Apiserver) -> list[tuple[str, int | None]]:
    """``(LIST or WATCH, status answered)`` per request."""
    return [("WATCH" if r.watch else "LIST", r.status) for r in server.received]


@pytest.fixture
async def apiserver() -> AsyncIterator[Apiserver]:
    """Refuses connections until it is started."""
    server: Apiserver = HttpDouble(configmaps, script=[(200, None)], port=free_port())
    yield server
    await server.stop()


async def test_an_informer_syncs_once_the_apiserver_answers_after_refusals_and_a_429(
    apiserver: Apiserver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    without_proxies(monkeypatch)
    apiserver.script = [(429, "1"), (200, None)]
    kube = await Kube.connect(write_kubeconfig(tmp_path, apiserver.url))
    kube.max_attempts = 1  # the informer, not the client, honours Retry-After here
    clock = Clock()

    async def bring_up(waits: int) -> None:
        if waits == 2:  # two connections refused, then the apiserver listens
            await apiserver.start()

    clock.on_sleep = bring_up
    informer = Informer(kube, CONFIGMAPS, NS, sleep=clock.sleep, clock=clock, rand=lambda: 0.5)
    task = asyncio.create_task(informer.run())
    try:
        await until(lambda: informer.get(NS, "b"), "the watched ConfigMap")
        # Refused twice: the transient wait (at most 1 s, jittered down to 0.75 here), not a growing
        # backoff; then the 429's Retry-After: 1, exactly.
        assert clock.waits == [0.75, 0.75, 1.0]
        assert seen(apiserver) == [("LIST", 429), ("LIST", 200), ("WATCH", 200)]
        assert sorted(o["metadata"]["name"] for o in informer.items()) == ["a", "b"]
        assert informer.synced.is_set() and informer.watching and informer.healthy
        assert informer.failures == 0
    finally:
        await stop(task)
        await kube.close()


async def test_the_client_honours_retry_after_itself_before_the_informer_sees_a_failure(
    apiserver: Apiserver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    without_proxies(monkeypatch)
    # A starting apiserver's 503 asks for 5 s; the informer's requests are resent after 1 s at most.
    apiserver.script = [(503, "5"), (429, "0"), (200, None)]
    await apiserver.start()
    kube = await Kube.connect(write_kubeconfig(tmp_path, apiserver.url))
    assert kube.max_retry_wait == 10.0, "other requests keep the client's cap"
    waited: list[float] = []
    sleep = asyncio.sleep

    async def recorded(seconds: float, *args: Any) -> Any:
        if seconds >= 0.1:
            waited.append(seconds)
        return await sleep(0, *args)

    monkeypatch.setattr(asyncio, "sleep", recorded)
    clock = Clock()
    informer = Informer(kube, CONFIGMAPS, NS, sleep=clock.sleep, clock=clock, rand=lambda: 0.5)
    task = asyncio.create_task(informer.run())
    try:
        await until(lambda: informer.get(NS, "b"), "the watched ConfigMap")
        assert clock.waits == []  # no failure reached the informer
        assert [s for _, s in seen(apiserver)] == [503, 429, 200, 200]
        assert waited == [TRANSIENT_WAIT], "the client resent after min(Retry-After, 1 s), then at once"
    finally:
        await stop(task)
        await kube.close()


# ----------------------------------------------------------------------------- a scripted Kube

Outcome = Exception | tuple[list[JSON], str] | list[tuple[str, JSON]] | asyncio.Event | None
"""A list answer ``(items, rv)`` or a watch's events (then a normal end), an exception to raise, an
Event to wait for first (the next entry is the answer), or None: hang (the script is over)."""


class ScriptedKube:
    """The two calls an informer makes, answered from one script in order; once it is used up, calls
    hang and :attr:`done` is set."""

    def __init__(self, clock: Clock, script: list[Outcome]) -> None:
        self.clock, self.script = clock, list(script)
        self.calls: list[str] = []
        self.done = asyncio.Event()

    async def _next(self, call: str) -> Outcome:
        self.calls.append(call)
        outcome = self.script.pop(0) if self.script else None
        if isinstance(outcome, asyncio.Event):
            await outcome.wait()
            outcome = self.script.pop(0) if self.script else None
        if outcome is None:
            self.done.set()
            await asyncio.Event().wait()
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def list(self, *args: Any, **kwargs: Any) -> tuple[list[JSON], str]:
        outcome = await self._next("list")
        assert isinstance(outcome, tuple), f"script: {outcome!r} is not a list answer"
        return outcome

    async def watch(self, *args: Any, **kwargs: Any) -> AsyncIterator[tuple[str, JSON]]:
        outcome = await self._next("watch")
        assert isinstance(outcome, list), f"script: {outcome!r} is not a watch"
        for event in outcome:
            yield event
        self.clock.now += 300  # a watch that ran its course (timeoutSeconds)


def informer_on(kube: ScriptedKube, clock: Clock) -> Informer:
    return Informer(kube, CONFIGMAPS, NS, sleep=clock.sleep, clock=clock, rand=lambda: 0.0)


async def run_script(script: list[Outcome], clock: Clock | None = None) -> tuple[Informer, ScriptedKube, Clock]:
    """Run an informer until its script is used up; returns it (still running) for inspection."""
    clock = clock or Clock()
    kube = ScriptedKube(clock, script)
    informer = informer_on(kube, clock)
    task = asyncio.create_task(informer.run())
    await until(kube.done.is_set, "the script used up")
    await stop(task)
    return informer, kube, clock


LISTED: tuple[list[JSON], str] = ([cm("a", "5")], "5")


def refused() -> Exception:
    return ConnectionRefusedError(111, "Connection refused")


async def test_connection_failures_are_retried_within_a_second_however_long_they_last() -> None:
    informer, _, clock = await run_script([refused() for _ in range(40)])
    assert len(clock.waits) == 40
    # rand 0: the transient wait is TRANSIENT_WAIT; the reflector's backoff alone would be 30 s by now.
    assert clock.waits == [0.8, *[TRANSIENT_WAIT] * 39]
    assert not informer.synced.is_set() and not informer.watching and informer.failures == 40


async def test_other_refusals_back_off_as_the_reflector_does() -> None:
    forbidden = [ApiError(403, {"reason": "Forbidden", "message": "no"}) for _ in range(8)]
    _, _, clock = await run_script(list(forbidden))
    assert clock.waits == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]


@pytest.mark.parametrize(
    ("error", "wait"),
    [
        (ApiError(429, {"message": "storage is (re)initializing"}, retry_after=1), 1.0),
        (ApiError(503, {"message": "before all known HTTP paths have been installed"}, retry_after=5), 1.0),
        (ApiError(500, {"message": "etcdserver: request timed out"}), TRANSIENT_WAIT),
        (ApiError(429, {"message": "slow down"}, retry_after=0), 0.1),
    ],
)
async def test_a_429_or_5xx_is_retried_after_what_it_asks_up_to_a_second(error: ApiError, wait: float) -> None:
    # After seven 403s the backoff stands at 30 s: the 429/5xx must not inherit it.
    forbidden: list[Outcome] = [ApiError(403, {"message": "no"}) for _ in range(7)]
    _, kube, clock = await run_script([*forbidden, error, error, LISTED])
    assert clock.waits[-2:] == [wait, wait]
    assert kube.calls[-2:] == ["list", "watch"]


async def test_a_404_for_a_resource_never_served_means_absent_and_waits_long() -> None:
    informer, _, clock = await run_script([ApiError(404, "404 page not found")])
    assert clock.waits == [30.0]
    assert informer.synced.is_set() and informer.absent and not informer.watching
    assert informer.healthy, "an uninstalled kind does not make the operator unready"


@pytest.fixture
def every_level() -> Iterator[None]:
    """structlog at every level (another test may have configured it to drop info), restored after."""
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    try:
        yield
    finally:
        structlog.configure(**saved)


class DiscoveringKube(ScriptedKube):
    """A scripted connection that also answers discovery: ``served`` says, per ask in order, whether the
    kind is served (then True); each ask is a call ``serves``."""

    def __init__(self, clock: Clock, script: list[Outcome], served: list[bool]) -> None:
        super().__init__(clock, script)
        self.served = list(served)

    async def serves(self, res: Any) -> bool:
        self.calls.append("serves")
        return self.served.pop(0) if self.served else True


@pytest.mark.usefixtures("every_level")
async def test_an_optional_kind_not_served_is_said_once_at_info_and_listed_only_once_served() -> None:
    clock = Clock()
    kube = DiscoveringKube(clock, [LISTED], served=[False, False, False])
    informer = Informer(kube, CONFIGMAPS, NS, optional=True, sleep=clock.sleep, clock=clock, rand=lambda: 0.0)
    seen: list[tuple[bool, bool, list[str]]] = []

    async def look(_: int) -> None:
        seen.append((informer.absent, informer.healthy, list(kube.calls)))

    clock.on_sleep = look
    with structlog.testing.capture_logs() as logged:
        task = asyncio.create_task(informer.run())
        await until(kube.done.is_set, "served: listed, then watched")
        await stop(task)
    assert seen[1] == (True, True, ["serves", "serves"]), "absent yet healthy; discovery asked, nothing listed"
    assert kube.calls == ["serves", "serves", "serves", "serves", "list", "watch"]
    assert clock.waits == [30.0, 30.0, 30.0] and not informer.absent and informer.get(NS, "a") is not None
    said = [(e["event"], e["log_level"]) for e in logged]
    assert said == [
        ("resource not served: what reads it is off until its CRD is installed", "info"),
        ("resource served now", "info"),
    ]


@pytest.mark.usefixtures("every_level")
async def test_a_required_kind_not_served_is_an_error_each_time_and_asked_of_discovery_before_a_list() -> None:
    clock = Clock()
    kube = DiscoveringKube(clock, [ApiError(404, "404 page not found")], served=[False])
    informer = Informer(kube, CONFIGMAPS, NS, sleep=clock.sleep, clock=clock, rand=lambda: 0.0)
    with structlog.testing.capture_logs() as logged:
        task = asyncio.create_task(informer.run())
        await until(kube.done.is_set, "listed once served")
        await stop(task)
    assert kube.calls[:3] == ["list", "serves", "serves"], "the first 404 is a list's; then discovery first"
    errors = [e for e in logged if e["event"] == "resource not served; is its CRD installed?"]
    assert [e["log_level"] for e in errors] == ["error", "error"]


async def test_a_404_for_a_resource_served_before_is_retried_promptly_for_a_while() -> None:
    gone = ApiError(404, "404 page not found")  # a restarted apiserver that has not read its CRDs yet
    clock = Clock()
    informer, _, clock = await run_script([LISTED, gone, gone, gone], clock)
    assert clock.waits == [0.8, TRANSIENT_WAIT, TRANSIENT_WAIT]
    assert not informer.absent and not informer.healthy
    # Still 404 after the grace period: believed (the CRD was deleted); the backoff grows.
    clock2 = Clock()
    many: list[Outcome] = [LISTED, gone]
    many += [gone] * int(NOT_FOUND_GRACE / TRANSIENT_WAIT + 4)
    _, _, clock2 = await run_script(many, clock2)
    prompt = next(i for i, w in enumerate(clock2.waits) if w > TRANSIENT_WAIT)
    assert NOT_FOUND_GRACE - TRANSIENT_WAIT <= sum(clock2.waits[:prompt]) <= NOT_FOUND_GRACE + TRANSIENT_WAIT
    assert all(w >= 30.0 for w in clock2.waits[prompt:])


# ----------------------------------------------------------------------------- watching


async def test_watching_survives_a_normal_end_and_drops_on_a_failure_until_the_next_list() -> None:
    clock = Clock()
    gate = asyncio.Event()
    kube = ScriptedKube(
        clock,
        [
            LISTED,
            [("ADDED", cm("b", "6"))],  # ends normally: reopened at once, no relist, still watching
            refused(),  # the reopened watch fails
            gate,  # the relist waits for the gate
            LISTED,
        ],
    )
    informer = informer_on(kube, clock)
    task = asyncio.create_task(informer.run())
    try:
        await until(lambda: kube.calls == ["list", "watch", "watch", "list"], "the relist")
        assert not informer.watching and not informer.healthy and informer.failures == 1
        assert informer.synced.is_set(), "synced stays: the cache has listed once"
        gate.set()
        await until(kube.done.is_set, "the watch after the relist")
        assert informer.watching and informer.healthy and informer.failures == 0
        assert clock.waits == [0.8]
        assert informer.get(NS, "b") is None, "the relist removed what it no longer lists"
    finally:
        await stop(task)


async def test_a_watch_closed_at_once_with_nothing_in_it_is_a_failure() -> None:
    clock = Clock()

    class Closing(ScriptedKube):
        async def watch(self, *args: Any, **kwargs: Any) -> AsyncIterator[tuple[str, JSON]]:
            self.calls.append("watch")
            if len(self.calls) > 2:
                self.done.set()
                await asyncio.Event().wait()
            nothing: list[tuple[str, JSON]] = []
            for event in nothing:
                yield event  # closed at once, empty (the clock does not move)

    kube = Closing(clock, [LISTED, LISTED])
    informer = informer_on(kube, clock)
    task = asyncio.create_task(informer.run())
    try:
        await until(kube.done.is_set, "the second watch")
        assert kube.calls == ["list", "watch", "list", "watch"]
        assert clock.waits == [0.8]
    finally:
        await stop(task)


# ----------------------------------------------------------------------------- readiness


async def test_readyz_names_the_caches_not_watching() -> None:
    manager = new_manager(RecordingKube(), Settings())
    assert manager.informers, "the controllers declare caches"
    first = manager.informers[0]
    assert manager.not_ready() == "not synced: " + ", ".join(i.name for i in manager.informers)

    clock = Clock()
    gate = asyncio.Event()
    kube = ScriptedKube(clock, [LISTED, refused(), gate, LISTED])
    first.kube = kube
    first._sleep, first._clock = clock.sleep, clock  # scripted time for this one cache
    for informer in manager.informers[1:]:
        informer.synced.set()
        informer.watching = True
    task = asyncio.create_task(first.run())
    probes = await serve(probes_app(manager.not_ready), "127.0.0.1:0", "probes")
    assert probes is not None
    try:
        await until(lambda: kube.calls == ["list", "watch", "list"], "the failed watch")
        manager.ready.set()  # run() sets it after the first sync
        assert manager.not_ready() == f"not watching: {first.name}"
        async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{probes[1]}/readyz") as r:
            assert r.status == 500
            assert (await r.text()).splitlines() == [
                f"[-]informers-synced failed: not watching: {first.name}",
                "healthz check failed",
            ]
        gate.set()
        await until(kube.done.is_set, "the watch after the relist")
        assert manager.not_ready() is None
        async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{probes[1]}/readyz") as r:
            assert (r.status, await r.text()) == (200, "ok")
    finally:
        await stop(task)
        await probes[0].cleanup()


def test_informer_names_say_the_resource_and_its_selectors() -> None:
    assert Informer(None, TRAINJOBS).name == "trainjobs.trainer.kubeflow.org"  # type: ignore[arg-type]
    assert Informer(None, CONFIGMAPS, label_selector="a=b").name == "configmaps (a=b)"  # type: ignore[arg-type]


def owned(name: str, owner: str | None) -> JSON:
    refs = [{"apiVersion": "v1", "kind": "X", "name": "x", "uid": owner, "controller": True}] if owner else []
    return {**cm(name, "1"), "metadata": {**cm(name, "1")["metadata"], "ownerReferences": refs}}


def test_the_owner_index_follows_one_child_several_and_a_change_of_owner() -> None:
    informer = Informer(RecordingKube(), CONFIGMAPS, NS)

    def names(uid: str) -> list[str]:
        return sorted(o["metadata"]["name"] for o in informer.owned_by(uid))

    informer._set(owned("a", "u1"))
    assert names("u1") == ["a"] and names("u2") == []
    informer._set(owned("b", "u1"))
    informer._set(owned("c", "u1"))
    informer._set(owned("a", "u1"))  # a new version of a child already filed
    assert names("u1") == ["a", "b", "c"]
    informer._remove((NS, "b"))
    informer._remove((NS, "c"))
    assert names("u1") == ["a"]
    informer._set(owned("b", "u1"))
    assert names("u1") == ["a", "b"]
    informer._set(owned("a", "u2"))  # a's controller changed
    informer._set(owned("b", None))  # b was orphaned
    assert names("u1") == [] and names("u2") == ["a"]
    informer._remove((NS, "a"))
    assert informer._by_owner == {}
