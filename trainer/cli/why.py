"""``why``: why a job waits (the reason, its message, the next step and the docs entry), and the
pods of listed jobs that ``get -o wide`` reads for its REASON and MESSAGE; the rule itself is
:func:`trainer.api.waiting.why_waiting`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import typer

from trainer.api.kinds import PODS
from trainer.api.waiting import Waiting, why_waiting
from trainer.cli.errors import run
from trainer.cli.root import TABLES, JobArgs, KubeconfigOpt, NamespaceOpt, Output, OutputOpt, app, settings
from trainer.cli.tables import Job, dump, object_name
from trainer.cli.targets import job_client, target
from trainer.client import AsyncTrainerClient, JobKind
from trainer.client.types import holding_condition
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError
from trainer.framework.meta import meta

JobKey = tuple[str, str]
"""``(namespace, name)`` of a job."""


def waiting_by_job(jobs: Iterable[Job], pods: Iterable[JSON], job_label: str) -> dict[JobKey, Waiting]:
    """Why each of ``jobs`` waits (:func:`trainer.api.waiting.why_waiting` over its conditions and the pods of
    ``pods`` whose ``job_label`` names it); jobs that wait for nothing are left out."""
    mine: dict[JobKey, list[JSON]] = {}
    for pod in pods:
        m = meta(pod)
        mine.setdefault((str(m.namespace or ""), str(m.labels.get(job_label, ""))), []).append(pod)
    out = {}
    for job in jobs:
        key = (job.metadata.namespace or "", job.metadata.name or "")
        why = why_waiting((job.status.conditions if job.status else None) or [], mine.get(key, []))
        if why is not None:
            out[key] = why
    return out


async def pods_of_jobs(
    c: AsyncTrainerClient, kind: JobKind[Any], *, all_namespaces: bool = False, name: str | None = None
) -> list[JSON]:
    """The pods of job ``name`` of ``kind``, or of every job of ``kind``, in the client's namespace
    (or all): those labelled with the kind's job label. Empty when pods may not be listed (403) or
    are not served (404): the caller then says what the conditions say. Raises :class:`ApiError`
    on other failures."""
    selector = f"{kind.job_label}={name}" if name is not None else kind.job_label
    try:
        pods, _ = await c.kube.list(PODS, None if all_namespaces else c.namespace, selector)
    except ApiError as e:
        if e.status in (403, 404):
            return []
        raise
    return pods


def why_data(job: Job, why: Waiting | None) -> JSON:
    """What ``why -o json|yaml`` prints: the job's name, state (the condition that holds it) and
    ``waiting`` (reason, message, nextStep, doc, source; null when nothing holds it)."""
    waiting = None
    if why is not None:
        waiting = {
            "reason": why.reason,
            "message": why.message,
            "nextStep": why.next_step,
            "doc": why.doc,
            "source": why.source,
        }
    return {"name": job.metadata.name, "state": holding_condition(job).state, "waiting": waiting}


def why_lines(job: Job, why: Waiting | None) -> list[str]:
    """What ``why`` prints: ``NAME: STATE``, then ``Reason:``, ``Message:``, ``Source:``, ``Next:``,
    ``See:``; or why nothing holds it (finished, running, or nothing found)."""
    held = holding_condition(job)
    name = job.metadata.name or ""
    if why is None:
        said = f" ({held.reason}: {held.message})" if held.reason and held.message else ""
        return [f"{name}: {held.state}{said}; nothing holds it"]
    rows: Sequence[tuple[str, str]] = [
        ("Reason:", why.reason),
        ("Message:", why.message or "-"),
        ("Source:", why.source),
        ("Next:", why.next_step),
        ("See:", why.doc),
    ]
    return [f"{name}: {held.state}", *(f"{key:<9}{value}" for key, value in rows)]


@app.command()
def why(
    ctx: typer.Context,
    args: JobArgs,
    kubeconfig: KubeconfigOpt = None,
    namespace: NamespaceOpt = None,
    output: OutputOpt = None,
) -> None:
    """Say why a job waits: the condition that holds it, an image that cannot be pulled, a pod no
    node can take (the scheduler's message), a container that cannot start, its PodGroup or its
    Kueue Workload; with the next step and the troubleshooting entry."""
    s = settings(ctx, kubeconfig, namespace, output)
    kind, name = target(args)

    async def gather(c: AsyncTrainerClient) -> tuple[Job, Waiting | None]:
        jc = job_client(c, kind)
        job: Job = await jc.get_job(name)
        return job, await jc.why_waiting(name, job)

    job, found = run(s, gather, crd=kind.resource)
    if s.output in TABLES:
        for line in why_lines(job, found):
            typer.echo(line)
    elif s.output == Output.name:
        typer.echo(object_name(job))
    else:
        typer.echo(dump(why_data(job, found), s.output))
