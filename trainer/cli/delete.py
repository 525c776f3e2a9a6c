"""``delete``: jobs and runtimes by name, or what the files of ``-f`` name."""

from __future__ import annotations

from typing import Annotated

import typer

from api.kinds import Resource
from trainer.cli.errors import CRDNotInstalledError, crd_installed, run
from trainer.cli.root import FILENAME_HELP, KubeconfigOpt, NamespaceOpt, RecursiveOpt, app, settings
from trainer.cli.submit import read_files
from trainer.cli.tables import resource_name
from trainer.cli.targets import parse_target
from trainer.client import AsyncTrainerClient, Manifest, NotFoundError
from trainer.client.jobs import delete_object
from trainer.client.manifest import manifest_resource


@app.command()
def delete(
    ctx: typer.Context,
    args: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[TYPE] [NAME]",
            help="TYPE NAME or TYPE/NAME (TYPE a job or runtime type, e.g. tj, mpij, tr, ctr), or NAME alone: "
            "a TrainJob",
        ),
    ] = None,
    filename: Annotated[list[str] | None, typer.Option("--filename", "-f", help=FILENAME_HELP)] = None,
    recursive: RecursiveOpt = False,
    wait_: Annotated[bool, typer.Option("--wait", help="return once it is gone")] = False,
    ignore_not_found: Annotated[
        bool, typer.Option("--ignore-not-found", help="succeed, printing nothing, when it does not exist")
    ] = False,
    kubeconfig: KubeconfigOpt = None,
    namespace: NamespaceOpt = None,
) -> None:
    """Delete a job (its Jobs, pods and Service go with it) or a runtime by name, or every object the
    files of -f name, in order; one that does not exist is an error once the others are deleted."""
    s = settings(ctx, kubeconfig, namespace, None)
    if bool(args) == bool(filename):
        raise typer.BadParameter("expected TYPE NAME, NAME or -f FILE (one of them)")
    deletions: list[tuple[Resource, str, Manifest | None]] = []  # an object of -f, deleted where the client says
    if filename:
        deletions += [
            (manifest_resource(o), o.metadata.name or "", o) for o in read_files(filename, recursive, "delete")
        ]
    else:
        t, name = parse_target(args or [])
        if name is None:
            raise typer.BadParameter(f"expected {t.name} NAME: which one?")
        if len(t.resources) != 1:
            raise typer.BadParameter(
                f"{t.name} are of two kinds: delete trainingruntime NAME or clustertrainingruntime NAME"
            )
        deletions.append((t.resources[0], name, None))

    async def go(c: AsyncTrainerClient) -> None:
        missing: NotFoundError | None = None
        for res, name, obj in deletions:
            try:
                if obj is None:
                    await delete_object(c.kube, res, c.namespace, name, wait=wait_)
                else:
                    await c.delete(obj, s.namespace, wait=wait_)
            except NotFoundError as e:
                if not await crd_installed(c, res):
                    raise CRDNotInstalledError(res) from None
                if not ignore_not_found:
                    missing = missing or e
                continue
            typer.echo(f"{resource_name(res, name)} deleted")
        if missing is not None:
            raise missing

    run(s, go)
