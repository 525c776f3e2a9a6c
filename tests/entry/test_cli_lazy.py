"""The CLI imports a command's module only when the command runs: ``import trainer.cli`` (what
``trainer --help`` needs) loads neither the apiserver client (kubernetes_asyncio, aiohttp) nor the
dashboard, and ``--help`` lists every command with the first words of its own help."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from typer.core import TyperGroup
from typer.testing import CliRunner

from trainer.cli import app, lazy

ROOT = Path(__file__).resolve().parent.parent.parent
HEAVY = ("kubernetes_asyncio", "aiohttp", "trainer.dashboard", "trainer.client", "jinja2")


def loaded_after(code: str) -> list[str]:
    """The modules of :data:`HEAVY` loaded once ``code`` ran in a fresh interpreter."""
    script = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120, check=True
    )
    names: list[str] = json.loads(done.stdout.splitlines()[-1])
    return [m for m in names if m.startswith(HEAVY)]


def test_importing_the_cli_loads_no_apiserver_client_nor_dashboard() -> None:
    assert loaded_after("import trainer.cli") == []


def test_help_loads_no_command_module() -> None:
    code = "from typer.testing import CliRunner\nfrom trainer.cli import app\nCliRunner().invoke(app, ['--help'])"
    assert loaded_after(code) == []


def test_a_command_loads_its_module_only() -> None:
    code = (
        "from typer.testing import CliRunner\nfrom trainer.cli import app\n"
        "r = CliRunner().invoke(app, ['get', '--help'])\nassert r.exit_code == 0, r.output"
    )
    loaded = loaded_after(code)
    assert "trainer.client" in loaded and "aiohttp" in loaded
    assert [m for m in loaded if m.startswith("kubernetes_asyncio")] == []  # only a plugin's kubeconfig needs it
    assert [m for m in loaded if m.startswith("trainer.dashboard")] == []


@pytest.mark.parametrize("name", list(lazy.COMMANDS))
def test_every_command_runs_from_its_module_and_help_says_its_first_words(name: str) -> None:
    command = lazy.COMMANDS[name]
    importlib.import_module(command.module)
    built = typer.main.get_command(app)
    assert isinstance(built, TyperGroup)
    real = built.commands[name]
    assert bool(real.hidden) == (command.summary is None)
    if command.summary is not None:
        assert " ".join((real.help or "").split()).startswith(command.summary), real.help
    result = CliRunner().invoke(app, [name, *(["run"] if name == "operator" else []), "--help"])
    assert result.exit_code == 0, result.output


def test_help_lists_the_commands_in_order_with_their_summaries() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    rows = [line.split()[0] for line in result.output.split("Commands:")[1].splitlines() if line[2:3].isalpha()]
    assert rows == [name for name, command in lazy.COMMANDS.items() if command.summary is not None]
    assert "runtimes" not in rows
