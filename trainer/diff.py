"""Pure comparison of a desired object with the stored one: does it need a write?

A desired object carries the hash of itself in an annotation, so that a change of what the operator
wants (including a removed field, which a subset test cannot see) is always written, and a stored
object that drifted from the desired fields is written again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from trainer.json_codec import dumps_sorted

HASH_ANNOTATION = "trainer.kubeflow.org/desired-hash"


def desired_hash(obj: dict[str, Any]) -> str:
    """A short stable hash of an object (key order does not matter)."""
    return hashlib.sha256(dumps_sorted(obj)).hexdigest()[:16]


def with_hash(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with :data:`HASH_ANNOTATION` set to its hash (a shallow copy; ``obj`` is not changed)."""
    meta = dict(obj.get("metadata") or {})
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != HASH_ANNOTATION}
    meta["annotations"] = annotations
    digest = desired_hash({**obj, "metadata": meta})
    meta["annotations"] = {**annotations, HASH_ANNOTATION: digest}
    return {**obj, "metadata": meta}


def is_subset(want: Any, have: Any) -> bool:
    """True when every field of ``want`` is in ``have`` with the same value (lists element-wise and
    of equal length; numbers compared as values)."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(is_subset(v, have.get(k)) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(want) == len(have) and all(map(is_subset, want, have))
    return bool(want == have)


def needs_apply(
    desired: dict[str, Any],
    existing: dict[str, Any] | None,
    project: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> bool:
    """Whether ``desired`` (made by :func:`with_hash`) must be written over ``existing``. ``project``
    is what the cache keeps of such an object (:mod:`trainer.kube.projection`): the fields it drops are
    compared through the hash only."""
    if existing is None:
        return True
    have = ((existing.get("metadata") or {}).get("annotations") or {}).get(HASH_ANNOTATION)
    want = desired["metadata"]["annotations"][HASH_ANNOTATION]
    return have != want or not is_subset(project(desired) if project else desired, existing)
