"""The root command of the ``trainer`` CLI: the typer app, its global options (``--kubeconfig``,
``--namespace``, ``--output``, ``--version``) and the options and arguments its commands share.
"""

from __future__ import annotations

import importlib.metadata
import logging
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

import typer

from trainer.cli.lazy import LazyGroup

HELP = """Submit, inspect, follow and delete Kubeflow TrainJobs (trainer.kubeflow.org/v1alpha1), and run
the operator.

Objects are named as kubectl names them: TYPE NAME or TYPE/NAME, TYPE a plural (trainjobs), singular
(trainjob), short name (tj) or one of these with the group (trainjobs.trainer.kubeflow.org); the
types: trainjobs, mpijobs, trainingruntimes, clustertrainingruntimes, and runtimes for both runtime
kinds. A NAME alone, where a name is expected and it is not a type, is a TrainJob.

Exit codes: 0 success; 1 the job Failed (wait) or an error (invalid manifest, unreadable file, API
error, not found); 2 usage error; 3 timeout (wait --timeout, logs --pod-timeout)."""


class Output(StrEnum):
    """Output formats of ``--output``."""

    table = "table"
    wide = "wide"
    name = "name"
    json = "json"
    yaml = "yaml"


TABLES = (Output.table, Output.wide)
"""The formats printed as tables (``wide`` adds REASON and MESSAGE to the job tables)."""


class Status(StrEnum):
    """Statuses ``wait --status`` accepts: those of :data:`trainer.client.STATUSES`."""

    Created = "Created"
    Suspended = "Suspended"
    Running = "Running"
    Complete = "Complete"
    Failed = "Failed"


@dataclass
class Settings:
    """The global options."""

    kubeconfig: str | None = None
    namespace: str | None = None
    output: Output = Output.table


KubeconfigOpt = Annotated[
    str | None, typer.Option("--kubeconfig", help="kubeconfig path; default: $KUBECONFIG, ~/.kube/config, in-cluster")
]


NamespaceOpt = Annotated[
    str | None,
    typer.Option("--namespace", "-n", help="namespace; default: the kubeconfig context's; overrides manifests'"),
]


OutputOpt = Annotated[Output | None, typer.Option("--output", "-o", help="output format")]


app = typer.Typer(
    name="trainer",
    cls=LazyGroup,
    help=HELP,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
LazyGroup.app = app


operator_app = typer.Typer(help="The operator itself.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(operator_app, name="operator")


def print_version(value: bool) -> None:
    """``--version``: print ``trainer <version>`` and exit."""
    if value:
        typer.echo(f"trainer {importlib.metadata.version('trainjob-operator')}")
        raise typer.Exit()


@app.callback()
def main(
    ctx: typer.Context,
    kubeconfig: KubeconfigOpt = None,
    namespace: NamespaceOpt = None,
    output: Annotated[Output, typer.Option("--output", "-o", help="output format")] = Output.table,
    version: Annotated[
        bool, typer.Option("--version", callback=print_version, is_eager=True, help="print the version and exit")
    ] = False,
) -> None:
    """Submit, inspect, follow and delete TrainJobs; see the exit codes above."""
    logging.getLogger("kubernetes_asyncio").setLevel(logging.ERROR)  # its warnings would add lines to ours
    ctx.obj = Settings(kubeconfig, namespace, output)


def settings(ctx: typer.Context, kubeconfig: str | None, namespace: str | None, output: Output | None) -> Settings:
    """The global options, overridden by those given after the command."""
    root = ctx.find_root().obj if isinstance(ctx.find_root().obj, Settings) else Settings()
    return Settings(kubeconfig or root.kubeconfig, namespace or root.namespace, output or root.output)


JobArgs = Annotated[
    list[str],
    typer.Argument(
        metavar="[TYPE] NAME",
        help="job: TYPE NAME or TYPE/NAME (TYPE trainjobs, tj, mpijobs, mpij, optimizationjobs, optj...), or NAME "
        "alone: a TrainJob",
    ),
]


WatchOpt = Annotated[bool, typer.Option("--watch", "-w", help="after listing, print each change until interrupted")]


FILENAME_HELP = "YAML/JSON file or directory of TrainJobs, MPIJobs and runtimes; - for stdin"


FilenameOpt = Annotated[list[str], typer.Option("--filename", "-f", help=FILENAME_HELP)]


RecursiveOpt = Annotated[bool, typer.Option("--recursive", "-R", help="read the directories of -f recursively")]


QueueOpt = Annotated[
    str | None, typer.Option(help="Kueue LocalQueue of the TrainJobs (label kueue.x-k8s.io/queue-name)")
]


MulticlusterOpt = Annotated[
    bool,
    typer.Option(
        help="submit the TrainJobs to a MultiKueue manager cluster: managedBy kueue.x-k8s.io/multikueue, "
        "the queue label (--queue or the manifest's) and suspend; Kueue runs each on a worker cluster"
    ),
]


SelectorOpt = Annotated[str | None, typer.Option("--selector", "-l", help="label selector")]


AllNamespacesOpt = Annotated[bool, typer.Option("--all-namespaces", "-A", help="every namespace")]


RuntimeOpt = Annotated[str | None, typer.Option(help="only TrainJobs of this runtime")]


QueueFilterOpt = Annotated[
    str | None, typer.Option(help="only jobs naming this Kueue (label) or Volcano (annotation) queue")
]
