"""``logs``: the log of a job's pod (one node of a step, or all), waiting for it to start."""

from __future__ import annotations

import asyncio
import re
from typing import Annotated

import typer

from trainer.cli.errors import run
from trainer.cli.root import JobArgs, KubeconfigOpt, NamespaceOpt, app, settings
from trainer.cli.targets import job_client, target
from trainer.client import AsyncTrainerClient
from trainer.client.jobs import DEFAULT_POD_TIMEOUT, pick_container
from trainer.framework.json_codec import JSON
from trainer.framework.meta import meta

DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def parse_duration(text: str) -> int:
    """Seconds of a duration as kubectl's ``--since`` takes it: ``30s``, ``5m``, ``2h``, ``1h30m``.
    Raises ``typer.BadParameter`` (exit 2)."""
    match = DURATION.fullmatch(text.strip())
    if not text.strip() or match is None:
        raise typer.BadParameter(f"invalid duration {text!r}; e.g. 30s, 5m, 1h30m")
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds


@app.command()
def logs(
    ctx: typer.Context,
    args: JobArgs,
    step: Annotated[
        str | None,
        typer.Option(
            help="replicated job (step), e.g. node, dataset-initializer; default: node, or an MPIJob's launcher"
        ),
    ] = None,
    node: Annotated[int | None, typer.Option(min=0, help="node index within the step; default 0")] = None,
    all_pods: Annotated[bool, typer.Option("--all-pods", help="every node (rank) of the step")] = False,
    prefix: Annotated[bool, typer.Option("--prefix", help="start each line with [pod/NAME/CONTAINER]")] = False,
    tail: Annotated[int, typer.Option("--tail", help="only the last lines of each log; -1 all")] = -1,
    since: Annotated[str | None, typer.Option("--since", help="only lines newer than this, e.g. 5m, 1h")] = None,
    previous: Annotated[
        bool, typer.Option("--previous", "-p", help="the log of the container's previous instance")
    ] = False,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="stream until the container ends")] = False,
    container: Annotated[
        str | None, typer.Option("--container", "-c", help="container; default: node, or the step's")
    ] = None,
    pod_timeout: Annotated[
        float, typer.Option(min=0.001, help="seconds to wait for the pod to start")
    ] = DEFAULT_POD_TIMEOUT,
    kubeconfig: KubeconfigOpt = None,
    namespace: NamespaceOpt = None,
) -> None:
    """Print the log of one node of a step (default: the step that trains, node 0), or of every node
    with --all-pods, waiting for the pods to start; at once an error (exit 1) for a pod that cannot
    start (ImagePullBackOff, InvalidImageName, CreateContainerConfigError), and on --pod-timeout
    (exit 3) why the pod waits."""
    s = settings(ctx, kubeconfig, namespace, None)
    kind, name = target(args)
    since_seconds = parse_duration(since) if since is not None else None

    async def stream(c: AsyncTrainerClient) -> None:
        jc = job_client(c, kind)
        pods = await jc.wait_for_pods(name, step, node, pod_timeout, all_nodes=all_pods)

        async def one(pod: JSON) -> None:
            labels = meta(pod).labels
            chosen = container or pick_container(pod, str(labels.get(kind.step_label, "")), kind.default_container)
            tag = f"[pod/{pod['metadata']['name']}/{chosen}] " if prefix else ""
            async for line in jc.read_pod_logs(
                pod,
                chosen,
                follow,
                tail_lines=tail if tail >= 0 else None,
                since_seconds=since_seconds,
                previous=previous,
            ):
                typer.echo(f"{tag}{line}")

        if follow:
            await asyncio.gather(*(one(p) for p in pods))
        else:
            for pod in pods:
                await one(pod)

    run(s, stream, crd=kind.resource)
