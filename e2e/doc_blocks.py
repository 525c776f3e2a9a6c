"""Blocks of the docs that tests run as written: found between ``<!-- NAME: ... -->`` and
``<!-- end of NAME -->`` markers, each one fence: ```` ```sh ```` (continuation lines joined, comments
dropped) or ```` ```python ````.

:func:`commands` reads a shell block; :func:`run` runs its commands one by one, each through ``bash -c``
with one environment (or, where a test must stand in for a command, a Python callable), and returns
what each printed and its exit status, so a test asserts on both. :func:`python` reads a Python block
as it is written, for a test to run as a script.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

Step = str | Callable[[], str]
"""A command as run: a shell line, or a callable standing in for one (returns what it printed)."""


def fenced(text: str, name: str, language: str) -> list[str]:
    """The lines inside block ``name`` of ``text`` (Markdown), the fence's own lines left out. Raises
    ``AssertionError`` when the block is missing or is not one ```` ```<language> ```` fence."""
    start = re.search(rf"^<!-- {re.escape(name)}\b.*-->$", text, re.M)
    assert start, f"no <!-- {name}: ... --> block"
    end = text.index(f"<!-- end of {name} -->", start.end())
    block = text[start.end() : end].strip()
    fence = f"```{language}\n"
    assert block.startswith(fence) and block.endswith("\n```") and block.count("```") == 2, (
        f"the {name} block is not one ```{language} fence"
    )
    return block.splitlines()[1:-1]


def python(text: str, name: str) -> str:
    """The code of Python block ``name`` in ``text`` (Markdown), as written. Raises ``AssertionError``
    when the block is missing or is not one ```` ```python ```` fence."""
    return "\n".join(fenced(text, name, "python")) + "\n"


def commands(text: str, name: str) -> list[str]:
    """The commands of block ``name`` in ``text`` (Markdown), continuation lines joined, comment lines
    and trailing ``# ...`` comments dropped. Raises ``AssertionError`` when the block is missing or is
    not one ```` ```sh ```` fence."""
    out, pending = [], ""
    for line in fenced(text, name, "sh"):
        if line.lstrip().startswith("#") and not pending:
            continue
        pending += line
        if pending.endswith("\\"):
            pending = pending[:-1]
            continue
        command = re.sub(r"\s+#\s.*$", "", pending).strip()
        if command:
            out.append(command)
        pending = ""
    return out


@dataclass(frozen=True)
class Ran:
    """One command of a block as the test ran it: as written, as run, its exit status and output."""

    written: str
    run: str
    rc: int
    output: str


def run(
    written: Sequence[str],
    substitute: Callable[[str], Step | None],
    env: dict[str, str],
    cwd: Path,
    timeout: float = 300,
) -> list[Ran]:
    """Run ``written`` in order: each as ``substitute`` makes it (None: skipped), a shell line through
    ``bash -c`` with ``env`` in ``cwd`` (``timeout`` seconds each), a callable called. Stops at the
    first command that exits non-zero (it is the last entry). Raises ``subprocess.TimeoutExpired``."""
    out: list[Ran] = []
    for command in written:
        step = substitute(command)
        if step is None:
            continue
        if callable(step):
            out.append(Ran(command, getattr(step, "__name__", "callable"), 0, step()))
            continue
        proc = subprocess.run(
            ["bash", "-c", step], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
        )
        out.append(Ran(command, step, proc.returncode, proc.stdout + proc.stderr))
        if proc.returncode != 0:
            break
    return out
