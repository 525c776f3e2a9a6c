"""``operator run``: the operator itself, run in this process with the CLI's global options."""

from __future__ import annotations

import typer

from trainer.cli.root import Settings, operator_app


@operator_app.command(
    "run",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def operator_run(ctx: typer.Context) -> None:
    """Run the operator; every argument goes to it (see trainer operator run --help). The global
    --kubeconfig and --namespace are passed on unless given here."""
    from trainer.main import main as operator_main

    argv = list(ctx.args)
    root = ctx.find_root().obj if isinstance(ctx.find_root().obj, Settings) else Settings()
    given = {a.split("=", 1)[0] for a in argv}
    if root.kubeconfig and "--kubeconfig" not in given:
        argv = ["--kubeconfig", root.kubeconfig, *argv]
    if root.namespace and "--namespace" not in given:
        argv = ["--namespace", root.namespace, *argv]
    raise typer.Exit(operator_main(argv))
