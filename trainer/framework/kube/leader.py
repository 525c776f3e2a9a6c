"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's ``tools/leaderelection`` does
it (``leaderelection.go`` ``tryAcquireOrRenew``/``renew``/``release``, ``resourcelock/leaselock.go``),
so that of several replicas of the operator exactly one reconciles.

The Lease ``<namespace>/<name>`` holds ``spec.holderIdentity``, ``leaseDurationSeconds``,
``acquireTime``, ``renewTime`` and ``leaseTransitions``. Every write is a PUT carrying the
``resourceVersion`` just read, so of two candidates racing for the same Lease the apiserver lets one
through and answers 409 Conflict to the other (optimistic concurrency).

Expiry is judged, as in client-go, on this process's own monotonic clock, never on the timestamps in
the Lease (which another machine's clock wrote): a candidate remembers when it first saw the current
contents of the Lease, and takes it over only once ``leaseDurationSeconds`` have passed since then
without the holder renewing it (a renewal changes ``renewTime``, hence the contents). An empty
``holderIdentity`` (a released Lease) is free at once.

The holder renews every ``retry_period``; if no renewal succeeds within ``renew_deadline`` of the
last one, or the Lease is seen held by someone else, :meth:`LeaderElector.keep` raises
:class:`LeadershipLost` and the caller stops reconciling at once (controller-runtime exits the
process). ``renew_deadline`` < ``lease_duration`` is what makes this safe: the old leader has given
up before any candidate can consider the Lease expired.

Writes are fenced by that deadline (:meth:`LeaderElector.check_write`, the write guard of the
controllers' :meth:`~trainer.framework.kube.client.Kube.fenced` connection): a write is sent only while this
process leads and less than ``renew_deadline`` has passed, on its monotonic clock, since the start of
its last successful acquire or renew round (so the Lease's ``renewTime`` is never older than that).
Otherwise it is refused unsent (:class:`FencedWrite`, logged as ``write fenced``), and a refusal for
the deadline gives leadership up for good: ``keep`` raises at once. client-go only stops the
controllers when its renew loop notices; a process paused past the deadline (SIGSTOP, a VM freeze)
resumes with every timer due at once, and its queued writes would race that loop. Here the deadline is
also counted from the last successful renewal, not from the start of the current retry round as
client-go's ``renew`` does (which allows up to ``retry_period`` more). On a clean shutdown
:meth:`LeaderElector.release` writes an empty holder with ``leaseDurationSeconds: 1`` so a standby
takes over on its next try (within ``retry_period``) instead of after ``lease_duration``.

Defaults are controller-runtime's: lease duration 15 s, renew deadline 10 s, retry period 2 s. One
deliberate difference: a candidate retries every ``retry_period`` with up to 20 % jitter, not
client-go's 120 %, so a released Lease is taken over within 2.4 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import structlog

from trainer.api.kinds import LEASES
from trainer.framework.clock import format_micro_time
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError, Kube
from trainer.framework.permissions import Permission

log = structlog.get_logger("trainer.leader")

LEASE_DURATION = 15.0
RENEW_DEADLINE = 10.0
RETRY_PERIOD = 2.0
JITTER = 0.2
ROLE = "trainer-leader-election"
"""The Role, in the operator's namespace, that grants the Lease's verbs."""
PERMISSIONS = (
    Permission(LEASES, ("get", "create", "update"), "leader election: read, create, compare-and-swap", role=ROLE),
)
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class LeadershipLost(Exception):
    """The Lease could not be renewed in time, or someone else holds it now."""


class FencedWrite(LeadershipLost):
    """A write refused, unsent, because this process may not write now: it does not lead, or its last
    successful renewal began ``renew_deadline`` or more ago (see :meth:`LeaderElector.check_write`)."""


def default_namespace(path: Path = SERVICE_ACCOUNT_NAMESPACE) -> str:
    """The pod's namespace (from its service account mount), else ``default`` (out of a cluster)."""
    try:
        return path.read_text().strip() or "default"
    except OSError:
        return "default"


def default_identity() -> str:
    """``<hostname>_<uuid>``, as controller-runtime names a candidate: unique even for two processes
    on one host."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True)
class Observation:
    """The Lease spec as this process last saw (or wrote) it, and when it first saw those contents
    (monotonic seconds): client-go's ``observedRecord`` and ``observedTime``."""

    spec: JSON
    at: float

    @property
    def holder(self) -> str:
        """The holder's identity, "" when nobody holds the Lease."""
        return str(self.spec.get("holderIdentity") or "")

    def expired(self, now: float) -> bool:
        """Whether the holder has not renewed for ``leaseDurationSeconds`` (by this process's clock)."""
        return self.at + float(self.spec.get("leaseDurationSeconds") or 0) <= now


def observe(previous: Observation | None, spec: JSON, now: float) -> Observation:
    """What this process knows after reading ``spec`` at ``now``: the time of observation moves only
    when the contents change, so a holder that stops renewing expires ``leaseDurationSeconds`` after
    its last renewal was first seen."""
    if previous is not None and previous.spec == spec:
        return previous
    return Observation(dict(spec), now)


def next_spec(
    current: Observation | None, identity: str, now: float, wall: datetime, lease_duration: float
) -> JSON | None:
    """The Lease spec ``identity`` writes now, or None when someone else validly holds the Lease.

    ``current`` is the observation of the Lease just read (None: it does not exist, so this creates
    it); ``now`` the monotonic clock, ``wall`` the wall clock for the timestamps written. Renewing
    keeps ``acquireTime`` and ``leaseTransitions``; taking over (an expired or released Lease) sets
    ``acquireTime`` and counts a transition.
    """
    stamp = format_micro_time(wall)
    spec: JSON = {
        "holderIdentity": identity,
        "leaseDurationSeconds": int(lease_duration),
        "acquireTime": stamp,
        "renewTime": stamp,
        "leaseTransitions": 0,
    }
    if current is None:
        return spec
    transitions = int(current.spec.get("leaseTransitions") or 0)
    if current.holder == identity:
        spec["acquireTime"] = current.spec.get("acquireTime") or stamp
        spec["leaseTransitions"] = transitions
        return spec
    if current.holder and not current.expired(now):
        return None
    spec["leaseTransitions"] = transitions + 1
    return spec


def released_spec(current: Observation, wall: datetime) -> JSON:
    """The spec that gives the Lease up (client-go ``release``): no holder, a 1 s duration."""
    stamp = format_micro_time(wall)
    return {
        "holderIdentity": "",
        "leaseDurationSeconds": 1,
        "acquireTime": stamp,
        "renewTime": stamp,
        "leaseTransitions": int(current.spec.get("leaseTransitions") or 0),
    }


class LeaderElector:
    """Competes for the Lease ``namespace/name`` as ``identity``.

    Use: ``await acquire()`` (returns once leading), then run ``keep()`` beside the work (it raises
    :class:`LeadershipLost` when leadership is gone; stop the work at once), and ``await release()``
    after the work stopped on a clean shutdown. ``on_change(leading)`` is told of every change.
    """

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        name: str,
        identity: str | None = None,
        lease_duration: float = LEASE_DURATION,
        renew_deadline: float = RENEW_DEADLINE,
        retry_period: float = RETRY_PERIOD,
        on_change: Callable[[bool], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not retry_period < renew_deadline < lease_duration:
            raise ValueError("leader election needs retry period < renew deadline < lease duration")
        self.kube, self.namespace, self.name = kube, namespace, name
        self.identity = identity or default_identity()
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period
        self.on_change = on_change
        self.clock = clock
        self._lease: JSON | None = None
        self._observed: Observation | None = None
        self._leading = False
        self._renewed_at: float | None = None
        self._fenced = asyncio.Event()

    @property
    def leading(self) -> bool:
        """Whether this process holds the Lease (as of its last read or write)."""
        return self._leading

    @property
    def renewed_at(self) -> float | None:
        """When (``clock`` seconds) the last successful acquire or renew round began; None before any."""
        return self._renewed_at

    @property
    def holder(self) -> str:
        """The holder last seen ("" when none or not read yet)."""
        return self._observed.holder if self._observed else ""

    def _set_leading(self, leading: bool) -> None:
        if leading and self._fenced.is_set():
            return  # fenced: never leads again (the process exits, a fresh candidate starts)
        if leading != self._leading:
            self._leading = leading
            if self.on_change is not None:
                self.on_change(leading)

    async def try_acquire_or_renew(self) -> bool:
        """One round: read the Lease, and write it if this process may hold it. True when it holds it
        now. Raises :class:`ApiError` (but not on a lost race: that is False) or a connection error."""
        now, wall = self.clock(), datetime.now(UTC)
        lease = await self.kube.get_or_none(LEASES, self.namespace, self.name)
        observed = None if lease is None else observe(self._observed, lease.get("spec") or {}, now)
        spec = next_spec(observed, self.identity, now, wall, self.lease_duration)
        if lease is not None:
            self._observed = observed
        if spec is None:
            self._set_leading(False)
            return False
        try:
            if lease is None:
                body: JSON = {
                    "apiVersion": LEASES.api_version,
                    "kind": LEASES.kind,
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": spec,
                }
                self._lease = await self.kube.create(LEASES, self.namespace, body)
            else:
                self._lease = await self.kube.update(LEASES, self.namespace, {**lease, "spec": spec})
        except ApiError as e:
            if e.conflict:  # another candidate created or wrote it since our read: it won
                return False
            raise
        stored = self._lease.get("spec")
        self._observed = Observation(dict(stored) if isinstance(stored, dict) else spec, self.clock())
        self._renewed_at = now  # the round's start: renewTime is no older than this
        self._set_leading(True)
        return True

    def check_write(self, method: str, path: str) -> None:
        """The write guard (a :data:`~trainer.framework.kube.client.WriteGuard`): returns when this process may
        write now, i.e. it leads and its last successful acquire or renew round began less than
        ``renew_deadline`` ago by ``clock``. Otherwise logs ``write fenced`` (``method``, ``path`` and
        why) and raises :class:`FencedWrite`; when the deadline is why, leadership is given up for good
        first (``on_change(False)``, and :meth:`keep` raises at once)."""
        now = self.clock()
        renewed = self._renewed_at
        if self._leading and renewed is not None and now - renewed < self.renew_deadline:
            return
        if self._leading:
            since = f"for {now - renewed:.1f}s" if renewed is not None else "ever"
            reason = f"lease not renewed {since} (renew deadline {self.renew_deadline:g}s)"
            self._fenced.set()
            self._set_leading(False)
        else:
            reason = "not leading"
        log.error(
            "write fenced",
            method=method,
            path=path,
            reason=reason,
            lease=f"{self.namespace}/{self.name}",
            identity=self.identity,
        )
        raise FencedWrite(f"{method} {path} refused: {reason}")

    async def _attempt(self, timeout: float) -> bool:
        try:
            async with asyncio.timeout(timeout):
                return await self.try_acquire_or_renew()
        except (ApiError, aiohttp.ClientError, OSError, TimeoutError, ValueError) as e:
            log.warning("lease request failed", lease=f"{self.namespace}/{self.name}", error=repr(e))
            return False

    async def acquire(self) -> None:
        """Return once this process holds the Lease, trying every ``retry_period`` (jittered)."""
        log.info("waiting to lead", lease=f"{self.namespace}/{self.name}", identity=self.identity)
        while not await self._attempt(self.renew_deadline):
            await asyncio.sleep(self.retry_period * (1 + random.random() * JITTER))
        log.info("acquired lease", lease=f"{self.namespace}/{self.name}", identity=self.identity)

    async def _pause(self, seconds: float) -> None:
        """Sleep ``seconds``, or less if a write is fenced meanwhile."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._fenced.wait()

    def _deadline(self) -> float:
        """``clock`` time by which the next renewal must succeed. Raises :class:`FencedWrite` once a
        write was fenced, :class:`LeadershipLost` once the deadline has passed."""
        where = f"lease {self.namespace}/{self.name}"
        if self._fenced.is_set():
            raise FencedWrite(f"{where}: a write was refused after the renew deadline ({self.renew_deadline:g}s)")
        deadline = (self._renewed_at if self._renewed_at is not None else -math.inf) + self.renew_deadline
        if self.clock() >= deadline:
            self._set_leading(False)
            raise LeadershipLost(f"{where} not renewed within {self.renew_deadline:g}s")
        return deadline

    async def keep(self) -> None:
        """Renew every ``retry_period`` until cancelled. Raises :class:`LeadershipLost` when the Lease
        is seen held by another, or no renewal succeeded within ``renew_deadline`` of the start of the
        last successful round (by ``clock``: a process paused that long finds out on its first step), and
        :class:`FencedWrite` as soon as :meth:`check_write` refused a write for that reason."""
        while True:
            await self._pause(self.retry_period)
            deadline = self._deadline()
            while not await self._attempt(deadline - self.clock()):
                if self.holder and self.holder != self.identity:
                    self._set_leading(False)
                    raise LeadershipLost(f"lease {self.namespace}/{self.name} is held by {self.holder}")
                deadline = self._deadline()
                await self._pause(min(self.retry_period, deadline - self.clock()))
                deadline = self._deadline()
            self._deadline()  # a write may have been fenced while the renewal was on its way

    async def release(self) -> bool:
        """Give the Lease up if this process holds it; True when it was released. Never raises: a
        failed release only means the successor waits for the Lease to expire."""
        if not self._leading or self._lease is None or self._observed is None:
            return False
        spec = released_spec(self._observed, datetime.now(UTC))
        try:
            async with asyncio.timeout(self.renew_deadline):
                self._lease = await self.kube.update(LEASES, self.namespace, {**self._lease, "spec": spec})
        except (ApiError, aiohttp.ClientError, OSError, TimeoutError, ValueError) as e:
            log.warning("lease release failed", lease=f"{self.namespace}/{self.name}", error=repr(e))
            return False
        self._observed = Observation(spec, self.clock())
        self._set_leading(False)
        log.info("released lease", lease=f"{self.namespace}/{self.name}", identity=self.identity)
        return True
