"""Which runtime a TrainJob expands from: its ``runtimeRef``, and the snapshot ConfigMap that freezes it.

Follows kubeflow/trainer KEP-2599: at the first reconcile the runtime's kind, name and spec are
stored in ConfigMap ``<trainjob>-runtime-snapshot`` (key ``runtime``), owned by the TrainJob; later
edits or deletion of the runtime never change the job.
"""

from __future__ import annotations

import json

from api import labels as L
from api.snapshot import SNAPSHOT_KEY as SNAPSHOT_KEY
from api.snapshot import SNAPSHOT_SUFFIX as SNAPSHOT_SUFFIX
from api.snapshot import runtime_of_snapshot as runtime_of_snapshot
from api.snapshot import snapshot_name as snapshot_name
from api.trainer_v1alpha1 import ClusterTrainingRuntime
from trainer.framework.json_codec import JSON
from trainer.framework.meta import meta
from trainer.framework.owner import owned_config_map


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


def runtime_ref(obj: JSON) -> tuple[str, str]:
    """``(kind, name)`` of the runtime a TrainJob (as JSON) references; the kind defaults to
    ClusterTrainingRuntime, as upstream."""
    ref = (obj.get("spec") or {}).get("runtimeRef") or {}
    return str(ref.get("kind") or ClusterTrainingRuntime.KIND), str(ref.get("name") or "")
