"""What the status server's clients need, as pure functions: the endpoint and token audience of a
TrainJob, and the environment, token volume and CA mount injected into its trainer pods.

Follows kubeflow/trainer ``pkg/runtime/framework/plugins/trainjobstatus/trainjobstatus.go`` (env
names, mount path, volume and ConfigMap names, token lifetime) and ``pkg/statusserver/utils.go``
(``TokenAudience``, ``StatusUrl``), KEP-2779 (``docs/proposals/2779-trainjob-progress``).

When the operator serves the status server (``--status-server-port``), its :class:`Injection` reaches
the TrainJob reconciler through its context, and :func:`inject` gives every container of the trainer
step's pod template:

* ``KUBEFLOW_TRAINER_SERVER_URL``: ``https://<host>:<port>/apis/trainer.kubeflow.org/v1alpha1/
  namespaces/<ns>/trainjobs/<name>/status``;
* ``KUBEFLOW_TRAINER_SERVER_CA_CERT``: ``/var/run/secrets/kubeflow/trainer/ca.crt``;
* ``KUBEFLOW_TRAINER_SERVER_TOKEN``: ``/var/run/secrets/kubeflow/trainer/token``;

and the pod a projected volume ``kubeflow-trainer-token`` mounted read-only at
``/var/run/secrets/kubeflow/trainer``: a ServiceAccount token for audience
:func:`token_audience` (valid an hour; the kubelet renews it) and ``ca.crt`` from the ConfigMap
``<trainjob>-tls-config`` (:func:`~trainer.statusserver.ca_publisher.ca_config_map`), one per
TrainJob, owned by it.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainer.api.kinds import TRAINER_GROUP, TRAINER_VERSION, TRAINJOBS
from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.framework.json_codec import JSON
from trainer.framework.merge import merge_named_replace, upsert_env

TOKEN_AUDIENCE_PREFIX = TRAINER_GROUP
"""Prefix of the audience of a TrainJob's tokens (upstream ``TokenAudiencePrefix``)."""
ENV_URL = "KUBEFLOW_TRAINER_SERVER_URL"
ENV_CA_CERT = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
ENV_TOKEN = "KUBEFLOW_TRAINER_SERVER_TOKEN"
MOUNT_PATH = "/var/run/secrets/kubeflow/trainer"
CA_FILE = "ca.crt"
TOKEN_FILE = "token"
TOKEN_VOLUME = "kubeflow-trainer-token"
TOKEN_EXPIRATION_SECONDS = 3600
"""Lifetime of the projected token; the kubelet refreshes it at 80% of its life."""
CA_KEY = "ca.crt"
"""Key of the CA PEM in the ConfigMap (and in the certificate Secret)."""
CA_CONFIG_MAP_SUFFIX = "-tls-config"


def token_audience(namespace: str, name: str) -> str:
    """The audience a token must carry to update TrainJob ``namespace/name``:
    ``trainer.kubeflow.org/v1alpha1/namespaces/<ns>/trainjobs/<name>/status`` (upstream
    ``statusserver.TokenAudience``)."""
    return f"{TOKEN_AUDIENCE_PREFIX}/{TRAINER_VERSION}/namespaces/{namespace}/trainjobs/{name}/status"


def status_path(namespace: str, name: str) -> str:
    """The request path of TrainJob ``namespace/name``'s endpoint:
    ``/apis/trainer.kubeflow.org/v1alpha1/namespaces/<ns>/trainjobs/<name>/status`` (upstream
    ``statusserver.StatusUrl``; the same path as the TrainJob's status subresource)."""
    return TRAINJOBS.path(namespace, name, "status")


def ca_config_map_name(trainjob: str) -> str:
    """Name of the ConfigMap holding the status server's CA for one TrainJob: ``<trainjob>-tls-config``."""
    return f"{trainjob}{CA_CONFIG_MAP_SUFFIX}"


def base_url(host: str, port: int) -> str:
    """``https://<host>:<port>`` (an IPv6 address in brackets)."""
    return f"https://{f'[{host}]' if ':' in host else host}:{port}"


@dataclass(frozen=True)
class Injection:
    """Where the trainer pods reach the status server."""

    base_url: str
    """``https://<host>:<port>``, no trailing slash."""

    def url(self, namespace: str, name: str) -> str:
        """The full endpoint URL of TrainJob ``namespace/name``."""
        return self.base_url + status_path(namespace, name)


def environment(namespace: str, name: str, where: Injection) -> list[JSON]:
    """The three ``KUBEFLOW_TRAINER_SERVER_*`` variables for TrainJob ``namespace/name``."""
    return [
        {"name": ENV_URL, "value": where.url(namespace, name)},
        {"name": ENV_CA_CERT, "value": f"{MOUNT_PATH}/{CA_FILE}"},
        {"name": ENV_TOKEN, "value": f"{MOUNT_PATH}/{TOKEN_FILE}"},
    ]


def token_volume(namespace: str, name: str) -> JSON:
    """The projected volume: the pod's ServiceAccount token for :func:`token_audience` at ``token``
    and the CA of ConfigMap :func:`ca_config_map_name` at ``ca.crt``."""
    return {
        "name": TOKEN_VOLUME,
        "projected": {
            "sources": [
                {
                    "serviceAccountToken": {
                        "audience": token_audience(namespace, name),
                        "expirationSeconds": TOKEN_EXPIRATION_SECONDS,
                        "path": TOKEN_FILE,
                    }
                },
                {"configMap": {"name": ca_config_map_name(name), "items": [{"key": CA_KEY, "path": CA_FILE}]}},
            ]
        },
    }


def inject(job: TrainJob, pod: JSON, where: Injection | None) -> None:
    """Give the trainer pod template ``pod`` (``{metadata, spec}``, changed in place) the status
    server's environment and token volume, when the operator serves one (``where`` not None);
    otherwise do nothing. Variables, mounts and the volume of the same names are replaced, as
    upstream's upserts do."""
    if where is None:
        return
    namespace, name = str(job.metadata.namespace or ""), str(job.metadata.name or "")
    spec = pod.setdefault("spec", {})
    env = environment(namespace, name, where)
    mount = {"name": TOKEN_VOLUME, "mountPath": MOUNT_PATH, "readOnly": True}
    for container in spec.get("containers") or []:
        upsert_env(container, env)
        container["volumeMounts"] = merge_named_replace(container.get("volumeMounts"), [mount])
    spec["volumes"] = merge_named_replace(spec.get("volumes"), [token_volume(namespace, name)])
