"""The generated tables of the docs other than the RBAC one (:mod:`trainer.render.rbac`):

* the support matrix: what the end-to-end suite runs against, at the versions ``localcluster/versions.env``
  pins (and Python from ``pyproject.toml`` and the ``Dockerfile``);
* every operator flag, from :mod:`trainer.wiring.settings` (flag, environment variable, default, help);
* every Helm value, from ``charts/trainer/values.yaml`` (its default and the comment above it);
* a line per module of ``trainer/api/`` and ``trainer/`` (``docs/internals.md``), from the first sentence of its
  docstring.

``python -m trainer.render.docs_tables`` rewrites each between its markers (``--check``: exit 1 when one is stale,
as ``tests/tooling/test_docs_tables.py`` does).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trainer.wiring import settings

ROOT = Path(__file__).resolve().parents[2]
DOCS_PAGE = ROOT / "docs" / "operating.md"
INTERNALS_PAGE = ROOT / "docs" / "internals.md"
VERSIONS_ENV = ROOT / "localcluster" / "versions.env"
VALUES = ROOT / "charts" / "trainer" / "values.yaml"
COMMAND = "python -m trainer.render.docs_tables"


def versions() -> dict[str, str]:
    """``localcluster/versions.env``'s ``NAME=value`` lines."""
    out = {}
    for line in VERSIONS_ENV.read_text().splitlines():
        name, sep, value = line.partition("=")
        if sep and not line.startswith("#"):
            out[name.strip()] = value.strip()
    return out


def python_versions() -> tuple[str, str]:
    """``pyproject.toml``'s ``requires-python`` and the Python of the Dockerfile's default base image."""
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    base = re.search(r"^ARG PYTHON_IMAGE=python:(\d+\.\d+)", (ROOT / "Dockerfile").read_text(), re.M)
    if base is None:
        raise ValueError("the Dockerfile has no ARG PYTHON_IMAGE=python:X.Y...")
    return str(requires), base[1]


def support_matrix() -> list[tuple[str, str, str]]:
    """(component, version, what is run) rows."""
    v = versions()
    requires, image_python = python_versions()
    return [
        (
            "Kubernetes",
            v["KUBERNETES_VERSION"],
            f"the local cluster's kube-apiserver, kube-controller-manager and kube-scheduler (etcd "
            f"{v['ETCD_VERSION']}, feature gate `GenericWorkload`, `scheduling.k8s.io/v1beta1` served), with KWOK "
            f"{v['KWOK_VERSION']} nodes and real kubelets; no other version is tested. `spec.scheduling` needs 1.37 or "
            "later; the rest needs only the APIs of 1.33 (the suite ran on v1.33.13 before v1.37.2)",
        ),
        (
            "Workload API",
            f"scheduling.k8s.io/v1beta1 ({v['KUBERNETES_VERSION']})",
            "`--gang-scheduler-name=workload`: the kube-scheduler's own gangs (a `Workload` and its `PodGroup`s "
            "per TrainJob whose runtime sets `spec.scheduling`, and per MPIJob), with no other scheduler installed",
        ),
        (
            "Kueue",
            v["KUEUE_VERSION"],
            "`--gang-scheduler-name=kueue`: quota held for a whole job, eviction, requeueing and deactivation; "
            "the operator reads `kueue.x-k8s.io/v1beta2` (Kueue 0.15 or later)",
        ),
        (
            "Volcano",
            v["VOLCANO_VERSION"],
            "`--gang-scheduler-name=volcano`: PodGroups, gangs that fit or wait, queues (missing, closed, parent, "
            "weighted), network topology",
        ),
        (
            "scheduler-plugins",
            "not run",
            "`--gang-scheduler-name=scheduler-plugins`: the `scheduling.x-k8s.io/v1alpha1` PodGroup the operator "
            "writes and the overlay's RBAC are checked by unit tests and a server dry run; no coscheduling "
            "scheduler runs in the suite",
        ),
        (
            "JobSet CRD",
            v["JOBSET_VERSION"],
            "installed with Kueue's CRDs (the version Kueue's `go.mod` requires); the operator makes no JobSet",
        ),
        (
            "Kubeflow Trainer (upstream)",
            v["UPSTREAM_TRAINER_VERSION"],
            "its own e2e suite runs against this operator, and its runtimes; the benchmarks compare with it",
        ),
        ("Helm", v["HELM_VERSION"], "the chart's tests and its installs in the suite"),
        (
            "Python",
            image_python,
            f"`requires-python {requires}`; the image's base is `python:{image_python}-slim-bookworm` "
            f"(the image the in-cluster tests build: Debian bookworm's Python {image_python})",
        ),
    ]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def support_table() -> str:
    rows = ["| Component | Version the e2e suite runs | What runs |", "|---|---|---|"]
    rows += [f"| {name} | {version} | {_cell(what)} |" for name, version, what in support_matrix()]
    return "\n".join(rows)


def flags_table() -> str:
    """One row per field of :class:`trainer.wiring.settings.Settings`, in ``--help``'s order."""
    rows = ["| Flag | Environment variable | Default | What |", "|---|---|---|---|"]
    for field, flag in settings.flags():
        default = "(none)" if field.default is None else f"`{json.dumps(field.default)}`"
        what = flag.help + (f"; one of {', '.join(flag.choices)}" if flag.choices else "")
        rows.append(f"| `{settings.flag_name(field)}` | `{settings.env_name(field)}` | {default} | {_cell(what)} |")
    return "\n".join(rows)


def value_comments(text: str) -> dict[str, str]:
    """The comment block right above each key of ``values.yaml`` (``image.tag``: dotted), joined."""
    out: dict[str, str] = {}
    comment: list[str] = []
    parents: list[tuple[int, str]] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            comment.append(stripped.lstrip("#").strip())
            continue
        key = re.match(r"^(\s*)([A-Za-z][\w-]*):", line)
        if key:
            indent = len(key[1])
            parents = [(i, k) for i, k in parents if i < indent]
            path = ".".join([k for _, k in parents] + [key[2]])
            if comment:
                out[path] = " ".join(comment)
            parents.append((indent, key[2]))
        comment = []
    return out


def leaves(values: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``(dotted key, default)`` of every value that is not a non-empty mapping."""
    if isinstance(values, dict) and values:
        for key, value in values.items():
            yield from leaves(value, f"{prefix}.{key}" if prefix else key)
    else:
        yield prefix, values


def values_table() -> str:
    """One row per leaf of ``values.yaml``, in its order, with the comment above it (or above the mapping
    it is the first of)."""
    text = VALUES.read_text()
    comments = value_comments(text)
    rows = ["| Value | Default | What |", "|---|---|---|"]
    told: set[str] = set()
    for key, default in leaves(yaml.safe_load(text)):
        own = comments.get(key, "")
        parts = key.split(".")
        for depth in range(len(parts) - 1, 0, -1):
            parent = ".".join(parts[:depth])
            if parent in comments and parent not in told:
                own = f"{comments[parent]} {own}".strip()
            told.add(parent)
        rows.append(f"| `{key}` | `{json.dumps(default)}` | {_cell(own)} |")
    return "\n".join(rows)


def first_sentence(docstring: str) -> str:
    """The first sentence of a docstring's first paragraph, on one line: up to its first ``.``, ``:`` or
    ``;`` that ends a word outside parentheses; Sphinx roles (``:mod:`x```) and double backquotes become
    Markdown code."""
    paragraph = " ".join(docstring.split("\n\n")[0].split())
    paragraph = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", paragraph).replace("``", "`")
    for found in re.finditer(r"[.:;](?:\s|$)", paragraph):
        head = paragraph[: found.start()]
        if head.count("(") == head.count(")"):
            return head
    return paragraph


def modules_table() -> str:
    """``| module | what it is |``: every module of ``trainer/api/`` and ``trainer/`` with a body, in path order.
    Raises ``ValueError`` naming a module without a docstring."""
    rows = ["| Module | What it is |", "|---|---|"]
    for path in sorted((ROOT / "trainer").rglob("*.py")):
        text = path.read_text()
        if not text.strip():
            continue  # an empty package marker
        doc = ast.get_docstring(ast.parse(text))
        rel = path.relative_to(ROOT).as_posix()
        if not doc:
            raise ValueError(f"{rel} has no docstring: say in its first sentence what it is")
        rows.append(f"| `{rel}` | {_cell(first_sentence(doc))} |")
    return "\n".join(rows)


@dataclass(frozen=True)
class Table:
    """A generated table of ``page``, between ``<!-- NAME: generated by ... -->`` and
    ``<!-- end of NAME -->``."""

    name: str
    source: str
    render: Callable[[], str]
    page: Path = DOCS_PAGE

    @property
    def start(self) -> str:
        return f"<!-- {self.name}: generated by `{COMMAND}` from {self.source} -->\n"

    @property
    def end(self) -> str:
        return f"<!-- end of {self.name} -->\n"

    def block(self) -> str:
        return self.start + self.render() + "\n" + self.end


TABLES = [
    Table("support matrix", "localcluster/versions.env, pyproject.toml and the Dockerfile", support_table),
    Table("flags table", "trainer/wiring/settings.py", flags_table),
    Table("helm values table", "charts/trainer/values.yaml", values_table),
    Table("module map", "each module's docstring", modules_table, INTERNALS_PAGE),
]


def with_tables(page: str, path: Path = DOCS_PAGE) -> str:
    """``page`` (the text of ``path``) with every table of :data:`TABLES` on ``path`` rewritten between its
    markers. Raises ``ValueError`` when a marker is missing."""
    for table in (t for t in TABLES if t.page == path):
        start = page.index(table.start)
        end = page.index(table.end, start) + len(table.end)
        page = page[:start] + table.block() + page[end:]
    return page


def main(argv: list[str] | None = None) -> int:
    """Rewrite the tables (``--check``: only say whether they are stale, exit 1 if so)."""
    p = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 if a generated table of the docs is stale")
    args = p.parse_args(argv)
    stale = 0
    for path in dict.fromkeys(t.page for t in TABLES):
        page = path.read_text()
        current = with_tables(page, path)
        if current == page:
            continue
        stale += 1
        if args.check:
            print(f"stale: {path.relative_to(ROOT)} (run `{COMMAND}`)", file=sys.stderr)
        else:
            path.write_text(current)
            print(f"wrote {path.relative_to(ROOT)}", file=sys.stderr)
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
