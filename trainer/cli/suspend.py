"""``suspend`` and ``resume``: a job's ``suspend`` field, set with a merge patch; of an OptimizationJob
(``optj NAME``) its ``spec.suspend``, which holds the search and suspends its running trials."""

from __future__ import annotations

import typer

from trainer.api.kinds import OPTIMIZATION_JOBS
from trainer.cli.errors import run
from trainer.cli.root import JobArgs, KubeconfigOpt, NamespaceOpt, app, settings
from trainer.cli.tables import resource_name
from trainer.cli.targets import parse_target, target
from trainer.client import AsyncTrainerClient, NotFoundError
from trainer.client.types import MPIJOB
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError


def set_suspend(
    ctx: typer.Context, args: list[str], suspend: bool, kubeconfig: str | None, namespace: str | None
) -> None:
    """Set ``spec.suspend`` (an MPIJob's ``spec.runPolicy.suspend``) with a merge patch."""
    s = settings(ctx, kubeconfig, namespace, None)
    t, named = parse_target(args)
    patch: JSON
    if t.optimization and named is not None:
        res, name, patch = OPTIMIZATION_JOBS, named, {"spec": {"suspend": suspend}}
    else:
        kind, name = target(args)
        res = kind.resource
        patch = {"spec": {"runPolicy": {"suspend": suspend}}} if kind is MPIJOB else {"spec": {"suspend": suspend}}

    async def go(c: AsyncTrainerClient) -> None:
        try:
            await c.kube.merge_patch(res, c.namespace, name, patch)
        except ApiError as e:
            if e.not_found:
                raise NotFoundError(res.kind, c.namespace, name) from None
            raise

    run(s, go, crd=res)
    typer.echo(f"{resource_name(res, name)} {'suspended' if suspend else 'resumed'}")


@app.command()
def suspend(
    ctx: typer.Context, args: JobArgs, kubeconfig: KubeconfigOpt = None, namespace: NamespaceOpt = None
) -> None:
    """Suspend a job: its pods go; it keeps its place and resumes with ``resume``. Of an OptimizationJob
    (optj NAME): no new trial, its running trials suspended."""
    set_suspend(ctx, args, True, kubeconfig, namespace)


@app.command()
def resume(ctx: typer.Context, args: JobArgs, kubeconfig: KubeconfigOpt = None, namespace: NamespaceOpt = None) -> None:
    """Resume a suspended job. Of an OptimizationJob (optj NAME): the search goes on, its trials resume."""
    set_suspend(ctx, args, False, kubeconfig, namespace)
