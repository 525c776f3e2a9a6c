"""The JSON codec: orjson's answers equal the standard library's, also where orjson falls back."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from trainer.framework import json_codec

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)  # every integer Kubernetes sends
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | INT64 | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(JSON_VALUES)
def test_a_value_survives_a_round_trip_and_a_copy(value: Any) -> None:
    assert json_codec.loads(json_codec.dumps(value)) == value
    assert json_codec.copy_json(value) == value


@given(st.dictionaries(st.text(), JSON_VALUES, max_size=6))
def test_sorted_dumps_do_not_depend_on_key_order(value: dict[str, Any]) -> None:
    reversed_order = dict(reversed(list(value.items())))
    assert json_codec.dumps_sorted(value) == json_codec.dumps_sorted(reversed_order)
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    assert json.loads(json_codec.dumps_sorted(value)) == json.loads(expected)


def test_ascii_text_is_hashed_as_the_standard_library_spells_it() -> None:
    value = {"b": [1, 2.5, None, True], "a": {"y": "x", "x": -(2**63)}}
    assert json_codec.dumps_sorted(value) == json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def test_a_copy_shares_nothing_with_the_original() -> None:
    value: dict[str, Any] = {"spec": {"containers": [{"name": "node", "env": [{"name": "A", "value": "1"}]}]}}
    copied = json_codec.copy_json(value)
    copied["spec"]["containers"][0]["env"].append({"name": "B", "value": "2"})
    assert value["spec"]["containers"][0]["env"] == [{"name": "A", "value": "1"}]


def test_integers_beyond_64_bits_are_written_exactly_and_read_back_as_floats() -> None:
    value = {"big": 2**70 + 1, "small": -(2**64) - 1}
    assert json_codec.dumps_sorted(value) == b'{"big":1180591620717411303425,"small":-18446744073709551617}'
    assert json_codec.dumps(value) == b'{"big":1180591620717411303425,"small":-18446744073709551617}'
    copied = json_codec.copy_json(value)
    assert copied == value and copied is not value
    assert json_codec.loads(b"[18446744073709551616]") == [float(2**64)], "as orjson reads them"
