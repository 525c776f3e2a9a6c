"""What a command names: a TYPE (``trainjobs``, ``tj``, ``runtimes``...) and NAME, read as kubectl
reads them, and the job client of a job kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import typer

from trainer.api.crd import CRDS
from trainer.api.kinds import CLUSTER_TRAINING_RUNTIMES, OPTIMIZATION_JOBS, TRAINING_RUNTIMES, TRAINJOBS, Resource
from trainer.api.labels import OPTIMIZATION_JOB_NAME
from trainer.client import TRAINJOB, AsyncJobClient, AsyncTrainerClient, JobKind
from trainer.client.types import MPIJOB


@dataclass(frozen=True)
class ObjectType:
    """A TYPE of ``get``, ``list`` and ``delete``: the kinds it covers and, for a job type, its
    :class:`JobKind`."""

    name: str
    """The plural, as kubectl names the type: ``trainjobs``, ``runtimes``..."""
    resources: tuple[Resource, ...]
    job: JobKind[Any] | None = None
    optimization: bool = False
    """Whether the type is ``optimizationjobs`` (:mod:`trainer.cli.optimization` prints them)."""

    @property
    def label(self) -> str:
        """What ``No <label> found.`` says: ``TrainJobs``, ``ClusterTrainingRuntimes``, ``runtimes``."""
        return f"{self.resources[0].kind}s" if len(self.resources) == 1 else self.name


RUNTIMES = ObjectType("runtimes", (TRAINING_RUNTIMES, CLUSTER_TRAINING_RUNTIMES))
"""The namespace's TrainingRuntimes and the ClusterTrainingRuntimes together."""


def object_types() -> dict[str, ObjectType]:
    """Every name of every type, as kubectl takes them: the plural, the singular, the short names
    of the CRD (:data:`trainer.api.crd.CRDS`: ``tj``, ``tr``, ``ctr``, ``mpij``, ``optj``), and the first two
    with the group (``trainjobs.trainer.kubeflow.org``); then ``runtimes`` and ``runtime``
    (:data:`RUNTIMES`)."""
    jobs = {kind.resource: kind for kind in (TRAINJOB, MPIJOB)}
    types: dict[str, ObjectType] = {}
    for crd in CRDS:
        res, singular = crd.resource, crd.resource.kind.lower()
        t = ObjectType(res.plural, (res,), jobs.get(res), optimization=res == OPTIMIZATION_JOBS)
        for name in (res.plural, singular, *crd.short_names, f"{res.plural}.{res.group}", f"{singular}.{res.group}"):
            types[name] = t
    return types | {"runtimes": RUNTIMES, "runtime": RUNTIMES}


TYPES = object_types()


def type_names() -> str:
    """The types and their other names without the group, for help and errors:
    ``trainjobs (trainjob, tj), ...``."""
    names: dict[str, list[str]] = {}
    for name, t in TYPES.items():
        if name != t.name and "." not in name:
            names.setdefault(t.name, []).append(name)
        names.setdefault(t.name, [])
    return ", ".join(f"{t} ({', '.join(others)})" if others else t for t, others in names.items())


def object_type(text: str) -> ObjectType:
    """The type a name means (:data:`TYPES`, any case). Raises ``typer.BadParameter`` (exit 2)
    naming the types."""
    found = TYPES.get(text.lower())
    if found is None:
        raise typer.BadParameter(f"unknown resource type {text!r}; the types are {type_names()}")
    return found


def parse_target(args: Sequence[str], name_alone: bool = True) -> tuple[ObjectType, str | None]:
    """The type and name of ``TYPE NAME`` or ``TYPE/NAME``, of ``TYPE`` (name None: every object of
    the type), or, with ``name_alone``, of ``NAME`` alone, when it names no type: a TrainJob (the
    form before TYPE). Raises ``typer.BadParameter`` (exit 2) for an unknown type (a word alone that
    names no type, without ``name_alone``, as ``kubectl get`` reads it) or more words."""
    if len(args) == 1 and "/" not in args[0]:
        found = TYPES.get(args[0].lower()) if name_alone else object_type(args[0])
        return (found, None) if found else (TYPES[TRAINJOBS.plural], args[0])
    if len(args) == 1:
        text, name = args[0].split("/", 1)
    elif len(args) == 2:
        text, name = args
    else:
        raise typer.BadParameter(f"expected TYPE, TYPE NAME or TYPE/NAME, got {' '.join(args)!r}")
    if not name:
        raise typer.BadParameter(f"no NAME after {text!r}")
    return object_type(text), name


def target(args: Sequence[str]) -> tuple[JobKind[Any], str]:
    """The job kind and name of ``TYPE NAME``, ``TYPE/NAME`` or ``NAME`` (a TrainJob), TYPE a job
    type (:func:`parse_target`). Raises ``typer.BadParameter`` (exit 2) for anything else."""
    t, name = parse_target(args)
    if t.optimization:
        raise typer.BadParameter(
            f"{t.name} run no pods of their own: their trials are TrainJobs (trainer get tj -l "
            f"{OPTIMIZATION_JOB_NAME}=NAME); get, describe, wait and delete take {t.name}"
        )
    if t.job is None:
        raise typer.BadParameter(f"{t.name} are not jobs; expected trainjobs or mpijobs (or their other names)")
    if name is None:
        raise typer.BadParameter(f"expected {args[0]} NAME: {args[0]!r} is a type, not a job's name")
    return t.job, name


def job_client(c: AsyncTrainerClient, kind: JobKind[Any]) -> AsyncJobClient[Any]:
    """The client of the :mod:`trainer.api` objects of ``kind`` (what the CLI prints) on ``c``'s connection
    and namespace."""
    return AsyncJobClient(c.kube, c.namespace, kind)


def parse_targets(args: Sequence[str]) -> tuple[ObjectType | None, list[tuple[ObjectType, str]]]:
    """What ``delete`` names, as kubectl reads it: ``TYPE NAME...`` (the type, and each name of it),
    ``TYPE`` alone (no name: for ``-l`` or ``--all``), ``TYPE/NAME...`` (no type for all), or
    ``NAME`` alone, when it names no type: a TrainJob. Raises ``typer.BadParameter`` (exit 2) for an
    unknown type, or ``TYPE/NAME`` mixed with other words."""
    if any("/" in a for a in args):
        if not all("/" in a for a in args):
            raise typer.BadParameter(
                f"{' '.join(args)!r} mixes TYPE/NAME with other words: give TYPE NAME... or TYPE/NAME..."
            )
        pairs = [parse_target([a]) for a in args]
        return None, [(t, name) for t, name in pairs if name]
    if len(args) == 1 and args[0].lower() not in TYPES:
        return None, [(TYPES[TRAINJOBS.plural], args[0])]
    t = object_type(args[0])
    return t, [(t, name) for name in args[1:]]
