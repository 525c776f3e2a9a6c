"""Seconds the process spends in CPython's cyclic garbage collector, by generation.

``trainer_gc_seconds_total{generation}`` (``0``, ``1``, ``2``): the wall-clock seconds of every
collection, measured by a :data:`gc.callbacks` hook (``time.perf_counter`` at its ``start`` and ``stop``
phases; a collection runs no I/O, so its wall-clock time is its CPU time unless the process lost its
core meanwhile). Beside it, ``prometheus_client``'s own ``python_gc_collections_total`` and
``python_gc_objects_collected_total`` (:class:`prometheus_client.GCCollector`) count the collections and
what they freed. Go operators export the same measure as ``go_gc_duration_seconds``; a cache of tens
of thousands of objects makes every full collection walk all of them, which this shows.

One hook per process, installed by the first :class:`GCTimeCollector` and shared by every registry
that has one (two operators in one process, a test, read the same process-wide figures).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

NAME = "trainer_gc_seconds"
"""The family's name (exported as ``trainer_gc_seconds_total``)."""


class _Timer:
    """The :data:`gc.callbacks` hook: seconds per generation, summed since it was installed."""

    def __init__(self) -> None:
        self.seconds = [0.0, 0.0, 0.0]
        self._began = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.seconds[min(int(info.get("generation", 2)), 2)] += time.perf_counter() - self._began


_timer: _Timer | None = None


def gc_seconds() -> list[float]:
    """Seconds spent in collections of generation 0, 1 and 2 since the hook was installed (installing it
    now when it is not: then ``[0.0, 0.0, 0.0]``)."""
    global _timer
    if _timer is None:
        _timer = _Timer()
        gc.callbacks.append(_timer)
    return list(_timer.seconds)


class GCTimeCollector(Collector):
    """``trainer_gc_seconds_total{generation}`` for ``registry`` (see the module docstring)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        gc_seconds()  # the hook counts from the registry's start
        registry.register(self)

    def collect(self) -> Iterable[Metric]:
        family = CounterMetricFamily(
            NAME, "Seconds spent in the garbage collector's collections, by generation", labels=["generation"]
        )
        for generation, seconds in enumerate(gc_seconds()):
            family.add_metric([str(generation)], seconds)
        return [family]
