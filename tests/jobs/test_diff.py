"""Deciding whether a desired object needs a write."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from trainer.jobs.child_writer import HASH_ANNOTATION, is_subset, needs_apply, with_hash

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=20,
)


def obj(**spec: object) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": spec}


def test_unchanged_object_with_server_defaults_needs_no_write() -> None:
    desired = with_hash(obj(clusterIP="None"))
    stored = {**desired, "spec": {"clusterIP": "None", "type": "ClusterIP"}, "status": {}}
    assert not needs_apply(desired, stored)


def test_removed_field_is_written() -> None:
    old = with_hash(obj(a=1, b=2))
    new = with_hash(obj(a=1))
    assert is_subset(new, {**old, "metadata": new["metadata"]})
    assert needs_apply(new, old), "a removal changes the hash"


def test_drift_is_written_and_missing_object_is_created() -> None:
    desired = with_hash(obj(a=1))
    assert needs_apply(desired, {**desired, "spec": {"a": 2}})
    assert needs_apply(desired, None)


@given(json_values)
def test_hash_is_stable_and_ignores_its_own_annotation(value: object) -> None:
    once = with_hash(obj(v=value))
    twice = with_hash(once)
    assert once["metadata"]["annotations"][HASH_ANNOTATION] == twice["metadata"]["annotations"][HASH_ANNOTATION]
    assert is_subset(once, once)
