"""``operator run``: the operator itself, run in this process with the CLI's global options.

The CLI imports no module of the operator: ``operator run`` finds the operator's ``main`` through the
console script the package declares (:data:`OPERATOR_SCRIPT`), so the CLI and the SDK work where only
they are installed and say so when the operator is not.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from typing import cast

import typer

from trainer.cli.errors import fail
from trainer.cli.root import Settings, operator_app

OPERATOR_SCRIPT = "trainer-operator"
"""The operator's console script (``[project.scripts]`` of the package), naming its ``main``."""


def operator_main() -> Callable[[list[str]], int]:
    """The operator's ``main(argv) -> exit code``, loaded from :data:`OPERATOR_SCRIPT`'s entry point.
    Prints ``error: ...`` and exits 1 when no installed package declares it, or when it cannot be
    imported (e.g. the operator's own dependencies are not installed)."""
    for entry_point in importlib.metadata.entry_points(group="console_scripts", name=OPERATOR_SCRIPT):
        try:
            return cast(Callable[[list[str]], int], entry_point.load())
        except ImportError as e:
            fail(f"the operator cannot be loaded ({e}): install the package with its dependencies")
    fail(f"the operator is not installed: no package declares the console script {OPERATOR_SCRIPT}")


@operator_app.command(
    "run",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def operator_run(ctx: typer.Context) -> None:
    """Run the operator; every argument goes to it (see trainer operator run --help). The global
    --kubeconfig and --namespace are passed on unless given here."""
    argv = list(ctx.args)
    root = ctx.find_root().obj if isinstance(ctx.find_root().obj, Settings) else Settings()
    given = {a.split("=", 1)[0] for a in argv}
    if root.kubeconfig and "--kubeconfig" not in given:
        argv = ["--kubeconfig", root.kubeconfig, *argv]
    if root.namespace and "--namespace" not in given:
        argv = ["--namespace", root.namespace, *argv]
    raise typer.Exit(operator_main()(argv))
