"""The operator's RBAC, in one table: every (resource, verbs) the operator's code uses, and why.

``python -m trainer.rbac`` renders it into the checked-in manifests (``--check`` exits 1 when one is
stale, as ``tests/tooling/test_rbac.py`` does):

* ``config/rbac/role.yaml``: the ClusterRole ``trainer-operator`` (what every gang scheduler needs);
* ``config/rbac/leader_election_role.yaml``: the Role ``trainer-leader-election`` for the Lease, in
  the operator's own namespace only (as kubebuilder scaffolds it);
* ``config/overlays/<scheduler>/role_patch.yaml``: JSON patches adding what one gang scheduler needs
  to the ClusterRole (``volcano``, ``scheduler-plugins``; ``kueue`` needs nothing: Kueue suspends
  and resumes the jobs itself, and the MPIJob label copy is a patch of mpijobs, already granted).

No wildcard anywhere. ``tests/tooling/test_rbac.py`` recomputes the set from the code (the informers the
Manager starts, every ``Kube`` call site and the objects the reconcilers apply) and requires it to
equal this table, so a new call without its rule, or a rule no code uses, fails there.

Rules are rendered like controller-gen's: one rule per (apiGroup, verbs), resources sorted.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from api.kinds import (
    CLUSTER_TRAINING_RUNTIMES,
    CONFIGMAPS,
    COSCHEDULING_PODGROUPS,
    EVENTS,
    JOBS,
    KUEUE_LOCAL_QUEUES,
    LEASES,
    MPIJOBS,
    MUTATING_WEBHOOKS,
    PERSISTENT_VOLUME_CLAIMS,
    PODS,
    SECRETS,
    SERVICES,
    TOKEN_REVIEWS,
    TRAINING_RUNTIMES,
    TRAINJOBS,
    VALIDATING_WEBHOOKS,
    VOLCANO_PODGROUPS,
    VOLCANO_QUEUES,
    Resource,
)

CONFIG = Path(__file__).resolve().parent.parent / "config"
CLUSTER_ROLE = "trainer-operator"
LEADER_ELECTION_ROLE = "trainer-leader-election"

WATCH = ("list", "watch")
APPLY = ("create", "patch")
"""Server-side apply is a PATCH; when the object does not exist yet the apiserver also checks the
``create`` verb (``staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go``)."""


@dataclass(frozen=True)
class Rule:
    """``verbs`` on ``resource`` (its ``subresource`` when set), and the code that needs them."""

    resource: Resource
    verbs: tuple[str, ...]
    why: str
    subresource: str | None = None

    @property
    def name(self) -> str:
        """``plural`` or ``plural/subresource``, as RBAC names it."""
        return self.resource.plural + (f"/{self.subresource}" if self.subresource else "")

    def grants(self) -> set[tuple[str, str, str]]:
        """``(apiGroup, resource, verb)`` triples."""
        return {(self.resource.group, self.name, verb) for verb in self.verbs}


OPERATOR: list[Rule] = [
    Rule(TRAINJOBS, WATCH, "informer (manager.py)"),
    Rule(TRAINJOBS, ("patch",), "status conditions and jobsStatus (controllers/trainjob.py)", "status"),
    Rule(
        TRAINJOBS,
        ("update",),
        "children's ownerReferences set blockOwnerDeletion, which the OwnerReferencesPermissionEnforcement "
        "admission plugin allows only to who may update the owner's finalizers (builders/labels.py)",
        "finalizers",
    ),
    Rule(TRAINING_RUNTIMES, WATCH, "informer (manager.py)"),
    Rule(CLUSTER_TRAINING_RUNTIMES, WATCH, "informer (manager.py)"),
    Rule(MPIJOBS, (*WATCH, "patch", "delete"), "informer; Kueue queue label; ttlSecondsAfterFinished"),
    Rule(MPIJOBS, ("patch",), "status (controllers/mpijob.py)", "status"),
    Rule(MPIJOBS, ("update",), "blockOwnerDeletion on children, as for trainjobs", "finalizers"),
    Rule(
        JOBS,
        (*WATCH, *APPLY, "get", "delete"),
        "informers; create, apply (get: whose is an object named like a child, on a create's 409, and taking "
        "over a create's fields, reconciler/child_writer.py); finished jobs, restarts, TTL, cleanPodPolicy",
    ),
    Rule(JOBS, ("patch",), "clearing startTime of a suspended Job (controllers/reconciler.py)", "status"),
    Rule(
        SERVICES,
        (*WATCH, *APPLY, "get", "delete"),
        "informers; the headless Service (get: as for jobs); ttlSecondsAfterFinished",
    ),
    Rule(
        CONFIGMAPS,
        (*WATCH, *APPLY, "get", "delete"),
        "informers; hostfiles, runtime snapshots (get: as for jobs); ttlSecondsAfterFinished",
    ),
    Rule(
        SECRETS,
        (*WATCH, *APPLY, "get", "delete"),
        "informers (children only, by label); SSH keys (get: as for jobs); ttlSecondsAfterFinished",
    ),
    Rule(
        PERSISTENT_VOLUME_CLAIMS,
        (*WATCH, *APPLY, "get", "delete"),
        "informer (children only, by label); volumeClaimPolicies (get: as for jobs); ttlSecondsAfterFinished",
    ),
    Rule(SECRETS, ("get", "update"), "the webhook's certificate Secret: read, rotate (webhook/tls.py)"),
    Rule(VALIDATING_WEBHOOKS, APPLY, "the operator applies its own webhook configurations (webhook/server.py)"),
    Rule(MUTATING_WEBHOOKS, APPLY, "the operator applies its own webhook configurations (webhook/server.py)"),
    Rule(KUEUE_LOCAL_QUEUES, ("get",), "admission warns when a Kueue LocalQueue is missing (webhook/server.py)"),
    Rule(EVENTS, ("create", "patch"), "events, repeats as a series (kube/events.py)"),
    Rule(TOKEN_REVIEWS, ("create",), "the status server checks trainer pods' bearer tokens (statusserver/auth.py)"),
    Rule(PODS, ("get",), "the status server checks a token's pod belongs to the TrainJob (statusserver/auth.py)"),
    Rule(
        JOBS,
        ("get",),
        "the status server reads the Job controlling a token's pod when its cache lacks it (statusserver/auth.py)",
    ),
    Rule(
        TRAINJOBS,
        ("get",),
        "the status server reads the TrainJob a token's pod chain must reach when its cache lacks it, e.g. before "
        "the caches synced (statusserver/auth.py)",
    ),
]
"""The ClusterRole: what the operator needs whatever its gang scheduler."""

LEADER_ELECTION: list[Rule] = [
    Rule(LEASES, ("get", "create", "update"), "leader election: read, create, compare-and-swap (kube/leader.py)"),
]
"""The Role in the operator's namespace, for ``--leader-elect``."""

GANG: dict[str, list[Rule]] = {
    "none": [],
    "kueue": [],
    "volcano": [
        Rule(
            VOLCANO_PODGROUPS,
            (*WATCH, *APPLY, "get", "delete"),
            "informer; one PodGroup per job (get: as for jobs); deleted when done",
        ),
        Rule(VOLCANO_QUEUES, WATCH, "informer: queue checks (gang/volcano.py)"),
    ],
    "scheduler-plugins": [
        Rule(
            COSCHEDULING_PODGROUPS,
            (*WATCH, *APPLY, "get", "delete"),
            "informer; one PodGroup per job (get: as for jobs); deleted when done",
        ),
    ],
}
"""What each ``--gang-scheduler-name`` adds to the ClusterRole."""


def grants(rules: list[Rule]) -> set[tuple[str, str, str]]:
    """Every ``(apiGroup, resource, verb)`` the rules grant."""
    return set().union(*(r.grants() for r in rules)) if rules else set()


def policy_rules(rules: list[Rule]) -> list[dict[str, Any]]:
    """RBAC ``PolicyRule``s: one per (apiGroup, verbs), resources and verbs sorted."""
    by_resource: dict[tuple[str, str], set[str]] = {}
    for group, resource, verb in grants(rules):
        by_resource.setdefault((group, resource), set()).add(verb)
    by_verbs: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for (group, resource), verbs in by_resource.items():
        by_verbs.setdefault((group, tuple(sorted(verbs))), []).append(resource)
    return [
        {"apiGroups": [group], "resources": sorted(resources), "verbs": list(verbs)}
        for (group, verbs), resources in sorted(by_verbs.items())
    ]


def cluster_role() -> dict[str, Any]:
    """The ClusterRole ``trainer-operator``."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": CLUSTER_ROLE},
        "rules": policy_rules(OPERATOR),
    }


def leader_election_role() -> dict[str, Any]:
    """The Role ``trainer-leader-election`` (its namespace comes from kustomize)."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": LEADER_ELECTION_ROLE},
        "rules": policy_rules(LEADER_ELECTION),
    }


def gang_patch(scheduler: str) -> list[dict[str, Any]]:
    """JSON patch operations appending the rules of ``scheduler`` to the ClusterRole."""
    return [{"op": "add", "path": "/rules/-", "value": rule} for rule in policy_rules(GANG[scheduler])]


HEADER = "# Generated by `python -m trainer.rbac` from trainer/rbac.py; do not edit.\n"


def files() -> dict[Path, str]:
    """Every generated file and its text."""
    out = {
        CONFIG / "rbac" / "role.yaml": HEADER + yaml.safe_dump(cluster_role(), sort_keys=False),
        CONFIG / "rbac" / "leader_election_role.yaml": HEADER + yaml.safe_dump(leader_election_role(), sort_keys=False),
    }
    for scheduler, rules in GANG.items():
        if rules:
            out[CONFIG / "overlays" / scheduler / "role_patch.yaml"] = HEADER + yaml.safe_dump(
                gang_patch(scheduler), sort_keys=False
            )
    return out


def main(argv: list[str] | None = None) -> int:
    """Write the files (``--check``: only report stale ones, exit 1 if any)."""
    p = argparse.ArgumentParser(prog="python -m trainer.rbac", description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 if a checked-in file differs")
    args = p.parse_args(argv)
    stale = []
    for path, text in files().items():
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
