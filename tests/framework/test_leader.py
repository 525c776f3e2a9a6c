"""Leader election decisions, given a Lease and the clock (the pure part of trainer.framework.kube.leader), and the
fencing of writes by the renew deadline: through a real HTTP client against a small local server, with a
fake monotonic clock standing for a paused process."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from structlog.testing import capture_logs

from tests.http_double import HttpDouble, status_response, without_proxies, write_kubeconfig
from trainer.api.kinds import CONFIGMAPS, LEASES, TRAINJOBS
from trainer.framework.clock import format_micro_time
from trainer.framework.controller import Context, Controller, Reconcile
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import Key
from trainer.framework.kube.client import Kube
from trainer.framework.kube.leader import (
    LEASE_DURATION,
    RENEW_DEADLINE,
    RETRY_PERIOD,
    FencedWrite,
    LeaderElector,
    LeadershipLost,
    Observation,
    default_identity,
    default_namespace,
    next_spec,
    observe,
    released_spec,
)
from trainer.wiring import Settings, new_manager

WALL = datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
STAMP = "2025-01-02T03:04:05.678901Z"


def held(holder: str, duration: int = 15, transitions: int = 3, acquired: str = "2025-01-01T00:00:00.000000Z") -> dict:  # type: ignore[type-arg]
    return {
        "holderIdentity": holder,
        "leaseDurationSeconds": duration,
        "acquireTime": acquired,
        "renewTime": "2025-01-01T00:00:10.000000Z",
        "leaseTransitions": transitions,
    }


def test_defaults_are_controller_runtimes() -> None:
    assert (LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD) == (15.0, 10.0, 2.0)


def test_micro_time_is_rfc3339_with_microseconds_in_utc() -> None:
    assert format_micro_time(WALL) == STAMP


def test_no_lease_creates_one_held_by_me() -> None:
    assert next_spec(None, "me", 100.0, WALL, 15) == {
        "holderIdentity": "me",
        "leaseDurationSeconds": 15,
        "acquireTime": STAMP,
        "renewTime": STAMP,
        "leaseTransitions": 0,
    }


def test_a_lease_validly_held_by_another_is_left_alone() -> None:
    seen = observe(None, held("other"), now=100.0)
    assert next_spec(seen, "me", 100.0, WALL, 15) is None
    assert next_spec(seen, "me", 114.9, WALL, 15) is None


def test_expiry_counts_from_when_the_contents_were_first_seen_not_from_renewTime() -> None:
    # renewTime is another machine's clock: only our own observation time counts.
    first = observe(None, held("other"), now=100.0)
    again = observe(first, held("other"), now=110.0)  # unchanged: still observed at 100
    assert again.at == 100.0
    spec = next_spec(again, "me", 115.0, WALL, 15)
    assert spec is not None
    assert spec["holderIdentity"] == "me"
    assert spec["acquireTime"] == STAMP
    assert spec["leaseTransitions"] == 4


def test_a_renewal_by_the_holder_restarts_the_expiry() -> None:
    first = observe(None, held("other"), now=100.0)
    renewed = {**held("other"), "renewTime": "2025-01-01T00:00:12.000000Z"}
    later = observe(first, renewed, now=112.0)
    assert later.at == 112.0
    assert next_spec(later, "me", 120.0, WALL, 15) is None
    assert next_spec(later, "me", 127.0, WALL, 15) is not None


def test_a_released_lease_is_taken_at_once() -> None:
    released = released_spec(Observation(held("other", transitions=5), 0.0), WALL)
    assert released == {
        "holderIdentity": "",
        "leaseDurationSeconds": 1,
        "acquireTime": STAMP,
        "renewTime": STAMP,
        "leaseTransitions": 5,
    }
    spec = next_spec(observe(None, released, now=50.0), "me", 50.0, WALL, 15)
    assert spec is not None
    assert (spec["holderIdentity"], spec["leaseTransitions"], spec["leaseDurationSeconds"]) == ("me", 6, 15)


def test_the_holder_renews_keeping_acquire_time_and_transitions() -> None:
    mine = observe(None, held("me", transitions=7), now=10.0)
    spec = next_spec(mine, "me", 500.0, WALL, 15)  # even if our own record looks expired
    assert spec == {
        "holderIdentity": "me",
        "leaseDurationSeconds": 15,
        "acquireTime": "2025-01-01T00:00:00.000000Z",
        "renewTime": STAMP,
        "leaseTransitions": 7,
    }


def test_a_missing_duration_means_expired() -> None:
    seen = observe(None, {"holderIdentity": "other"}, now=1.0)
    assert seen.expired(1.0)
    assert next_spec(seen, "me", 1.0, WALL, 15) is not None


def test_timings_must_nest() -> None:
    with pytest.raises(ValueError, match="retry period < renew deadline < lease duration"):
        LeaderElector(None, "ns", "l", lease_duration=10, renew_deadline=10)  # type: ignore[arg-type]


def test_default_namespace_reads_the_service_account_mount(tmp_path: Path) -> None:
    f = tmp_path / "namespace"
    f.write_text("trainer-system\n")
    assert default_namespace(f) == "trainer-system"
    assert default_namespace(tmp_path / "missing") == "default"


def test_identities_are_unique_per_process() -> None:
    assert default_identity() != default_identity()


# ----------------------------------------------------------------------------- fenced writes


class Clock:
    """A fake monotonic clock: ``now`` moves only when a test moves it (a pause of the process)."""

    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


class Leases:
    """Answers just enough of an apiserver for an elector and a manager: one Lease (GET, POST, PUT with
    resourceVersion conflicts), empty lists, watches that stay open, and any other write answered 201
    with its own body."""

    def __init__(self) -> None:
        self.lease: JSON | None = None
        self._rv = 0

    async def __call__(self, server: HttpDouble[object], request: web.Request) -> web.StreamResponse:
        if "/leases" in request.path:
            return await self._lease(request)
        if request.method != "GET":
            return web.json_response(await request.json(), status=201)
        if request.query.get("watch") == "true":
            return await server.watch(request)
        return web.json_response({"items": [], "metadata": {"resourceVersion": "1"}})

    async def _lease(self, request: web.Request) -> web.Response:
        if request.method == "GET":
            if self.lease is None:
                return status_response(404, "NotFound")
            return web.json_response(self.lease)
        body = await request.json()
        current = self.lease["metadata"]["resourceVersion"] if self.lease else None
        if (request.method == "POST") == (self.lease is not None) or (
            request.method == "PUT" and body["metadata"].get("resourceVersion") != current
        ):
            return status_response(409, "Conflict")
        self._rv += 1
        body["metadata"]["resourceVersion"] = str(self._rv)
        self.lease = body
        return web.json_response(body, status=201 if request.method == "POST" else 200)


def writes(server: HttpDouble[object]) -> list[tuple[str, str]]:
    """``(method, path)`` of every request but a GET the server received."""
    return [(r.method, r.path) for r in server.received if r.method != "GET"]


@pytest.fixture
def leases() -> Leases:
    return Leases()


@pytest.fixture
async def apiserver(leases: Leases) -> AsyncIterator[HttpDouble[object]]:
    async with HttpDouble(leases) as server:
        yield server


@pytest.fixture
async def kube(apiserver: HttpDouble[object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Kube]:
    without_proxies(monkeypatch)
    k = await Kube.connect(write_kubeconfig(tmp_path, apiserver.url))
    yield k
    await k.close()


def elector_on(kube: Kube, clock: Clock, changes: list[bool] | None = None) -> LeaderElector:
    on_change = changes.append if changes is not None else None
    return LeaderElector(kube, "ns", "lease", identity="me", retry_period=0.05, clock=clock, on_change=on_change)


CM_PATH = CONFIGMAPS.path("n")


def configmap(name: str) -> JSON:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "n"}}


async def test_a_leader_writes_until_its_renew_deadline_and_never_after(
    kube: Kube, apiserver: HttpDouble[object]
) -> None:
    clock, changes = Clock(), list[bool]()
    elector = elector_on(kube, clock, changes)
    writer = kube.fenced(elector.check_write)
    await elector.acquire()
    assert changes == [True] and elector.renewed_at == 500.0
    clock.now += RENEW_DEADLINE - 0.1
    await writer.create(CONFIGMAPS, "n", configmap("in-time"))
    await writer.get_or_none(CONFIGMAPS, "n", "in-time")  # reads are never fenced
    clock.now += 0.1  # the deadline: a write now could race a new leader
    with capture_logs() as logs, pytest.raises(FencedWrite, match=r"lease not renewed for 10\.0s"):
        await writer.create(CONFIGMAPS, "n", configmap("late"))
    assert writes(apiserver) == [("POST", LEASES.path("ns")), ("POST", CM_PATH)], "the late write was not sent"
    assert [(e["event"], e["method"], e["path"]) for e in logs] == [("write fenced", "POST", CM_PATH)]
    assert changes == [True, False] and not elector.leading
    # Fenced for good: keep() raises at once, and neither a renewal nor a release writes the Lease.
    with pytest.raises(FencedWrite):
        await asyncio.wait_for(elector.keep(), timeout=10)
    assert not await elector.release()
    with pytest.raises(FencedWrite, match="not leading"):
        await writer.delete(CONFIGMAPS, "n", "in-time")
    assert writes(apiserver) == [("POST", LEASES.path("ns")), ("POST", CM_PATH)]


async def test_each_renewal_moves_the_deadline(kube: Kube, apiserver: HttpDouble[object]) -> None:
    clock = Clock()
    elector = elector_on(kube, clock)
    writer = kube.fenced(elector.check_write)
    await elector.acquire()
    clock.now += 8
    assert await elector.try_acquire_or_renew()
    clock.now += RENEW_DEADLINE - 0.5  # 17.5 s after acquiring, 9.5 s after renewing
    await writer.create(CONFIGMAPS, "n", configmap("renewed"))
    clock.now += 0.5
    with pytest.raises(FencedWrite):
        await writer.create(CONFIGMAPS, "n", configmap("late"))
    assert [p for m, p in writes(apiserver) if m == "POST"] == [LEASES.path("ns"), CM_PATH]


async def test_a_standby_never_writes(kube: Kube, apiserver: HttpDouble[object], leases: Leases) -> None:
    clock = Clock()
    leases.lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "lease", "namespace": "ns", "resourceVersion": "1"},
        "spec": {"holderIdentity": "other", "leaseDurationSeconds": 15},
    }
    elector = elector_on(kube, clock)
    writer = kube.fenced(elector.check_write)
    assert not await elector.try_acquire_or_renew()
    with pytest.raises(FencedWrite, match="not leading"):
        await writer.apply(configmap("x"), "trainer")
    assert writes(apiserver) == []
    # Refusing a standby's write does not keep it from leading later.
    clock.now += LEASE_DURATION
    assert await elector.try_acquire_or_renew()
    await writer.apply(configmap("x"), "trainer")
    assert writes(apiserver) == [("PUT", LEASES.path("ns", "lease")), ("PATCH", CONFIGMAPS.path("n", "x"))]


async def test_a_write_that_waited_across_a_pause_inside_the_client_is_not_sent(
    kube: Kube, apiserver: HttpDouble[object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard is asked again right before the first byte goes out: here setting the credentials (an
    await inside the client, after the first check, where an exec plugin's token is refreshed) is where
    the process 'pauses' past its deadline."""
    clock = Clock()
    elector = elector_on(kube, clock)
    writer = kube.fenced(elector.check_write)
    await elector.acquire()
    pauses = 0

    set_credentials = kube.api.update_params_for_auth

    async def pause_during_the_send(headers: dict[str, str], query: list[tuple[str, Any]], auth: list[str]) -> None:
        nonlocal pauses
        pauses += 1
        clock.now += RENEW_DEADLINE + 5
        await set_credentials(headers, query, auth)

    observed: list[tuple[str, str]] = []
    writer.observe = lambda method, code, *_: observed.append((method, code))
    monkeypatch.setattr(kube.api, "update_params_for_auth", pause_during_the_send)
    with pytest.raises(FencedWrite):
        await writer.merge_patch(CONFIGMAPS, "n", "x", {"data": {"k": "v"}})
    assert pauses == 1, "the first check passed; the pause came after it"
    assert writes(apiserver) == [("POST", LEASES.path("ns"))]
    assert observed == [], "nothing was sent, so nothing is counted"


async def test_keep_gives_up_at_once_after_a_pause_past_the_deadline(kube: Kube, apiserver: HttpDouble[object]) -> None:
    clock = Clock()
    elector = elector_on(kube, clock)
    await elector.acquire()
    clock.now += RENEW_DEADLINE + 2  # SIGSTOP/SIGCONT: the next step finds the deadline passed
    with pytest.raises(LeadershipLost, match="not renewed within 10s"):
        await asyncio.wait_for(elector.keep(), timeout=10)
    assert writes(apiserver) == [("POST", LEASES.path("ns"))], "no renewal was tried after the deadline"
    assert not elector.leading


async def test_a_fenced_write_stops_the_manager(kube: Kube, apiserver: HttpDouble[object]) -> None:
    clock = Clock()
    elector = LeaderElector(kube, "ns", "lease", identity="me", retry_period=5.0, clock=clock)

    def build(ctx: Context) -> Reconcile:
        async def reconcile(key: Key) -> float | None:
            await ctx.kube.create(CONFIGMAPS, key[0], configmap(key[1]))
            return None

        return reconcile

    manager = new_manager(kube, Settings(), elector=elector, declared=[Controller("trainjob", TRAINJOBS, build)])
    run = asyncio.create_task(manager.run())
    try:
        async with asyncio.timeout(10):
            while not elector.leading:
                await asyncio.sleep(0.01)
            manager.queues["trainjob"].add(("n", "first"))
            while ("POST", CM_PATH) not in writes(apiserver):
                await asyncio.sleep(0.01)
        clock.now += RENEW_DEADLINE  # paused past the deadline, then a reconcile wants to write
        manager.queues["trainjob"].add(("n", "second"))
        with pytest.raises(FencedWrite):
            await asyncio.wait_for(run, timeout=10)
    finally:
        run.cancel()
    assert writes(apiserver) == [("POST", LEASES.path("ns")), ("POST", CM_PATH)], "no write, no release"
