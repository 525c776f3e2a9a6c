"""torchtune's BuiltinTrainer for real, on a real node (kubelet + containerd): the torchtune sample
(``config/samples/torchtune-tiny``: upstream's ``torchtune-llama3.2-1b`` runtime, its initializers writing
a small Llama 3.2-shaped model, tokenizer and data set into the runtime's claim) runs ``tune run`` with
torchtune 0.6.1 on Debian's torch 2.6 (the ``torchtune`` image of :mod:`localcluster.realnode.images`),
LoRA on one CPU process: the operator rewrote upstream's command to the single-device LoRA recipe, the
trainer started after both initializers completed (``dependsOn``), trained, and saved its adapter.

The claim binds to a hostPath PersistentVolume the test makes, as an administrator provisions storage.

Runs where real nodes can (:func:`localcluster.realnode.node.unavailable`, ``make test`` included), else is
skipped with its reason; ``TRAINER_E2E_REAL=0`` skips it."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from e2e.helpers import LLAMA3_2_1B_LORA_COMMAND, ROOT, host_path_volume, trainjob_ended, what_happened
from localcluster import LocalCluster
from localcluster.client import Client, condition
from localcluster.realnode.node import NODE_SELECTOR, RealNodes, unavailable
from trainer.api.kinds import TRAINJOBS
from trainer.framework.json_codec import JSON

WHY_NOT = "TRAINER_E2E_REAL=0" if os.environ.get("TRAINER_E2E_REAL") == "0" else unavailable()
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(WHY_NOT is not None, reason=f"real pods: {WHY_NOT}")]
REAL_NODE_IMAGES = ("torchtune",)
SAMPLE = ROOT / "config" / "samples" / "torchtune-tiny"
STEPS = ("dataset-initializer", "model-initializer", "node")


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _finished(pod: JSON) -> datetime:
    (state,) = [s["state"]["terminated"] for s in pod["status"]["containerStatuses"]]
    return _time(state["finishedAt"])


async def test_upstreams_torchtune_runtime_fine_tunes_a_small_llama_with_lora_on_a_real_node(
    client: Client, ns: str, cluster: LocalCluster, real_nodes: RealNodes, tmp_path: Path
) -> None:
    cluster.run_kubectl("apply", "-n", ns, "-k", str(SAMPLE))
    storage = Path(tempfile.mkdtemp(prefix="torchtune-"))
    volume = tmp_path / "volume.yaml"
    volume.write_text(yaml.safe_dump(host_path_volume(ns, "initializer-tiny", storage)))
    cluster.run_kubectl("apply", "-f", str(volume))
    job = yaml.safe_load((SAMPLE / "trainjob.yaml").read_text())
    job["metadata"] = {"name": "tiny"}
    # This cluster has KWOK nodes too: the real ones only.
    job["spec"]["podTemplateOverrides"] = [
        {"targetJobs": [{"name": step} for step in STEPS], "spec": {"nodeSelector": NODE_SELECTOR}}
    ]
    await client.kube.create(TRAINJOBS, ns, job)

    try:
        tj = await trainjob_ended(client, ns, "tiny", timeout=300)
    except AssertionError as timed_out:
        listing = sorted(str(p.relative_to(storage)) for p in storage.rglob("*"))
        raise AssertionError(f"{timed_out}\n{what_happened(cluster, ns, 'tiny', real_nodes)}\n{listing}") from None
    pods = {
        p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"]: p
        for p in await client.pods(ns, "jobset.sigs.k8s.io/jobset-name=tiny")
    }
    text = cluster.run_kubectl("logs", "-n", ns, pods["node"]["metadata"]["name"], check=False).stdout
    assert condition(tj, "Complete"), (tj["status"], text)
    assert sorted(pods) == sorted(STEPS), sorted(pods)

    node = pods["node"]["spec"]["containers"][0]
    assert node["command"] == LLAMA3_2_1B_LORA_COMMAND, node["command"]
    assert node["args"] == job["spec"]["trainer"]["args"], node["args"]
    env = {e["name"]: e.get("value") for e in node.get("env", [])}
    assert (env.get("PET_NNODES"), env.get("PET_NPROC_PER_NODE")) == ("1", "1"), env
    assert "PET_NODE_RANK" in env, env  # from the pod's completion index
    assert "PET_MASTER_ADDR" not in env and "PET_MASTER_PORT" not in env, env
    # dependsOn: the trainer's pod started once both initializers had completed.
    started = _time(pods["node"]["status"]["startTime"])
    assert all(_finished(pods[step]) <= started for step in STEPS[:2]), [p["status"] for p in pods.values()]

    # tqdm's lines: "<epoch>|<step>|Loss: <value>", one step at least once each (max_steps_per_epoch=4).
    steps = {step: float(loss) for step, loss in re.findall(r"1\|(\d+)\|Loss: ([0-9.]+)", text)}
    assert sorted(steps) == ["1", "2", "3", "4"] and all(0 < loss < 100 for loss in steps.values()), text
    out = storage / "initializer-tiny" / "output" / "epoch_0"
    adapter = json.loads((out / "adapter_config.json").read_text())
    assert adapter["r"] == 4 and sorted(adapter["target_modules"]) == ["q_proj", "v_proj"], adapter
    assert (out / "adapter_model.safetensors").stat().st_size > 0
    assert (out / "model-00001-of-00001.safetensors").stat().st_size > 8_000_000  # the merged model
    cluster.run_kubectl("delete", "pv", f"{ns}-initializer-tiny", "--wait=false")
    shutil.rmtree(storage, ignore_errors=True)
