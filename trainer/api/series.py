"""What a trainer pod reports in a TrainJob's ``status.trainerStatus`` (KEP-2779: ``progressPercentage``,
``estimatedRemainingSeconds``, ``metrics``), read as series of numbers: the operator exports them as
Prometheus gauges, the dashboard samples them for its curves. Series, from :func:`series_of`:

* ``(PROGRESS, "")``: ``progressPercentage`` / 100;
* ``(REMAINING, "")``: ``estimatedRemainingSeconds``;
* ``(METRIC, name)``: each metric whose value reads as a finite number, its name sanitised
  (:func:`metric_label`), the first :data:`MAX_METRICS_PER_JOB` of them.
"""

from __future__ import annotations

import math
import re
from typing import Any

from trainer.api.conditions import is_true
from trainer.api.jobkinds import TRAINJOB

MAX_METRICS_PER_JOB = 32
"""Metrics of one job exported at most (a job may report 256): the first ones, in its order."""
MAX_METRIC_NAME = 64
"""Characters of a metric's name kept in its label (the CRD allows 64)."""
PROGRESS, REMAINING, METRIC = "progress", "remaining", "metric"
_UNSAFE = re.compile(r"[^A-Za-z0-9_:./-]")

Series = dict[tuple[str, str], float]
"""One job's series: ``(PROGRESS | REMAINING | METRIC, metric label) -> value``."""


def metric_label(name: str) -> str:
    """A reported metric's name as a label value: each character outside ``[A-Za-z0-9_:./-]`` made
    ``_``, at most :data:`MAX_METRIC_NAME` characters (``"val loss"`` -> ``"val_loss"``)."""
    return _UNSAFE.sub("_", name[:MAX_METRIC_NAME])


def _number(value: object) -> float | None:
    """``value`` (a reported string, or a number) as a finite float, else None."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    try:
        out = float(value)
    except ValueError:
        return None
    return out if math.isfinite(out) else None


def series_of(obj: dict[str, Any]) -> Series:
    """The series of TrainJob ``obj`` (JSON as cached): none once it finished or is being deleted, else
    those of its ``status.trainerStatus`` (see the module docstring). Two metrics that sanitise to the
    same label: the first wins."""
    status = obj.get("status") or {}
    if (obj.get("metadata") or {}).get("deletionTimestamp") or is_true(
        status.get("conditions") or [], *TRAINJOB.terminal
    ):
        return {}
    reported = status.get("trainerStatus") or {}
    out: Series = {}
    progress = _number(reported.get("progressPercentage"))
    if progress is not None:
        out[(PROGRESS, "")] = progress / 100
    remaining = _number(reported.get("estimatedRemainingSeconds"))
    if remaining is not None:
        out[(REMAINING, "")] = remaining
    kept = 0
    for metric in reported.get("metrics") or []:
        if kept >= MAX_METRICS_PER_JOB:
            break
        value = _number(metric.get("value")) if isinstance(metric, dict) else None
        name = metric_label(str(metric.get("name") or "")) if isinstance(metric, dict) else ""
        if value is None or not name or (METRIC, name) in out:
            continue
        out[(METRIC, name)] = value
        kept += 1
    return out
