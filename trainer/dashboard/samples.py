"""The metrics the dashboard samples from ``status.trainerStatus`` of the jobs whose pages were viewed
recently, for their curves when no Prometheus is given: bounded in memory.

A sample is the job's reported metrics at one moment, read as the operator exports them
(:func:`trainer.api.series.series_of`: values that read as finite numbers, names made label
values, the first 32; none once the job finished). Bounds: :data:`DEFAULT_POINTS` samples per job (the
oldest go first), :data:`DEFAULT_JOBS` jobs (the least recently viewed go first, with their samples),
:data:`MAX_METRICS` metrics per job; so at most ``jobs x metrics x points`` numbers.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from trainer.api.series import METRIC, series_of
from trainer.framework.bounded import BoundedDict
from trainer.framework.json_codec import JSON

DEFAULT_POINTS = 720
"""Samples kept per job: an hour at one sample each 5 s."""
DEFAULT_JOBS = 50
"""Jobs sampled (and remembered) at most."""
MAX_METRICS = 16
"""Metrics of one job kept at most: the first reported."""
DEFAULT_VIEWED_FOR = 600.0
"""Seconds after its page was last viewed that a job is still sampled."""

JobKey = tuple[str, str, str]
"""``(kind, namespace, name)`` of a job, e.g. ``("TrainJob", "team-a", "digits-x2")``."""

Point = tuple[float, float]
"""``(seconds since the epoch, value)``."""


@dataclass
class JobSamples:
    """The samples of one job: per metric, its points, oldest first."""

    viewed: float
    """When the job's page was last viewed (seconds since the epoch)."""
    sampled: float = float("-inf")
    """When the job was last sampled."""
    curves: dict[str, deque[Point]] = field(default_factory=dict)


class Samples:
    """Metrics sampled per job, bounded (module docstring). ``points`` per job and ``jobs`` at most;
    a job is sampled while its page was viewed within ``viewed_for`` seconds, at most once in ``gap``
    seconds (however often its page is loaded). Raises ``ValueError`` for a bound below 1."""

    def __init__(
        self,
        points: int = DEFAULT_POINTS,
        jobs: int = DEFAULT_JOBS,
        viewed_for: float = DEFAULT_VIEWED_FOR,
        gap: float = 0.0,
    ) -> None:
        if points < 1:
            raise ValueError(f"points must be at least 1, not {points}")
        self.points, self.viewed_for, self.gap = points, viewed_for, gap
        self._jobs: BoundedDict[JobKey, JobSamples] = BoundedDict(jobs)

    def viewed(self, key: JobKey, now: float) -> None:
        """The page of job ``key`` was viewed at ``now``: it is sampled from now on, and it becomes the
        most recently viewed (the last to be dropped)."""
        known = self._jobs.pop(key, None) or JobSamples(now)
        known.viewed = now
        self._jobs[key] = known

    def watched(self, now: float) -> list[JobKey]:
        """The jobs to sample at ``now``: those viewed within ``viewed_for`` seconds, least recently
        viewed first."""
        return [k for k, s in self._jobs.items() if now - s.viewed <= self.viewed_for]

    def add(self, key: JobKey, now: float, obj: JSON) -> int:
        """Sample job ``obj`` (a TrainJob as the apiserver returns it) of ``key`` at ``now``: a point for
        each metric it reports (none once finished). Only for a job viewed (:meth:`viewed`) and not
        sampled in the last ``gap`` seconds; returns the points added."""
        job = self._jobs.get(key)
        if job is None or now - job.sampled < self.gap:
            return 0
        job.sampled = now
        added = 0
        for (kind, name), value in series_of(obj).items():
            if kind != METRIC or (name not in job.curves and len(job.curves) >= MAX_METRICS):
                continue
            job.curves.setdefault(name, deque(maxlen=self.points)).append((now, value))
            added += 1
        return added

    def curves(self, key: JobKey) -> dict[str, list[Point]]:
        """The sampled points of job ``key`` per metric, oldest first; empty when none."""
        job = self._jobs.get(key)
        return {name: list(points) for name, points in job.curves.items()} if job else {}

    def __len__(self) -> int:
        """The jobs remembered."""
        return len(self._jobs)
