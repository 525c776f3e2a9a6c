"""Kubernetes Events about the objects the operator manages (``kubectl describe``, ``kubectl events``
and the kubeflow SDK's ``get_job_events`` show them), with client-go's series for repeats.

Repeats follow k8s.io/client-go ``tools/events`` (``event_broadcaster.go`` ``recordToSink``,
``refreshExistingEventSeries``, ``finishSeries``; ``event_recorder.go`` ``makeEvent``): the first
occurrence of an event is created; the second turns it into a series (``series.count: 2``,
``series.lastObservedTime``) with one patch; later repeats only count in memory, and the series is
patched every :data:`SERIES_REFRESH` seconds (client-go: 30 min) and once more when it ends (no repeat
for :data:`SERIES_FINISH` seconds; client-go: 6 min). So a repeating event costs at most two writes,
then one per refresh, however often it repeats.

The Event is written through the ``core/v1`` API with both shapes filled in, as the apiserver accepts
for that version: the ``events.k8s.io`` fields (``eventTime``, ``series``, ``action``,
``reportingComponent``, ``reportingInstance``) and the legacy ones that older readers need
(``firstTimestamp``, ``lastTimestamp``, ``count``, ``source.component``; the kubeflow SDK skips an
event without ``firstTimestamp``, which an ``events.k8s.io/v1`` create may not set). Repeats are
matched on the message too (client-go matches on regarding, action, reason, reporting controller), so
two different messages never fold into one.
"""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from dataclasses import dataclass
from typing import Any

import structlog

from api.kinds import EVENTS
from trainer.framework.bounded import BoundedDict
from trainer.framework.clock import now_micro, now_rfc3339
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError, KubeClient
from trainer.framework.meta import meta
from trainer.framework.permissions import Permission

log = structlog.get_logger("trainer.events")
COMPONENT = "trainer"
"""``reportingComponent`` and ``source.component`` of every Event."""
SERIES_REFRESH = 30 * 60.0
"""Seconds between patches of a series that keeps repeating (client-go's ``refreshTime``)."""
SERIES_FINISH = 6 * 60.0
"""Seconds without a repeat after which a series ends (client-go's ``finishTime``)."""
MAX_CACHED = 10_000
NOTE_LIMIT = 1024
PERMISSIONS = (Permission(EVENTS, ("create", "patch"), "events; a repeat patches its series"),)
"""The apiserver refuses a longer ``note`` (1 kB)."""


@dataclass
class _Recorded:
    """An Event this process wrote, and what it knows of its series since."""

    namespace: str
    name: str
    count: int
    last_observed: str
    seen: float
    """Monotonic time of the last occurrence."""
    written: float
    """Monotonic time of the last write (the create, or a series patch)."""
    dirty: bool = False
    """The in-memory count is ahead of the stored series."""


class EventRecorder:
    """Writes Events. Failures are logged, never raised: an event is never worth a retry. ``clock`` is
    the monotonic clock (a test's)."""

    def __init__(self, kube: KubeClient, instance: str | None = None, clock: Any = time.monotonic) -> None:
        self.kube = kube
        self.instance = (instance or socket.gethostname())[:128]
        """``reportingInstance``: this replica (the pod's host name)."""
        self._clock = clock
        self._recorded: BoundedDict[tuple[str, str, str, str, str], _Recorded] = BoundedDict(MAX_CACHED)

    async def emit(self, obj: JSON, type_: str, reason: str, message: str, action: str | None = None) -> None:
        """Record an event of ``type_`` (``Normal``/``Warning``) with ``reason`` about ``obj``;
        ``action`` (what the operator did or failed to do) defaults to ``reason``."""
        m = meta(obj)
        namespace = m.namespace or "default"
        note = message[:NOTE_LIMIT]
        action = (action or reason)[:128]
        ident = (str(m.uid), type_, reason, action, note)
        now = self._clock()
        seen = self._recorded.get(ident)
        try:
            if seen is not None:
                seen.count, seen.last_observed, seen.seen = seen.count + 1, now_micro(), now
                if seen.count > 2:
                    seen.dirty = True  # written by the next refresh
                    return
                await self._patch_series(seen)
                return
            name = f"{m.name}.{uuid.uuid4().hex[:16]}"
            stamp = now_rfc3339()
            event: JSON = {
                "apiVersion": EVENTS.api_version,
                "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "eventTime": now_micro(),
                "reportingComponent": COMPONENT,
                "reportingInstance": self.instance,
                "action": action,
                "reason": reason,
                "involvedObject": {
                    "apiVersion": obj.get("apiVersion"),
                    "kind": obj.get("kind"),
                    "name": m.name,
                    "namespace": m.namespace,
                    "uid": m.uid,
                    "resourceVersion": m.resource_version,
                },
                "message": note,
                "type": type_,
                "source": {"component": COMPONENT},
                "firstTimestamp": stamp,
                "lastTimestamp": stamp,
                "count": 1,
            }
            await self.kube.create(EVENTS, namespace, event)
            self._recorded[ident] = _Recorded(namespace, name, 1, event["eventTime"], now, now)
        except ApiError as e:
            if e.not_found:
                self._recorded.pop(ident, None)  # the Event expired: the next one starts anew
            if e.namespace_terminating:
                return
            log.warning("event not recorded", reason=reason, error=str(e))
        except Exception as e:
            log.warning("event not recorded", reason=reason, error=repr(e))

    async def _patch_series(self, seen: _Recorded) -> None:
        series = {"count": seen.count, "lastObservedTime": seen.last_observed}
        patch = {"series": series, "count": seen.count, "lastTimestamp": seen.last_observed[:19] + "Z"}
        await self.kube.merge_patch(EVENTS, seen.namespace, seen.name, patch)
        seen.dirty, seen.written = False, self._clock()

    async def refresh(self) -> None:
        """Write the count of each series that repeated since its last write, when that write is
        :data:`SERIES_REFRESH` seconds old or the series has ended (no repeat for
        :data:`SERIES_FINISH` seconds), and forget ended series (client-go's
        ``refreshExistingEventSeries`` and ``finishSeries``). Never raises but ``CancelledError``."""
        now = self._clock()
        for ident, seen in list(self._recorded.items()):
            ended = now - seen.seen >= SERIES_FINISH
            try:
                if seen.dirty and (ended or now - seen.written >= SERIES_REFRESH):
                    await self._patch_series(seen)
            except ApiError as e:
                if not e.not_found:
                    log.warning("event series not recorded", error=str(e))
            except Exception as e:
                log.warning("event series not recorded", error=repr(e))
            if ended:
                self._recorded.pop(ident, None)

    async def run(self, interval: float = SERIES_FINISH) -> None:
        """Call :meth:`refresh` every ``interval`` seconds until cancelled."""
        while True:
            await asyncio.sleep(interval)
            await self.refresh()
