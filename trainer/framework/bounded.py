"""A mapping that keeps at most so many entries, dropping the oldest: the operator's caches of
verdicts, events and failures, bounded so that a long run does not grow them without end."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedDict(dict[K, V]):
    """A dict of at most ``limit`` entries, in insertion order: storing a new key beyond the limit
    drops the oldest entry (the first inserted). Storing again under a key keeps its place, as in a
    dict; to make an entry the newest, delete it first. Reads are a plain dict's (no Python code runs
    for ``get``, ``in`` or ``[]``); every way of storing (``[]=``, ``update``, ``setdefault``) keeps the
    bound. Raises ``ValueError`` for a ``limit`` below 1."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"the limit must be at least 1, not {limit}")
        super().__init__()
        self.limit = limit

    def __setitem__(self, key: K, value: V) -> None:
        super().__setitem__(key, value)
        while len(self) > self.limit:
            del self[next(iter(self))]

    def setdefault(self, key: K, default: V = None) -> V:  # type: ignore[assignment]
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, other: Mapping[K, V] | Iterable[tuple[K, V]] = (), /, **kwargs: Any) -> None:  # type: ignore[override]
        for key, value in other.items() if isinstance(other, Mapping) else other:
            self[key] = value
        for key, value in kwargs.items():
            self[key] = value  # type: ignore[index]

    def __ior__(self, other: Any) -> BoundedDict[K, V]:  # type: ignore[override,misc]
        self.update(other)
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.limit}, {dict(self)!r})"
