"""Kubernetes Events about the objects the operator manages (``kubectl describe`` shows them).

Repeats of the same (object, type, reason, message) bump the count of the first Event instead of
creating new ones, as client-go's recorder does.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import structlog

from api.kinds import EVENTS
from trainer.kube.client import JSON, ApiError, Kube

log = structlog.get_logger("trainer.events")
COMPONENT = "trainer"


def now_rfc3339() -> str:
    """The current time as Kubernetes writes it (seconds, UTC, ``Z``)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str) -> datetime:
    """A time as Kubernetes writes it (``2006-01-02T15:04:05Z``), in UTC. Raises ``ValueError``
    for anything else."""
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


class EventRecorder:
    """Writes core/v1 Events. Failures are logged, never raised: an event is never worth a retry."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self._seen: dict[tuple[str, str, str, str], tuple[str, int]] = {}

    async def emit(self, obj: JSON, type_: str, reason: str, message: str) -> None:
        """Record an event of ``type_`` (``Normal``/``Warning``) with ``reason`` about ``obj``."""
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        ident = (str(meta.get("uid")), type_, reason, message)
        now = now_rfc3339()
        try:
            if ident in self._seen:
                name, count = self._seen[ident]
                await self.kube.merge_patch(EVENTS, namespace, name, {"count": count + 1, "lastTimestamp": now})
                self._seen[ident] = (name, count + 1)
                return
            name = f"{meta.get('name')}.{uuid.uuid4().hex[:16]}"
            event: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": {
                    "apiVersion": obj.get("apiVersion"),
                    "kind": obj.get("kind"),
                    "name": meta.get("name"),
                    "namespace": meta.get("namespace"),
                    "uid": meta.get("uid"),
                    "resourceVersion": meta.get("resourceVersion"),
                },
                "type": type_,
                "reason": reason,
                "message": message[:1024],
                "source": {"component": COMPONENT},
                "reportingComponent": COMPONENT,
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
            }
            await self.kube.create(EVENTS, namespace, event)
            self._seen[ident] = (name, 1)
            if len(self._seen) > 10000:
                self._seen.pop(next(iter(self._seen)))
        except ApiError as e:
            if e.not_found:
                self._seen.pop(ident, None)
            if e.namespace_terminating:
                return
            log.warning("event not recorded", reason=reason, error=str(e))
        except Exception as e:
            log.warning("event not recorded", reason=reason, error=repr(e))
