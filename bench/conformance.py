"""Upstream and ours, pod for pod: the same runtimes and TrainJobs applied to upstream Kubeflow Trainer +
JobSet on one local cluster and to this checkout's operator on another, and the Jobs each side creates
compared after normalising what differs by nature (uids, owners, server-set fields, hashes).

The cases: every ClusterTrainingRuntime upstream ships (``manifests/base/runtimes`` of
``github.com/kubeflow/trainer/v2`` at :data:`e2e.upstream.TRAINER_VERSION`, and the Flux runtime of its
``examples/flux/flux-runtime.yaml``), each with a TrainJob that names it and sets nothing else, and
upstream's examples (``examples/yaml/*.yaml``, applied as published). All of it is read from the Go
module cache (:mod:`e2e.upstream`), never committed here.

Upstream runs as :class:`bench.burst.CountedUpstream` (built by :func:`bench.upstream.ensure_upstream`)
on a :func:`bench.cluster.local_cluster` with upstream's CRDs; this operator as
:class:`bench.cluster.Operator` on a second one with this checkout's CRDs (admission webhooks off on both
sides, as in ``bench.burst``). Nodes are KWOK's: a Job-owned pod that is scheduled completes at once, so a
replicated job that ``dependsOn`` an initializer gets its Jobs once the initializer's pods are done; a pod
that cannot be scheduled (an unbound claim, an unmatched node selector) leaves its Job in place, and only
the Jobs are compared.

What is compared, per Job (matched by name: ``<trainjob>-<replicated job>-<index>``): its labels and
annotations and its whole ``spec`` (the pod template included) with ``spec.selector`` and the labels the
Job controller adds (``controller-uid``) and this operator's ``trainer.kubeflow.org/desired-hash`` (a hash
of what it wrote, read to skip writes that change nothing) left out; uids, ``ownerReferences``, ``resourceVersion``,
``creationTimestamp``, ``managedFields``, ``generation`` and ``status`` dropped; 40- and 64-digit hex
values read as ``<hash>``. Lists of named items (containers, env, volumes, mounts, ports) are matched by
name. Each difference is either explained (:data:`EXPLAINED`: a path pattern and the reason, also in
docs/api.md "Conformance with upstream, pod for pod") or counted as unexplained.

Run (under the e2e lock; two clusters, one after the other)::

    flock /tmp/trainer-e2e.lock .venv/bin/python -m bench.conformance [--case NAME ...] [--json PATH]

Exit status 0 when no difference is unexplained, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench.burst import CountedUpstream
from bench.cluster import CRDS, HelpFormatter, Operator, local_cluster, machine
from bench.upstream import ensure_upstream, jobset_version, upstream_owner
from e2e.upstream import TRAINER_VERSION, default_runtimes, documents, examples_dir, trainer_dir
from localcluster import LocalCluster
from localcluster.pki import Pki
from trainer.framework.json_codec import JSON
from trainer.jobs.child_writer import HASH_ANNOTATION

NAMESPACE = "conformance"
"""The namespace every case's TrainJob is applied in, on both sides."""
PODS_PER_NODE = 110
SERVER_SET = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation", "ownerReferences")
"""Metadata the apiserver (or the owner) sets, dropped from both sides."""
JOB_CONTROLLER_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid")
"""Labels the Job controller adds to a Job and its template (the Job's uid)."""
HASH = re.compile(r"^[0-9a-f]{40}$|^[0-9a-f]{64}$")
NAMED_LISTS = frozenset(
    {
        "containers",
        "initContainers",
        "env",
        "volumes",
        "volumeMounts",
        "ports",
        "imagePullSecrets",
        "resourceClaims",
        "hostAliases",
    }
)
"""List fields whose items are matched by their ``name`` (``imagePullSecrets``, ``hostAliases`` by ``name``/``ip``)."""


# --- the cases ---------------------------------------------------------------------------------------


@dataclass
class Case:
    """One thing applied to both sides: its objects (runtimes first, then TrainJobs) and the TrainJobs
    whose Jobs are compared."""

    name: str
    objects: list[JSON]
    trainjobs: list[str] = field(default_factory=list)
    jobs: tuple[int, int] | None = None
    """Jobs of its TrainJobs found upstream and here, once :func:`run` ran it."""


def dns_name(text: str) -> str:
    """``text`` as a DNS label: lower case, every run of other characters a ``-``."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def runtime_case(runtime: JSON) -> Case:
    """A runtime and two TrainJobs that name it: ``rt-<runtime name>`` sets nothing else (the runtime
    as shipped), ``rt2-<runtime name>`` sets only ``trainer.numNodes: 2``."""
    name = runtime["metadata"]["name"]
    ref = {"apiGroup": "trainer.kubeflow.org", "kind": runtime["kind"], "name": name}
    jobs = [f"rt-{dns_name(name)}", f"rt2-{dns_name(name)}"]
    trainjobs: list[JSON] = [
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": job},
            "spec": {"runtimeRef": ref, **({"trainer": {"numNodes": 2}} if job.startswith("rt2-") else {})},
        }
        for job in jobs
    ]
    return Case(name, [runtime, *trainjobs], jobs)


def upstream_cases() -> list[Case]:
    """Every runtime upstream ships (:func:`e2e.upstream.default_runtimes` and the Flux example runtime),
    then every example file of ``examples/yaml`` (the default runtimes it names come with the runtime
    cases). Raises ``RuntimeError`` when the module cannot be downloaded."""
    runtimes = dict(default_runtimes())
    for doc in documents(trainer_dir() / "examples" / "flux" / "flux-runtime.yaml"):
        if doc.get("kind") == "ClusterTrainingRuntime":
            runtimes[doc["metadata"]["name"]] = doc
    cases = [runtime_case(rt) for _, rt in sorted(runtimes.items())]
    for path in sorted(examples_dir().glob("*.yaml")):
        docs = documents(path)
        jobs = [d["metadata"]["name"] for d in docs if d.get("kind") == "TrainJob"]
        cases.append(Case(path.stem, docs, jobs))
    return cases


# --- normalising and comparing (pure) ----------------------------------------------------------------


def normalise_job(job: JSON, uids: Iterable[str]) -> JSON:
    """What is compared of one Job: ``{"metadata": {"labels", "annotations"}, "spec"}``, with the
    Job controller's uid labels, ``spec.selector`` and this operator's hash of what it wrote
    (:data:`trainer.jobs.child_writer.HASH_ANNOTATION`) left out and every string equal to one of
    ``uids`` (or containing it) or a 40/64-digit hex hash replaced by ``<uid>`` / ``<hash>``."""
    meta = job.get("metadata") or {}
    spec = dict(job.get("spec") or {})
    spec.pop("selector", None)
    out: JSON = {
        "metadata": {"labels": dict(meta.get("labels") or {}), "annotations": dict(meta.get("annotations") or {})},
        "spec": spec,
    }
    known = [u for u in uids if u]

    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if k not in SERVER_SET}
        if isinstance(value, list):
            return [clean(v) for v in value]
        if isinstance(value, str):
            for uid in known:
                value = value.replace(uid, "<uid>")
            return "<hash>" if HASH.match(value) else value
        return value

    cleaned: JSON = clean(out)
    cleaned["metadata"]["annotations"].pop(HASH_ANNOTATION, None)
    for labels in (
        cleaned["metadata"]["labels"],
        ((cleaned["spec"].get("template") or {}).get("metadata") or {}).get("labels") or {},
    ):
        for key in JOB_CONTROLLER_LABELS:
            labels.pop(key, None)
    return cleaned


def item_key(item: Any) -> str | None:
    """The key a named-list item is matched by: its ``name`` (or ``ip``), ``None`` when it has neither."""
    if isinstance(item, dict):
        for key in ("name", "ip"):
            if isinstance(item.get(key), str):
                return str(item[key])
    return None


ABSENT = "<absent>"


def diff(upstream: Any, ours: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """``(path, upstream value, our value)`` of every difference between two normalised values;
    :data:`ABSENT` stands for a missing key or item. Items of :data:`NAMED_LISTS` are matched by
    :func:`item_key` (path ``containers[node]``), other lists by position."""
    if isinstance(upstream, dict) and isinstance(ours, dict):
        out = []
        for key in sorted(set(upstream) | set(ours)):
            sub = f"{path}.{key}" if path else key
            out += diff(upstream.get(key, ABSENT), ours.get(key, ABSENT), sub)
        return out
    if isinstance(upstream, list) and isinstance(ours, list):
        name = path.rsplit(".", 1)[-1]
        keys_a, keys_b = [item_key(i) for i in upstream], [item_key(i) for i in ours]
        if name in NAMED_LISTS and None not in keys_a and None not in keys_b:
            a = dict(zip(keys_a, upstream, strict=True))
            b = dict(zip(keys_b, ours, strict=True))
            out = []
            for key in [*keys_a, *(k for k in keys_b if k not in a)]:
                out += diff(a.get(key, ABSENT), b.get(key, ABSENT), f"{path}[{key}]")
            if not out and keys_a != keys_b:
                out.append((f"{path}(order)", keys_a, keys_b))
            return out
        if len(upstream) == len(ours):
            out = []
            for i, (x, y) in enumerate(zip(upstream, ours, strict=True)):
                out += diff(x, y, f"{path}[{i}]")
            return out
    return [] if upstream == ours else [(path, upstream, ours)]


def job_key(job: JSON, trainjob: str) -> str:
    """``<replicated job>-<index>`` of a Job of ``trainjob`` (its name without ``<trainjob>-``)."""
    name = str(job["metadata"]["name"])
    return name[len(trainjob) + 1 :] if name.startswith(trainjob + "-") else name


@dataclass(frozen=True)
class Difference:
    """One difference of a case: where (``<trainjob>/<job key>: <path>``), both values, and the reason
    it is explained (``None``: unexplained)."""

    case: str
    where: str
    upstream: Any
    ours: Any
    reason: str | None


Explained = tuple[str, str, str]
"""``(case pattern, where pattern, reason)``: a difference whose case and ``<trainjob>/<job key>: <path>``
match both regular expressions (``re.search``) is explained by the reason."""

TRAINER_UNSET = (
    "upstream's torch, JAX and XGBoost plugins set the framework's environment and port only when the "
    "TrainJob sets spec.trainer (kubeflow/trainer pkg/runtime/framework/plugins/torch/torch.go, jax/jax.go, "
    "xgboost/xgboost.go look the trainer container up under `trainJob.Spec.Trainer != nil`), so a TrainJob "
    "that leaves its trainer to the runtime gets pods that cannot find each other once the runtime's numNodes "
    "is above 1; here it gets what an empty spec.trainer gives"
)
MPI_VOLUMES = (
    "the MPI Secret and hostfile ConfigMap (same objects, same names) are mounted as mpi-operator mounts them "
    "(volumes ssh-auth, mode 0600, and mpi-job-config with discover_hosts.sh), shared with MPIJob; upstream "
    "Trainer names them mpi-ssh-auth (0400, id_rsa 0640) and mpi-hostfile. Renaming would change the pod "
    "template of running Jobs on upgrade"
)
EXPLAINED: list[Explained] = [
    (
        r"^(torch-distributed|torch-distributed-with-cache|jax-distributed|xgboost-distributed)$",
        r"^rt-[^/]*/node-0: spec\.template\.spec\.containers\[node\]\.(env|ports)",
        TRAINER_UNSET,
    ),
    (
        r"^(deepspeed|mlx)-distributed$",
        r": spec\.template\.spec\.(volumes|containers\[node\]\.volumeMounts)"
        r"\[(mpi-ssh-auth|ssh-auth|mpi-hostfile|mpi-job-config)\]$",
        MPI_VOLUMES,
    ),
    (
        r"^(deepspeed|mlx)-distributed$",
        r"launcher-0: spec\.template\.spec\.containers\[node\]\.env\[PRTE_MCA_",
        "Open MPI 5 (PRRTE) reads PRTE_MCA_* and ignores the OMPI_MCA_orte_* both set, so without them it reads "
        "no hostfile and runs every rank on the launcher (kubeflow/trainer#4029, open: ahead of upstream)",
    ),
    (
        r"^flux-distributed$",
        r"^rt-flux-distributed/node-0: <job>$",
        "upstream's Flux plugin reads *trainJob.Spec.Trainer.NumNodes (kubeflow/trainer "
        "pkg/runtime/framework/plugins/flux/flux.go, generateFluxEntrypoint): a TrainJob without spec.trainer "
        "makes its reconcile panic and it creates nothing; here the runtime's numNodes is used",
    ),
    (
        r"^04-volcano-integration$",
        r"^volcano-example/node-0: <job>$",
        "not compared: without Volcano on the cluster upstream creates nothing (its Volcano plugin GETs the "
        "PodGroup first, kubeflow/trainer pkg/runtime/framework/plugins/volcano/volcano.go, and the kind is "
        "unknown); this operator, started without a gang scheduler, creates the Jobs and says Misconfigured "
        "(PodGroupPolicyMismatch)",
    ),
    (
        r"^02-runtime-patches$",
        r"node-0: metadata\.(labels|annotations)\.",
        "there is no JobSet here: the runtime's (or a runtime patch's) template.metadata, which upstream puts on "
        "the JobSet only, goes on the Jobs",
    ),
]
"""The differences this operator keeps on purpose, each with its reason (docs/api.md "Conformance with
upstream, pod for pod" lists the same)."""


def explain(case: str, where: str, explained: Iterable[Explained] = ()) -> str | None:
    """The reason of the first entry of ``explained`` (default :data:`EXPLAINED`) matching, or ``None``."""
    for case_re, path_re, reason in explained or EXPLAINED:
        if re.search(case_re, case) and re.search(path_re, where):
            return reason
    return None


def compare_case(
    case: Case,
    upstream_jobs: dict[str, list[JSON]],
    our_jobs: dict[str, list[JSON]],
    uids: Iterable[str],
) -> list[Difference]:
    """Every :class:`Difference` between the Jobs of each TrainJob of ``case`` on both sides (Jobs by
    TrainJob name; a Job on one side only is one difference, ``<job>`` present vs absent)."""
    uid_list = list(uids)
    out = []
    for trainjob in case.trainjobs:
        a = {job_key(j, trainjob): normalise_job(j, uid_list) for j in upstream_jobs.get(trainjob, [])}
        b = {job_key(j, trainjob): normalise_job(j, uid_list) for j in our_jobs.get(trainjob, [])}
        if not a and not b:
            out.append(Difference(case.name, f"{trainjob}: <no Job on either side>", ABSENT, ABSENT, None))
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                where = f"{trainjob}/{key}: <job>"
                out.append(
                    Difference(
                        case.name,
                        where,
                        "present" if key in a else ABSENT,
                        "present" if key in b else ABSENT,
                        explain(case.name, where),
                    )
                )
                continue
            for path, x, y in diff(a[key], b[key]):
                out.append(
                    Difference(
                        case.name, f"{trainjob}/{key}: {path}", x, y, explain(case.name, f"{trainjob}/{key}: {path}")
                    )
                )
    return out


# --- one side on its cluster -------------------------------------------------------------------------


def apply_all(cluster: LocalCluster, objects: Iterable[JSON], log: Callable[[str], None]) -> None:
    """``kubectl apply -n`` :data:`NAMESPACE` ``-f`` of each object; a refused one is logged (the
    case then shows no Job on that side)."""
    with tempfile.TemporaryDirectory() as tmp:
        for i, obj in enumerate(objects):
            path = Path(tmp) / f"{i}.yaml"
            path.write_text(yaml.safe_dump(obj))
            done = cluster.run_kubectl("apply", "-n", NAMESPACE, "-f", str(path), check=False)
            if done.returncode != 0:
                log(f"  kubectl apply {obj['kind']}/{obj['metadata']['name']}: {done.stderr.strip()}")


def list_items(cluster: LocalCluster, path: str) -> list[JSON]:
    """The items of the collection at ``path``. Raises ``RuntimeError`` on a status other than 200."""
    status, body = cluster.api().get(path)
    if status != 200:
        raise RuntimeError(f"GET {path}: {status} {body}")
    return list(body.get("items") or [])


def collect(
    cluster: LocalCluster, trainjobs: set[str], quiet: float, timeout: float
) -> tuple[dict[str, list[JSON]], list[str]]:
    """The Jobs of ``trainjobs`` by TrainJob name (:func:`bench.upstream.upstream_owner`), read once no
    Job was added for ``quiet`` seconds and every TrainJob has one, or for four times as long (a TrainJob
    that gets none), or ``timeout`` seconds passed; and the uids seen (TrainJobs, JobSets, Jobs)."""
    jobs_path = f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs"
    began = since = time.monotonic()
    seen = -1
    while True:
        jobs = list_items(cluster, jobs_path)
        owners = {upstream_owner(j) for j in jobs}
        if len(jobs) != seen:
            seen, since = len(jobs), time.monotonic()
        now = time.monotonic()
        still = now - since
        if (still >= quiet and trainjobs <= owners) or still >= 4 * quiet or now - began >= timeout:
            break
        time.sleep(1)
    by_trainjob: dict[str, list[JSON]] = {}
    for job in jobs:
        owner = upstream_owner(job)
        if owner in trainjobs:
            by_trainjob.setdefault(owner, []).append(job)
    uids = [str(j["metadata"]["uid"]) for j in jobs]
    for path in (
        f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{NAMESPACE}/trainjobs",
        f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{NAMESPACE}/jobsets",
    ):
        with contextlib.suppress(RuntimeError):  # no JobSet CRD on this operator's cluster
            uids += [str(o["metadata"]["uid"]) for o in list_items(cluster, path)]
    return by_trainjob, uids


def run_side(
    side: str,
    cases: list[Case],
    quiet: float,
    timeout: float,
    log: Callable[[str], None],
    logs: Path | None = None,
) -> tuple[dict[str, list[JSON]], list[str]]:
    """Start a cluster and one side's controllers (``upstream`` or ``ours``), apply every case, wait
    (:func:`collect`) and return the Jobs by TrainJob and the uids; everything is stopped on return,
    the controllers' logs first copied to ``logs/<side>/`` when ``logs`` is given."""
    directory = ensure_upstream() if side == "upstream" else None
    crds = directory / "crds" if directory is not None else CRDS
    started = time.monotonic()
    with local_cluster(f"conformance-{side}-", PODS_PER_NODE, crds=crds) as cluster:
        status, body = cluster.api().create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
        if status not in (201, 409):
            raise RuntimeError(f"namespace {NAMESPACE}: {status} {body}")
        op: CountedUpstream | Operator
        if directory is not None:
            op = CountedUpstream(directory, cluster.kubeconfig, cluster.state_dir, Pki(cluster.state_dir / "pki"))
            op.start(cluster.api())
        else:
            op = Operator(cluster.kubeconfig, None, cluster.state_dir / "operator.log")
            op.start()
        try:
            asyncio.run(op.wait_ready(120))
            log(f"{side}: cluster and controllers ready in {time.monotonic() - started:.1f} s")
            runtimes = [o for c in cases for o in c.objects if o["kind"] != "TrainJob"]
            apply_all(cluster, runtimes, log)
            apply_all(cluster, [o for c in cases for o in c.objects if o["kind"] == "TrainJob"], log)
            trainjobs = {t for c in cases for t in c.trainjobs}
            return collect(cluster, trainjobs, quiet, timeout)
        finally:
            op.stop()
            if logs is not None:
                (logs / side).mkdir(parents=True, exist_ok=True)
                for path in cluster.state_dir.glob("*.log"):
                    shutil.copy(path, logs / side / path.name)
            log(f"{side}: done in {time.monotonic() - started:.1f} s")


# --- the report --------------------------------------------------------------------------------------


def shown(value: Any) -> str:
    """A value on one line (JSON, at most 160 characters)."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= 160 else text[:157] + "..."


def report(cases: list[Case], diffs: list[Difference], out: Callable[[str], None] = print) -> int:
    """Print the table (case, Jobs compared upstream/here, differences, explained, unexplained) and every
    difference; returns the number unexplained."""
    out(f"{'case':<34}{'jobs':>8}{'differences':>12}{'explained':>11}{'unexplained':>13}")
    for case in cases:
        mine = [d for d in diffs if d.case == case.name]
        bad = sum(d.reason is None for d in mine)
        jobs = "-" if case.jobs is None else f"{case.jobs[0]}/{case.jobs[1]}"
        out(f"{case.name:<34}{jobs:>8}{len(mine):>12}{len(mine) - bad:>11}{bad:>13}")
    total_bad = sum(d.reason is None for d in diffs)
    out(f"{'total':<34}{'':>8}{len(diffs):>12}{len(diffs) - total_bad:>11}{total_bad:>13}")
    for d in diffs:
        tag = "UNEXPLAINED" if d.reason is None else f"explained: {d.reason}"
        out(f"- [{d.case}] {d.where}: upstream {shown(d.upstream)} vs ours {shown(d.ours)}  ({tag})")
    return total_bad


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.conformance", description=__doc__, formatter_class=HelpFormatter)
    p.add_argument(
        "--case", action="append", default=[], help="run only this case (runtime or example name); repeatable"
    )
    p.add_argument("--quiet-seconds", type=float, default=6.0, help="no new Job for this long ends a side's wait")
    p.add_argument("--timeout", type=float, default=90.0, help="seconds a side waits for its Jobs at most")
    p.add_argument("--logs", type=Path, metavar="DIR", help="copy both sides' controller logs to DIR/<side>/")
    p.add_argument("--json", type=Path, metavar="PATH", help="write the differences as JSON to PATH")
    return p.parse_args(argv)


def select(cases: list[Case], names: list[str]) -> list[Case]:
    """The cases named (all when ``names`` is empty). Raises ``ValueError`` naming an unknown one."""
    if not names:
        return cases
    known = {c.name: c for c in cases}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"no case {', '.join(unknown)}; cases: {', '.join(known)}")
    return [known[n] for n in names]


def run(
    names: list[str], quiet: float, timeout: float, log: Callable[[str], None], logs: Path | None = None
) -> tuple[list[Case], list[Difference]]:
    """Both sides for the cases named (all when empty), upstream first; the cases and their differences
    (``logs``: see :func:`run_side`)."""
    cases = select(upstream_cases(), names)
    upstream_jobs, upstream_uids = run_side("upstream", cases, quiet, timeout, log, logs)
    our_jobs, our_uids = run_side("ours", cases, quiet, timeout, log, logs)
    uids = [*upstream_uids, *our_uids]
    for c in cases:
        c.jobs = (
            sum(len(upstream_jobs.get(t, [])) for t in c.trainjobs),
            sum(len(our_jobs.get(t, [])) for t in c.trainjobs),
        )
    return cases, [d for c in cases for d in compare_case(c, upstream_jobs, our_jobs, uids)]


def main(argv: list[str] | None = None) -> int:
    """Run, print the report; 0 when every difference is explained, 1 otherwise, 2 on an unknown case."""
    args = parse_args(argv)
    m = machine()
    print(f"machine: {m['cores']} cores, {m['memory_gib']:.1f} GiB; upstream Trainer {TRAINER_VERSION}", flush=True)
    started = time.monotonic()
    try:
        cases, diffs = run(args.case, args.quiet_seconds, args.timeout, lambda s: print(s, flush=True), args.logs)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    print(f"JobSet {jobset_version(ensure_upstream())}; both sides in {time.monotonic() - started:.1f} s")
    bad = report(cases, diffs)
    if args.json:
        rows = [d.__dict__ for d in diffs]
        args.json.write_text(json.dumps(rows, indent=2, default=str) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
