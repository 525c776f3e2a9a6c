"""A :class:`Permission` records the module that made it and refuses what RBAC cannot grant; a controller's
declaration implies its informers' list/watch and the verbs of what it owns; rules render like
controller-gen's."""

from __future__ import annotations

import pytest

from trainer.api.kinds import CONFIGMAPS, EVENTS, JOBS, SECRETS, TRAINJOBS, WORKLOADS
from trainer.framework.controller import Context, Controller, Owns, Reconcile, Watches, every_primary
from trainer.framework.permissions import OWNED, WATCH, Permission, grants, policy_rules


def _build(_ctx: Context) -> Reconcile:
    raise AssertionError("never built")


def test_a_permission_records_the_module_that_made_it() -> None:
    assert Permission(JOBS, ("get",), "why").module == __name__


def test_a_permission_refuses_what_rbac_cannot_grant() -> None:
    with pytest.raises(ValueError, match="unknown"):
        Permission(JOBS, ("*",), "why")
    with pytest.raises(ValueError, match="unknown"):
        Permission(JOBS, (), "why")
    with pytest.raises(ValueError, match="cannot restrict create by name"):
        Permission(SECRETS, ("create",), "why", names=("x",))


def test_grants_name_the_subresource_and_the_objects() -> None:
    status = Permission(TRAINJOBS, ("patch",), "why", "status")
    named = Permission(SECRETS, ("get",), "why", names=("a", "b"))
    assert grants([status, named]) == {
        ("trainer.kubeflow.org", "trainjobs/status", "patch", ""),
        ("", "secrets", "get", "a"),
        ("", "secrets", "get", "b"),
    }
    assert grants([]) == set()


def test_policy_rules_group_resources_by_verbs_and_drop_names_a_wider_grant_covers() -> None:
    rules = policy_rules(
        [
            Permission(SECRETS, ("get", "list"), "why"),
            Permission(CONFIGMAPS, ("list", "get"), "why"),
            Permission(SECRETS, ("get",), "why", names=("a",)),
            Permission(SECRETS, ("update",), "why", names=("a",)),
        ]
    )
    assert rules == [
        {"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": ["get", "list"]},
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a"], "verbs": ["update"]},
    ]


def test_a_controller_declaration_implies_its_permissions() -> None:
    needs = Permission(TRAINJOBS, ("patch",), "status", "status")
    c = Controller(
        "x",
        TRAINJOBS,
        _build,
        owns=(Owns(JOBS, "l"), Owns(WORKLOADS, verbs=("create", "get", "patch"))),
        watches=(Watches(EVENTS, every_primary(TRAINJOBS), field_selector="reason=FailedCreate"),),
        needs=(needs,),
    )
    by = {(p.resource, p.subresource): p for p in c.permissions()}
    assert by[(TRAINJOBS, None)].verbs == WATCH
    assert by[(JOBS, None)].verbs == (*WATCH, *OWNED)
    assert "cannot narrow" in by[(JOBS, None)].why
    assert by[(WORKLOADS, None)].verbs == (*WATCH, "create", "get", "patch")
    assert by[(EVENTS, None)].verbs == WATCH
    assert by[(TRAINJOBS, "finalizers")].verbs == ("update",)
    assert by[(TRAINJOBS, "finalizers")].module == "trainer.framework.owner"
    assert by[(TRAINJOBS, "status")] is needs
    bare = Controller("y", TRAINJOBS, _build)
    assert [p.verbs for p in bare.permissions()] == [WATCH]  # owns nothing: no finalizers update
