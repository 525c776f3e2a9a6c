"""The upstream side of the bench: Kubeflow Trainer's controller manager and the JobSet controller.

``localcluster/build.sh upstream`` builds both from the Go module proxy (Trainer at ``UPSTREAM_TRAINER_VERSION``
of ``localcluster/versions.env``, JobSet at the version Trainer's ``go.mod`` requires) into
``$TRAINER_CACHE/bin/upstream-<version>/``, with the CRDs of both (``crds/``), Trainer's
ClusterTrainingRuntimes (``runtimes/``) and both admission webhook configurations (``webhooks/``), all
from the module sources. :func:`ensure_upstream` builds it when something is missing.

:class:`Upstream` runs both binaries against a local cluster, each as its own process, with upstream's
own defaults (Trainer: ``manifests/base/manager/controller_manager_config.yaml`` of kubeflow/trainer,
client QPS 50 and burst 100, 5 TrainJob reconciles at once; JobSet: its flag defaults, QPS and burst
500) but for what running out of a cluster needs:

- leader election off, loopback metrics and probe ports; Trainer's metrics in plain HTTP
  (``metrics.secureServing: false``); JobSet's stay HTTPS behind its authentication filter, read with
  a ServiceAccount token (:func:`metrics_token`);
- certificate management off (``certManagement.enable: false``, ``internalCertManagement.enable:
  false``): each webhook server serves a certificate of the cluster's CA written beforehand, Trainer's
  from controller-runtime's default directory under ``$TMPDIR`` (``k8s-webhook-server/serving-certs``,
  so the process gets a ``TMPDIR`` of its own), JobSet's from ``webhook.certDir``;
- JobSet's webhook configurations (``config/components/webhook/manifests.yaml`` of kubernetes-sigs/jobset:
  JobSet defaulting and validation, pod mutation and validation) are installed as shipped but for their
  names (prefixed ``jobset-``, as its kustomization does) and their client configuration, a URL on
  loopback with the cluster's CA (:func:`webhook_configurations`): JobSet needs its defaulting webhook
  (its controller dereferences the fields it defaults and panics on a JobSet that skipped it).
  Trainer's own webhook configurations are not installed: the apiserver calls no Trainer webhook, as it
  calls none of this project's operator in ``bench.burst`` (whose webhook is off by default).

Both watch every namespace (neither can be told one), so a cluster runs either this side or the
project's operator, never both.
"""

from __future__ import annotations

import base64
import os
import ssl
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from bench.cluster import Usage, read_usage, wait_readyz
from localcluster.api import ApiClient
from localcluster.binaries import BUILD_SCRIPT, cache_dir, versions
from localcluster.cluster import free_ports
from localcluster.pki import Pki, write_serving_cert
from trainer.api.kinds import JOBSETS, TRAINJOBS
from trainer.framework.json_codec import JSON

VERSION_VARIABLE = "UPSTREAM_TRAINER_VERSION"
"""The ``localcluster/versions.env`` variable naming the Kubeflow Trainer version of the upstream side."""
TRAINER_BINARY, JOBSET_BINARY = "trainer-controller-manager", "jobset-controller"
BUILT = (
    TRAINER_BINARY,
    JOBSET_BINARY,
    "crds/trainer.kubeflow.org_trainjobs.yaml",
    "crds/trainer.kubeflow.org_clustertrainingruntimes.yaml",
    "crds/jobset.x-k8s.io_jobsets.yaml",
    "runtimes/torch_distributed.yaml",
)
"""What ``localcluster/build.sh upstream`` leaves in the upstream directory, relative to it."""
TORCH_RUNTIME = "runtimes/torch_distributed.yaml"
"""Upstream's torch ClusterTrainingRuntime (``manifests/base/runtimes`` of kubeflow/trainer)."""
TRAINER_CONTROLLER = "trainjob_controller"
"""The ``controller`` label of Trainer's TrainJob reconciles (pkg/controller/trainjob_controller.go)."""
METRICS_READER = "bench-metrics"
"""ServiceAccount, ClusterRole and ClusterRoleBinding that let the bench read JobSet's ``/metrics``."""


def upstream_owner(obj: JSON) -> str | None:
    """The TrainJob ``obj`` belongs to on the upstream side: the name of its TrainJob owner (a JobSet),
    or of its JobSet owner (its Jobs and Service; upstream names the JobSet as its TrainJob,
    kubeflow/trainer ``pkg/runtime/framework/plugins/jobset``); ``None`` when neither owns it."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        group = str(ref.get("apiVersion", "")).split("/")[0]
        if (ref.get("kind"), group) in ((TRAINJOBS.kind, TRAINJOBS.group), (JOBSETS.kind, JOBSETS.group)):
            return str(ref["name"])
    return None


# --- the build ---------------------------------------------------------------------------------------


def upstream_dir(pinned: dict[str, str] | None = None, cache: Path | None = None) -> Path:
    """``<cache>/bin/upstream-<UPSTREAM_TRAINER_VERSION>`` (``pinned``: ``localcluster/versions.env`` by default,
    ``cache``: :func:`localcluster.binaries.cache_dir`). Raises ``KeyError`` when the version is not pinned."""
    pinned = versions() if pinned is None else pinned
    return (cache_dir() if cache is None else cache) / "bin" / f"upstream-{pinned[VERSION_VARIABLE]}"


def missing(directory: Path) -> list[str]:
    """The entries of :data:`BUILT` absent from ``directory`` (binaries must be executable)."""
    out = []
    for rel in BUILT:
        path = directory / rel
        ok = os.access(path, os.X_OK) if "/" not in rel else path.is_file()
        if not ok:
            out.append(rel)
    return out


def ensure_upstream() -> Path:
    """The upstream directory, built first by ``localcluster/build.sh upstream`` when :func:`missing` names
    something (the build's output goes to stderr). Raises ``subprocess.CalledProcessError`` when the
    build fails and ``FileNotFoundError`` when it leaves something out."""
    directory = upstream_dir()
    if missing(directory):
        subprocess.run(["bash", str(BUILD_SCRIPT), "upstream"], check=True)
        left = missing(directory)
        if left:
            raise FileNotFoundError(f"{BUILD_SCRIPT} upstream did not produce: {', '.join(left)}")
    return directory


def jobset_version(directory: Path) -> str:
    """The JobSet version built beside Trainer (the ``JOBSET_VERSION`` file the build writes), or
    ``"?"`` when the file is missing."""
    path = directory / "JOBSET_VERSION"
    return path.read_text().strip() if path.is_file() else "?"


# --- configuration (pure) ----------------------------------------------------------------------------


def trainer_config(metrics_port: int, health_port: int, webhook_port: int) -> dict[str, Any]:
    """Trainer's ``--config`` file (``config.trainer.kubeflow.org/v1alpha1`` Configuration): upstream's
    ``controller_manager_config.yaml`` values (TrainJob concurrency 5, QPS 50, burst 100) with loopback
    ports, plain-HTTP metrics, no leader election and no certificate management."""
    return {
        "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
        "kind": "Configuration",
        "health": {
            "healthProbeBindAddress": f"127.0.0.1:{health_port}",
            "readinessEndpointName": "readyz",
            "livenessEndpointName": "healthz",
        },
        "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}", "secureServing": False},
        "webhook": {"port": webhook_port, "host": "127.0.0.1"},
        "leaderElection": {"leaderElect": False},
        "controller": {
            "groupKindConcurrency": {
                "TrainJob.trainer.kubeflow.org": 5,
                "TrainingRuntime.trainer.kubeflow.org": 1,
                "ClusterTrainingRuntime.trainer.kubeflow.org": 1,
            }
        },
        "certManagement": {"enable": False},
        "clientConnection": {"qps": 50, "burst": 100},
    }


def jobset_config(metrics_port: int, health_port: int, webhook_port: int, cert_dir: Path) -> dict[str, Any]:
    """JobSet's ``--config`` file (``config.jobset.x-k8s.io/v1alpha1`` Configuration): loopback ports,
    the webhook's certificate from ``cert_dir``, no leader election, no internal certificate management;
    QPS and burst stay JobSet's defaults (500)."""
    return {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}"},
        "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
    }


def metrics_reader_objects(namespace: str = "default") -> list[tuple[str, dict[str, Any]]]:
    """``(collection path, object)`` of the ServiceAccount, ClusterRole (``get`` on the non-resource URL
    ``/metrics``) and ClusterRoleBinding named :data:`METRICS_READER`, in creation order."""
    subject = {"kind": "ServiceAccount", "name": METRICS_READER, "namespace": namespace}
    return [
        (
            f"/api/v1/namespaces/{namespace}/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": METRICS_READER}},
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": METRICS_READER},
                "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
            },
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": METRICS_READER},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": METRICS_READER},
                "subjects": [subject],
            },
        ),
    ]


def metrics_token(api: ApiClient, namespace: str = "default") -> str:
    """A token of the ServiceAccount :data:`METRICS_READER` (created with its role and binding when
    missing; TokenRequest, 24 h), which JobSet's metrics filter lets read ``/metrics``. Raises
    ``RuntimeError`` naming the refused request."""
    for path, obj in metrics_reader_objects(namespace):
        status, body = api.create(path, obj)
        if status not in (201, 409):
            raise RuntimeError(f"POST {path}: {status} {body}")
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{METRICS_READER}/token"
    status, body = api.create(
        path, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 86400}}
    )
    if status != 201:
        raise RuntimeError(f"POST {path}: {status} {body}")
    return str(body["status"]["token"])


def webhook_configurations(text: str, base_url: str, ca_pem: bytes, prefix: str) -> list[JSON]:
    """The webhook configurations of ``text`` (multi-document YAML of Mutating/Validating
    WebhookConfigurations, as controller-gen writes them: each webhook calls a Service at a path), each
    named ``prefix`` + its name, each webhook calling ``base_url`` + its path and trusting ``ca_pem``
    (base64 in ``caBundle``). Raises ``KeyError`` on a webhook without a service path."""
    out = []
    bundle = base64.b64encode(ca_pem).decode()
    for doc in yaml.safe_load_all(text):
        if not doc:
            continue
        doc["metadata"]["name"] = prefix + doc["metadata"]["name"]
        for hook in doc.get("webhooks") or []:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": base_url.rstrip("/") + path, "caBundle": bundle}
        out.append(doc)
    return out


WEBHOOK_COLLECTIONS = {
    "MutatingWebhookConfiguration": "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
    "ValidatingWebhookConfiguration": "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
}


# --- the processes -----------------------------------------------------------------------------------


class Upstream:
    """Trainer's controller manager and the JobSet controller of ``directory`` (:func:`ensure_upstream`)
    on the cluster of ``kubeconfig``, each its own process logging to ``state_dir``; read like
    :class:`bench.burst.CountedOperator`: :meth:`scrape` sums both processes' requests, :meth:`usage`
    both processes' CPU and memory."""

    def __init__(self, directory: Path, kubeconfig: Path, state_dir: Path, pki: Pki) -> None:
        """Describe both processes and write their configuration and certificates; nothing runs
        before :meth:`start`."""
        self.directory, self.kubeconfig, self.state_dir, self.pki = directory, kubeconfig, state_dir, pki
        ports = free_ports(6)
        self.trainer_ports = {"metrics": ports[0], "health": ports[1], "webhook": ports[2]}
        self.jobset_ports = {"metrics": ports[3], "health": ports[4], "webhook": ports[5]}
        self.tmp = state_dir / "trainer-tmp"
        jobset_certs = state_dir / "jobset-certs"
        write_serving_cert(pki, self.tmp / "k8s-webhook-server" / "serving-certs", "trainer-webhook")
        write_serving_cert(pki, jobset_certs, "jobset-webhook")
        t, j = self.trainer_ports, self.jobset_ports
        self.trainer_conf = state_dir / "trainer-config.yaml"
        self.trainer_conf.write_text(yaml.safe_dump(trainer_config(t["metrics"], t["health"], t["webhook"])))
        self.jobset_conf = state_dir / "jobset-config.yaml"
        self.jobset_conf.write_text(
            yaml.safe_dump(jobset_config(j["metrics"], j["health"], j["webhook"], jobset_certs))
        )
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.token = ""

    def commands(self) -> dict[str, tuple[list[str], dict[str, str]]]:
        """Per process name: its argv and the environment variables it gets beyond this one's."""
        return {
            "trainer": (
                [str(self.directory / TRAINER_BINARY), f"--config={self.trainer_conf}"],
                {"KUBECONFIG": str(self.kubeconfig), "TMPDIR": str(self.tmp)},
            ),
            "jobset": (
                [
                    str(self.directory / JOBSET_BINARY),
                    f"--config={self.jobset_conf}",
                    f"--kubeconfig={self.kubeconfig}",
                ],
                {"KUBECONFIG": str(self.kubeconfig)},
            ),
        }

    @property
    def pid(self) -> int:
        """The Trainer process id. Raises ``RuntimeError`` before :meth:`start`."""
        if "trainer" not in self.procs:
            raise RuntimeError("upstream is not started")
        return self.procs["trainer"].pid

    def start(self, api: ApiClient | None = None, only: str | None = None) -> None:
        """Start both processes, or the one named ``only`` (``trainer``, ``jobset``); returns at once
        (see :meth:`wait_ready`). With ``api``, first get the token JobSet's metrics need
        (:func:`metrics_token`) and install JobSet's webhook configurations (:func:`webhook_configurations`).
        Raises ``RuntimeError`` naming a refused request."""
        if api is not None and not self.token:
            self.token = metrics_token(api)
            text = (self.directory / "webhooks" / "jobset.yaml").read_text()
            url = f"https://127.0.0.1:{self.jobset_ports['webhook']}"
            for cfg in webhook_configurations(text, url, self.pki.ca_cert.read_bytes(), "jobset-"):
                path = WEBHOOK_COLLECTIONS[cfg["kind"]]
                status, body = api.create(path, cfg)
                if status not in (201, 409):
                    raise RuntimeError(f"POST {path}: {status} {body}")
        for name, (argv, extra) in self.commands().items():
            if only not in (None, name):
                continue
            with (self.state_dir / f"{name}.log").open("ab") as out:
                self.procs[name] = subprocess.Popen(
                    argv, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **extra}
                )

    async def wait_ready(self, timeout: float) -> None:
        """Wait until both ``/readyz`` answer 200. Raises :class:`bench.cluster.PhaseTimeout` after
        ``timeout`` seconds and ``RuntimeError`` when a process exits (naming its log)."""
        deadline = time.monotonic() + timeout
        for name, port in (("trainer", self.trainer_ports["health"]), ("jobset", self.jobset_ports["health"])):
            await wait_readyz(self.procs.get(name), port, deadline, f"upstream {name}", self.state_dir / f"{name}.log")

    async def metrics_texts(self) -> dict[str, str]:
        """Both processes' Prometheus text now: Trainer's over HTTP, JobSet's over HTTPS with the
        token (its certificate is self-signed: not verified). Raises ``aiohttp.ClientError``."""
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        out = {}
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{self.trainer_ports['metrics']}/metrics") as r:
                out["trainer"] = await r.text()
            url = f"https://127.0.0.1:{self.jobset_ports['metrics']}/metrics"
            async with http.get(url, ssl=insecure, headers=headers) as r:
                if r.status != 200:
                    raise aiohttp.ClientResponseError(r.request_info, (), status=r.status, message=await r.text())
                out["jobset"] = await r.text()
        return out

    def pids(self) -> dict[str, int]:
        """Process id by name."""
        return {name: p.pid for name, p in self.procs.items()}

    def usage(self) -> Usage:
        """Both processes' CPU seconds, RSS and peak RSS, summed (see :func:`bench.cluster.read_usage`)."""
        parts = [read_usage(pid) for pid in self.pids().values()]
        return Usage(cpu=sum(u.cpu for u in parts), rss=sum(u.rss for u in parts), peak=sum(u.peak for u in parts))

    def kill(self) -> None:
        """SIGKILL both and reap them."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def stop(self, only: str | None = None) -> None:
        """SIGTERM both, or the one named ``only``, then SIGKILL after 30 s."""
        procs = [p for name, p in self.procs.items() if only in (None, name)]
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
