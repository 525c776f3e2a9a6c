"""``get`` and ``list``: the objects of a TYPE, or one by name, as tables, names or JSON/YAML; with
``--watch`` (jobs and OptimizationJobs), each change as it comes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from trainer.api.kinds import OPTIMIZATION_JOBS, Resource
from trainer.api.optimizationjob import OptimizationJob
from trainer.api.trainer_v1alpha1 import ClusterTrainingRuntime, TrainingRuntime, TrainJob, runtime_from_dict
from trainer.cli.errors import CRDNotInstalledError, crd_installed, run
from trainer.cli.optimization import get_optimization_job, list_optimization_jobs, optimization_rows
from trainer.cli.root import (
    TABLES,
    AllNamespacesOpt,
    KubeconfigOpt,
    NamespaceOpt,
    Output,
    OutputOpt,
    QueueFilterOpt,
    RuntimeOpt,
    SelectorOpt,
    Settings,
    WatchOpt,
    app,
    settings,
)
from trainer.cli.tables import (
    Job,
    Runtimes,
    as_list,
    console,
    dump,
    job_rows,
    object_name,
    print_trimmed,
    runtimes_by_key,
    runtimes_table,
    show,
    show_jobs,
)
from trainer.cli.targets import RUNTIMES, ObjectType, job_client, object_type, parse_target, type_names
from trainer.cli.why import pods_of_jobs, waiting_by_job
from trainer.client import TRAINJOB, AsyncTrainerClient, JobKind, NotFoundError
from trainer.client.jobs import watch_objects
from trainer.client.types import in_queue
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError
from trainer.framework.meta import meta


def print_watched(out: Console, header: list[str], rows: list[list[str]], widths: list[int]) -> None:
    """Print the rows of a watched table: with the header the first time (whose columns then fix
    ``widths``, filled in here), later rows in the same widths, nothing for no rows but the first time."""
    first = not widths
    if first:
        widths[:] = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]
    elif not rows:
        return
    t = Table(box=None, show_header=first, pad_edge=False, show_edge=False)
    for column, width in zip(header, widths, strict=True):
        t.add_column(column, min_width=width)
    for row in rows:
        t.add_row(*row)
    print_trimmed(out, t)


async def job_runtimes(c: AsyncTrainerClient, kind: JobKind[Any], *, all_namespaces: bool = False) -> Runtimes:
    """The runtimes a table of TrainJobs reads NODES from (:func:`trainer.cli.tables.nodes_cell`): the
    namespace's TrainingRuntimes (every namespace's with ``all_namespaces``) and the
    ClusterTrainingRuntimes; none for MPIJobs, or when they cannot be read (NODES then shows ``-``
    where a job sets no ``numNodes``)."""
    if kind is not TRAINJOB:
        return {}
    try:
        return runtimes_by_key(await c._runtime_objects(all_namespaces=all_namespaces))
    except ApiError:
        return {}


async def watch_printed(
    c: AsyncTrainerClient,
    res: Resource,
    output: Output,
    parse: Callable[[JSON], Any | None],
    rows: Callable[[list[Any]], tuple[list[str], list[list[str]]]],
    *,
    name: str | None = None,
    label_selector: str | None = None,
    all_namespaces: bool = False,
    relist: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """``-w`` of objects of ``res``: print them (the one named ``name``, or those ``label_selector`` selects
    and ``parse`` keeps: it returns the model, None to leave one out), then each one again whenever it
    changes, until interrupted; as a table (``rows`` gives its header and rows) whose header is printed
    once, as names, or as one JSON/YAML object each. ``relist`` runs before each list (a table's lookups).
    Raises :class:`NotFoundError` when ``name`` does not exist when the watch starts (as ``kubectl get NAME
    -w``; a deletion later does not end it), :class:`ApiError`."""
    out = console()
    namespace = None if all_namespaces else c.namespace
    field_selector = f"metadata.name={name}" if name else None
    seen: dict[tuple[str, str], str] = {}
    widths: list[int] = []

    def emit(objs: Iterable[JSON]) -> None:
        kept = []
        for obj in objs:
            m = meta(obj)
            key = (str(m.namespace or ""), str(m.name or ""))
            if seen.get(key) == m.resource_version:
                continue
            seen[key] = str(m.resource_version)
            if (model := parse(obj)) is not None:
                kept.append(model)
        if output not in TABLES:
            for model in kept:
                typer.echo(object_name(model) if output == Output.name else dump(model, output))
            return
        header, lines = rows(kept)
        print_watched(out, header, lines, widths)

    while True:
        items, version = await c.kube.list(res, namespace, label_selector, field_selector=field_selector)
        if relist is not None and output in TABLES:
            await relist()
        if name and not items and not seen:
            raise NotFoundError(res.kind, c.namespace, name)
        emit(items)
        try:
            async for type_, obj in watch_objects(
                c.kube, res, namespace, version, field_selector=field_selector, label_selector=label_selector
            ):
                if type_ != "BOOKMARK":
                    emit([obj])
        except ApiError as e:
            if not e.gone:
                raise


async def watch_jobs(
    c: AsyncTrainerClient,
    kind: JobKind[Any],
    output: Output,
    *,
    name: str | None = None,
    label_selector: str | None = None,
    all_namespaces: bool = False,
    keep: Callable[[Any], bool] = lambda _: True,
) -> None:
    """``-w`` of jobs (:func:`watch_printed`): those ``keep`` keeps, in the jobs' table with progress."""
    runtimes: list[Runtimes] = [{}]

    async def relist() -> None:
        runtimes[0] = await job_runtimes(c, kind, all_namespaces=all_namespaces)

    def parse(obj: JSON) -> Any | None:
        job = kind.model.model_validate(obj)
        return job if keep(job) else None

    def rows(jobs: list[Any]) -> tuple[list[str], list[list[str]]]:
        wide = output == Output.wide
        return job_rows(jobs, wide=wide, namespaces=all_namespaces, progress=True, runtimes=runtimes[0])

    await watch_printed(
        c,
        kind.resource,
        output,
        parse,
        rows,
        name=name,
        label_selector=label_selector,
        all_namespaces=all_namespaces,
        relist=relist,
    )


async def watch_optimization_jobs(
    c: AsyncTrainerClient,
    output: Output,
    *,
    name: str | None = None,
    label_selector: str | None = None,
    all_namespaces: bool = False,
) -> None:
    """``get optj -w`` (:func:`watch_printed`): the OptimizationJobs' table, a row again at each change."""
    await watch_printed(
        c,
        OPTIMIZATION_JOBS,
        output,
        OptimizationJob.model_validate,
        lambda jobs: optimization_rows(jobs, namespaces=all_namespaces),
        name=name,
        label_selector=label_selector,
        all_namespaces=all_namespaces,
    )


TYPE_HELP = f"one of {type_names()}"


async def named_runtimes(
    c: AsyncTrainerClient, t: ObjectType, name: str
) -> list[TrainingRuntime | ClusterTrainingRuntime]:
    """The runtimes of type ``t`` named ``name`` (a TrainingRuntime and a ClusterTrainingRuntime for
    ``runtimes``). Raises :class:`NotFoundError` when there is none, :class:`ApiError`."""
    found = []
    for res in t.resources:
        obj = await c.kube.get_or_none(res, c.namespace if res.namespaced else None, name)
        if obj is not None:
            found.append(runtime_from_dict(obj))
    if not found:
        namespaced = any(res.namespaced for res in t.resources)
        raise NotFoundError(" or ".join(res.kind for res in t.resources), c.namespace if namespaced else None, name)
    return found


def list_objects(
    s: Settings,
    t: ObjectType,
    *,
    selector: str | None = None,
    all_namespaces: bool = False,
    watch: bool = False,
    runtime: str | None = None,
    queue: str | None = None,
) -> None:
    """What ``list TYPE`` and ``get TYPE`` print: the objects of ``t``, jobs oldest first, runtimes
    by name, OptimizationJobs oldest first (:mod:`trainer.cli.optimization`); ``No <TYPE> found.`` on
    stderr when there is none. Raises ``typer.BadParameter`` (exit 2) for options the type does not take."""
    if t.optimization:
        if runtime is not None or queue is not None:
            raise typer.BadParameter(f"--runtime and --queue are not for {t.name}")
        if watch:
            run(
                s,
                lambda c: watch_optimization_jobs(c, s.output, label_selector=selector, all_namespaces=all_namespaces),
                crd=OPTIMIZATION_JOBS,
            )
            return
        list_optimization_jobs(s, selector=selector, all_namespaces=all_namespaces)
        return
    if t.job is None:
        if watch or runtime is not None or queue is not None:
            raise typer.BadParameter(f"--watch, --runtime and --queue are for jobs, not {t.name}")

        async def listed(c: AsyncTrainerClient) -> list[TrainingRuntime | ClusterTrainingRuntime]:
            found = await c._runtime_objects(t.resources, label_selector=selector, all_namespaces=all_namespaces)
            for res in t.resources:
                if not found and not await crd_installed(c, res):
                    raise CRDNotInstalledError(res)
            return found

        runtimes = run(s, listed)
        if not runtimes and s.output in TABLES:
            typer.echo(f"No {t.label} found.", err=True)
            return
        show(as_list(runtimes), s.output, lambda: [runtimes_table(runtimes, namespaces=all_namespaces)], runtimes)
        return
    kind = t.job
    if runtime is not None and kind is not TRAINJOB:
        raise typer.BadParameter("--runtime selects TrainJobs only")

    def keep(job: Job) -> bool:
        by_runtime = runtime is None or (isinstance(job, TrainJob) and job.spec.runtime_ref.name == runtime)
        return by_runtime and (queue is None or in_queue(job, queue))

    if watch:
        run(
            s,
            lambda c: watch_jobs(c, kind, s.output, label_selector=selector, all_namespaces=all_namespaces, keep=keep),
            crd=kind.resource,
        )
        return

    async def listed_jobs(c: AsyncTrainerClient) -> tuple[list[Job], list[JSON], Runtimes]:
        found = await job_client(c, kind).list_jobs(label_selector=selector, queue=queue, all_namespaces=all_namespaces)
        wide = s.output == Output.wide and found
        pods = await pods_of_jobs(c, kind, all_namespaces=all_namespaces) if wide else []
        table = s.output in TABLES and found
        return found, pods, await job_runtimes(c, kind, all_namespaces=all_namespaces) if table else {}

    jobs, pods, their_runtimes = run(s, listed_jobs, crd=kind.resource)
    jobs = [j for j in jobs if keep(j)]
    if not jobs and s.output in TABLES:
        typer.echo(f"No {t.label} found.", err=True)
        return
    waiting = waiting_by_job(jobs, pods, kind.job_label)
    show_jobs(jobs, as_list(jobs), s.output, namespaces=all_namespaces, waiting=waiting, runtimes=their_runtimes)


@app.command()
def get(
    ctx: typer.Context,
    args: Annotated[list[str], typer.Argument(metavar="TYPE [NAME]", help=TYPE_HELP)],
    watch: WatchOpt = False,
    selector: SelectorOpt = None,
    all_namespaces: AllNamespacesOpt = False,
    runtime: RuntimeOpt = None,
    queue: QueueFilterOpt = None,
    kubeconfig: KubeconfigOpt = None,
    namespace: NamespaceOpt = None,
    output: OutputOpt = None,
) -> None:
    """Show the objects of a TYPE (as list does) or the one named NAME; a job's STATE is the
    condition that holds it (e.g. WaitingForGang, RuntimeNotFound). TYPE/NAME works too. As with
    kubectl get, the first word is a TYPE: one that names no type is a usage error (exit 2)."""
    s = settings(ctx, kubeconfig, namespace, output)
    t, name = parse_target(args, name_alone=False)
    if name is None:
        list_objects(s, t, selector=selector, all_namespaces=all_namespaces, watch=watch, runtime=runtime, queue=queue)
        return
    if selector is not None or all_namespaces or runtime is not None or queue is not None:
        raise typer.BadParameter("-l, -A, --runtime and --queue select what a TYPE lists; not with a NAME")
    if t.optimization:
        if watch:
            run(s, lambda c: watch_optimization_jobs(c, s.output, name=name), crd=OPTIMIZATION_JOBS)
            return
        get_optimization_job(s, name)
        return
    if t.job is None:
        if watch:
            raise typer.BadParameter(f"--watch is for jobs, not {t.name}")
        found = run(s, lambda c: named_runtimes(c, t, name), crd=t.resources[0])
        show(found[0] if len(found) == 1 else as_list(found), s.output, lambda: [runtimes_table(found)], found)
        return
    kind = t.job
    if watch:
        run(s, lambda c: watch_jobs(c, kind, s.output, name=name), crd=kind.resource)
        return

    async def got(c: AsyncTrainerClient) -> tuple[Job, list[JSON], Runtimes]:
        found = await job_client(c, kind).get_job(name)
        wide = s.output == Output.wide
        pods = await pods_of_jobs(c, kind, name=name) if wide else []
        return found, pods, await job_runtimes(c, kind) if s.output in TABLES else {}

    job, pods, runtimes = run(s, got, crd=kind.resource)
    show_jobs([job], job, s.output, waiting=waiting_by_job([job], pods, kind.job_label), runtimes=runtimes)


@app.command("list")
def list_(
    ctx: typer.Context,
    type_: Annotated[str, typer.Argument(metavar="[TYPE]", help=f"{TYPE_HELP}; default trainjobs")] = "trainjobs",
    runtime: RuntimeOpt = None,
    selector: SelectorOpt = None,
    queue: QueueFilterOpt = None,
    all_namespaces: AllNamespacesOpt = False,
    watch: WatchOpt = False,
    kubeconfig: KubeconfigOpt = None,
    namespace: NamespaceOpt = None,
    output: OutputOpt = None,
) -> None:
    """List the objects of a TYPE (default TrainJobs): jobs oldest first, STATE being the condition
    that holds each (-o wide: with its reason and message); runtimes by name."""
    s = settings(ctx, kubeconfig, namespace, output)
    t = object_type(type_)
    list_objects(s, t, selector=selector, all_namespaces=all_namespaces, watch=watch, runtime=runtime, queue=queue)


@app.command(hidden=True)
def runtimes(
    ctx: typer.Context, kubeconfig: KubeconfigOpt = None, namespace: NamespaceOpt = None, output: OutputOpt = None
) -> None:
    """``get runtimes``, by its name before TYPE (kept for scripts)."""
    list_objects(settings(ctx, kubeconfig, namespace, output), RUNTIMES)
