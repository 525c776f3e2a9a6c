"""``delete``: jobs and runtimes by name (several of a TYPE, or TYPE/NAME...), by label (``-l``),
all of a TYPE (``--all``), or what the files of ``-f`` name."""

from __future__ import annotations

from typing import Annotated

import typer

from trainer.api.kinds import Resource
from trainer.cli.dryrun import DryRun, DryRunOpt, done
from trainer.cli.errors import CRDNotInstalledError, crd_installed, fail, run
from trainer.cli.root import FILENAME_HELP, KubeconfigOpt, NamespaceOpt, RecursiveOpt, SelectorOpt, app, settings
from trainer.cli.submit import read_manifests
from trainer.cli.tables import resource_name
from trainer.cli.targets import ObjectType, parse_targets
from trainer.client import AsyncTrainerClient, Manifest, NotFoundError, TrainerClientError
from trainer.client.jobs import delete_object
from trainer.client.manifest import generate_name, manifest_resource
from trainer.framework.meta import meta


def one_kind(t: ObjectType) -> Resource:
    """The one kind of a type ``delete`` takes. Raises ``typer.BadParameter`` (exit 2) for
    ``runtimes``, which names two kinds."""
    if len(t.resources) != 1:
        raise typer.BadParameter(
            f"{t.name} are of two kinds: delete trainingruntime NAME or clustertrainingruntime NAME"
        )
    return t.resources[0]


def named_in_files(files: list[str], recursive: bool) -> list[Manifest]:
    """The objects of ``-f``, each with a ``metadata.name``. An object with only a
    ``metadata.generateName`` cannot be found by its file (its name is the apiserver's): refused
    before anything is deleted, with kubectl's words (``resource name may not be empty``) and where
    to find the name. Prints the error and exits 1."""
    try:
        objs = read_manifests(files, recursive)
    except TrainerClientError as e:
        fail(str(e))
    for obj in objs:
        if not obj.metadata.name:
            fail(
                f"{obj.kind} with metadata.generateName {generate_name(obj)!r}: resource name may not be empty "
                f"(as kubectl delete -f); its name is the one create printed: delete it by that name "
                f"(trainer delete {manifest_resource(obj).plural} NAME) or by a label (-l)"
            )
    return objs


@app.command()
def delete(
    ctx: typer.Context,
    args: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[TYPE] [NAME]",
            help="TYPE NAME... or TYPE/NAME... (TYPE a job or runtime type, e.g. tj, mpij, tr, ctr), TYPE with "
            "-l or --all, or NAME alone: a TrainJob",
        ),
    ] = None,
    filename: Annotated[list[str] | None, typer.Option("--filename", "-f", help=FILENAME_HELP)] = None,
    recursive: RecursiveOpt = False,
    selector: SelectorOpt = None,
    all_: Annotated[bool, typer.Option("--all", help="every object of the TYPE in the namespace")] = False,
    wait_: Annotated[bool, typer.Option("--wait", help="return once it is gone")] = False,
    ignore_not_found: Annotated[
        bool, typer.Option("--ignore-not-found", help="succeed, printing nothing, when it does not exist")
    ] = False,
    dry_run: DryRunOpt = DryRun.none,
    kubeconfig: KubeconfigOpt = None,
    namespace: NamespaceOpt = None,
) -> None:
    """Delete jobs (their Jobs, pods and Service go with them) or runtimes: by name, those a label
    selector (-l) selects or all of a TYPE (--all), or every object the files of -f name, in order;
    one that does not exist is an error once the others are deleted. Selecting none prints "No
    resources found" (exit 0), as kubectl."""
    s = settings(ctx, kubeconfig, namespace, None)
    if bool(args) == bool(filename):
        raise typer.BadParameter("expected TYPE NAME..., NAME, TYPE -l SELECTOR, TYPE --all or -f FILE (one of them)")
    if filename and (selector is not None or all_):
        raise typer.BadParameter("-l and --all select objects of a TYPE; not with -f")
    if selector is not None and all_:
        raise typer.BadParameter("-l and --all: give one of them")
    deletions: list[tuple[Resource, str, Manifest | None]] = []  # an object of -f, deleted where the client says
    select: Resource | None = None  # the kind -l or --all selects from
    if filename:
        deletions += [(manifest_resource(o), o.metadata.name or "", o) for o in named_in_files(filename, recursive)]
    else:
        t, named = parse_targets(args or [])
        if selector is not None or all_:
            if t is None or named:
                raise typer.BadParameter("-l and --all select the objects of a TYPE: give the TYPE, without names")
            select = one_kind(t)
        elif not named:
            raise typer.BadParameter(f"expected {t.name if t else 'TYPE'} NAME...: which one? (or -l, --all)")
        deletions += [(one_kind(nt), name, None) for nt, name in named]

    async def selected(c: AsyncTrainerClient, res: Resource) -> list[tuple[Resource, str, Manifest | None]]:
        items, _ = await c.kube.list(res, c.namespace if res.namespaced else None, selector)
        if not items and not await crd_installed(c, res):
            raise CRDNotInstalledError(res)
        return [(res, str(meta(i).name), None) for i in items]

    async def go(c: AsyncTrainerClient) -> None:
        missing: NotFoundError | None = None
        todo = await selected(c, select) if select is not None else deletions
        if select is not None and not todo:
            typer.echo("No resources found", err=True)
        for res, name, obj in todo:
            try:
                if dry_run == DryRun.client:
                    ns = c._namespace_for(obj, s.namespace) if obj is not None else c.namespace
                    if await c.kube.get_or_none(res, ns if res.namespaced else None, name) is None:
                        raise NotFoundError(res.kind, ns if res.namespaced else None, name)
                elif obj is None:
                    await delete_object(c.kube, res, c.namespace, name, wait=wait_, dry_run=dry_run == DryRun.server)
                else:
                    await c.delete(obj, s.namespace, wait=wait_, dry_run=dry_run == DryRun.server)
            except NotFoundError as e:
                if not await crd_installed(c, res):
                    raise CRDNotInstalledError(res) from None
                if not ignore_not_found:
                    missing = missing or e
                continue
            typer.echo(done(f"{resource_name(res, name)} deleted", dry_run))
        if missing is not None:
            raise missing

    run(s, go)
