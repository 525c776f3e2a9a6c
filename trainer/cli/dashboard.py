"""``dashboard``: the read-only web page of the jobs, served on 127.0.0.1."""

from __future__ import annotations

from typing import Annotated

import typer

from trainer.cli.errors import run
from trainer.cli.root import AllNamespacesOpt, KubeconfigOpt, NamespaceOpt, app, settings
from trainer.client import AsyncTrainerClient
from trainer.dashboard import server as dashboard_server


@app.command()
def dashboard(
    ctx: typer.Context,
    port: Annotated[int, typer.Option(min=1, max=65535, help="port on 127.0.0.1")] = dashboard_server.DEFAULT_PORT,
    all_namespaces: AllNamespacesOpt = False,
    prometheus_url: Annotated[
        str | None,
        typer.Option(help="Prometheus base URL (e.g. http://127.0.0.1:9090) to draw the curves from"),
    ] = None,
    sample_interval: Annotated[
        float, typer.Option(min=0.1, help="seconds between samples of a viewed job's metrics (no Prometheus)")
    ] = dashboard_server.DEFAULT_SAMPLE_INTERVAL,
    refresh: Annotated[int, typer.Option(min=1, help="seconds after which a page reloads")] = (
        dashboard_server.DEFAULT_REFRESH
    ),
    kubeconfig: KubeconfigOpt = None,
    namespace: NamespaceOpt = None,
) -> None:
    """Serve a read-only web page of the jobs on http://127.0.0.1:PORT/ until Ctrl-C: every TrainJob and
    MPIJob of the namespace (or all, -A) with state, queue, progress and ETA; a job's page with its
    conditions, pods, events, last log lines and loss/accuracy curves (from --prometheus-url, else
    sampled while the page is viewed). Only GET, list and log reads reach the apiserver."""
    s = settings(ctx, kubeconfig, namespace, None)

    async def go(c: AsyncTrainerClient) -> None:
        board = dashboard_server.Dashboard(
            c,
            all_namespaces=all_namespaces,
            prometheus_url=prometheus_url,
            sample_interval=sample_interval,
            refresh=refresh,
        )
        await dashboard_server.serve(board, port, lambda url: typer.echo(f"serving {board.scope} on {url}", err=True))

    run(s, go)
