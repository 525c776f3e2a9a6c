"""Permissions declared beside the code that needs them, as kubebuilder's ``+kubebuilder:rbac`` markers are.

A module that calls the apiserver declares what it asks for in a module-level ``PERMISSIONS`` tuple of
:class:`Permission`; each records the module that made it (:attr:`Permission.module`), so a "why" never
names a file by hand and a module that goes takes its permissions with it. A controller's declaration
(:class:`~trainer.framework.controller.Controller`) implies the rest: ``list``/``watch`` on its primary
and on what it owns and watches (their informers), and on what it owns the verbs its
:class:`~trainer.framework.controller.Owns` says (:meth:`~trainer.framework.controller.Controller.permissions`).

:mod:`trainer.render.rbac` collects both and renders them (:func:`policy_rules`: RBAC rules as controller-gen
writes them) into the ClusterRole, the Roles of the operator's namespace and the docs' table.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from trainer.api.kinds import Resource

__all__ = ["APPLY", "OWNED", "VERBS", "WATCH", "Grant", "Permission", "grants", "policy_rules"]

WATCH = ("list", "watch")
"""What an informer asks: list, then watch from the list's resourceVersion."""
APPLY = ("create", "patch")
"""Server-side apply is a PATCH; when the object does not exist yet the apiserver also checks the
``create`` verb (``staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go``)."""
OWNED = (*APPLY, "get", "delete")
"""What a controller does to the objects it owns unless its declaration says otherwise: server-side
apply, get (whose is an object named like a child, on a create's 409) and delete."""
VERBS = frozenset({"get", "list", "watch", "create", "update", "patch", "delete"})
"""The verbs a :class:`Permission` may name (no ``deletecollection``, no wildcard)."""

Grant = tuple[str, str, str, str]
"""``(apiGroup, resource or resource/subresource, verb, resourceName)``; resourceName ``""``: any object."""


def _declaring_module() -> str:
    """The ``__name__`` of the module whose code made the :class:`Permission` (frame 0: here, 1: the
    dataclass's ``__init__``, 2: the caller)."""
    return str(sys._getframe(2).f_globals.get("__name__", "?"))


@dataclass(frozen=True)
class Permission:
    """``verbs`` on ``resource`` (its ``subresource`` when set), only on the objects ``names`` when given,
    granted by the ClusterRole (``role`` None) or by the Role ``role`` in the operator's own namespace,
    and why the declaring module needs them. Raises ``ValueError`` for no verb, an unknown verb (a
    wildcard), or names beside ``create`` (RBAC cannot restrict ``create`` by name: the name is in the
    body, not the URL)."""

    resource: Resource
    verbs: tuple[str, ...]
    why: str
    subresource: str | None = None
    names: tuple[str, ...] = ()
    role: str | None = None
    """The Role in the operator's namespace that grants it (e.g. ``trainer-leader-election``); None: the
    ClusterRole, cluster-wide."""
    module: str = field(default_factory=_declaring_module)
    """The module that declared it: recorded where the Permission is made, not written by hand."""

    def __post_init__(self) -> None:
        unknown = sorted(set(self.verbs) - VERBS)
        if not self.verbs or unknown:
            raise ValueError(f"{self.module}: {self.name}: verbs {list(self.verbs)} (unknown: {unknown})")
        if self.names and "create" in self.verbs:
            raise ValueError(f"{self.module}: {self.name}: RBAC cannot restrict create by name")

    @property
    def name(self) -> str:
        """``plural`` or ``plural/subresource``, as RBAC names it."""
        return self.resource.plural + (f"/{self.subresource}" if self.subresource else "")

    def grants(self) -> set[Grant]:
        """Every ``(apiGroup, resource, verb, resourceName)`` it grants, resourceName ``""`` for any object."""
        return {(self.resource.group, self.name, verb, name) for verb in self.verbs for name in self.names or ("",)}


def grants(permissions: list[Permission]) -> set[Grant]:
    """Every ``(apiGroup, resource, verb, resourceName)`` the permissions grant (empty for none)."""
    return set().union(*(p.grants() for p in permissions)) if permissions else set()


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
