"""How far one plain torch TrainJob travels through the code: from its watch event to the Job create
and the status write, which project files run and how deep the project's frames nest.

``python -m bench.walk`` runs the real manager, informer, queue, worker and reconciler on the
recording double of ``Kube`` (tests/kube_double.py; no cluster, no network), with a profiler that
notes every project function entered, and prints the files in the order first entered and the
deepest chain of project frames, grouped by layer (tests/test_layers.py: api, framework, job layer,
kinds, ...) and role: the job layer and the kinds tell the story, but for their ``features/`` folders
and the kind's ``spec/`` (what a plain job only passes through: volume claims, the runtime snapshot,
TTL, exclusive placement, failure policy, overrides, ...); the framework and ``api`` are the plumbing.
Test and bench modules are not counted.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import yaml

from tests.kube_double import RecordingKube
from tests.test_layers import LAYER_NAMES, layer_of, package_of
from trainer.api.kinds import JOBS
from trainer.framework.kube.cache import key_of
from trainer.main import configure_logging
from trainer.wiring import Settings, new_manager

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "config" / "samples"
COUNTED = ("trainer/",)
WRITES = {"put": "watch event", "create": "create {kind}", "apply": "apply {kind}", "patch_status": "status write"}
"""The recording double's methods whose first call marks a step, by what the step is called."""
STEPS = ("watch event", "create Job", "apply Job", "status write")


def _project_file(frame: FrameType) -> str | None:
    path = Path(frame.f_code.co_filename)
    try:
        rel = path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return None
    return rel if rel.startswith(COUNTED) else None


def _jobs_written(kube: RecordingKube) -> int:
    """Jobs written so far, created (POST) or applied."""
    return kube.count("create", "Job") + kube.count("apply", "Job")


async def walk() -> tuple[list[str], dict[str, list[str]]]:
    """(project files in the order first entered, the project frames on the stack at each step:
    the watch event reaching the queue, the Job create, the status write)."""
    kube = RecordingKube()
    # No batching or coalescing waits: the walk follows the calls, not the clock.
    settings = Settings(children_batch_seconds=0, status_coalesce_seconds=0)
    manager = new_manager(kube, settings, None)
    kube.connect(manager.informers)
    kube.put(yaml.safe_load((SAMPLES / "torch-distributed.yaml").read_text()))
    tj: dict[str, Any] = yaml.safe_load((SAMPLES / "trainjob.yaml").read_text())
    queue = manager.queues["trainjob"]
    worker = asyncio.create_task(manager._worker("trainjob"))
    await asyncio.sleep(0)

    files: list[str] = []
    paths: dict[str, list[str]] = {}
    calls: dict[str, int] = {}

    def chain(frame: FrameType | None) -> list[str]:
        out: list[str] = []
        while frame is not None:
            rel = _project_file(frame)
            if rel is not None:
                out.append(f"{rel}:{frame.f_code.co_name}")
            frame = frame.f_back
        return out[::-1]

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call":
            return
        rel = _project_file(frame)
        if rel is not None and rel not in files:
            files.append(rel)
        name = frame.f_code.co_name
        if rel is not None:
            calls[f"{rel}:{name}"] = calls.get(f"{rel}:{name}", 0) + 1
        if frame.f_code.co_filename.endswith("kube_double.py") and name in WRITES:
            obj = frame.f_locals.get("obj") or {}
            what = WRITES[name].format(kind=obj.get("kind"))
            if what in STEPS and what not in paths:
                paths[what] = chain(frame.f_back)
        if name == "add" and rel == "trainer/framework/kube/queue.py" and "watch event -> queue" not in paths:
            paths["watch event -> queue"] = chain(frame)

    sys.setprofile(profile)
    try:
        kube.put(tj)  # stored, and its watch event fed to the TrainJob informer
        started = False
        for _ in range(200):
            if kube.count("patch_status", "TrainJob") and _jobs_written(kube):
                break
            if _jobs_written(kube) and not started:
                # The Job controller's part: the Job's pods run, which the TrainJob's status counts.
                job = next(w.body for w in kube.writes if w.kind == "Job")
                kube.put({**kube.objects[(JOBS, key_of(job))], "status": {"active": 2, "ready": 2}})
                started = True
            await asyncio.sleep(0.01)
        while len(queue) or queue._processing:  # the reconcile under way ends
            await asyncio.sleep(0.01)
    finally:
        sys.setprofile(None)
        worker.cancel()
    if not (_jobs_written(kube) and kube.count("patch_status", "TrainJob")):
        raise RuntimeError(f"the TrainJob's Job and status were not written: {kube.writes}")
    paths["calls"] = [f"{k} {v}" for k, v in calls.items()]
    return files, paths


def layer_of_file(path: str) -> int:
    """The layer (an index of :data:`tests.test_layers.LAYER_NAMES`) of a project file ``trainer/jobs/x.py``."""
    parts = Path(path).with_suffix("").parts
    return layer_of(package_of(".".join(parts[:-1] if parts[-1] == "__init__" else parts)))


def by_layer(files: list[str]) -> dict[str, list[str]]:
    """``files`` grouped by layer name, lowest layer first, each group in the order first entered."""
    out: dict[str, list[str]] = {name: [] for name in LAYER_NAMES}
    for f in files:
        out[LAYER_NAMES[layer_of_file(f)]].append(f)
    return {name: group for name, group in out.items() if group}


def role_of(path: str) -> str:
    """``plumbing`` (api, framework), ``feature`` (a ``features/`` folder of the job layer or a kind, or a
    kind's ``spec/``), ``story`` (the rest of the job layer and the kinds) or ``entry`` (the layers above)."""
    layer = LAYER_NAMES[layer_of_file(path)]
    if layer in ("api", "framework"):
        return "plumbing"
    if layer in ("job layer", "kinds"):
        return "feature" if "/features/" in path or "/spec/" in path else "story"
    return "entry"


def main() -> None:
    configure_logging("json", "warning")
    files, paths = asyncio.run(walk())
    print(f"project files entered from the watch event to the Job create and the status write: {len(files)}")
    roles = [role_of(f) for f in files]
    print(", ".join(f"{role} {roles.count(role)}" for role in ("story", "feature", "plumbing", "entry")))
    for name, group in by_layer(files).items():
        print(f"{name}: {len(group)}")
        for role in ("story", "feature", "plumbing", "entry"):
            mine = [f for f in group if role_of(f) == role]
            if mine:
                print(f"  {role}: {len(mine)}")
                for f in mine:
                    print(f"    {f}")
    calls = {k: int(v) for k, v in (c.rsplit(" ", 1) for c in paths.pop("calls"))}
    on_path = sorted({frame.split(":")[0] for step in paths.values() for frame in step})
    print(f"files on the call paths below: {len(on_path)}")
    reconciles = sum(v for k, v in calls.items() if k.endswith(":reconcile"))
    print(f"reconciles: {reconciles}; project function calls: {sum(calls.values())}")
    print("the most called project functions, calls per reconcile:")
    for name, n in sorted(calls.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  {name}: {n / max(reconciles, 1):g}")
    for step, frames in paths.items():
        if step == "watch event":
            continue
        print(f"{step}: {len(frames)} frames")
        for f in frames:
            print(f"  {f}")


if __name__ == "__main__":
    main()
