"""The samples users try on the demo's cluster name the image the demo builds and imports into its real
nodes (:data:`localcluster.realnode.images.TRAINING_IMAGE`), so each runs there as written: the README's
SDK block (``<!-- sdk -->``, run by ``e2e/test_upstream_e2e_real.py``), the chart's NOTES.txt sample
and the demo's own digits runtime."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import yaml

from e2e import doc_blocks
from localcluster.realnode.images import TRAINING_IMAGE

ROOT = Path(__file__).resolve().parents[2]
NOTES = ROOT / "charts" / "trainer" / "templates" / "NOTES.txt"


def manifests(path: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((ROOT / path).read_text()) if d]


def string_arguments(code: str, method: str) -> list[str]:
    """The string literals passed first to ``client.<method>(...)`` in ``code``."""
    return [
        node.args[0].value
        for node in ast.walk(ast.parse(code))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == method
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ]


def trainer_images(job: dict[str, Any]) -> list[str]:
    return [job["spec"]["trainer"]["image"]] if job.get("kind") == "TrainJob" else []


def test_the_readme_sdk_block_trains_on_the_demos_image() -> None:
    code = doc_blocks.python((ROOT / "README.md").read_text(), "sdk")
    (created,) = string_arguments(code, "create_job")
    (job,) = manifests(created)
    assert trainer_images(job) == [TRAINING_IMAGE], created
    # The runtime it runs on is applied by the block itself (the demo's cluster has only the digits one).
    applied = [m for path in string_arguments(code, "apply") for m in manifests(path)]
    runtimes = {(m["kind"], m["metadata"]["name"]) for m in applied}
    ref = job["spec"]["runtimeRef"]
    assert (ref.get("kind", "ClusterTrainingRuntime"), ref["name"]) in runtimes, (ref, runtimes)


def test_the_notes_sample_trains_on_the_demos_image_and_says_so() -> None:
    notes = NOTES.read_text()
    (apply,) = [line.strip() for line in notes.splitlines() if line.strip().startswith("trainer apply ")]
    files = re.findall(r"-f (\S+)", apply)
    jobs = [m for path in files for m in manifests(path) if m["kind"] == "TrainJob"]
    assert jobs and all(trainer_images(j) == [TRAINING_IMAGE] for j in jobs), files
    assert TRAINING_IMAGE in notes and "make demo" in notes
    waited = re.findall(r"trainer .*\bwait (\S+)", notes)
    assert waited == [j["metadata"]["name"] for j in jobs], waited


def test_the_demos_own_sample_runs_on_that_image() -> None:
    (runtime,) = manifests("config/samples/digits/runtime.yaml")
    pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert [c["image"] for c in pod["containers"]] == [TRAINING_IMAGE]
