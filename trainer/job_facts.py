"""Facts about jobs, each read one way everywhere: whether a batch/v1 Job has finished.

Callers (the reconcilers, their status, the manager's handlers through a controller's declaration)
ask here rather than reading conditions themselves, so a rule has one spelling.
"""

from __future__ import annotations

from trainer.kube.client import JSON


def job_finished(job: JSON) -> str | None:
    """``"Complete"`` or ``"Failed"`` when a batch/v1 Job has that condition True, else None."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return str(cond["type"])
    return None
