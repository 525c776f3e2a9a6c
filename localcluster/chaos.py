"""Chaos runs: TrainJobs and MPIJobs created in a burst while the operator is killed (``kill -9``) and
the kube-apiserver restarted, and the checks of what they must leave behind. Shared by
``e2e/test_chaos.py`` (sized for CI) and ``bench/chaos.py`` (the larger run).

- :func:`workload` builds the parents (torch TrainJobs, TrainJobs on the mpi runtime, MPIJobs) and,
  for each, the children it must end with (:class:`Parent`).
- :class:`Observer` lists and watches the namespace from before the burst: every uid each child name
  ever had, when it was first seen, whether its data ever changed; and which parents finished.
- :class:`Chaos` kills the operator and restarts the apiserver at points of the run's progress.
- :func:`check` reads the final state and returns a :class:`Report`: children created more than once
  (a second uid under one name), children beyond the expected ones, orphans (no controller owner
  reference to an existing parent), lost children (never created, or gone while they should stay),
  written-once children whose data changed (an SSH key, a runtime snapshot), unfinished parents.

The expectations follow the operator's children, named as upstream: per TrainJob (kubeflow/trainer
with JobSet, ``pkg/runtime/framework/plugins/jobset``, kubernetes-sigs/jobset
``pkg/controllers/jobset_controller.go``) the Jobs ``<trainjob>-<replicatedJob>-<index>``, the
headless Service ``<trainjob>``, the runtime snapshot ConfigMap ``<trainjob>-runtime-snapshot`` and,
on an mpi runtime (``pkg/runtime/framework/plugins/mpi``), the Secret ``<trainjob>-mpi-ssh-auth``
and the ConfigMap ``<trainjob>-mpi-hostfile``; per MPIJob (kubeflow/mpi-operator
``pkg/controller/mpi_job_controller.go``) the Jobs ``<name>-launcher`` and ``<name>-worker``, the
Service ``<name>``, the ConfigMap ``<name>-config`` and the Secret ``<name>-ssh``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

import aiohttp
import yaml

from localcluster import ROOT
from localcluster.operator_process import Operator
from trainer.api.kinds import CONFIGMAPS, JOBS, MPIJOBS, SECRETS, SERVICES, TRAINJOBS, Resource
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError, Kube

T = TypeVar("T")
SAMPLES = ROOT / "config" / "samples"
TORCH_RUNTIME = "torch-distributed"
MPI_RUNTIME = "deepspeed-distributed"
PARENT_LABELS = {"TrainJob": "jobset.sigs.k8s.io/jobset-name", "MPIJob": "training.kubeflow.org/job-name"}
"""The label each kind's children carry, valued with the parent's name."""
PARENTS = (TRAINJOBS, MPIJOBS)
CHILDREN = (JOBS, SERVICES, CONFIGMAPS, SECRETS)
DONE = {"TrainJob": "Complete", "MPIJob": "Succeeded"}
"""The condition that says a parent succeeded."""
FAILED = "Failed"
FIELD_MANAGER = "e2e"
Child = tuple[str, str]
"""A child's ``(kind, name)``."""


def run_for(delay: float, jitter: float) -> dict[str, str]:
    """KWOK annotations that complete a pod after uniform[``delay``, ``jitter``) seconds Running
    (``jitter`` must exceed ``delay``; see localcluster/kwok-stages.yaml)."""
    if jitter <= delay:
        raise ValueError(f"jitter {jitter} must exceed delay {delay}")
    return {
        "pod-complete.stage.kwok.x-k8s.io/delay": f"{delay:g}s",
        "pod-complete.stage.kwok.x-k8s.io/jitter-delay": f"{jitter:g}s",
    }


@dataclass(frozen=True)
class Parent:
    """One TrainJob or MPIJob of a run and what it must end with."""

    kind: str
    """``TrainJob`` or ``MPIJob``."""
    name: str
    manifest: JSON
    children: frozenset[Child]
    """Every child it must have had, each exactly once."""
    once: frozenset[Child]
    """Children written once, whose data must never change (SSH keys, the runtime snapshot)."""
    may_go: frozenset[Child] = frozenset()
    """Children that may be deleted once the parent finished (Jobs still running then, as JobSet
    deletes them)."""

    @property
    def jobs(self) -> list[str]:
        """The names of its Jobs."""
        return sorted(name for kind, name in self.children if kind == "Job")


def torch_trainjob(name: str, pod_run: dict[str, str], nodes: int = 2) -> Parent:
    """A TrainJob on the ``torch-distributed`` ClusterTrainingRuntime, ``nodes`` pods running ``pod_run``."""
    manifest = {
        "apiVersion": TRAINJOBS.api_version,
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {
            "runtimeRef": {"name": TORCH_RUNTIME, "kind": "ClusterTrainingRuntime"},
            "trainer": {"numNodes": nodes},
            "annotations": dict(pod_run),
        },
    }
    snapshot = ("ConfigMap", f"{name}-runtime-snapshot")
    children = {("Job", f"{name}-node-0"), ("Service", name), snapshot}
    return Parent("TrainJob", name, manifest, frozenset(children), frozenset({snapshot}))


def mpi_trainjob(name: str, launcher_run: dict[str, str], node_run: dict[str, str], nodes: int = 3) -> Parent:
    """A TrainJob on the ``deepspeed-distributed`` (mpi) ClusterTrainingRuntime: ``nodes`` nodes, the
    launcher being the first, its pod running ``launcher_run``, the workers ``node_run``
    (``podTemplateOverrides``). Its ``node`` Job may be deleted once it is Complete."""
    overrides = [
        {"targetJobs": [{"name": "launcher"}], "metadata": {"annotations": dict(launcher_run)}},
        {"targetJobs": [{"name": "node"}], "metadata": {"annotations": dict(node_run)}},
    ]
    manifest = {
        "apiVersion": TRAINJOBS.api_version,
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {
            "runtimeRef": {"name": MPI_RUNTIME, "kind": "ClusterTrainingRuntime"},
            "trainer": {"numNodes": nodes},
            "podTemplateOverrides": overrides,
        },
    }
    once = {("ConfigMap", f"{name}-runtime-snapshot"), ("Secret", f"{name}-mpi-ssh-auth")}
    node = ("Job", f"{name}-node-0")
    children = {("Job", f"{name}-launcher-0"), node, ("Service", name), ("ConfigMap", f"{name}-mpi-hostfile"), *once}
    return Parent("TrainJob", name, manifest, frozenset(children), frozenset(once), frozenset({node}))


def mpijob(name: str, launcher_run: dict[str, str], worker_run: dict[str, str]) -> Parent:
    """The sample MPIJob (config/samples/mpijob.yaml) as ``name``, without its CPU limits (the run
    tests the operator, not the cluster's capacity), its pods running ``launcher_run`` and
    ``worker_run``."""
    manifest: JSON = yaml.safe_load((SAMPLES / "mpijob.yaml").read_text())
    manifest["metadata"] = {"name": name}
    for role, run in (("Launcher", launcher_run), ("Worker", worker_run)):
        template = manifest["spec"]["mpiReplicaSpecs"][role]["template"]
        template["metadata"] = {"annotations": dict(run)}
        for container in template["spec"]["containers"]:
            container.pop("resources", None)
    once = {("Secret", f"{name}-ssh")}
    children = {
        ("Job", f"{name}-launcher"),
        ("Job", f"{name}-worker"),
        ("Service", name),
        ("ConfigMap", f"{name}-config"),
    }
    return Parent("MPIJob", name, manifest, frozenset(children | once), frozenset(once))


def workload(
    trainjobs: int, mpi_share: float = 1 / 3, mpijobs: int = 0, run: tuple[float, float] = (2, 5)
) -> list[Parent]:
    """``trainjobs`` TrainJobs, ``mpi_share`` of them (every k-th) on the mpi runtime, the others on
    the torch runtime, and ``mpijobs`` MPIJobs; every pod runs uniform[``run``) seconds (an mpi
    TrainJob's launcher one more second, so its workers mostly finish first)."""
    pod_run = run_for(*run)
    launcher_run = run_for(run[0] + 1, run[1] + 1)
    every = max(1, round(1 / mpi_share)) if mpi_share > 0 else 0
    out: list[Parent] = []
    for i in range(trainjobs):
        if every and i % every == every - 1:
            out.append(mpi_trainjob(f"mpi-tj-{i}", launcher_run, pod_run))
        else:
            out.append(torch_trainjob(f"torch-tj-{i}", pod_run))
    out += [mpijob(f"mpijob-{i}", pod_run, pod_run) for i in range(mpijobs)]
    return out


def runtimes() -> list[JSON]:
    """The two ClusterTrainingRuntimes the TrainJobs of :func:`workload` name, as in config/samples/."""
    return [yaml.safe_load((SAMPLES / f"{name}.yaml").read_text()) for name in (TORCH_RUNTIME, MPI_RUNTIME)]


# --- talking to an apiserver that may be restarting ----------------------------------------------


def _transient(e: BaseException) -> bool:
    """Whether ``e`` is what a restarting apiserver answers: no connection, or 429/5xx."""
    if isinstance(e, ApiError):
        return e.status == 429 or e.status >= 500
    return isinstance(e, aiohttp.ClientError | OSError | TimeoutError | EOFError)


async def retrying(call: Callable[[], Awaitable[T]], what: str, timeout: float = 90.0, interval: float = 0.1) -> T:
    """``await call()`` until it answers: connection errors and 429/5xx answers (the apiserver
    restarting) are retried every ``interval`` seconds for ``timeout`` seconds, then raised as
    ``TimeoutError`` naming ``what``; any other error is raised at once."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await call()
        except Exception as e:
            if not _transient(e):
                raise
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: no answer for {timeout:.0f}s, last error {e!r}") from e
        await asyncio.sleep(interval)


async def create(kube: Kube, namespace: str, parents: list[Parent], concurrency: int = 8) -> None:
    """Server-side apply every parent into ``namespace``, ``concurrency`` at a time, each retried
    through an apiserver restart (:func:`retrying`; apply is idempotent, so a lost answer is harmless)."""
    gate = asyncio.Semaphore(concurrency)

    async def one(parent: Parent) -> None:
        obj = copy.deepcopy(parent.manifest)
        obj["metadata"]["namespace"] = namespace
        async with gate:
            await retrying(lambda: kube.apply(obj, FIELD_MANAGER), f"creating {parent.kind} {parent.name}")

    await asyncio.gather(*(one(p) for p in parents))


def _conditions(obj: JSON) -> dict[str, str]:
    return {str(c.get("type")): str(c.get("status")) for c in (obj.get("status") or {}).get("conditions") or []}


def outcome(obj: JSON) -> str | None:
    """``succeeded``, ``failed`` or None (still running) from a parent's conditions."""
    conditions = _conditions(obj)
    if conditions.get(DONE.get(str(obj.get("kind")), "")) == "True":
        return "succeeded"
    if conditions.get(FAILED) == "True":
        return "failed"
    return None


# --- watching -----------------------------------------------------------------------------------


@dataclass
class Sighting:
    """One uid seen under a child's name."""

    uid: str
    first_seen: float
    """``time.monotonic()`` of its first sighting."""
    digest: str
    """Digest of its data at first sight (ConfigMaps and Secrets; empty for other kinds)."""
    changed: bool = False
    """Its data was seen different from ``digest`` at some point."""
    deleted: bool = False
    """A DELETED event was seen for it."""


def _digest(kind: str, obj: JSON) -> str:
    if kind not in ("ConfigMap", "Secret"):
        return ""
    data = {"data": obj.get("data") or {}, "binaryData": obj.get("binaryData") or {}}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def _controller(obj: JSON) -> JSON | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def _is_child(obj: JSON) -> bool:
    """Labelled as a parent's child, or controlled by a TrainJob or an MPIJob."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    ref = _controller(obj)
    return any(label in labels for label in PARENT_LABELS.values()) or (ref or {}).get("kind") in PARENT_LABELS


class Observer:
    """Lists and watches the children (Jobs, Services, ConfigMaps and Secrets labelled with a parent
    label) and the parents (TrainJobs, MPIJobs) of ``namespace`` until :meth:`stop`, through apiserver
    restarts: a broken or expired watch is followed by a new list and watch 0.1 s later. Its own
    connection (``kube``) is not closed by it."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        """Nothing is read before :meth:`start`."""
        self.kube, self.namespace = kube, namespace
        self.seen: dict[Child, dict[str, Sighting]] = {}
        """Every uid seen under each child ``(kind, name)``."""
        self.parents_seen: dict[Child, float] = {}
        """Each parent ``(kind, name)`` and when it was first seen."""
        self.finished: dict[Child, tuple[str, float]] = {}
        """Each finished parent: its :func:`outcome` and when it was first seen finished."""
        self.relists = 0
        """Lists made after the first one of each resource (watches broken or expired)."""
        self._tasks: list[asyncio.Task[None]] = []
        self._synced: list[asyncio.Event] = []

    async def start(self) -> None:
        """Start following every resource; returns once each has been listed once."""
        for res in (*PARENTS, *CHILDREN):
            synced = asyncio.Event()
            self._synced.append(synced)
            self._tasks.append(asyncio.create_task(self._follow(res, synced)))
        await asyncio.gather(*(s.wait() for s in self._synced))

    async def stop(self) -> None:
        """Stop following; raises what stopped a follower before (see :meth:`raise_failure`)."""
        for task in self._tasks:
            task.cancel()
        results = await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        for result in results:
            if isinstance(result, Exception):
                raise result

    def raise_failure(self) -> None:
        """Raise what made a follower stop: an answer of the apiserver that a restart does not
        explain (e.g. 403), after which that resource was no longer recorded."""
        for task in self._tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                task.result()

    def jobs_seen(self) -> int:
        """How many Job names have been seen."""
        return sum(1 for kind, _ in self.seen if kind == "Job")

    def record(self, res: Resource, typ: str, obj: JSON) -> None:
        """Take one object, listed or from a watch event of type ``typ``."""
        meta = obj.get("metadata") or {}
        name, uid = meta.get("name"), meta.get("uid")
        if not name or not uid:
            return  # a bookmark
        now = time.monotonic()
        if res in PARENTS:
            key = (res.kind, str(name))
            self.parents_seen.setdefault(key, now)
            result = outcome({**obj, "kind": res.kind})
            if result is not None and key not in self.finished:
                self.finished[key] = (result, now)
            return
        if not _is_child(obj):
            return
        digest = _digest(res.kind, obj)
        uids = self.seen.setdefault((res.kind, str(name)), {})
        sighting = uids.get(str(uid))
        if sighting is None:
            sighting = uids[str(uid)] = Sighting(str(uid), now, digest)
        elif digest != sighting.digest:
            sighting.changed = True
        if typ == "DELETED":
            sighting.deleted = True

    async def _follow(self, res: Resource, synced: asyncio.Event) -> None:
        while True:
            try:
                items, rv = await self.kube.list(res, self.namespace)
                if synced.is_set():
                    self.relists += 1
                for item in items:
                    self.record(res, "LISTED", item)
                synced.set()
                async for typ, obj in self.kube.watch(res, self.namespace, rv, timeout_seconds=120):
                    self.record(res, typ, obj)
            except Exception as e:
                if not (_transient(e) or (isinstance(e, ApiError) and e.gone) or isinstance(e, ValueError)):
                    raise
            await asyncio.sleep(0.1)


# --- chaos --------------------------------------------------------------------------------------


class Killer:
    """Kills ``operator`` with SIGKILL (``kill -9``) and starts a new one at once, each call; notes
    when the operator had already exited by itself (a crash, which no kill explains)."""

    def __init__(self, operator: Operator) -> None:
        """Nothing is done before the first call."""
        self.operator = operator
        self.kills = 0
        self.crashes: list[str] = []
        """One line per operator process found exited by itself, with its exit code."""

    def check(self, start: bool = True) -> None:
        """Note a crash if the operator process has exited by itself, and (``start``) start a new one."""
        proc = self.operator.proc
        if proc is not None and proc.poll() is not None:
            self.crashes.append(f"operator pid {proc.pid} exited by itself with code {proc.returncode}")
            self.operator.proc = None
            if start:
                self.operator.start()

    def __call__(self) -> None:
        """Kill and start again (a crashed operator is noted, then started again)."""
        self.check(start=False)
        self.operator.kill()
        self.operator.start()
        self.kills += 1


@dataclass
class Event:
    """One planned fault: ``kill`` (the operator, ``kill -9``, started again at once) or ``apiserver``
    (stopped and started again), due when the run's :meth:`Chaos.progress` reaches ``at``."""

    action: str
    at: float
    began: float | None = None
    """``time.monotonic()`` when it was done (for ``apiserver``: when the stop began)."""
    answered: float | None = None
    """``apiserver``: when ``/readyz`` answered again."""


class Chaos:
    """Runs ``kills`` operator kills and ``apiserver_restarts`` apiserver restarts, spread evenly over
    the run's progress from ``first`` to ``last`` (fractions of :meth:`progress`), the restarts among
    the kills, ``min_gap`` seconds apart at least.

    ``kill_operator`` kills the operator with SIGKILL and starts a new one (blocking, quick);
    ``restart_apiserver`` stops and starts the apiserver and returns the ``time.monotonic()`` at
    which it answered again (blocking; run in a thread)."""

    def __init__(
        self,
        observer: Observer,
        parents: list[Parent],
        kill_operator: Callable[[], None],
        restart_apiserver: Callable[[], float],
        kills: int,
        apiserver_restarts: int,
        first: float = 0.05,
        last: float = 0.7,
        min_gap: float = 2.0,
    ) -> None:
        """Plan the events; nothing is done before :meth:`run`."""
        self.observer, self.parents = observer, parents
        self.min_gap = min_gap
        self.kill_operator, self.restart_apiserver = kill_operator, restart_apiserver
        total = kills + apiserver_restarts
        restarts = {min(total - 1, (i + 1) * total // (apiserver_restarts + 1)) for i in range(apiserver_restarts)}
        step = (last - first) / max(1, total - 1)
        self.events = [
            Event("apiserver" if i in restarts else "kill", first + i * step if total > 1 else first)
            for i in range(total)
        ]
        self.expected_jobs = sum(len(p.jobs) for p in parents)

    def progress(self) -> float:
        """How far the run is, in [0, 1]: a quarter for the parents seen, a quarter for the Jobs seen,
        half for the parents finished."""
        n = max(1, len(self.parents))
        seen = min(1.0, len(self.observer.parents_seen) / n)
        jobs = min(1.0, self.observer.jobs_seen() / max(1, self.expected_jobs))
        done = min(1.0, len(self.observer.finished) / n)
        return 0.25 * seen + 0.25 * jobs + 0.5 * done

    async def run(self) -> None:
        """Do every event when its progress is reached and at least ``min_gap`` seconds after the end
        of the one before (a new operator has started by then), in order; returns after the last."""
        ended = 0.0
        for event in self.events:
            while self.progress() < event.at or time.monotonic() < ended + self.min_gap:
                await asyncio.sleep(0.05)
            event.began = time.monotonic()
            if event.action == "kill":
                self.kill_operator()
            else:
                event.answered = await asyncio.to_thread(self.restart_apiserver)
            ended = time.monotonic()

    def timeline(self, since: float) -> list[str]:
        """The events done, with their times in seconds since ``since`` (a ``time.monotonic()``)."""
        out = []
        for event in self.events:
            if event.began is None:
                out.append(f"{event.action} at progress {event.at:.2f}: not reached")
            elif event.answered is not None:
                out.append(
                    f"apiserver restart at progress {event.at:.2f}: stopped at +{event.began - since:.1f}s, "
                    f"answered at +{event.answered - since:.1f}s (down {event.answered - event.began:.1f}s)"
                )
            else:
                out.append(f"operator kill -9 at progress {event.at:.2f}: +{event.began - since:.1f}s")
        return out


async def wait_finished(kube: Kube, namespace: str, parents: list[Parent], timeout: float) -> float | None:
    """Poll (every second, through apiserver restarts) until every parent finished; returns the
    ``time.monotonic()`` at which they had, or None after ``timeout`` seconds."""
    names = {(p.kind, p.name) for p in parents}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        finished: set[Child] = set()
        for res in PARENTS:
            items, _ = await retrying(partial(kube.list, res, namespace), f"listing {res.plural}")
            finished |= {(res.kind, o["metadata"]["name"]) for o in items if outcome({**o, "kind": res.kind})}
        if names <= finished:
            return time.monotonic()
        await asyncio.sleep(1)
    return None


# --- the checks ---------------------------------------------------------------------------------


@dataclass
class Report:
    """What a run left behind; every list names its offenders (empty lists: no violation)."""

    parents: int
    expected_children: int
    duplicates: list[str] = field(default_factory=list)
    """Children created more than once (several uids under one name, or a uid at the end that is not
    the first one seen)."""
    extras: list[str] = field(default_factory=list)
    """Children a parent should not have (e.g. a Job ``<trainjob>-node-1``)."""
    orphans: list[str] = field(default_factory=list)
    """Children without a controller owner reference to an existing TrainJob or MPIJob."""
    lost: list[str] = field(default_factory=list)
    """Expected children never seen, or gone at the end though they had to stay."""
    rekeyed: list[str] = field(default_factory=list)
    """Written-once children (SSH Secrets, runtime snapshots) whose data changed."""
    unfinished: list[str] = field(default_factory=list)
    """Parents that did not succeed (still running, failed or missing)."""
    gone_after_finish: int = 0
    """Children of :attr:`Parent.may_go` deleted after their parent finished (allowed)."""

    def violations(self) -> list[str]:
        """One line per violation, prefixed with its category."""
        out = []
        for category in ("duplicates", "extras", "orphans", "lost", "rekeyed", "unfinished"):
            out += [f"{category}: {line}" for line in getattr(self, category)]
        return out

    def counts(self) -> dict[str, int]:
        """The number of offenders per category."""
        return {c: len(getattr(self, c)) for c in ("duplicates", "extras", "orphans", "lost", "rekeyed", "unfinished")}

    def summary(self) -> str:
        """One line: the parents, the children expected and the counts."""
        counts = ", ".join(f"{k} {v}" for k, v in self.counts().items())
        return (
            f"{self.parents} parents, {self.expected_children} children expected; {counts}; "
            f"{self.gone_after_finish} Jobs deleted after their parent finished (allowed)"
        )


async def check(kube: Kube, namespace: str, parents: list[Parent], observer: Observer) -> Report:
    """List the final state of ``namespace`` (recorded into ``observer`` first) and check it and
    everything ``observer`` saw against ``parents``. Raises ``TimeoutError`` when the apiserver does
    not answer (:func:`retrying`), and what stopped one of the observer's followers."""
    observer.raise_failure()
    final: dict[Child, JSON] = {}
    for res in CHILDREN:
        items, _ = await retrying(partial(kube.list, res, namespace), f"listing {res.plural}")
        for item in items:
            observer.record(res, "LISTED", item)
            if _is_child(item):
                final[(res.kind, item["metadata"]["name"])] = item
    owners: dict[tuple[str, str, str], JSON] = {}
    by_name: dict[Child, JSON] = {}
    for res in PARENTS:
        items, _ = await retrying(partial(kube.list, res, namespace), f"listing {res.plural}")
        for item in items:
            meta = item["metadata"]
            owners[(res.kind, meta["name"], meta["uid"])] = item
            by_name[(res.kind, meta["name"])] = {**item, "kind": res.kind}

    report = Report(len(parents), sum(len(p.children) for p in parents))
    expected: set[Child] = set()
    for p in parents:
        expected |= p.children
        obj = by_name.get((p.kind, p.name))
        result = outcome(obj) if obj is not None else "missing"
        if result != "succeeded":
            conditions = _conditions(obj) if obj is not None else {}
            report.unfinished.append(f"{p.kind} {p.name}: {result or 'running'} {conditions}")
        for child in sorted(p.children):
            kind, name = child
            sightings = sorted(observer.seen.get(child, {}).values(), key=lambda s: s.first_seen)
            if not sightings:
                report.lost.append(f"{p.kind} {p.name}: {kind} {name} never created")
                continue
            if len(sightings) > 1:
                report.duplicates.append(f"{p.kind} {p.name}: {kind} {name} created {len(sightings)} times")
            present = final.get(child)
            if present is None:
                if child in p.may_go and result is not None:
                    report.gone_after_finish += 1
                else:
                    report.lost.append(f"{p.kind} {p.name}: {kind} {name} deleted")
            elif present["metadata"]["uid"] != sightings[0].uid and len(sightings) == 1:
                report.duplicates.append(f"{p.kind} {p.name}: {kind} {name} replaced")
            if child in p.once:
                changed = any(s.changed for s in sightings) or len({s.digest for s in sightings}) > 1
                if present is not None and _digest(kind, present) != sightings[0].digest:
                    changed = True
                if changed:
                    report.rekeyed.append(f"{p.kind} {p.name}: {kind} {name} data changed")

    for child in sorted(set(observer.seen) - expected):
        kind, name = child
        state = "at the end" if child in final else "during the run"
        report.extras.append(f"{kind} {name} ({state})")

    for (kind, name), obj in sorted(final.items()):
        ref = _controller(obj)
        if ref is None:
            report.orphans.append(f"{kind} {name}: no controller owner reference")
        elif (str(ref.get("kind")), str(ref.get("name")), str(ref.get("uid"))) not in owners:
            report.orphans.append(f"{kind} {name}: its controller {ref.get('kind')} {ref.get('name')} is gone")
        else:
            labels = obj["metadata"].get("labels") or {}
            label = PARENT_LABELS.get(str(ref.get("kind")), "")
            if labels.get(label) != ref.get("name"):
                report.orphans.append(f"{kind} {name}: label {label}={labels.get(label)!r} names another parent")
    return report


# --- one whole run ------------------------------------------------------------------------------


@dataclass
class Run:
    """What :func:`run` measured and found."""

    report: Report
    lines: list[str]
    """The run's story: parents, fault timeline, times, relists, the report's summary."""
    created: float
    """Seconds from the start to the last parent created."""
    finished: float | None
    """Seconds from the start to every parent finished; None when they had not within the timeout."""
    faults_done: bool
    """Whether every planned fault happened."""
    crashes: list[str] = field(default_factory=list)
    """Operator processes that exited by themselves (see :class:`Killer`)."""

    def failures(self) -> list[str]:
        """Every violation, plus a line when not everything finished or a fault did not happen."""
        out = self.report.violations()
        if self.finished is None:
            out.append("timeout: not every parent finished")
        if not self.faults_done:
            out.append("chaos: not every planned fault happened")
        out += [f"crash: {line}" for line in self.crashes]
        return out


async def run(
    kube: Kube,
    watch: Kube,
    namespace: str,
    parents: list[Parent],
    operator: Operator,
    restart_apiserver: Callable[[], float],
    kills: int,
    apiserver_restarts: int,
    timeout: float,
    settle: float = 3.0,
    concurrency: int = 8,
) -> Run:
    """Create ``parents`` in ``namespace`` in a burst (through ``kube``) while :class:`Chaos` does
    ``kills`` kills of ``operator`` (:class:`Killer`) and ``apiserver_restarts`` apiserver restarts;
    wait up to ``timeout`` seconds for every parent to finish and every fault to be done, ``settle``
    seconds more (a child created again late would show then), and :func:`check` what is left.
    ``watch`` is the :class:`Observer`'s own connection. The runtimes must exist (:func:`runtimes`).
    Raises what a fault raised (e.g. the apiserver not ready again in time)."""
    observer = Observer(watch, namespace)
    await observer.start()
    killer = Killer(operator)
    chaos = Chaos(observer, parents, killer, restart_apiserver, kills, apiserver_restarts)
    began = time.monotonic()
    faults = asyncio.create_task(chaos.run())
    try:
        await create(kube, namespace, parents, concurrency)
        created = time.monotonic() - began
        finished = await wait_finished(kube, namespace, parents, timeout)
        left = max(1.0, began + timeout - time.monotonic())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(faults), left)
        await asyncio.sleep(settle)
        report = await check(kube, namespace, parents, observer)
        killer.check()
    finally:
        if not faults.done():
            faults.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await faults
        await observer.stop()
    trainjobs = sum(1 for p in parents if p.kind == "TrainJob")
    mpi = sum(1 for p in parents if p.kind == "TrainJob" and ("Secret", f"{p.name}-mpi-ssh-auth") in p.children)
    lines = [
        f"{len(parents)} parents: {trainjobs} TrainJobs ({mpi} on the mpi runtime), "
        f"{len(parents) - trainjobs} MPIJobs; {chaos.expected_jobs} Jobs expected; created in {created:.1f}s",
        *chaos.timeline(began),
        f"all finished at +{finished - began:.1f}s" if finished else f"not all finished within {timeout:.0f}s",
        f"observer relists (watches broken by the restarts): {observer.relists}",
        report.summary(),
    ]
    lines += killer.crashes
    done = all(e.began is not None for e in chaos.events) and faults.done() and not faults.cancelled()
    return Run(report, lines, created, None if finished is None else finished - began, done, killer.crashes)
