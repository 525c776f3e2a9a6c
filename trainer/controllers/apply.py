"""Writing children: server-side apply of what differs, events for creations and refusals.

Shared by every reconciler. A child is written only when :func:`trainer.diff.needs_apply` says
it differs from the cached copy; an invalid write (422) or a forbidden one (403) is reported on the
owner as a Warning event ``TrainJobResourcesCreationFailed`` instead of being retried forever.
"""

from __future__ import annotations

import structlog

from trainer.builders.labels import FIELD_MANAGER
from trainer.diff import needs_apply, with_hash
from trainer.kube.cache import key_of
from trainer.kube.client import JOBS, JSON, ApiError, Kube
from trainer.kube.events import EventRecorder

log = structlog.get_logger("trainer.apply")


class Applier:
    """Applies children of one owner kind's reconciler."""

    def __init__(self, kube: Kube, events: EventRecorder) -> None:
        self.kube, self.events = kube, events

    async def apply(self, owner: JSON, desired: JSON, existing: JSON | None) -> JSON | None:
        """Server-side apply ``desired`` unless ``existing`` already matches it; returns the stored
        object (None when refused). A refusal (422, 403) becomes a Warning event on ``owner``, not a
        retry; other errors raise."""
        desired = with_hash(desired)
        if not needs_apply(desired, existing):
            return existing
        try:
            stored = await self.kube.apply(desired, FIELD_MANAGER)
        except ApiError as e:
            if e.namespace_terminating:
                return None
            if e.invalid or e.status == 403:
                await self.events.emit(
                    owner,
                    "Warning",
                    "TrainJobResourcesCreationFailed",
                    f"{desired['kind']} {desired['metadata']['name']}: {e.message}",
                )
                return None
            raise
        log.info("applied", kind=desired["kind"], name=desired["metadata"]["name"], created=existing is None)
        if existing is None:
            await self.events.emit(
                owner, "Normal", "SuccessfulCreate", f"Created {desired['kind']} {desired['metadata']['name']}"
            )
        return stored

    async def apply_job(self, owner: JSON, desired: JSON, existing: JSON | None) -> None:
        """Apply one Job. A suspended Job whose Pod template cannot be changed in place (Kubernetes
        allows only scheduling directives, and only before the Job first starts) has its startTime
        cleared, and if that is not enough it is deleted to be recreated by the next reconcile: it
        has no Pods, so nothing is lost."""
        desired = with_hash(desired)
        if not needs_apply(desired, existing):
            return
        try:
            await self.kube.apply(desired, FIELD_MANAGER)
        except ApiError as e:
            if e.namespace_terminating:
                return
            if not e.invalid:
                raise
            if existing is not None and (existing.get("spec") or {}).get("suspend") and desired["spec"]["suspend"]:
                if existing.get("status", {}).get("startTime"):
                    ns, name = key_of(desired)
                    await self.kube.patch_status(JOBS, ns, name, {"startTime": None})
                    try:
                        await self.kube.apply(desired, FIELD_MANAGER)
                        return
                    except ApiError as again:
                        if not again.invalid:
                            raise
                if int((existing.get("status") or {}).get("active") or 0) == 0:
                    log.info("recreating suspended job", name=desired["metadata"]["name"], why=e.message)
                    await self.kube.delete(JOBS, *key_of(desired))
                    await self.events.emit(
                        owner,
                        "Normal",
                        "RecreatingJob",
                        f"Recreating suspended Job {desired['metadata']['name']} to apply the changed Pod template",
                    )
                    return
            await self.events.emit(
                owner,
                "Warning",
                "TrainJobResourcesCreationFailed",
                f"Job {desired['metadata']['name']}: {e.message}",
            )
            return
        log.info("applied", kind="Job", name=desired["metadata"]["name"], created=existing is None)
        if existing is None:
            await self.events.emit(owner, "Normal", "SuccessfulCreate", f"Created Job {desired['metadata']['name']}")
