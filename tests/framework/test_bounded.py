"""The bounded mapping: at most ``limit`` entries, the oldest dropped first."""

from __future__ import annotations

import pytest

from trainer.framework.bounded import BoundedDict


def test_a_new_key_beyond_the_limit_drops_the_oldest() -> None:
    d: BoundedDict[str, int] = BoundedDict(2)
    d["a"], d["b"] = 1, 2
    d["c"] = 3
    assert list(d.items()) == [("b", 2), ("c", 3)]
    assert "a" not in d and d.get("a") is None and len(d) == 2


def test_storing_again_keeps_the_place_and_deleting_first_renews_it() -> None:
    d: BoundedDict[str, int] = BoundedDict(2)
    d["a"], d["b"] = 1, 2
    d["a"] = 10
    d["c"] = 3
    assert dict(d) == {"b": 2, "c": 3}
    d.pop("b")
    d["b"] = 20
    d["d"] = 4
    assert list(d) == ["b", "d"]


def test_update_and_setdefault_keep_the_bound() -> None:
    d: BoundedDict[int, int] = BoundedDict(3)
    d.update({i: i for i in range(10)})
    assert list(d.items()) == [(7, 7), (8, 8), (9, 9)]
    assert d.setdefault(10, 0) == 0 and list(d) == [8, 9, 10]
    d |= {11: 11, 12: 12}
    assert list(d) == [10, 11, 12]
    d.clear()
    assert len(d) == 0


def test_the_limit_is_at_least_one() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        BoundedDict(0)
