"""The operator image without a container engine: read the Dockerfile, run its build stage on this
machine under a scratch root, and give back how its entrypoint would run.

Only what this project's Dockerfile uses is understood: ``ARG`` (defaults), ``FROM ... AS``,
``ENV k=v``, ``WORKDIR``, ``COPY [--from=stage] src... dest``, ``RUN`` (shell form), ``USER``,
``EXPOSE`` and ``ENTRYPOINT`` (exec form). The build stage's ``RUN`` lines run in bash with the
image's absolute directories (``/opt``, ``/src``, ...) moved under the scratch root and ``python``
being this machine's Python (the same minor version as the image's). Anything else raises
``ValueError``: a new instruction in the Dockerfile must be taught here, not silently skipped.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Stage:
    """One ``FROM`` and what follows it."""

    base: str
    name: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "/"
    copies: list[tuple[str, list[str], str]] = field(default_factory=list)
    """``(--from flag or "", sources, destination)``."""
    runs: list[str] = field(default_factory=list)
    user: str | None = None
    ports: list[str] = field(default_factory=list)
    entrypoint: list[str] | None = None
    steps: list[tuple[str, str]] = field(default_factory=list)
    """``(instruction, argument)`` in order, for the build."""


@dataclass
class Dockerfile:
    """A parsed Dockerfile: its stages in order."""

    stages: list[Stage]

    @property
    def entrypoint(self) -> list[str] | None:
        """The final stage's ``ENTRYPOINT``."""
        return self.stages[-1].entrypoint

    @classmethod
    def parse(cls, path: Path) -> Dockerfile:
        """Parse ``path``. Raises ``ValueError`` on an instruction this module does not know."""
        text = re.sub(
            r"\\\n\s*", " ", "\n".join(line for line in path.read_text().splitlines() if not line.startswith("#"))
        )
        args: dict[str, str] = {}
        stages: list[Stage] = []
        for line in text.splitlines():
            if not line.strip():
                continue
            op, _, rest = line.strip().partition(" ")
            op, rest = op.upper(), rest.strip()
            if op == "ARG" and not stages:
                name, _, default = rest.partition("=")
                args[name] = default
                continue
            subst = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), ""), rest)
            if op == "FROM":
                words = subst.split()
                stages.append(
                    Stage(base=words[0], name=words[2] if len(words) > 2 and words[1].upper() == "AS" else None)
                )
                continue
            if not stages:
                raise ValueError(f"{op} before FROM")
            stage = stages[-1]
            if op == "ENV":
                for pair in shlex.split(rest):
                    key, _, value = pair.partition("=")
                    stage.env[key] = value
            elif op == "WORKDIR":
                stage.workdir = rest
            elif op == "COPY":
                words = rest.split()
                flag = words.pop(0) if words[0].startswith("--") else ""
                stage.copies.append((flag, words[:-1], words[-1]))
            elif op == "RUN":
                stage.runs.append(rest)
            elif op == "USER":
                stage.user = rest
            elif op == "EXPOSE":
                stage.ports += rest.split()
            elif op == "ENTRYPOINT":
                stage.entrypoint = json.loads(rest)
            else:
                raise ValueError(f"Dockerfile instruction {op} is not understood by localcluster/image.py")
            stage.steps.append((op, rest))
        return cls(stages)


def _rebase(text: str, root: Path, dirs: set[str]) -> str:
    for d in sorted(dirs, key=len, reverse=True):
        text = re.sub(rf"(?<![\w./-]){re.escape(d)}(?=/|\s|$)", str(root) + d, text)
    return text


def build_locally(dockerfile: Dockerfile, context: Path, root: Path) -> dict[str, str]:
    """Run the first (build) stage under ``root`` and return the environment of the final stage
    (its ``ENV``, ``PATH`` rebased), in which its ``ENTRYPOINT`` resolves to what the build made.
    Raises ``subprocess.CalledProcessError`` when a ``RUN`` fails."""
    build, final = dockerfile.stages[0], dockerfile.stages[-1]
    words = " ".join([build.workdir, *(s.workdir for s in dockerfile.stages), *build.runs])
    words += " " + " ".join(dest for _, _, dest in build.copies)
    dirs = {"/" + m.group(1) for m in re.finditer(r"(?<![\w./-])/(\w+)(?=/|\s|$)", words)}
    shims = root / "shims"
    shims.mkdir(parents=True, exist_ok=True)
    python = getattr(sys, "_base_executable", sys.executable)
    (shims / "python").unlink(missing_ok=True)
    (shims / "python").symlink_to(python)
    env = {**os.environ, "PATH": f"{shims}:{os.environ.get('PATH', '')}"}
    env.pop("VIRTUAL_ENV", None)
    workdir = root / build.workdir.lstrip("/")
    for op, arg in build.steps:
        if op == "ENV":
            for pair in shlex.split(arg):
                key, _, value = pair.partition("=")
                env[key] = value
        elif op == "WORKDIR":
            workdir = Path(_rebase(arg, root, dirs))
            workdir.mkdir(parents=True, exist_ok=True)
        elif op == "COPY":
            *sources, dest = arg.split()
            target = Path(_rebase(dest, root, dirs)) if dest.startswith("/") else workdir / dest
            for src in sources:
                path = context / src
                if path.is_dir():  # as Docker: the directory's contents go to the destination
                    shutil.copytree(path, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
                elif dest.endswith("/") or len(sources) > 1:
                    target.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, target / path.name)
                else:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, target)
        elif op == "RUN":
            subprocess.run(["bash", "-c", _rebase(arg, root, dirs)], cwd=workdir, env=env, check=True)
    out = {**os.environ, **final.env}
    out["PATH"] = _rebase(final.env.get("PATH", "$PATH"), root, dirs).replace("$PATH", os.environ.get("PATH", ""))
    out.pop("VIRTUAL_ENV", None)
    return out
