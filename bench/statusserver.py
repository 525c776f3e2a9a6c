"""Status server throughput: how many progress posts the operator's status server takes, how fast it
answers them and how few status writes they cost.

``python -m bench.statusserver --pods 1000 --duration 30`` starts the local cluster (KWOK nodes, the
binaries of ``localcluster/build.sh``) in a temporary directory, starts the operator as its own process
watching namespace ``bench`` with its status server on loopback (``--status-server-port``,
``--status-server-host 127.0.0.1``, ``--status-write-interval``), and creates ``--pods`` /
``--pods-per-job`` TrainJobs whose trainer pods (``--pods-per-job`` each, ServiceAccount ``default``)
run on KWOK for the whole run. Each running pod is then simulated: a token of its ServiceAccount bound
to it with its TrainJob's audience (the TokenRequest API, as the kubelet mints it for the projected
volume; KWOK pods run no containers), the CA of its TrainJob's ``<trainjob>-tls-config`` ConfigMap, and
one HTTPS connection of its own, kept alive. Two phases:

1. **first posts**: every pod posts once, all at once, until its post is answered 200 (a 429 is retried
   after its ``Retry-After``): each new token costs a TokenReview, at most 16 at once. Printed: the
   seconds until every pod was let in, the answers by code.
2. **sustained**, once per ``--period`` value (default ``0 1``), each after a pause of
   ``--write-interval`` seconds (so every TrainJob's next post is written at once, as a first report
   is): every pod posts its progress (progress, remaining seconds, ``loss``) in a loop for
   ``--duration`` seconds, one post in flight per pod, the next one ``--period`` seconds after the
   previous one was sent (0: as soon as it was answered, a closed loop; with a period each pod starts at
   a random offset within it). The status writes are counted on a watch of the namespace's TrainJobs
   (every change of a ``status.trainerStatus`` is one write) until none came for ``--write-interval`` +
   2 seconds after the last post. Printed: posts answered 200 per second, latency p50/p99/max (seconds,
   from send to answer) of every post and of those sent after the first ``--write-interval`` seconds
   (when each TrainJob's first post, which waits for its write, is behind), the answers by code,
   trainerStatus writes and writes per post, the operator's PATCHes of ``trainjobs/status`` by code
   (its reconciler's status writes included) and POSTs of ``tokenreviews`` (its
   ``trainer_apiserver_requests_total``), its CPU seconds (``/proc/<pid>/stat``) and this process's (the
   simulated pods share the machine's cores with the operator and the cluster).

The machine (cores, memory) comes first. ``--json PATH`` writes every figure as JSON too.

**Upstream**: Kubeflow Trainer v2.3.0 has the same endpoint (:data:`UPSTREAM`), which is not run
here: the reasons are printed with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import resource
import ssl
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from bench.burst import Counts, create_all, parse_requests, tail
from bench.cluster import HelpFormatter, Operator, PhaseTimeout, local_cluster, machine, pods_per_node
from localcluster.client import Client
from localcluster.cluster import free_ports
from trainer.api.kinds import CONFIGMAPS, NAMESPACES, PODS, SERVICE_ACCOUNTS, TRAINING_RUNTIMES, TRAINJOBS
from trainer.api.labels import JOBSET_NAME
from trainer.framework.json_codec import JSON
from trainer.trainjob.spec.injection import ca_config_map_name, status_path, token_audience

NS = "bench"
RUNTIME = "bench-status"
RUN_FOR = {  # KWOK completes pods carrying these after ~delay: longer than any run
    "pod-complete.stage.kwok.x-k8s.io/delay": "3600s",
    "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "3601s",
}
FLUSH_GRACE = 2.0
"""Seconds after ``--write-interval`` that the watch keeps counting once the posts stopped."""
UPSTREAM = (
    "upstream Kubeflow Trainer v2.3.0 has this endpoint (pkg/statusserver, added by kubeflow/trainer#3227, "
    "in the v2.2 releases already; alpha feature gate TrainJobStatus, off by default) but is not measured here: "
    "its token check (pkg/statusserver/auth.go) reads the issuer from the in-cluster token file "
    "/var/run/secrets/kubernetes.io/serviceaccount/token and fetches the OIDC discovery document from that "
    "issuer (https://kubernetes.default.svc.cluster.local on the local cluster), which a process run out "
    "of the cluster can neither read nor reach, and its server fails to start without them. By its source "
    "it writes every accepted post as one server-side apply of the status (no coalescing: 1 write per post) "
    "through a client limited to 5 requests per second, burst 10 (statusServer.qps/burst), so one replica "
    "writes at most 5 posts per second once the burst is spent."
)


# --- pure parts --------------------------------------------------------------------------------------


def report(pod: int, step: int) -> JSON:
    """The body pod ``pod`` posts at its ``step``-th post: ``{"trainerStatus": {progressPercentage,
    estimatedRemainingSeconds, metrics: [loss]}}``, every post a different report."""
    return {
        "trainerStatus": {
            "progressPercentage": step % 101,
            "estimatedRemainingSeconds": 100_000 - step,
            "metrics": [{"name": "loss", "value": f"{1 / (step + 1):.6f}"}],
        }
    }


def trainer_status_changed(before: JSON | None, after: JSON) -> bool:
    """Whether the TrainJob ``after`` (a watch event's object) holds another ``status.trainerStatus``
    than ``before`` (the same TrainJob's previous version, None when unseen)."""
    old = ((before or {}).get("status") or {}).get("trainerStatus")
    return old != (after.get("status") or {}).get("trainerStatus")


@dataclass
class Tally:
    """The answers of a phase begun at ``start`` (monotonic seconds): each post's send time (seconds
    after ``start``), latency (seconds) and HTTP code."""

    start: float = 0.0
    sent: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    codes: Counter[int] = field(default_factory=Counter)

    def add(self, code: int, sent: float, seconds: float) -> None:
        self.codes[code] += 1
        self.sent.append(sent - self.start)
        self.latencies.append(seconds)

    def after(self, offset: float) -> list[float]:
        """The latencies of the posts sent ``offset`` seconds after the start or later."""
        return [lat for t, lat in zip(self.sent, self.latencies, strict=True) if t >= offset]


def figures(tally: Tally, seconds: float, writes: int, settled: float, interval: float) -> JSON:
    """The sustained phase's figures: ``posts`` (answered 200), ``posts_per_second`` (over ``seconds``),
    ``latency`` (:func:`bench.burst.tail` of every post) and ``latency_after_first_interval`` (of the
    posts sent ``interval`` seconds after the start or later: once each TrainJob's first post, written
    at once, is behind), ``codes`` (answers by code), ``writes`` (trainerStatus writes until they
    ``settled``, seconds after the last post) and ``writes_per_post`` (None without a post). Raises
    ``ValueError`` when ``seconds`` <= 0."""
    if seconds <= 0:
        raise ValueError(f"a phase of {seconds} s")
    ok = tally.codes.get(200, 0)
    return {
        "posts": ok,
        "posts_per_second": round(ok / seconds, 1),
        "latency": tail(tally.latencies),
        "latency_after_first_interval": tail(tally.after(interval)),
        "codes": {str(k): v for k, v in sorted(tally.codes.items())},
        "writes": writes,
        "writes_settled_after": round(settled, 1),
        "writes_per_post": round(writes / ok, 4) if ok else None,
    }


def by_code(before: Counts, after: Counts, verb: str, resource: str) -> dict[str, float]:
    """The operator's ``verb`` requests of ``resource`` between two scrapes
    (:func:`bench.burst.parse_requests`), by answer code; codes that did not move left out."""
    keys = {k for k in set(before) | set(after) if k[:2] == (verb, resource)}
    delta = {k[2]: after.get(k, 0.0) - before.get(k, 0.0) for k in sorted(keys)}
    return {code: n for code, n in delta.items() if n}


# --- the cluster side --------------------------------------------------------------------------------


def runtime(pods_per_job: int) -> JSON:
    """TrainingRuntime :data:`RUNTIME`: one trainer Job of ``pods_per_job`` pods under ServiceAccount
    ``default`` that run for the whole bench on KWOK."""
    pod = {
        "metadata": {"annotations": RUN_FOR},
        "spec": {"serviceAccountName": "default", "containers": [{"name": "node", "image": "busybox"}]},
    }
    node = {
        "name": "node",
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"template": pod},
        },
    }
    return {
        "apiVersion": TRAINJOBS.api_version,
        "kind": "TrainingRuntime",
        "metadata": {"name": RUNTIME, "namespace": NS},
        "spec": {
            "mlPolicy": {"numNodes": pods_per_job, "torch": {"numProcPerNode": "auto"}},
            "template": {"spec": {"replicatedJobs": [node]}},
        },
    }


def trainjob(i: int, pods_per_job: int) -> JSON:
    return {
        "apiVersion": TRAINJOBS.api_version,
        "kind": TRAINJOBS.kind,
        "metadata": {"name": f"s-{i}", "namespace": NS},
        "spec": {"runtimeRef": {"name": RUNTIME, "kind": "TrainingRuntime"}, "trainer": {"numNodes": pods_per_job}},
    }


async def poll(probe: Callable[[], Awaitable[bool]], what: str, deadline: float) -> None:
    """Await ``probe`` every second until true; raises :class:`PhaseTimeout` naming ``what`` at
    ``deadline`` (monotonic)."""
    while not await probe():
        if time.monotonic() > deadline:
            raise PhaseTimeout(f"{what}: not done in time")
        await asyncio.sleep(1)


@dataclass(frozen=True)
class Pod:
    """A simulated trainer pod: where it posts and with which token."""

    index: int
    url: str
    token: str


async def running_pods(client: Client, args: argparse.Namespace, port: int) -> tuple[list[Pod], str, float]:
    """Create the TrainJobs and wait until ``--pods`` of their pods run; returns the simulated pods,
    the status server's CA (PEM) and the seconds from the first create to the last token."""
    jobs = args.pods // args.pods_per_job
    await client.kube.create(NAMESPACES, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    await client.kube.create(TRAINING_RUNTIMES, NS, runtime(args.pods_per_job))
    started, _ = await create_all(client.kube, [trainjob(i, args.pods_per_job) for i in range(jobs)], 32)
    deadline, need = started + float(args.timeout), int(args.pods)
    found: list[JSON] = []

    async def all_running() -> bool:
        items, _ = await client.kube.list(PODS, NS)
        found[:] = [p for p in items if (p.get("status") or {}).get("phase") == "Running"]
        return len(found) >= need

    await poll(all_running, f"{need} running pods", deadline)

    async def account() -> bool:
        return await client.kube.get_or_none(SERVICE_ACCOUNTS, NS, "default") is not None

    await poll(account, "ServiceAccount default", deadline)

    async def published() -> bool:
        return await client.kube.get_or_none(CONFIGMAPS, NS, ca_config_map_name("s-0")) is not None

    await poll(published, "the CA ConfigMap", deadline)
    cm = await client.kube.get_or_none(CONFIGMAPS, NS, ca_config_map_name("s-0"))
    gate = asyncio.Semaphore(32)

    async def mint(i: int, pod: JSON) -> Pod:
        job = pod["metadata"]["labels"][JOBSET_NAME]
        async with gate:
            token = await client.pod_token(pod, token_audience(NS, job))
        return Pod(i, f"https://127.0.0.1:{port}{status_path(NS, job)}", token)

    pods = await asyncio.gather(*(mint(i, p) for i, p in enumerate(found)))
    return list(pods), str((cm or {})["data"]["ca.crt"]), time.monotonic() - started


# --- the posting side --------------------------------------------------------------------------------


async def post(session: aiohttp.ClientSession, pod: Pod, step: int, tally: Tally) -> float | None:
    """One post of ``pod``; its answer goes to ``tally``. Returns the ``Retry-After`` seconds of a 429,
    else None."""
    sent = time.monotonic()
    headers = {"Authorization": f"Bearer {pod.token}"}
    async with session.post(pod.url, json=report(pod.index, step), headers=headers) as r:
        await r.read()
        tally.add(r.status, sent, time.monotonic() - sent)
        return float(r.headers.get("Retry-After", "1")) if r.status == 429 else None


async def first_posts(session: aiohttp.ClientSession, pods: list[Pod]) -> tuple[float, Tally]:
    """Every pod posts until answered 200; returns the seconds until the last one was and the answers."""
    tally = Tally(time.monotonic())

    async def one(pod: Pod) -> None:
        while True:
            wait = await post(session, pod, 0, tally)
            if wait is None:
                return
            await asyncio.sleep(wait)

    started = time.monotonic()
    await asyncio.gather(*(one(p) for p in pods))
    return time.monotonic() - started, tally


async def sustained(session: aiohttp.ClientSession, pods: list[Pod], seconds: float, period: float) -> Tally:
    """Every pod posts for ``seconds``, one post in flight each, ``period`` seconds apart at least
    (with a period, each pod's first post at a random offset within it, so that pods do not post in
    step)."""
    tally = Tally(time.monotonic())
    end = tally.start + seconds

    async def one(pod: Pod) -> None:
        step = 1
        await asyncio.sleep(random.uniform(0, period))
        while (sent := time.monotonic()) < end:
            wait = await post(session, pod, step, tally)
            step += 1
            if wait is not None or period:
                await asyncio.sleep(max(wait or 0.0, sent + period - time.monotonic()))

    await asyncio.gather(*(one(p) for p in pods))
    return tally


@contextlib.asynccontextmanager
async def counted_writes(client: Client) -> AsyncIterator[list[int]]:
    """Count the trainerStatus writes in namespace :data:`NS` while the block runs (the one-element list
    it yields holds the count)."""
    items, rv = await client.kube.list(TRAINJOBS, NS)
    seen: dict[str, JSON] = {o["metadata"]["name"]: o for o in items}
    count = [0]

    async def watch() -> None:
        nonlocal rv
        while True:
            async for typ, obj in client.kube.watch(TRAINJOBS, NS, rv):
                rv = obj["metadata"].get("resourceVersion", rv)
                if typ == "MODIFIED":
                    name = obj["metadata"]["name"]
                    count[0] += trainer_status_changed(seen.get(name), obj)
                    seen[name] = obj

    task = asyncio.ensure_future(watch())
    try:
        yield count
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def settled(writes: list[int], quiet: float, limit: float) -> float:
    """Wait until ``writes[0]`` (:func:`counted_writes`) has not moved for ``quiet`` seconds, at most
    ``limit`` seconds; returns the seconds from the call to its last move."""
    began = last_move = time.monotonic()
    seen = writes[0]
    while time.monotonic() - last_move < quiet and time.monotonic() - began < limit:
        await asyncio.sleep(0.5)
        if writes[0] != seen:
            seen, last_move = writes[0], time.monotonic()
    return last_move - began


def client_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def measure(args: argparse.Namespace, client: Client, op: Operator, port: int) -> JSON:
    """Both phases against the started operator ``op`` (status server on ``port``), the sustained one
    once per ``--period``; every figure."""
    await op.wait_ready(120)
    pods, ca, setup = await running_pods(client, args, port)
    print(f"{len(pods)} pods running with their tokens {setup:.1f} s after the first TrainJob was created", flush=True)
    context = ssl.create_default_context(cadata=ca)
    connector = aiohttp.TCPConnector(ssl=context, limit=0)
    runs = []
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as session:
        let_in, first = await first_posts(session, pods)
        print(f"first posts: every pod let in after {let_in:.2f} s, answers {dict(first.codes)}", flush=True)
        for period in args.period:
            await asyncio.sleep(args.write_interval)  # every TrainJob's next post is written at once
            before, usage, cpu = parse_requests(await op.metrics()), op.usage(), client_cpu()
            async with counted_writes(client) as writes:
                tally = await sustained(session, pods, args.duration, period)
                spent = time.monotonic() - tally.start
                client_spent = client_cpu() - cpu
                quiet = await settled(writes, args.write_interval + FLUSH_GRACE, 120)
            after, used = parse_requests(await op.metrics()), op.usage()
            out = figures(tally, spent, writes[0], quiet, args.write_interval)
            out["operator_cpu"] = round(used.cpu - usage.cpu, 2)
            out["client_cpu"] = round(client_spent, 2)
            out["operator_status_patches"] = by_code(before, after, "PATCH", "trainjobs/status")
            out["operator_token_reviews"] = sum(by_code(before, after, "POST", "tokenreviews").values())
            runs.append({"seconds": round(spent, 1), "period": period, **out})
            show(runs[-1], args.write_interval)
    return {
        "pods": len(pods),
        "trainjobs": len(pods) // args.pods_per_job,
        "setup_seconds": round(setup, 1),
        "first_posts": {"seconds": round(let_in, 2), "codes": {str(k): v for k, v in sorted(first.codes.items())}},
        "sustained": runs,
    }


def show(s: JSON, interval: float) -> None:
    """Print one sustained phase's figures (:func:`figures` and the operator's)."""
    lat, steady = s["latency"] or {}, s["latency_after_first_interval"] or {}
    loop = "closed loop" if not s["period"] else f"a post per pod every {s['period']} s"
    print(f"sustained ({s['seconds']} s, {loop}, --status-write-interval {interval}):")
    print(f"  posts answered 200        {s['posts']} ({s['posts_per_second']} per second)")
    print(f"  latency p50 / p99 / max   {lat.get('median')} / {lat.get('p99')} / {lat.get('max')} s")
    print(f"    after the first {interval} s  {steady.get('median')} / {steady.get('p99')} / {steady.get('max')} s")
    print(f"  answers by code           {s['codes']}")
    last = f"the last {s['writes_settled_after']} s after the last post"
    print(f"  trainerStatus writes      {s['writes']} ({s['writes_per_post']} per post; {last})")
    patches, reviews = s["operator_status_patches"], s["operator_token_reviews"]
    print(f"  operator PATCH trainjobs/status by code {patches}, POST tokenreviews {reviews:.0f}")
    print(f"  operator CPU              {s['operator_cpu']} s; simulated pods' CPU {s['client_cpu']} s", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    host = machine()
    jobs = args.pods // args.pods_per_job
    print(f"machine: {host['cores']} cores, {host['memory_gib']} GiB; {args.pods} pods, {jobs} TrainJobs")
    with local_cluster("bench-statusserver-", pods_per_node(args.pods)) as cluster:
        (port,) = free_ports(1)
        flags = ["--status-server-port", str(port), "--status-server-host", "127.0.0.1"]
        flags += ["--status-write-interval", str(args.write_interval)]
        op = Operator(cluster.kubeconfig, NS, cluster.state_dir / "operator.log", args=flags)
        op.start()
        try:

            async def run() -> JSON:
                client = await Client.connect(cluster)
                try:
                    return await measure(args, client, op, port)
                finally:
                    await client.close()

            try:
                figures_ = asyncio.run(run())
            except PhaseTimeout as e:
                print(f"timed out: {e}", file=sys.stderr)
                return 1
        finally:
            op.stop()
    print(UPSTREAM)
    if args.json:
        args.json.write_text(
            json.dumps({"machine": host, "args": vars(args) | {"json": str(args.json)}, **figures_}, indent=2)
        )
    return 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.statusserver", description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--pods", type=int, default=1000, help="simulated trainer pods")
    p.add_argument("--pods-per-job", type=int, default=1, help="trainer pods of each TrainJob")
    p.add_argument("--duration", type=float, default=30.0, help="seconds of the sustained phase")
    p.add_argument(
        "--period",
        type=float,
        nargs="+",
        default=[0.0, 1.0],
        help="seconds between two posts of a pod (0: closed loop); one sustained phase per value",
    )
    p.add_argument("--write-interval", type=float, default=5.0, help="the operator's --status-write-interval")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds to get every pod running")
    p.add_argument("--json", type=Path, help="write the figures as JSON to this file too")
    args = p.parse_args(argv)
    if args.pods < 1 or args.pods_per_job < 1 or args.pods % args.pods_per_job:
        p.error("--pods must be a positive multiple of --pods-per-job")
    return args


if __name__ == "__main__":
    sys.exit(main())
