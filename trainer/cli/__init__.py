"""The ``trainer`` command line (typer + rich): submit, inspect, follow and delete TrainJobs, and run
the operator.

Every command is a thin layer over :class:`trainer.client.AsyncTrainerClient` and, for the :mod:`trainer.api`
objects it prints, :class:`trainer.client.AsyncJobClient`; what is pure here
(output formatting, exit codes) is tested without a cluster in ``tests/entry/test_cli.py``.

A module per command group (:mod:`~trainer.cli.submit`: ``apply``, ``create``; :mod:`~trainer.cli.get`:
``get``, ``list``; :mod:`~trainer.cli.describe`; :mod:`~trainer.cli.why`; :mod:`~trainer.cli.logs`;
:mod:`~trainer.cli.wait`;
:mod:`~trainer.cli.delete`; :mod:`~trainer.cli.suspend`: ``suspend``, ``resume``;
:mod:`~trainer.cli.dashboard`; :mod:`~trainer.cli.launch`: ``operator run``), each adding its commands
to :data:`app` (:mod:`~trainer.cli.root`, with the global and shared options) when imported: only when
the command runs (:mod:`~trainer.cli.lazy` names the module of each, in the order ``--help`` lists
them), so that ``trainer --help`` or ``trainer get`` loads neither the dashboard nor what other
commands need. Shared: :mod:`~trainer.cli.tables` (what is printed),
:mod:`~trainer.cli.errors` (exit codes, errors, running a command) and :mod:`~trainer.cli.targets`
(TYPE and NAME).
"""

from trainer.cli.root import app

__all__ = ["app"]
