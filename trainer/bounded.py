"""A mapping that keeps at most so many entries, dropping the oldest: the operator's caches of
verdicts, events and failures, bounded so that a long run does not grow them without end."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedDict(MutableMapping[K, V]):
    """A dict of at most ``limit`` entries, in insertion order: storing a new key beyond the limit
    drops the oldest entry (the first inserted). Storing again under a key keeps its place, as in a
    dict; to make an entry the newest, delete it first. Raises ``ValueError`` for a ``limit`` below 1."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"the limit must be at least 1, not {limit}")
        self.limit = limit
        self._data: dict[K, V] = {}

    def __getitem__(self, key: K) -> V:
        return self._data[key]

    def __setitem__(self, key: K, value: V) -> None:
        data = self._data
        data[key] = value
        while len(data) > self.limit:
            del data[next(iter(data))]

    def __delitem__(self, key: K) -> None:
        del self._data[key]

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[K]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.limit}, {self._data!r})"

    def clear(self) -> None:
        self._data.clear()
