"""``wait``: until a job reaches a status, showing the condition that holds it meanwhile."""

from __future__ import annotations

from typing import Annotated

import typer

from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.cli.errors import run
from trainer.cli.optimization import wait_optimization_job
from trainer.cli.root import TABLES, JobArgs, KubeconfigOpt, NamespaceOpt, OutputOpt, Status, app, settings
from trainer.cli.tables import Job, console, jobs_summary, replicas_summary, show
from trainer.cli.targets import job_client, parse_target, target
from trainer.client import COMPLETE, AsyncTrainerClient
from trainer.client.jobs import DEFAULT_WAIT_TIMEOUT
from trainer.client.types import Holding, holding_condition


def holding_text(name: str, held: Holding) -> str:
    """``<name>: <state>``, with `` (<reason>: <message>)`` when the condition gives them."""
    detail = f"{held.reason}: {held.message}" if held.message else held.reason
    return f"{name}: {held.state}" + (f" ({detail})" if detail else "")


@app.command()
def wait(
    ctx: typer.Context,
    args: JobArgs,
    status: Annotated[
        list[Status] | None, typer.Option("--status", help="status to wait for (repeatable); default Complete")
    ] = None,
    timeout: Annotated[float, typer.Option(min=0.001, help="seconds")] = DEFAULT_WAIT_TIMEOUT,
    kubeconfig: KubeconfigOpt = None,
    namespace: NamespaceOpt = None,
    output: OutputOpt = None,
) -> None:
    """Wait until the job reaches a status (exit 1 if it Fails instead, 3 on timeout); meanwhile
    show the condition that holds it (of an OptimizationJob, optj NAME: its trial counts and best trial)."""
    s = settings(ctx, kubeconfig, namespace, output)
    wanted = {str(x) for x in status} if status else {COMPLETE}
    t, optj = parse_target(args)
    if t.optimization and optj is not None:
        wait_optimization_job(s, optj, wanted, timeout)
        return
    kind, name = target(args)
    err = console(stderr=True)
    seen: list[str] = []

    async def watch(c: AsyncTrainerClient) -> Job:
        with err.status(f"waiting for {name} to be {' or '.join(sorted(wanted))}") as spinner:

            def progress(job: Job) -> None:
                text = holding_text(name, holding_condition(job))
                summary = jobs_summary(job) if isinstance(job, TrainJob) else replicas_summary(job)
                spinner.update(f"{text}  {'jobs' if isinstance(job, TrainJob) else 'replicas'}: {summary}")
                if not seen or seen[-1] != text:
                    seen.append(text)
                    if not err.is_terminal:
                        err.print(text)

            job: Job = await job_client(c, kind).wait_for_job_status(name, wanted, timeout, callbacks=[progress])
            return job

    job = run(s, watch, crd=kind.resource)
    if s.output in TABLES:
        typer.echo(f"{name} {kind.status_of(job)}")
    else:
        show(job, s.output, list, [job])
