"""Which runtime a TrainJob expands from: its ``runtimeRef``, and the snapshot ConfigMap that freezes it.

Follows kubeflow/trainer KEP-2599: at the first reconcile the runtime's kind, name and spec are
stored in ConfigMap ``<trainjob>-runtime-snapshot`` (key ``runtime``), owned by the TrainJob; later
edits or deletion of the runtime never change the job.
"""

from __future__ import annotations

import json

import yaml

from api import labels as L
from api.trainer_v1alpha1 import ClusterTrainingRuntime
from trainer.framework import json_codec
from trainer.framework.json_codec import JSON
from trainer.framework.meta import meta
from trainer.framework.owner import owned_config_map

SNAPSHOT_SUFFIX = "-runtime-snapshot"
SNAPSHOT_KEY = "runtime"


def snapshot_name(trainjob: str) -> str:
    """Name of the ConfigMap that freezes a TrainJob's runtime."""
    return f"{trainjob}{SNAPSHOT_SUFFIX}"


def snapshot_config_map(obj: JSON, runtime_obj: JSON) -> JSON:
    """The ConfigMap ``<trainjob>-runtime-snapshot`` (key ``runtime``: the runtime's kind, name and spec
    as JSON), owned by the TrainJob ``obj`` (JSON with metadata name, namespace and uid): its runtime
    ``runtime_obj`` as it was at the first reconcile (kubeflow/trainer KEP-2599). Later edits or
    deletion of the runtime never change the job. Raises ``KeyError`` when ``obj`` lacks metadata."""
    name = obj["metadata"]["name"]
    frozen = {
        "apiVersion": runtime_obj.get("apiVersion"),
        "kind": runtime_obj.get("kind"),
        "metadata": {"name": meta(runtime_obj).name},
        "spec": runtime_obj.get("spec"),
    }
    data = {SNAPSHOT_KEY: json.dumps(frozen, sort_keys=True)}
    return owned_config_map(obj, snapshot_name(name), data, {L.JOBSET_NAME: name})


def runtime_of_snapshot(config_map: JSON) -> JSON | None:
    """The runtime (JSON) a snapshot ConfigMap froze, or None when it holds none or no object. This
    operator writes JSON; Kubeflow Trainer writes YAML (kubeflow/trainer ``pkg/runtime/core/snapshot.go``),
    read with ``yaml.safe_load`` after JSON fails, so a TrainJob it snapshotted keeps its runtime here.
    YAML with an alias (which upstream never writes; a tenant's alias bomb would) or nested past the
    parser's recursion limit reads as None."""
    text = (config_map.get("data") or {}).get(SNAPSHOT_KEY)
    if not text:
        return None
    try:
        data = json_codec.loads(text)
    except ValueError:
        try:
            if any(isinstance(e, yaml.AliasEvent) for e in yaml.parse(text, Loader=yaml.SafeLoader)):
                return None
            data = yaml.safe_load(text)
        except (yaml.YAMLError, RecursionError):
            return None
    return data if isinstance(data, dict) else None


def runtime_ref(obj: JSON) -> tuple[str, str]:
    """``(kind, name)`` of the runtime a TrainJob (as JSON) references; the kind defaults to
    ClusterTrainingRuntime, as upstream."""
    ref = (obj.get("spec") or {}).get("runtimeRef") or {}
    return str(ref.get("kind") or ClusterTrainingRuntime.KIND), str(ref.get("name") or "")
