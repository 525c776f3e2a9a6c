"""``apply`` and ``create``: read the manifests of ``-f`` (files, directories, stdin) and send them."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Annotated

import typer

from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.cli.dryrun import DryRun, DryRunOpt, done
from trainer.cli.errors import fail, run
from trainer.cli.root import (
    TABLES,
    FilenameOpt,
    KubeconfigOpt,
    MulticlusterOpt,
    NamespaceOpt,
    OutputOpt,
    QueueOpt,
    RecursiveOpt,
    Settings,
    app,
    settings,
)
from trainer.cli.tables import as_list, object_name, resource_name, show
from trainer.client import AsyncTrainerClient, Manifest, ManifestError, TrainerClientError
from trainer.client.aio import wire_form
from trainer.client.manifest import (
    generate_name,
    load_manifests,
    manifest_resource,
    parse_manifest,
    read_yaml,
    require_names,
    wire_dict,
    with_namespace,
)
from trainer.client.multicluster import for_multicluster

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
"""Files ``apply -f DIR`` reads, as kubectl."""


def manifest_files(path: Path, recursive: bool = False) -> list[Path]:
    """``path`` itself, or the :data:`MANIFEST_SUFFIXES` files of a directory by name (of its
    subdirectories too when ``recursive``). Raises :class:`trainer.client.ManifestError` for a
    directory without any."""
    if not path.is_dir():
        return [path]
    found = sorted(p for p in (path.rglob("*") if recursive else path.iterdir()) if p.is_file())
    files = [p for p in found if p.suffix in MANIFEST_SUFFIXES]
    if not files:
        raise ManifestError(f"{path}: no {', '.join(MANIFEST_SUFFIXES)} file in this directory")
    return files


def read_manifests(files: Sequence[str], recursive: bool = False) -> list[Manifest]:
    """Every object of ``files`` (``-`` is stdin; a directory is read as :func:`manifest_files`),
    validated before anything is sent. Raises :class:`trainer.client.ManifestError`."""
    objs: list[Manifest] = []
    for f in files:
        if f == "-":
            objs += [parse_manifest(doc, where) for where, doc in read_yaml(sys.stdin.read(), "<stdin>")]
        else:
            for path in manifest_files(Path(f), recursive):
                objs += load_manifests(path)
    return objs


def read_files(
    files: Sequence[str], recursive: bool, verb: str, queue: str | None = None, multicluster: bool = False
) -> list[Manifest]:
    """The objects of ``-f`` (:func:`read_manifests`), checked before the cluster is contacted: each
    has a ``metadata.name`` unless ``verb`` is ``create`` (which completes a
    ``metadata.generateName``), and ``multicluster`` can mark each TrainJob. Prints the error and
    exits 1 otherwise."""
    try:
        objs = read_manifests(files, recursive)
        if verb != "create":
            require_names(objs, verb)
        if multicluster:
            for obj in objs:
                if isinstance(obj, TrainJob):
                    for_multicluster(wire_dict(obj), queue)
    except TrainerClientError as e:
        fail(str(e))
    return objs


def as_sent(s: Settings, queue: str | None, multicluster: bool) -> Callable[[Manifest], Manifest]:
    """``--dry-run=client``: an object as it would be sent (:func:`trainer.client.aio.wire_form`:
    marked with ``queue`` and for ``multicluster``), in ``-n``'s namespace when given; nothing is
    sent."""

    def sent(obj: Manifest) -> Manifest:
        body = wire_form(obj, queue, multicluster)
        if s.namespace and manifest_resource(obj).namespaced:
            body = with_namespace(body, s.namespace)
        return type(obj).model_validate(body)

    return sent


def unnamed(obj: Manifest) -> str:
    """``<kind>.<group>/<generateName>`` of an object not yet named (``--dry-run=client``: the
    apiserver would add 5 characters to its ``metadata.generateName``)."""
    return f"{obj.kind.lower()}.{obj.api_version.split('/')[0]}/{generate_name(obj) or ''}"


def submit(
    s: Settings,
    objs: Sequence[Manifest],
    send: Callable[[AsyncTrainerClient, Manifest], Awaitable[list[Manifest]]],
    line: Callable[[Manifest], str],
    sent: Callable[[Manifest], Manifest] | None = None,
) -> None:
    """Send the objects one by one; as tables, print the ``line`` of each stored object as it is
    done (those before an error stay printed), else all stored objects at the end. With ``sent``
    (``--dry-run=client``) nothing is sent: each object is printed as ``sent`` says it would be."""

    async def each(c: AsyncTrainerClient) -> list[Manifest]:
        stored: list[Manifest] = []
        for obj in objs:
            done = await send(c, obj)
            if s.output in TABLES:
                for d in done:
                    typer.echo(line(d))
            stored += done
        return stored

    if sent is not None:
        stored = [sent(o) for o in objs]
        if s.output in TABLES:
            for obj in stored:
                typer.echo(line(obj))
    else:
        stored = run(s, each)
    if s.output not in TABLES:
        show(stored[0] if len(stored) == 1 else as_list(stored), s.output, list, stored)


@app.command()
def apply(
    ctx: typer.Context,
    filename: FilenameOpt,
    recursive: RecursiveOpt = False,
    force_conflicts: Annotated[bool, typer.Option(help="take over fields other managers own")] = False,
    queue: QueueOpt = None,
    multicluster: MulticlusterOpt = False,
    dry_run: DryRunOpt = DryRun.none,
    kubeconfig: KubeconfigOpt = None,
    namespace: NamespaceOpt = None,
    output: OutputOpt = None,
) -> None:
    """Create or update TrainJobs, MPIJobs, TrainingRuntimes and ClusterTrainingRuntimes (server-side apply)."""
    s = settings(ctx, kubeconfig, namespace, output)
    objs = read_files(filename, recursive, "apply", queue, multicluster)
    submit(
        s,
        objs,
        lambda c, o: c.apply(
            o,
            s.namespace,
            force=force_conflicts,
            queue=queue,
            multicluster=multicluster,
            dry_run=dry_run == DryRun.server,
        ),
        lambda o: done(f"{resource_name(manifest_resource(o), o.metadata.name or '')} applied", dry_run),
        as_sent(s, queue, multicluster) if dry_run == DryRun.client else None,
    )


@app.command()
def create(
    ctx: typer.Context,
    filename: FilenameOpt,
    recursive: RecursiveOpt = False,
    queue: QueueOpt = None,
    multicluster: MulticlusterOpt = False,
    dry_run: DryRunOpt = DryRun.none,
    kubeconfig: KubeconfigOpt = None,
    namespace: NamespaceOpt = None,
    output: OutputOpt = None,
) -> None:
    """Create TrainJobs, MPIJobs, TrainingRuntimes and ClusterTrainingRuntimes, as kubectl create: an
    object named by metadata.generateName gets its name from the apiserver, and the line printed
    (<kind>.<group>/<name> created) says which; one that exists already is an error."""
    s = settings(ctx, kubeconfig, namespace, output)
    objs = read_files(filename, recursive, "create", queue, multicluster)
    submit(
        s,
        objs,
        lambda c, o: c.create(o, s.namespace, queue=queue, multicluster=multicluster, dry_run=dry_run == DryRun.server),
        lambda o: done(f"{object_name(o) if o.metadata.name else unnamed(o)} created", dry_run),
        as_sent(s, queue, multicluster) if dry_run == DryRun.client else None,
    )
