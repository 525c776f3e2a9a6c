"""The body of a status post and the patch written from it.

The JSON body (upstream ``UpdateTrainJobStatusRequest``, KEP-2779) is ``{"trainerStatus":
{"progressPercentage": 0-100, "estimatedRemainingSeconds": >= 0, "metrics": [{"name", "value"}] (at
most 256, strings of 1 to 64 characters), "lastUpdatedTime": RFC 3339}}`` (every field optional;
``lastUpdatedTime`` defaults to the time the server received the post). A body that is not such JSON
raises :class:`PayloadError` (answered 422).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from pydantic import ValidationError

from api.trainer_v1alpha1 import TrainerStatus
from trainer.framework.clock import format_time
from trainer.framework.json_codec import JSON

INT32_MAX = 2**31 - 1


class PayloadError(ValueError):
    """A request body that is not an update (answered 422 with this message)."""


def rfc3339(value: str) -> str:
    """``value`` (RFC 3339 with an offset, fractions allowed) in UTC to the second, as
    ``metav1.Time`` stores it (``2025-01-23T10:30:45Z``). Raises :class:`PayloadError`."""
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise PayloadError(f"trainerStatus.lastUpdatedTime: not an RFC 3339 time: {value!r}") from None
    if when.tzinfo is None:
        raise PayloadError(f"trainerStatus.lastUpdatedTime: no time zone offset in {value!r}")
    return format_time(when)


def parse_update(body: bytes, now: datetime | None = None) -> TrainerStatus | None:
    """The ``trainerStatus`` of a request body (upstream ``UpdateTrainJobStatusRequest``), None when
    it has none. Types are strict (no strings for numbers, no fractions); bounds are the CRD's, plus
    int32 for ``estimatedRemainingSeconds``; other keys are ignored, as Go's decoder ignores them;
    ``lastUpdatedTime`` defaults to ``now`` (default: the current time). Raises :class:`PayloadError`."""
    try:
        data = json.loads(body)
    except ValueError as e:
        raise PayloadError(f"invalid payload: {e}") from None
    if not isinstance(data, dict):
        raise PayloadError("invalid payload: not a JSON object")
    raw = data.get("trainerStatus")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise PayloadError("trainerStatus: not an object")
    if raw.get("lastUpdatedTime") is None:
        raw = {**raw, "lastUpdatedTime": (now or datetime.now(UTC)).isoformat()}
    try:
        status = TrainerStatus.model_validate(raw, strict=True)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in ("trainerStatus", *err["loc"]))
        raise PayloadError(f"{where}: {err['msg']}") from None
    if (status.estimated_remaining_seconds or 0) > INT32_MAX:
        raise PayloadError(f"trainerStatus.estimatedRemainingSeconds: more than {INT32_MAX}")
    return status.model_copy(update={"last_updated_time": rfc3339(status.last_updated_time)})


def stored(status: TrainerStatus) -> JSON:
    """The ``trainerStatus`` object as written: only the modelled fields, unset ones left out."""
    out: JSON = {}
    if status.progress_percentage is not None:
        out["progressPercentage"] = status.progress_percentage
    if status.estimated_remaining_seconds is not None:
        out["estimatedRemainingSeconds"] = status.estimated_remaining_seconds
    if status.metrics:
        out["metrics"] = [{"name": m.name, "value": m.value} for m in status.metrics]
    out["lastUpdatedTime"] = status.last_updated_time
    return out


def status_patch(status: TrainerStatus) -> JSON:
    """The merge-patch of ``status`` that replaces ``trainerStatus`` whole: every field it leaves out
    is set to null (removed)."""
    fields = ("progressPercentage", "estimatedRemainingSeconds", "metrics", "lastUpdatedTime")
    return {"trainerStatus": {k: None for k in fields} | stored(status)}
