"""The body of a status post and the patch written from it.

The JSON body (upstream ``UpdateTrainJobStatusRequest``, KEP-2779) is ``{"trainerStatus":
{"progressPercentage": 0-100, "estimatedRemainingSeconds": >= 0, "metrics": [{"name", "value"}] (at
most 256, strings of 1 to 64 characters), "lastUpdatedTime": RFC 3339, "lastCheckpoint": {"epoch",
"step", "path", "savedTime"}}}`` (every field optional; ``lastUpdatedTime`` and a checkpoint's
``savedTime`` default to the time the server received the post). ``lastCheckpoint`` is this operator's
extension (:class:`trainer.api.trainer_v1alpha1.Checkpoint`): a post without one keeps the stored one. A body
that is not such JSON raises :class:`PayloadError` (answered 422).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from pydantic import ValidationError

from trainer.api.trainer_v1alpha1 import TrainerStatus
from trainer.framework.clock import format_time
from trainer.framework.json_codec import JSON

INT32_MAX = 2**31 - 1


class PayloadError(ValueError):
    """A request body that is not an update (answered 422 with this message)."""


def rfc3339(value: str, field: str = "lastUpdatedTime") -> str:
    """``value`` (RFC 3339 with an offset, fractions allowed) in UTC to the second, as
    ``metav1.Time`` stores it (``2025-01-23T10:30:45Z``). Raises :class:`PayloadError` naming
    ``trainerStatus.<field>``."""
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise PayloadError(f"trainerStatus.{field}: not an RFC 3339 time: {value!r}") from None
    if when.tzinfo is None:
        raise PayloadError(f"trainerStatus.{field}: no time zone offset in {value!r}")
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
    received = (now or datetime.now(UTC)).isoformat()
    if raw.get("lastUpdatedTime") is None:
        raw = {**raw, "lastUpdatedTime": received}
    checkpoint = raw.get("lastCheckpoint")
    if isinstance(checkpoint, dict) and checkpoint.get("savedTime") is None:
        raw = {**raw, "lastCheckpoint": {**checkpoint, "savedTime": received}}
    try:
        status = TrainerStatus.model_validate(raw, strict=True)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in ("trainerStatus", *err["loc"]))
        raise PayloadError(f"{where}: {err['msg']}") from None
    if (status.estimated_remaining_seconds or 0) > INT32_MAX:
        raise PayloadError(f"trainerStatus.estimatedRemainingSeconds: more than {INT32_MAX}")
    update: dict[str, object] = {"last_updated_time": rfc3339(status.last_updated_time, "lastUpdatedTime")}
    if status.last_checkpoint is not None:
        saved = rfc3339(status.last_checkpoint.saved_time, "lastCheckpoint.savedTime")
        update["last_checkpoint"] = status.last_checkpoint.model_copy(update={"saved_time": saved})
    return status.model_copy(update=update)


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
    if status.last_checkpoint is not None:
        c = status.last_checkpoint
        given = {"epoch": c.epoch, "step": c.step, "path": c.path, "savedTime": c.saved_time}
        out[CHECKPOINT] = {k: v for k, v in given.items() if v is not None}
    return out


CHECKPOINT = "lastCheckpoint"
"""The key of ``trainerStatus`` that a post without it leaves as stored (our extension)."""


def status_patch(status: TrainerStatus) -> JSON:
    """The merge-patch of ``status`` that replaces ``trainerStatus`` whole (every upstream field it
    leaves out is set to null, removed) but for ``lastCheckpoint``, written only when the post has one:
    a checkpoint stays until the trainer reports a newer one."""
    fields = ("progressPercentage", "estimatedRemainingSeconds", "metrics", "lastUpdatedTime")
    return {"trainerStatus": {k: None for k in fields} | stored(status)}


def coalesce(older: JSON | None, newer: JSON) -> JSON:
    """The one patch that writes both ``older`` and ``newer`` (two :func:`status_patch` results for one
    TrainJob, ``newer`` posted later): ``newer``, with ``older``'s checkpoint when ``newer`` has none,
    so a checkpoint reported between two writes is not lost to a later progress post."""
    kept = ((older or {}).get("trainerStatus") or {}).get(CHECKPOINT)
    if kept is None or CHECKPOINT in newer["trainerStatus"]:
        return newer
    return {"trainerStatus": {**newer["trainerStatus"], CHECKPOINT: kept}}
