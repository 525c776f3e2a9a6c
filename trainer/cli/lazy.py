"""The commands of the ``trainer`` CLI, each imported only when it runs: :data:`COMMANDS` names the
module of every command and the line ``trainer --help`` lists it with, and :class:`LazyGroup` (the
root group) imports a command's module when the command is invoked (or its ``--help`` asked for).

So ``trainer --help`` loads typer and nothing of the client, and ``trainer get`` loads what ``get``
needs (the apiserver client, the :mod:`trainer.api` models) but not, say, the dashboard's web server: the
pattern of click's "Lazily Loading Subcommands" (click docs, ``docs/complex.rst``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import ClassVar

import typer
import typer.main
from typer import _click as click  # the click typer vendors: its groups, contexts and formatters are these
from typer.core import TyperCommand, TyperGroup


@dataclass(frozen=True)
class Command:
    """Where a command is defined and what the root ``--help`` says of it."""

    module: str
    """The module whose import adds the command to :data:`trainer.cli.root.app`."""
    summary: str | None
    """The first sentence of the command's help (tests check it is); None for a hidden command."""


COMMANDS = {
    "apply": Command(
        "trainer.cli.submit",
        "Create or update TrainJobs, MPIJobs, TrainingRuntimes and ClusterTrainingRuntimes (server-side apply).",
    ),
    "create": Command("trainer.cli.submit", "Create TrainJobs, MPIJobs, TrainingRuntimes and ClusterTrainingRuntimes"),
    "get": Command("trainer.cli.get", "Show the objects of a TYPE (as list does) or the one named NAME"),
    "list": Command("trainer.cli.get", "List the objects of a TYPE (default TrainJobs)"),
    "runtimes": Command("trainer.cli.get", None),
    "describe": Command("trainer.cli.describe", "Show a job's state"),
    "why": Command("trainer.cli.why", "Say why a job waits"),
    "logs": Command("trainer.cli.logs", "Print the log of one node of a step"),
    "wait": Command("trainer.cli.wait", "Wait until the job reaches a status"),
    "delete": Command("trainer.cli.delete", "Delete jobs (their Jobs, pods and Service go with them) or runtimes"),
    "suspend": Command("trainer.cli.suspend", "Suspend a job"),
    "resume": Command("trainer.cli.suspend", "Resume a suspended job."),
    "dashboard": Command("trainer.cli.dashboard", "Serve a read-only web page of the jobs on http://127.0.0.1:PORT/"),
    "operator": Command("trainer.cli.launch", "The operator itself."),
}
"""Every command, in the order ``trainer --help`` lists them."""


class LazyGroup(TyperGroup):
    """The root group: lists :data:`COMMANDS` (and any command added by a module imported
    otherwise) without importing them; resolving a command imports its module and builds it."""

    app: ClassVar[typer.Typer | None] = None
    """The app the group is built from (:data:`trainer.cli.root.app` sets itself here): what a
    command's module adds its command to."""
    loaded: frozenset[str] = frozenset()
    """The commands whose module this group has imported and built."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command: those of :data:`COMMANDS` in their order, then any other one registered."""
        return [*COMMANDS, *(name for name in super().list_commands(ctx) if name not in COMMANDS)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command ``cmd_name``, its module imported first (once) when :data:`COMMANDS` names it."""
        command = COMMANDS.get(cmd_name)
        if command is not None and cmd_name not in self.loaded:
            importlib.import_module(command.module)
            built = typer.main.get_command(self.app) if self.app is not None else None
            if isinstance(built, TyperGroup):
                self.commands.update(built.commands)
            self.loaded = self.loaded | {cmd_name}
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The ``Commands:`` section: each command with its :attr:`Command.summary` (the first line
        of the help of a command not in :data:`COMMANDS`), no module imported."""
        rows = []
        for name in self.list_commands(ctx):
            command = COMMANDS.get(name)
            if command is not None:
                if command.summary is not None:
                    rows.append((name, command.summary))
                continue
            found = super().get_command(ctx, name)
            if found is not None and not found.hidden:
                rows.append((name, found.get_short_help_str()))
        if rows:
            limit = formatter.width - 6 - max(len(name) for name, _ in rows)
            with formatter.section("Commands"):
                formatter.write_dl(
                    [(name, TyperCommand(name, help=text).get_short_help_str(limit)) for name, text in rows]
                )
