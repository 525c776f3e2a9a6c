"""The operator's RBAC, rendered from the permissions its code declares.

A permission is declared in the module that uses it (:mod:`trainer.framework.permissions`): the
``PERMISSIONS`` of every module of :data:`DECLARING`, and what each controller's declaration implies
(:meth:`~trainer.framework.controller.Controller.permissions`: informers, owned objects, the status) under
every gang scheduler. ``python -m trainer.rbac`` renders them (``--check`` exits 1 when a file is stale):

* ``config/rbac/role.yaml``: the ClusterRole ``trainer-operator`` (what every gang scheduler needs);
* ``config/rbac/leader_election_role.yaml`` and ``config/rbac/webhook_certificates_role.yaml``: the Roles
  of the operator's own namespace (the permissions declared with their ``role``);
* ``config/overlays/<scheduler>/role_patch.yaml``: JSON patches adding what one gang scheduler's
  controllers need to the ClusterRole (none for ``kueue`` and ``none``);
* ``config/webhook/manifests.yaml``: the webhook configurations of
  :func:`trainer.webhook.server.configurations` (the ClusterRole lets the operator patch only those);
* the RBAC table of ``docs/operating.md`` (:func:`table`, between its markers).

``tests/tooling/test_rbac.py`` recomputes the grants from the code (informers, every ``Kube`` call site)
and requires them to equal these. Rules are rendered like controller-gen's: one rule per (apiGroup,
verbs, resourceNames), resources sorted.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from trainer.framework.kube.leader import ROLE as LEADER_ELECTION_ROLE
from trainer.framework.permissions import Grant, Permission, grants
from trainer.framework.tls import ROLE as CERTIFICATES_ROLE
from trainer.jobs import gang
from trainer.webhook import server as webhook
from trainer.wiring import Settings, controllers

__all__ = ["CERTIFICATES_ROLE", "CLUSTER_ROLE", "DECLARING", "LEADER_ELECTION_ROLE", "Grant", "grants"]

CONFIG = Path(__file__).resolve().parent.parent / "config"
CLUSTER_ROLE = "trainer-operator"
ROLE_FILES = {LEADER_ELECTION_ROLE: "leader_election_role.yaml", CERTIFICATES_ROLE: "webhook_certificates_role.yaml"}
"""The Roles of the operator's namespace and their files under ``config/rbac``."""
DECLARING = (
    "trainer.framework.delegated_auth",
    "trainer.framework.kube.events",
    "trainer.framework.kube.leader",
    "trainer.framework.tls",
    "trainer.jobs.child_writer",
    "trainer.main",
    "trainer.mpijob.controller",
    "trainer.mpijob.crd",
    "trainer.mpijob.upstream",
    "trainer.statusserver.auth",
    "trainer.statusserver.ca_publisher",
    "trainer.statusserver.server",
    "trainer.trainjob.controller",
    "trainer.trainjob.features.upstream_jobset",
    "trainer.webhook.server",
)
"""Every module with a module-level ``PERMISSIONS`` (the test checks this list against the source tree)."""


@cache
def declared() -> tuple[Permission, ...]:
    """The ``PERMISSIONS`` of every module of :data:`DECLARING`, in that order. Raises ``ImportError`` for a
    module that is gone, ``AttributeError`` for one that declares none."""
    return tuple(p for m in DECLARING for p in importlib.import_module(m).PERMISSIONS)


@cache
def needed(scheduler: str) -> tuple[Permission, ...]:
    """What the operator needs under ``--gang-scheduler-name=scheduler``: :func:`declared` and the
    permissions of its controllers, each once. Raises ``ValueError`` for an unknown scheduler."""
    implied = [
        p for c in controllers(Settings(gang_scheduler_name=scheduler), gang.get(scheduler)) for p in c.permissions()
    ]
    return tuple(dict.fromkeys([*declared(), *implied]))


def operator() -> list[Permission]:
    """The ClusterRole's permissions: those every gang scheduler needs."""
    return [p for p in needed("none") if p.role is None and all(p in needed(s) for s in gang.SCHEDULERS)]


def gang_only(scheduler: str) -> list[Permission]:
    """What ``scheduler`` adds to the ClusterRole."""
    common = set(operator())
    return [p for p in needed(scheduler) if p.role is None and p not in common]


def in_role(role: str) -> list[Permission]:
    """The permissions the Role ``role`` of the operator's namespace grants."""
    return [p for p in declared() if p.role == role]


def policy_rules(permissions: list[Permission]) -> list[dict[str, Any]]:
    """RBAC ``PolicyRule``s: one per (apiGroup, verbs, resourceNames), resources, verbs and names sorted;
    ``resourceNames`` only on rules restricted to named objects."""
    by_resource: dict[tuple[str, str, str], set[str]] = {}
    for group, resource, verb, name in grants(permissions):
        by_resource.setdefault((group, resource, verb), set()).add(name)
    by_grant: dict[tuple[str, str, tuple[str, ...]], set[str]] = {}
    for (group, resource, verb), named in by_resource.items():
        # A verb granted on any object needs no names beside it.
        by_grant.setdefault((group, resource, () if "" in named else tuple(sorted(named))), set()).add(verb)
    by_verbs: dict[tuple[str, tuple[str, ...], tuple[str, ...]], list[str]] = {}
    for (group, resource, names), granted in by_grant.items():
        by_verbs.setdefault((group, tuple(sorted(granted)), names), []).append(resource)
    out = []
    for (group, verbs, names), resources in sorted(by_verbs.items()):
        rule: dict[str, Any] = {"apiGroups": [group], "resources": sorted(resources)}
        if names:
            rule["resourceNames"] = list(names)
        rule["verbs"] = list(verbs)
        out.append(rule)
    return out


def role(kind: str, name: str, permissions: list[Permission]) -> dict[str, Any]:
    """The ``kind`` (ClusterRole, Role) ``name`` granting ``permissions`` (a Role's namespace comes from
    kustomize)."""
    meta = {"name": name}
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": meta,
        "rules": policy_rules(permissions),
    }


def cluster_role() -> dict[str, Any]:
    """The ClusterRole ``trainer-operator``."""
    return role("ClusterRole", CLUSTER_ROLE, operator())


HEADER = "# Generated by `python -m trainer.rbac` from trainer/rbac.py; do not edit.\n"


def files() -> dict[Path, str]:
    """Every generated file and its text. Raises ``ValueError`` for a permission of a Role with no file."""
    unknown = {p.role for p in declared()} - {None, *ROLE_FILES}
    if unknown:
        raise ValueError(f"permissions of Roles with no file in trainer.rbac.ROLE_FILES: {sorted(map(str, unknown))}")
    out = {CONFIG / "rbac" / "role.yaml": HEADER + yaml.safe_dump(cluster_role(), sort_keys=False)}
    for name, file in ROLE_FILES.items():
        out[CONFIG / "rbac" / file] = HEADER + yaml.safe_dump(role("Role", name, in_role(name)), sort_keys=False)
    out[CONFIG / "webhook" / "manifests.yaml"] = webhook.render()
    for scheduler in gang.SCHEDULERS:
        patch = [{"op": "add", "path": "/rules/-", "value": r} for r in policy_rules(gang_only(scheduler))]
        if patch:
            out[CONFIG / "overlays" / scheduler / "role_patch.yaml"] = HEADER + yaml.safe_dump(patch, sort_keys=False)
    return out


DOCS_PAGE = CONFIG.parent / "docs" / "operating.md"
"""The docs page holding the RBAC table."""
TABLE_START = "<!-- rbac table: generated by `python -m trainer.rbac` from trainer/rbac.py -->\n"
TABLE_END = "<!-- end of rbac table -->\n"


def table() -> str:
    """The docs' RBAC table (Markdown): one row per permission of the ClusterRole, of each gang scheduler's
    additions and of the Roles, by resource, with where it applies, its ``resourceNames``, why and the
    module that declared it."""
    rows = ["| Resource | Verbs | Where | Why (declared in) |", "|---|---|---|---|"]
    sections = [
        ("cluster-wide", operator()),
        *((f"cluster-wide, `{g}` only", gang_only(g)) for g in gang.SCHEDULERS),
        *((f"operator's namespace (Role `{r}`)", in_role(r)) for r in ROLE_FILES),
    ]
    for where, permissions in sections:
        whys: dict[tuple[str, str, str, str], list[str]] = {}  # one row for what differs only in why
        for p in sorted(permissions, key=lambda p: (p.resource.group, p.name, p.module)):
            res = p.resource.plural + (f".{p.resource.group}" if p.resource.group else "")
            named = f", only {', '.join(f'`{n}`' for n in p.names)}" if p.names else ""
            whys.setdefault(
                (res + (f"/{p.subresource}" if p.subresource else ""), ", ".join(p.verbs), named, p.module), []
            ).append(p.why)
        for (res, verbs, named, module), why in whys.items():
            rows.append(f"| `{res}` | {verbs} | {where}{named} | {'; '.join(why)} (`{module}`) |")
    return TABLE_START + "\n".join(rows) + "\n" + TABLE_END


def with_table(page: str) -> str:
    """``page`` with the text between :data:`TABLE_START` and :data:`TABLE_END` replaced by
    :func:`table`. Raises ``ValueError`` when the markers are missing."""
    start, end = page.index(TABLE_START), page.index(TABLE_END) + len(TABLE_END)
    return page[:start] + table() + page[end:]


def main(argv: list[str] | None = None) -> int:
    """Write the files (``--check``: only report stale ones, exit 1 if any)."""
    p = argparse.ArgumentParser(prog="python -m trainer.rbac", description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 if a checked-in file differs")
    args = p.parse_args(argv)
    stale = []
    for path, text in {**files(), DOCS_PAGE: with_table(DOCS_PAGE.read_text())}.items():
        if path.exists() and path.read_text() == text:
            continue
        stale.append(path)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    for path in stale:
        print(f"{'stale' if args.check else 'wrote'} {path.relative_to(CONFIG.parent)}", file=sys.stderr)
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
