"""The snapshot ConfigMap that freezes a TrainJob's runtime: its name and how its content reads.

Follows kubeflow/trainer KEP-2599: at the first reconcile the runtime's kind, name and spec are
stored in ConfigMap ``<trainjob>-runtime-snapshot`` (key ``runtime``), owned by the TrainJob; later
edits or deletion of the runtime never change the job. The operator writes it; the SDK reads it.
"""

from __future__ import annotations

from typing import Any

import orjson
import yaml

SNAPSHOT_SUFFIX = "-runtime-snapshot"
SNAPSHOT_KEY = "runtime"


def snapshot_name(trainjob: str) -> str:
    """Name of the ConfigMap that freezes a TrainJob's runtime."""
    return f"{trainjob}{SNAPSHOT_SUFFIX}"


def runtime_of_snapshot(config_map: dict[str, Any]) -> dict[str, Any] | None:
    """The runtime (JSON) a snapshot ConfigMap froze, or None when it holds none or no object. This
    operator writes JSON; Kubeflow Trainer writes YAML (kubeflow/trainer ``pkg/runtime/core/snapshot.go``),
    read with ``yaml.safe_load`` after JSON fails, so a TrainJob it snapshotted keeps its runtime here.
    YAML with an alias (which upstream never writes; a tenant's alias bomb would) or nested past the
    parser's recursion limit reads as None."""
    text = (config_map.get("data") or {}).get(SNAPSHOT_KEY)
    if not text:
        return None
    try:
        data = orjson.loads(text)
    except ValueError:
        try:
            if any(isinstance(e, yaml.AliasEvent) for e in yaml.parse(text, Loader=yaml.SafeLoader)):
                return None
            data = yaml.safe_load(text)
        except (yaml.YAMLError, RecursionError):
            return None
    return data if isinstance(data, dict) else None
