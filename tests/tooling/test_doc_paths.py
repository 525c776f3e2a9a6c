"""Every repository path the docs name exists: in docs/*.md and README.md, a backticked token that starts
with one of the repository's top-level directories (``trainer/jobs/child_writer.py``, ``config/default``,
``charts/trainer/values.yaml``) or names a module of the package (``trainer.framework.controller``) must
be a file, directory or module of this checkout. A token with a placeholder (``<name>``, ``*``) is
skipped; so is one whose clause (the text since the last ``(``, ``;``, sentence or line) says it is
upstream's or names another repository (``upstream `charts/kubeflow-trainer```, ``kubernetes-sigs/jobset
`api/jobset/v1alpha2```): that path is in another repository."""

from __future__ import annotations

import importlib
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
TOKEN = re.compile(r"`([^`\s]+)`")
MODULE = re.compile(r"trainer(?:\.[a-z_][a-z0-9_]*)+")
# In a token's clause: it is another repository's path.
ELSEWHERE = re.compile(r"\bupstream|\b[\w-]+/[\w-]+ `|mpi-operator|\bjobset's|\bkueue's|\bvolcano's", re.I)


def top_level_dirs() -> set[str]:
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return {f.split("/", 1)[0] for f in files.splitlines() if "/" in f and not f.startswith(".")}


def is_package_part(name: str) -> bool:
    return (ROOT / "trainer" / f"{name}.py").exists() or (ROOT / "trainer" / name).is_dir()


def clause(text: str, at: int) -> str:
    """The text of ``text`` before ``at`` back to the last ``(``, ``;``, sentence end or line end."""
    start = max(text.rfind(sep, 0, at) for sep in ("(", ";", ". ", "\n"))
    return text[start + 1 : at + 1]


def named_paths(text: str, tops: set[str]) -> list[str]:
    """The tokens of ``text`` that name a path or module of this repository (see the module's docstring)."""
    out: list[str] = []
    for m in TOKEN.finditer(text):
        token = m[1].rstrip(".,:;")
        if re.search(r"[<>*{}$~]|://", token) or ELSEWHERE.search(clause(text, m.start())):
            continue
        if "/" in token and token.split("/", 1)[0] in tops:
            out.append(token.split("#", 1)[0].split("::", 1)[0])
        elif MODULE.fullmatch(token) and is_package_part(token.split(".")[1]):
            out.append(token)  # not `trainer.image` (a TrainJob field) nor `trainer.json` (a key)
    return out


def exists(token: str) -> bool:
    if "/" in token:
        return (ROOT / token).exists()

    def module(dotted: str) -> Path | None:
        path = ROOT / dotted.replace(".", "/")
        return next((p for p in (path.with_suffix(".py"), path / "__init__.py") if p.exists()), None)

    if module(token):  # trainer.wiring.settings, trainer.jobs
        return True
    parent, _, name = token.rpartition(".")  # or a name of a module: trainer.wiring.settings.Settings
    return module(parent) is not None and hasattr(importlib.import_module(parent), name)


def test_the_check_finds_a_missing_path_and_skips_upstreams() -> None:
    tops = {"trainer", "config"}
    text = (
        "see `trainer/jobs/nope.py`, `config/default`, `trainer.jobs.nope`, `trainer.image`"
        " (upstream's `config/samples/x.yaml`, `config/y`), `trainer/<kind>/kind.py`,"
        " `kubectl get` (kubernetes-sigs/jobset `api/jobset`)"
    )
    found = named_paths(text, tops)
    assert found == ["trainer/jobs/nope.py", "config/default", "trainer.jobs.nope"]
    assert [t for t in found if not exists(t)] == ["trainer/jobs/nope.py", "trainer.jobs.nope"]
    assert exists("trainer.framework.controller") and exists("trainer/wiring/settings.py") and exists("trainer.jobs")
    assert exists("trainer.wiring.settings.Settings") and not exists("trainer.wiring.settings.Nope")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_path_a_page_names_exists(page: Path) -> None:
    missing = sorted({t for t in named_paths(page.read_text(), top_level_dirs()) if not exists(t)})
    assert missing == [], f"{page.relative_to(ROOT)} names paths this repository lacks: {missing}"
