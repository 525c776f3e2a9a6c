"""What a TrainJob feature is: one module that declares the child kinds it owns, the resources it
watches and what it adds to a reconcile, listed once in :data:`trainer.trainjob.features.FEATURES`.

As kubeflow/trainer's plugins (``pkg/runtime/framework/plugins/<name>/``) each hold their build, their
watch and their RBAC marker in one file, a :class:`Feature` holds: ``owns`` (child kinds the TrainJob
controls through it: the controller caches them by the ``jobset-name`` label and may write and delete
them), ``watches`` (other resources whose changes bring a TrainJob's reconcile), and plain functions for
the steps it takes part in: ``take_over`` (before expansion: something else runs the TrainJob now),
``desired`` (its children's writes), ``jobs`` (its change to the Jobs about to be written) and
``deletes_trainjob`` (this reconcile deletes the TrainJob itself: no status write). The kind's
controller runs every listed feature at each step and never names one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from trainer.api.kinds import Resource
from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.framework.controller import Reader, Watches
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import key_of
from trainer.framework.meta import meta
from trainer.jobs.child_writer import Desired
from trainer.jobs.reconcile import Blocked
from trainer.trainjob.options import TrainJobOptions
from trainer.trainjob.runtime.view import TrainJobView


@dataclass(frozen=True, kw_only=True)
class Step:
    """What a feature reads while the TrainJob's writes are decided: the controller's caches, the
    TrainJob as this reconcile sees it, the controller's settings and ``--gang-scheduler-name``."""

    reader: Reader
    view: TrainJobView
    options: TrainJobOptions
    gang_name: str

    @property
    def uid(self) -> str:
        """The TrainJob's uid: its children's controller owner reference."""
        return str(self.view.info.job.metadata.uid)


TakeOver = Callable[[Reader, JSON, TrainJob, datetime], "Blocked | None"]
"""``(reader, TrainJob as stored, parsed, now) -> Blocked`` while something else runs the TrainJob, else None."""


@dataclass(frozen=True, kw_only=True)
class Feature:
    """One TrainJob feature (see the module docstring); every step is optional."""

    name: str
    owns: tuple[Resource, ...] = ()
    watches: tuple[Watches, ...] = ()
    take_over: TakeOver | None = None
    desired: Callable[[Step, Desired], None] | None = None
    """Adds the feature's writes to the TrainJob's (``Desired``), finished or not."""
    jobs: Callable[[Step, list[JSON], Desired], list[JSON]] | None = None
    """The Jobs to apply after the feature's change (and its writes added), while the TrainJob runs and
    no restart is under way."""
    deletes_trainjob: Callable[[TrainJobView], bool] | None = None


def deleting(obj: JSON) -> bool:
    """Whether ``obj`` is being deleted already."""
    return bool(meta(obj).deletion)


def keep_only(step: Step, out: Desired, resource: Resource, wanted: JSON | None) -> None:
    """A child of ``resource`` the TrainJob has while it runs: ``wanted`` applied unless the TrainJob
    finished (or None: not wanted now), and every other one it owns deleted (once finished, or when no
    longer wanted, e.g. a switch turned off)."""
    keep = wanted if wanted is not None and not step.view.attempt.finished else None
    if keep is not None:
        out.apply.append(keep)
    name = keep["metadata"]["name"] if keep is not None else None
    out.delete += [
        (resource, *key_of(o))
        for o in step.reader.owned(resource, step.uid)
        if o["metadata"]["name"] != name and not deleting(o)
    ]
