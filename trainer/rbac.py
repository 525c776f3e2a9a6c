"""The operator's RBAC, in one table: every (resource, verbs, resourceNames) the operator's code uses,
where (cluster-wide or in its own namespace), and why.

``python -m trainer.rbac`` renders it into the checked-in manifests (``--check`` exits 1 when one is
stale, as ``tests/tooling/test_rbac.py`` does):

* ``config/rbac/role.yaml``: the ClusterRole ``trainer-operator`` (what every gang scheduler needs);
* ``config/rbac/leader_election_role.yaml``: the Role ``trainer-leader-election`` for the Lease, in
  the operator's own namespace only (as kubebuilder scaffolds it);
* ``config/rbac/webhook_certificates_role.yaml``: the Role ``trainer-webhook-certificates`` for the
  webhook's and the status server's certificate Secrets, in the operator's own namespace only;
* ``config/overlays/<scheduler>/role_patch.yaml``: JSON patches adding what one gang scheduler needs
  to the ClusterRole (``volcano``, ``scheduler-plugins``; ``kueue`` needs nothing: Kueue suspends
  and resumes the jobs itself, and the MPIJob label copy is a patch of mpijobs, already granted);
* ``config/webhook/manifests.yaml``: the webhook configurations of
  :func:`trainer.webhook.server.configurations`, installed with the operator (the ClusterRole lets
  it patch only those, by name);
* the RBAC table of ``docs/operating.md`` (:func:`table`, between its markers).

No wildcard anywhere; ``resourceNames`` wherever the verb allows them (``create`` carries its name in
the body, not the URL, so RBAC cannot restrict it by name; ``list``/``watch`` can be, for requests
with the ``metadata.name`` field selector). ``tests/tooling/test_rbac.py`` recomputes the set from the
code (the informers the Manager and the certificate keepers start, every ``Kube`` call site, its
namespace and name, and the objects the reconcilers apply) and requires it to equal this table, so a
new call without its rule, or a rule no code uses, fails there.

Rules are rendered like controller-gen's: one rule per (apiGroup, verbs, resourceNames), resources
sorted.
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
    CRDS,
    EVENTS,
    JOBS,
    JOBSETS,
    KUEUE_LOCAL_QUEUES,
    LEASES,
    MPIJOBS,
    MUTATING_WEBHOOKS,
    NETWORK_POLICIES,
    PERSISTENT_VOLUME_CLAIMS,
    POD_DISRUPTION_BUDGETS,
    POD_GROUPS,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    SECRETS,
    SERVICES,
    SUBJECT_ACCESS_REVIEWS,
    TOKEN_REVIEWS,
    TRAINING_RUNTIMES,
    TRAINJOBS,
    VALIDATING_WEBHOOKS,
    VOLCANO_PODGROUPS,
    VOLCANO_QUEUES,
    WORKLOADS,
    Resource,
)
from trainer.framework.probes import METRICS_SECRET
from trainer.framework.tls import SECRET_NAME as WEBHOOK_SECRET
from trainer.mpijob.crd import CRD_NAME as MPIJOB_CRD
from trainer.statusserver.server import SECRET_NAME as STATUS_SERVER_SECRET
from trainer.webhook import server as webhook

CONFIG = Path(__file__).resolve().parent.parent / "config"
CLUSTER_ROLE = "trainer-operator"
LEADER_ELECTION_ROLE = "trainer-leader-election"
CERTIFICATES_ROLE = "trainer-webhook-certificates"

Grant = tuple[str, str, str, str]
"""``(apiGroup, resource, verb, resourceName)``; resourceName ``""``: any object."""
WATCH = ("list", "watch")
APPLY = ("create", "patch")
"""Server-side apply is a PATCH; when the object does not exist yet the apiserver also checks the
``create`` verb (``staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go``)."""


@dataclass(frozen=True)
class Rule:
    """``verbs`` on ``resource`` (its ``subresource`` when set), only on the objects ``names`` when
    given, and the code that needs them."""

    resource: Resource
    verbs: tuple[str, ...]
    why: str
    subresource: str | None = None
    names: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """``plural`` or ``plural/subresource``, as RBAC names it."""
        return self.resource.plural + (f"/{self.subresource}" if self.subresource else "")

    def grants(self) -> set[Grant]:
        """``(apiGroup, resource, verb, resourceName)``, resourceName ``""`` for any object."""
        return {(self.resource.group, self.name, verb, name) for verb in self.verbs for name in self.names or ("",)}


OPERATOR: list[Rule] = [
    Rule(TRAINJOBS, (*WATCH, "delete"), "informer (manager.py); ttlSecondsAfterFinished and runPolicy's (KEP-2899)"),
    Rule(TRAINJOBS, ("patch",), "status conditions and jobsStatus (trainer/jobs/status_writer.py)", "status"),
    Rule(
        TRAINJOBS,
        ("update",),
        "children's ownerReferences set blockOwnerDeletion, which the OwnerReferencesPermissionEnforcement "
        "admission plugin allows only to who may update the owner's finalizers (trainer/framework/owner.py)",
        "finalizers",
    ),
    Rule(TRAINING_RUNTIMES, WATCH, "informer (manager.py)"),
    Rule(
        RESOURCE_CLAIM_TEMPLATES,
        WATCH,
        "informer: the GPUs a TrainJob's DRA claims count, and whether the cluster serves resource.k8s.io/v1 "
        "(trainjob/features/devices.py, KEP-2782)",
    ),
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
        JOBSETS,
        (*WATCH, "delete"),
        "the JobSets Kubeflow Trainer made of TrainJobs: informer; a suspended one's is deleted, and one past its "
        "TrainJob's deadline (trainjob/features/upstream_jobset.py)",
    ),
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
        "the MPI SSH key Secrets the jobs own, in the jobs' namespaces: the informer of owned Secrets lists "
        "and watches by label, which RBAC cannot narrow (so list/watch grant reading every Secret), create "
        "cannot be narrowed by name, apply is a patch; get: whose is a Secret named like a child, on a "
        "create's 409 (reconciler/child_writer.py); deleted with ttlSecondsAfterFinished",
    ),
    Rule(
        PERSISTENT_VOLUME_CLAIMS,
        (*WATCH, *APPLY, "get", "delete"),
        "informer (children only, by label); volumeClaimPolicies (get: as for jobs); ttlSecondsAfterFinished",
    ),
    Rule(
        POD_DISRUPTION_BUDGETS,
        (*WATCH, *APPLY, "get", "delete"),
        "informer (children only, by label); a gang TrainJob's budget (get: as for jobs); deleted once it finished "
        "(trainjob/features/disruption.py)",
    ),
    Rule(
        NETWORK_POLICIES,
        (*WATCH, *APPLY, "get", "delete"),
        "informer (children only, by label); a TrainJob's under --trainjob-network-policy (get: as for jobs); deleted "
        "once it finished or the flag is off (trainjob/features/network_policy.py)",
    ),
    Rule(
        VALIDATING_WEBHOOKS,
        ("get", "patch"),
        "read, then patch only the caBundle of the configuration installed with the operator (webhook/server.py)",
        names=(webhook.CONFIG_NAME,),
    ),
    Rule(
        MUTATING_WEBHOOKS,
        ("get", "patch"),
        "read, then patch only the caBundle of the configuration installed with the operator (webhook/server.py)",
        names=(webhook.CONFIG_NAME,),
    ),
    Rule(KUEUE_LOCAL_QUEUES, ("get",), "admission warns when a Kueue LocalQueue is missing (webhook/server.py)"),
    Rule(
        EVENTS,
        (*WATCH, "create", "patch"),
        "informer of the Job controller's FailedCreate events (replica_failure.py); events, repeats as a series "
        "(kube/events.py)",
    ),
    Rule(
        TOKEN_REVIEWS,
        ("create",),
        "the status server checks trainer pods' bearer tokens (statusserver/auth.py); --metrics-secure: the "
        "scraper's (framework/delegated_auth.py)",
    ),
    Rule(
        SUBJECT_ACCESS_REVIEWS,
        ("create",),
        "--metrics-secure: may the scraper's token get /metrics (framework/delegated_auth.py)",
    ),
    Rule(PODS, ("get",), "the status server checks a token's pod belongs to the TrainJob (statusserver/auth.py)"),
    Rule(
        PODS,
        (*WATCH, "delete"),
        "the worker Pods of MPIJobs mpi-operator started: informer (by label), deleted when such an MPIJob is "
        "suspended and as its cleanPodPolicy says once it finished (mpijob/upstream.py)",
    ),
    Rule(
        CRDS,
        ("get",),
        "at startup, whether the MPIJob CRD serves v2beta1 (training-operator v1's serves v1 only: mpijob/crd.py)",
        names=(MPIJOB_CRD,),
    ),
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

CERTIFICATES: list[Rule] = [
    Rule(
        SECRETS,
        ("get", "update", *WATCH),
        "the certificate Secrets of the webhook, the status server and --metrics-secure: read, watch (by name), "
        "rotate (webhook/tls.py)",
        names=(WEBHOOK_SECRET, STATUS_SERVER_SECRET, METRICS_SECRET),
    ),
    Rule(
        SECRETS,
        ("create",),
        "the first replica writes the certificate Secrets; RBAC cannot restrict create by name (the name is in "
        "the body, not the URL), so this is any Secret, in the operator's namespace only (webhook/tls.py)",
    ),
]
"""The Role in the operator's namespace (``--webhook-namespace``), for ``--webhook-port`` and
``--status-server-port``."""

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
    "workload": [
        Rule(
            WORKLOADS,
            (*WATCH, "create", "get", "patch"),
            "informer; one Workload per job, created once and never changed (get, patch: a create's 409 on one "
            "the job controls is read and labelled, reconciler/child_writer.py) (gang/workload.py)",
        ),
        Rule(
            POD_GROUPS,
            (*WATCH, "create", "get", "patch"),
            "informer; a PodGroup per group of the Workload, created once (get, patch: as for workloads)",
        ),
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


def grants(rules: list[Rule]) -> set[Grant]:
    """Every ``(apiGroup, resource, verb, resourceName)`` the rules grant."""
    return set().union(*(r.grants() for r in rules)) if rules else set()


def policy_rules(rules: list[Rule]) -> list[dict[str, Any]]:
    """RBAC ``PolicyRule``s: one per (apiGroup, verbs, resourceNames), resources, verbs and names sorted;
    ``resourceNames`` only on rules restricted to named objects."""
    by_resource: dict[tuple[str, str, str], set[str]] = {}
    for group, resource, verb, name in grants(rules):
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


def _role(kind: str, name: str, rules: list[Rule]) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "rules": policy_rules(rules),
    }


def cluster_role() -> dict[str, Any]:
    """The ClusterRole ``trainer-operator``."""
    return _role("ClusterRole", CLUSTER_ROLE, OPERATOR)


def leader_election_role() -> dict[str, Any]:
    """The Role ``trainer-leader-election`` (its namespace comes from kustomize)."""
    return _role("Role", LEADER_ELECTION_ROLE, LEADER_ELECTION)


def certificates_role() -> dict[str, Any]:
    """The Role ``trainer-webhook-certificates`` (its namespace comes from kustomize)."""
    return _role("Role", CERTIFICATES_ROLE, CERTIFICATES)


def gang_patch(scheduler: str) -> list[dict[str, Any]]:
    """JSON patch operations appending the rules of ``scheduler`` to the ClusterRole."""
    return [{"op": "add", "path": "/rules/-", "value": rule} for rule in policy_rules(GANG[scheduler])]


HEADER = "# Generated by `python -m trainer.rbac` from trainer/rbac.py; do not edit.\n"


def files() -> dict[Path, str]:
    """Every generated file and its text."""
    out = {
        CONFIG / "rbac" / "role.yaml": HEADER + yaml.safe_dump(cluster_role(), sort_keys=False),
        CONFIG / "rbac" / "leader_election_role.yaml": HEADER + yaml.safe_dump(leader_election_role(), sort_keys=False),
        CONFIG / "rbac" / "webhook_certificates_role.yaml": HEADER
        + yaml.safe_dump(certificates_role(), sort_keys=False),
        CONFIG / "webhook" / "manifests.yaml": webhook.render(),
    }
    for scheduler, rules in GANG.items():
        if rules:
            out[CONFIG / "overlays" / scheduler / "role_patch.yaml"] = HEADER + yaml.safe_dump(
                gang_patch(scheduler), sort_keys=False
            )
    return out


DOCS_PAGE = CONFIG.parent / "docs" / "operating.md"
"""The docs page holding the RBAC table."""
TABLE_START = "<!-- rbac table: generated by `python -m trainer.rbac` from trainer/rbac.py -->\n"
TABLE_END = "<!-- end of rbac table -->\n"


def table() -> str:
    """The docs' RBAC table (Markdown): one row per rule of the ClusterRole, the gang schedulers'
    additions and the two Roles, with where it applies (cluster-wide, or the operator's namespace),
    its ``resourceNames`` and why."""
    rows = ["| Resource | Verbs | Where | Why |", "|---|---|---|---|"]
    sections: list[tuple[str, list[Rule]]] = [
        ("cluster-wide", OPERATOR),
        *((f"cluster-wide, `{g}` only", rules) for g, rules in GANG.items()),
        ("operator's namespace", LEADER_ELECTION + CERTIFICATES),
    ]
    for where, rules in sections:
        for rule in rules:
            res = rule.resource.plural + (f".{rule.resource.group}" if rule.resource.group else "")
            res += f"/{rule.subresource}" if rule.subresource else ""
            named = f", only {', '.join(f'`{n}`' for n in rule.names)}" if rule.names else ""
            rows.append(f"| `{res}` | {', '.join(rule.verbs)} | {where}{named} | {rule.why} |")
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
