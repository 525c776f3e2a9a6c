"""One tenant's deeply nested object stops nothing: the caches rebuild it without recursion, a
projection that fails keeps the object whole instead of ending the informer, and admission refuses
what nests deeper than ``MAX_DEPTH`` naming the path."""

from __future__ import annotations

from typing import Any

from e2e.helpers import nested
from tests.conftest import load_sample
from tests.kube_double import RecordingKube
from trainer.api.kinds import TRAINJOBS
from trainer.framework.json_codec import JSON, deepest
from trainer.framework.kube.cache import Informer
from trainer.framework.kube.projection import interned, projection
from trainer.webhook.rules import MAX_DEPTH, nesting_errors


def deep_trainjob(levels: int) -> JSON:
    tj = load_sample("trainjob.yaml")
    tj["metadata"]["uid"] = "u"
    tj["spec"]["podTemplateOverrides"] = [{"targetJobs": [{"name": "node"}], "metadata": nested(levels)}]
    return tj


def test_depth_is_measured_without_recursion_and_names_the_path() -> None:
    assert deepest(1) == (0, "") and deepest({}) == (1, "") and deepest({"a": [1]}) == (2, "a")
    assert deepest({"a": [{"b": {}}], "c": {}}) == (4, "a[0].b")
    depth, path = deepest(deep_trainjob(5000))
    assert depth == 5000 + 4 and path.startswith("spec.podTemplateOverrides[0].metadata.x.x")


def test_interned_rebuilds_any_depth_equal_and_reuses_what_is_unchanged() -> None:
    deep = nested(5000)
    copy: Any = interned(deep)
    assert deepest(copy) == deepest(deep) and copy is not deep
    obj = {"metadata": {"name": "a"}, "spec": {"k": ["v", {"n": 1}]}}
    first = interned(obj)
    again = interned({"metadata": {"name": "a"}, "spec": {"k": ["v", {"n": 2}]}}, first)
    assert again["metadata"] is first["metadata"] and again["spec"]["k"][1] == {"n": 2}


def test_a_projection_that_raises_keeps_the_object_and_the_cache_going() -> None:
    def broken(obj: JSON, cached: JSON | None = None, /) -> JSON:
        if obj["metadata"]["name"] == "bad":
            raise RecursionError("maximum recursion depth exceeded")
        return projection()(obj, cached)

    informer = Informer(RecordingKube(), TRAINJOBS, transform=broken)
    seen: list[str] = []
    informer.add_handler(lambda old, new: seen.append((new or old or {})["metadata"]["name"]))
    for name in ("bad", "good"):
        informer.handle_event("ADDED", {"metadata": {"name": name, "namespace": "n", "resourceVersion": "1"}})
    assert informer.get("n", "bad") is not None and informer.get("n", "good") is not None
    assert informer.rejected == 1 and seen == ["bad", "good"], "both told; the bad one kept as it came"


def test_admission_refuses_what_nests_too_deep_naming_the_path() -> None:
    assert nesting_errors(deep_trainjob(10)) == []
    (error,) = nesting_errors(deep_trainjob(1000))
    assert error.startswith("spec.podTemplateOverrides[0].metadata.x.x") and f"more than {MAX_DEPTH}" in error
    assert len(error) < 400, "the path is cut short"
