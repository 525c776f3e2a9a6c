"""What the caches keep of each object: only the fields the reconcilers read.

Every cached object loses ``metadata.managedFields`` (they are often the largest part of an object),
but for a mark that the operator created it with POST (:func:`owned_by_update`). A controller declares
what else the caches of what it owns drop (:attr:`trainer.framework.controller.Owns.keep`: a child Job's Pod
template, a child Secret's data); the same fields are kept of a desired object (not interned) before it
is compared with a cached one (:func:`trainer.jobs.child_writer.needs_apply`), so a projected
cache never looks like drift.

Then every key and every string value is interned (``sys.intern``): a JSON decoder makes new strings
for every object it decodes, and the same label keys, label values, owner uids, kinds and runtime
snapshots recur across cached objects; interned, each is held once (and freed with its last user).
So are equal leaves, dicts and lists of a few scalars or such leaves, a few levels deep (a Job's spec
and status, a Service's ports, a TrainJob's spec, the owner references every child of a job carries,
conditions, the operator's own ``managedFields`` mark): one container for all, the least recently used
forgotten past :data:`MAX_LEAVES`. Cached objects are shared this way and are never changed in place by
their readers (as client-go's informer caches).
A new version of a cached object reuses what is equal in the version cached before it (its spec, its
labels when only the status changed): a watch reports whole objects, mostly unchanged, and an equality
test runs in C where interning walks every value in Python. Equal means equal as Python compares JSON
values (``1 == 1.0 == true``); a field of a typed API object does not change its JSON type.

As client-go's informer transforms (k8s.io/client-go ``tools/cache/shared_informer.go``
``SetTransform``) and controller-runtime's ``cache.TransformStripManagedFields``
(sigs.k8s.io/controller-runtime ``pkg/cache/cache.go``) do it; a transform returns a new object and
never changes the one it is given.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Protocol

from trainer.framework.json_codec import JSON
from trainer.framework.meta import meta

FIELD_MANAGER = "trainer"
"""The operator's field manager: every create and server-side apply of its writes names it."""
Projection = Callable[[JSON], JSON]


class Transform(Protocol):
    """What an informer caches of a new object, given the version it cached before (None: none)."""

    def __call__(self, obj: JSON, cached: JSON | None = None, /) -> JSON: ...


def interned(value: Any, like: Any = None) -> Any:
    """``value`` rebuilt with every dict key and every string interned (lists and dicts are new; numbers,
    booleans and None are kept). Where ``value`` holds what ``like`` (an earlier result of this function)
    holds at the same place, equal, that part of ``like`` is taken as it is. Walks with a stack of its
    own, not recursion: an object nested however deep (a tenant's preserve-unknown-fields) is rebuilt,
    never a ``RecursionError``. Neither ``value`` nor its ``metadata`` (a name and uid of its own) is
    looked up among the shared leaves (:func:`_shared_leaf`); what they hold is, but for the strings of
    :data:`NEVER_SHARED`, which are kept as they are."""
    stack: list[tuple[Any, Any, Any]] = []
    root = _rebuilt(value, like, stack, share=False)
    own = value.get("metadata") if isinstance(value, dict) else None
    while stack:
        src, old, dst = stack.pop()
        if isinstance(src, dict):
            was = old if isinstance(old, dict) else None
            top = src is value
            for k, v in src.items():
                if src is own and k in NEVER_SHARED and type(v) is str:
                    dst[sys.intern(k)] = v
                    continue
                like_v = was.get(k) if was is not None else None
                dst[sys.intern(k)] = _rebuilt(v, like_v, stack, share=not (top and k == "metadata"))
        else:
            items = old if isinstance(old, list) and len(old) == len(src) else None
            for i, v in enumerate(src):
                dst[i] = _rebuilt(v, items[i] if items is not None else None, stack)
    return root


def _rebuilt(value: Any, like: Any, stack: list[tuple[Any, Any, Any]], share: bool = True) -> Any:
    """``like`` when it equals ``value``; :data:`UPDATE_MARK` itself (one list for every cached object
    that carries it); with ``share``, the shared leaf equal to ``value`` (:func:`_shared_leaf`); an interned
    string or a kept scalar; else a new, empty container that :func:`interned` fills from ``stack``."""
    if value is UPDATE_MARK:
        return value
    if like is not None and type(value) is type(like) and _equal(value, like):
        return like
    if share and isinstance(value, (dict, list)) and len(value) <= LEAF_ITEMS:
        leaf = _shared_leaf(value)
        if leaf is not None:
            return leaf
    if isinstance(value, dict):
        new: dict[str, Any] = {}
        stack.append((value, like, new))
        return new
    if isinstance(value, list):
        items: list[Any] = [None] * len(value)
        stack.append((value, like, items))
        return items
    if isinstance(value, str):
        return sys.intern(value)
    return value


NEVER_SHARED = frozenset({"resourceVersion"})
"""Strings of an object's own ``metadata`` that no other object holds, kept as decoded, not interned: the
interpreter's table of interned strings keeps a slot for each string interned (about 50 bytes), which
only a string that recurs pays back."""
LEAF_ITEMS = 16
"""Entries a dict or list may have to be shared as a leaf (see :func:`_shared_leaf`)."""
LEAF_DEPTH = 3
"""Levels of containers a leaf may nest (a dict of lists of dicts of scalars: 3)."""
MAX_LEAVES = 8192
"""Shared leaves remembered at most (the least recently used go first)."""
_SCALARS = frozenset({str, int, float, bool, type(None)})
_leaves: dict[tuple[Any, ...], Any] = {}
"""Leaf key (:func:`_shared_leaf`) -> the one interned container cached objects hold for it."""


def _leaf_key(value: dict[str, Any] | list[Any], depth: int = 0) -> tuple[Any, ...] | None:
    """What tells ``value`` from other leaves (see :func:`_shared_leaf`): its type, then each key (or index)
    with the type and the value of a scalar item, or the key of an item that is a leaf itself; None when
    ``value`` is no leaf at this ``depth`` (0: the outermost)."""
    key: list[Any] = [type(value)]
    for k, v in value.items() if isinstance(value, dict) else enumerate(value):
        kind = type(v)
        if kind in _SCALARS:
            key += (k, kind, v)
            continue
        if depth + 1 >= LEAF_DEPTH or not (kind is dict or kind is list) or len(v) > LEAF_ITEMS:
            return None
        sub = _leaf_key(v, depth + 1)
        if sub is None:
            return None
        key += (k, sub)  # a tuple where a scalar has its type: the two never read alike
    return tuple(key)


def _shared_leaf(value: dict[str, Any] | list[Any]) -> Any:
    """The one cached container equal to ``value`` when ``value`` is a leaf, else None. A leaf is a dict or
    list of at most :data:`LEAF_ITEMS` items, each a string, number, boolean, null or leaf, nested
    :data:`LEAF_DEPTH` deep at most. Equal leaves recur across cached objects (a Job's spec, a Service's
    ports and status, a runtime reference, a TrainJob's spec, the owner references every child of a job
    carries, conditions written in the same second, a status of replicated jobs in the same state): each is
    held once, as strings are by interning. Equal means the same keys in the same order with values of the
    same JSON type (``1`` and ``true`` are two leaves). Cached objects are read, never changed, so sharing
    is safe."""
    ident = _leaf_key(value)
    if ident is None:
        return None
    try:
        shared = _leaves.pop(ident)
    except KeyError:
        if isinstance(value, dict):
            shared = {sys.intern(k): _shared_item(v) for k, v in value.items()}
        else:
            shared = [_shared_item(v) for v in value]
        if len(_leaves) >= MAX_LEAVES:
            del _leaves[next(iter(_leaves))]
    _leaves[ident] = shared  # the most recently used last
    return shared


def _shared_item(value: Any) -> Any:
    """An item of a shared leaf: an interned string, a kept scalar, or the shared leaf it is."""
    if type(value) is str:
        return sys.intern(value)
    if isinstance(value, (dict, list)):
        return _shared_leaf(value)
    return value


def _equal(a: Any, b: Any) -> bool:
    """``a == b`` (in C), or False when they nest too deep for the interpreter to compare."""
    try:
        return bool(a == b)
    except RecursionError:
        return False


def managed_entry(entries: list[JSON], manager: str, operation: str) -> JSON | None:
    """``manager``'s ``managedFields`` entry of ``operation`` (``Apply``/``Update``) for the object itself
    (not a subresource), or None."""
    return next(
        (
            e
            for e in entries
            if e.get("manager") == manager and e.get("operation") == operation and not e.get("subresource")
        ),
        None,
    )


def strip_managed_fields(obj: JSON) -> JSON:
    """``obj`` without ``metadata.managedFields`` (a shallow copy when there were any) but for one mark:
    :data:`UPDATE_MARK` when the operator owns fields of it by an ``Update`` (it created it with POST),
    which its next apply takes over first (:mod:`trainer.jobs.child_writer`)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return obj
    kept = {k: v for k, v in meta.items() if k != "managedFields"}
    if managed_entry(meta["managedFields"] or [], FIELD_MANAGER, "Update") is not None:
        kept["managedFields"] = UPDATE_MARK
    return {**obj, "metadata": kept}


def owned_by_update(obj: JSON) -> bool:
    """Whether ``obj`` (as the caches keep it) carries :data:`UPDATE_MARK`."""
    return meta(obj).managed_fields == UPDATE_MARK


UPDATE_MARK: list[JSON] = [{"manager": FIELD_MANAGER, "operation": "Update"}]
"""What the caches keep of ``managedFields`` when the operator's field manager has an ``Update`` entry
of the object itself (not of its status)."""


def projection(keep: Projection | None = None) -> Transform:
    """What a cache keeps of its objects: ``keep`` (by default :func:`strip_managed_fields`; a controller
    declares what it reads of what it owns, :attr:`trainer.framework.controller.Owns.keep`), then
    :func:`interned`, reusing the equal parts of ``cached`` (what was kept of the object before, if any)."""
    fields = keep or strip_managed_fields

    def project(obj: JSON, cached: JSON | None = None, /) -> JSON:
        kept: JSON = interned(fields(obj), cached)
        return kept

    return project
