"""JSON text to objects and back, and copies of JSON objects, with orjson.

Every body the operator sends to or reads from the apiserver, every desired-object hash and every copy
of a pod template made before it is changed goes through here, so that the cost of JSON handling is
paid in one well-kept C library (orjson) rather than in :mod:`json` and :func:`copy.deepcopy`.

Objects are JSON values as :mod:`json` gives them: dicts with ``str`` keys, lists, strings, numbers,
booleans and None. What orjson does not take (an integer beyond 64 bits, a key that is not a string)
goes through :mod:`json` / :func:`copy.deepcopy` instead, with the same result.
"""

from __future__ import annotations

import copy
import json
from typing import Any, TypeVar, cast

import orjson

T = TypeVar("T")

JSON = dict[str, Any]
"""A JSON object as :func:`loads` gives it (``str`` keys; the shape of every Kubernetes object here)."""


def loads(text: str | bytes) -> Any:
    """The JSON value ``text`` holds. Raises ``ValueError`` (orjson's ``JSONDecodeError`` is one) when
    it is not JSON. An integer beyond 64 bits is read as a float (the apiserver sends none: Kubernetes
    integers are int64)."""
    return orjson.loads(text)


def dumps(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON (no spaces), keys in their order."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def dumps_sorted(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON with every object's keys sorted: the same bytes for the same
    value whatever its key order (for ASCII text, exactly ``json.dumps(value, sort_keys=True,
    separators=(",", ":"))``)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def copy_json(value: T) -> T:
    """A deep copy of the JSON value ``value`` (new dicts and lists all the way down; a tuple comes
    back as a list)."""
    try:
        return cast(T, orjson.loads(orjson.dumps(value)))
    except TypeError:
        return copy.deepcopy(value)


def deepest(value: Any) -> tuple[int, str]:
    """``(depth, path)`` of the most deeply nested object or array in the JSON value ``value``: the
    depth counts nested objects and arrays (``{}`` is 1, ``{"a": []}`` 2, a scalar 0); the path is
    dotted (``spec.podTemplateOverrides[0].metadata``; "" for ``value`` itself). Walks with a stack of
    its own, so any depth is measured without recursion."""
    best: tuple[int, str] = (0, "")
    stack: list[tuple[Any, int, str]] = [(value, 1, "")]
    while stack:
        node, depth, path = stack.pop()
        if isinstance(node, dict):
            items: Any = ((f"{path}.{k}" if path else str(k), v) for k, v in node.items())
        elif isinstance(node, list):
            items = ((f"{path}[{i}]", v) for i, v in enumerate(node))
        else:
            continue
        if depth > best[0]:
            best = (depth, path)
        stack += [(v, depth + 1, p) for p, v in items if isinstance(v, (dict, list))]
    return best
