"""``--dry-run`` of ``create``, ``apply`` and ``delete``, as kubectl's: ``client`` sends nothing,
``server`` has the apiserver check each write (``dryRun=All``: validation and admission webhooks
included) and store nothing."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer


class DryRun(StrEnum):
    """The values of ``--dry-run`` (kubectl's)."""

    none = "none"
    client = "client"
    server = "server"


DryRunOpt = Annotated[
    DryRun,
    typer.Option(
        "--dry-run",
        help="client: print what would be done, contacting no apiserver (delete: reading what it names); "
        "server: the apiserver checks each write (dryRun=All, admission included) and stores nothing",
    ),
]


def done(line: str, dry_run: DryRun) -> str:
    """``line`` (``<kind>.<group>/<name> created``) as kubectl prints it for ``dry_run``: with
    `` (dry run)`` or `` (server dry run)``."""
    return {DryRun.none: line, DryRun.client: f"{line} (dry run)", DryRun.server: f"{line} (server dry run)"}[dry_run]
