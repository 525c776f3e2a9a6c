"""MultiCluster: a MultiKueue manager cluster and worker clusters, each a :class:`LocalCluster`.

Every cluster is a real control plane on loopback with Kueue and this project's operator
(``--gang-scheduler-name=kueue``, admission webhook on), the TrainJob, MPIJob and JobSet CRDs, and
the sample runtimes of ``config/samples``. Only the workers have KWOK nodes (2 x 8 CPU each):
nothing runs on the manager. Kueue objects (``kueue.x-k8s.io/v1beta2``, checked against
sigs.k8s.io/kueue@v0.19.2 ``apis/kueue/v1beta2`` and ``keps/693-multikueue``):

- each worker: ResourceFlavor ``kwok`` (nodes labelled ``type=kwok``), ClusterQueue
  ``cluster-queue`` with the worker's CPU quota (:data:`WORKER_CPUS`: worker-a 1, worker-b 8) and
  64Gi of memory, LocalQueue ``user-queue`` in ``default``;
- the manager: per worker a Secret ``<worker>-kubeconfig`` in ``kueue-system`` whose ``kubeconfig``
  carries inline credentials (CA, client certificate and key of a ``multikueue`` user of that
  worker: Kueue refuses file paths) and a MultiKueueCluster naming it; MultiKueueConfig
  ``multikueue`` listing the workers; AdmissionCheck ``multikueue`` (controller
  ``kueue.x-k8s.io/multikueue``) with that config; ResourceFlavor ``default``; ClusterQueue
  ``cluster-queue`` whose quota is the workers' sum and which requires the check; LocalQueue
  ``user-queue`` in ``default``.

Layout of ``state_dir``: one :class:`LocalCluster` state directory per cluster (``manager/``,
``worker-a/``, ``worker-b/``); in each, ``manifests/`` holds what was applied, ``logs/operator.log``
and ``run/operator.pid`` the operator, ``operator-ports.json`` its ports.

``start()`` on running clusters reuses them (as :meth:`LocalCluster.start` does), re-applies the
objects and starts the operators that are not running; ``stop()`` stops operators, then clusters.
"""

from __future__ import annotations

import base64
import json
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from localcluster import ROOT, kueue
from localcluster.api import ApiClient
from localcluster.binaries import ensure_binaries
from localcluster.cluster import LocalCluster, _port_is_free, free_ports
from localcluster.operator_sa import NAMESPACE as SA_NAMESPACE
from localcluster.pki import Pki, ensure_client_cert, ensure_pki
from localcluster.process import Component
from trainer.api.kinds import (
    KUEUE_ADMISSION_CHECKS,
    KUEUE_CLUSTER_QUEUES,
    KUEUE_MULTIKUEUE_CLUSTERS,
    VALIDATING_WEBHOOKS,
)
from trainer.webhook.server import CONFIG_NAME
from trainer.webhook.server import configurations as webhook_configurations

CRDS = ROOT / "config" / "crd" / "bases"
RUNTIMES = (
    ROOT / "config" / "samples" / "torch-distributed.yaml",
    ROOT / "config" / "samples" / "deepspeed-distributed.yaml",
)
MANAGER = "manager"
WORKER_CPUS: dict[str, str] = {"worker-a": "1", "worker-b": "8"}
"""Each worker's ClusterQueue CPU quota (Kubernetes quantities); the manager's is their sum."""
WORKER_MEMORY_GI = 64
QUEUE = "user-queue"
CLUSTER_QUEUE = "cluster-queue"
ADMISSION_CHECK = "multikueue"
MULTIKUEUE_CONFIG = "multikueue"
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
MULTIKUEUE_USER = ("multikueue", "system:masters")
"""The identity the manager's Kueue has on each worker: (common name, organization)."""
WEBHOOK_CONFIG = CONFIG_NAME
"""The operator's webhook configurations' name."""
FIELD_MANAGER = "trainer-e2e-multicluster"


def _stderr(message: str) -> None:
    print(f"[multicluster] {message}", file=sys.stderr, flush=True)


def _milli_cpus(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


def inline_kubeconfig(pki: Pki, user: str, server: str, context: str) -> dict[str, Any]:
    """A kubeconfig for ``user`` of the cluster of ``pki`` at ``server`` with every credential
    inline (``certificate-authority-data``, ``client-certificate-data``, ``client-key-data``), as
    MultiKueue requires (kueue ``pkg/controller/admissionchecks/multikueue/multikueuecluster.go``,
    ``validateKubeconfig``). Raises ``OSError`` when a PEM file is missing."""

    def data(path: Path) -> str:
        return base64.b64encode(path.read_bytes()).decode()

    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": {"server": server, "certificate-authority-data": data(pki.ca_cert)}}],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": data(pki.client_cert(user)),
                    "client-key-data": data(pki.client_key(user)),
                },
            }
        ],
        "contexts": [{"name": context, "context": {"cluster": context, "user": user}}],
        "current-context": context,
    }


def namespace_objects(namespace: str) -> list[dict[str, Any]]:
    """The Namespace and its LocalQueue ``user-queue`` (into ``cluster-queue``): the same on every cluster."""
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        kueue.local_queue(namespace, QUEUE, CLUSTER_QUEUE),
    ]


def worker_objects(cpu: str) -> list[dict[str, Any]]:
    """What a worker's Kueue needs: the KWOK flavor, ``cluster-queue`` with ``cpu`` CPUs, ``default``'s queue."""
    return [
        kueue.resource_flavor("kwok", {"type": "kwok"}),
        kueue.cluster_queue(CLUSTER_QUEUE, "kwok", cpu, f"{WORKER_MEMORY_GI}Gi"),
        *namespace_objects("default"),
    ]


def manager_objects(workers: Mapping[str, str], kubeconfigs: Mapping[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The manager's MultiKueue objects for ``workers`` (name -> CPU quota) reached through
    ``kubeconfigs`` (name -> inline kubeconfig); its ClusterQueue's quota is the workers' sum."""
    cpu = f"{sum(_milli_cpus(q) for q in workers.values())}m"
    memory = f"{WORKER_MEMORY_GI * len(workers)}Gi"
    objs: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": kueue.NAMESPACE}}]
    for name in workers:
        secret = f"{name}-kubeconfig"
        config = yaml.safe_dump(kubeconfigs[name], sort_keys=False)
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": secret, "namespace": kueue.NAMESPACE},
                "data": {"kubeconfig": base64.b64encode(config.encode()).decode()},
            }
        )
        objs.append(
            {
                "apiVersion": kueue.KUEUE_API_VERSION,
                "kind": "MultiKueueCluster",
                "metadata": {"name": name},
                "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": secret}}},
            }
        )
    objs += [
        {
            "apiVersion": kueue.KUEUE_API_VERSION,
            "kind": "MultiKueueConfig",
            "metadata": {"name": MULTIKUEUE_CONFIG},
            "spec": {"clusters": list(workers)},
        },
        {
            "apiVersion": kueue.KUEUE_API_VERSION,
            "kind": "AdmissionCheck",
            "metadata": {"name": ADMISSION_CHECK},
            "spec": {
                "controllerName": MULTIKUEUE_CONTROLLER,
                "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": MULTIKUEUE_CONFIG},
            },
        },
        kueue.resource_flavor("default"),
        kueue.cluster_queue(CLUSTER_QUEUE, "default", cpu, memory, admission_checks=[ADMISSION_CHECK]),
        *namespace_objects("default"),
    ]
    return objs


class MultiCluster:
    """A MultiKueue manager and its workers (``workers``: name -> CPU quota), in ``state_dir``.

    As a pytest fixture::

        with MultiCluster(tmp_path / "mc") as mc:
            mc.add_namespace("team-a")
            ...  # submit to mc.manager.kubeconfig
    """

    def __init__(
        self,
        state_dir: Path,
        workers: Mapping[str, str] = WORKER_CPUS,
        worker_nodes: int = 2,
        node_cpu: str = "8",
        timeout: float = 240.0,
        log: Callable[[str], None] = _stderr,
        operator_kubeconfig: Callable[[LocalCluster], Path] | None = None,
    ) -> None:
        """Describe the clusters; nothing is started before :meth:`start`. The operators connect
        with each cluster's admin kubeconfig, or with what ``operator_kubeconfig`` returns for it
        (e.g. their ServiceAccount's, see ``localcluster/operator_sa.py``)."""
        self.state_dir = Path(state_dir).resolve()
        self.operator_kubeconfig = operator_kubeconfig
        self.worker_cpus = dict(workers)
        self.timeout = timeout
        self.log = log

        def cluster(name: str, nodes: int) -> LocalCluster:
            return LocalCluster(
                self.state_dir / name,
                nodes=nodes,
                node_cpu=node_cpu,
                kueue=True,
                extra_crds=[CRDS],
                timeout=timeout,
                log=lambda message: log(f"{name}: {message}"),
            )

        self.manager = cluster(MANAGER, 0)
        self.workers = {name: cluster(name, worker_nodes) for name in self.worker_cpus}
        self._operators = {
            name: Component("operator", Path(sys.executable), c.state_dir / "run", c.state_dir / "logs")
            for name, c in self.clusters.items()
        }

    @property
    def clusters(self) -> dict[str, LocalCluster]:
        """Every cluster by name, the manager first."""
        return {MANAGER: self.manager, **self.workers}

    def operator_log(self, cluster: str) -> Path:
        """The log file of the operator of ``cluster``."""
        return self._operators[cluster].log_file

    # --- lifecycle -----------------------------------------------------------------------------

    def __enter__(self) -> MultiCluster:
        """Start (or reuse) every cluster."""
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop every cluster."""
        self.stop()

    def start(self) -> None:
        """Start the clusters (in parallel), apply their objects, start the operators; return once
        every MultiKueueCluster and the AdmissionCheck are Active, every ClusterQueue is Active and
        every operator is ready with its webhook installed. Raises what :meth:`LocalCluster.start`
        raises, ``TimeoutError`` after ``timeout`` seconds, ``RuntimeError`` when a process exits;
        on failure everything started is stopped."""
        began = time.monotonic()
        deadline = began + self.timeout
        ensure_binaries(optional=["kueue"])  # one build, before the parallel starts
        # Kueue's fixed metrics certificate path is shared: create it once, not in three racing starts.
        kueue.ensure_metrics_certs(ensure_pki(self.manager.state_dir / "pki"))
        try:
            with ThreadPoolExecutor(max_workers=len(self.clusters)) as pool:
                for future in [pool.submit(c.start) for c in self.clusters.values()]:
                    future.result()
            self.log(f"{len(self.clusters)} clusters up ({time.monotonic() - began:.1f}s)")
            self._configure()
            self._start_operators(deadline)
            self._wait_active(deadline)
        except BaseException:
            self.log("start failed; stopping every cluster")
            self.stop()
            raise
        self.log(f"ready in {time.monotonic() - began:.1f}s: KUBECONFIG={self.manager.kubeconfig}")

    def stop(self, purge: bool = False) -> None:
        """Stop the operators, then every cluster; with ``purge`` also delete ``state_dir``."""
        for operator in self._operators.values():
            operator.stop()
        with ThreadPoolExecutor(max_workers=len(self.clusters)) as pool:
            list(pool.map(lambda c: c.stop(purge=purge), self.clusters.values()))

    def status(self) -> dict[str, tuple[bool, int | None]]:
        """Per cluster: whether it runs, and its operator's pid (None when not running)."""
        return {name: (c.is_running(), self._operators[name].pid()) for name, c in self.clusters.items()}

    # --- objects -------------------------------------------------------------------------------

    def apply(self, cluster: str, objs: list[dict[str, Any]], name: str) -> None:
        """Server-side apply ``objs`` to ``cluster``, kept as ``manifests/<name>.yaml`` in its state
        directory. Raises ``RuntimeError`` with kubectl's output when it fails."""
        c = self.clusters[cluster]
        path = c.state_dir / "manifests" / f"{name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump_all(objs, sort_keys=False))
        args = ["apply", "--server-side", "--force-conflicts", f"--field-manager={FIELD_MANAGER}", "-f", str(path)]
        result = c.run_kubectl(*args, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"{cluster}: kubectl {' '.join(args)} failed:\n{result.stderr}{result.stdout}")

    def add_namespace(self, namespace: str) -> None:
        """Create ``namespace`` with its LocalQueue ``user-queue`` on every cluster (MultiKueue
        copies a job into the same namespace and queue on the worker)."""
        for name in self.clusters:
            self.apply(name, namespace_objects(namespace), f"namespace-{namespace}")

    def _configure(self) -> None:
        runtimes = [doc for path in RUNTIMES for doc in yaml.safe_load_all(path.read_text()) if doc]
        kubeconfigs = {}
        for name, worker in self.workers.items():
            self.apply(name, [*runtimes, *worker_objects(self.worker_cpus[name])], "setup")
            pki = Pki(worker.state_dir / "pki")
            ensure_client_cert(pki, MULTIKUEUE_USER[0], *MULTIKUEUE_USER)
            kubeconfigs[name] = inline_kubeconfig(pki, MULTIKUEUE_USER[0], worker.server, name)
        self.apply(MANAGER, [*runtimes, *manager_objects(self.worker_cpus, kubeconfigs)], "setup")

    # --- operators -----------------------------------------------------------------------------

    def _operator_ports(self, c: LocalCluster) -> tuple[int, int]:
        """(webhook, health) ports: the last ones of this cluster when free, else new ones."""
        path = c.state_dir / "operator-ports.json"
        try:
            ports = json.loads(path.read_text())
            webhook, health = int(ports["webhook"]), int(ports["health"])
            if _port_is_free(webhook) and _port_is_free(health):
                return webhook, health
        except (OSError, ValueError, KeyError, TypeError):
            pass
        webhook, health = free_ports(2)
        path.write_text(json.dumps({"webhook": webhook, "health": health}) + "\n")
        return webhook, health

    def _start_operators(self, deadline: float) -> None:
        health_ports = {}
        for name, c in self.clusters.items():
            operator = self._operators[name]
            path = c.state_dir / "operator-ports.json"
            if operator.is_alive():
                health_ports[name] = int(json.loads(path.read_text())["health"])
                continue
            webhook, health = self._operator_ports(c)
            # The webhook configurations come with the operator, here calling its port on 127.0.0.1; it
            # patches their caBundle (and is ready once it has).
            self.apply(name, webhook_configurations(f"https://127.0.0.1:{webhook}"), "webhook")
            kubeconfig = self.operator_kubeconfig(c) if self.operator_kubeconfig else c.kubeconfig
            args = ["-m", "trainer", "--kubeconfig", str(kubeconfig), "--gang-scheduler-name", "kueue"]
            args += ["--webhook-port", str(webhook), "--webhook-host", "127.0.0.1", "--log-format", "json"]
            args += ["--metrics-bind-address", "0", "--health-probe-bind-address", f"127.0.0.1:{health}"]
            if self.operator_kubeconfig:  # its certificate Secrets where its Role is
                args += ["--webhook-namespace", SA_NAMESPACE]
            pid = operator.start(args, cwd=ROOT)
            self.log(f"{name}: started the operator (pid {pid})")
            health_ports[name] = health
        for name, c in self.clusters.items():
            self._wait(
                f"{name}: operator ready and its webhook installed",
                deadline,
                partial(_operator_ready, c, health_ports[name]),
                self._operators[name],
            )

    # --- readiness -----------------------------------------------------------------------------

    def _wait_active(self, deadline: float) -> None:
        api = self.manager.api()
        for worker in self.workers:
            self._wait(
                f"MultiKueueCluster {worker} Active",
                deadline,
                partial(_active, api, KUEUE_MULTIKUEUE_CLUSTERS.path(name=worker)),
            )
        self._wait(
            f"AdmissionCheck {ADMISSION_CHECK} Active",
            deadline,
            partial(_active, api, KUEUE_ADMISSION_CHECKS.path(name=ADMISSION_CHECK)),
        )
        for name, c in self.clusters.items():
            self._wait(
                f"{name}: ClusterQueue {CLUSTER_QUEUE} Active",
                deadline,
                partial(_active, c.api(), KUEUE_CLUSTER_QUEUES.path(name=CLUSTER_QUEUE)),
            )

    def _wait(self, what: str, deadline: float, ready: Callable[[], bool], process: Component | None = None) -> None:
        began = time.monotonic()
        while not ready():
            if process is not None and not process.is_alive():
                raise RuntimeError(f"{process.log_file} ended while waiting for {what}:\n{process.log_tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {what}")
            time.sleep(0.2)
        self.log(f"{what} ({time.monotonic() - began:.1f}s)")


def _operator_ready(cluster: LocalCluster, health_port: int) -> bool:
    """Whether the operator answers ``/readyz`` on ``health_port`` (so its webhook configurations carry
    its CA) and they exist."""
    return _ready(health_port) and cluster.api().get(VALIDATING_WEBHOOKS.path(name=WEBHOOK_CONFIG))[0] == 200


def _ready(port: int) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
            return bool(resp.status == 200)
    except (OSError, ValueError):
        return False


def _active(api: ApiClient, path: str) -> bool:
    """Whether the object at ``path`` has condition ``Active`` True."""
    try:
        status, body = api.get(path)
    except OSError:
        return False
    if status != 200 or not isinstance(body, dict):
        return False
    conditions = (body.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Active" and c.get("status") == "True" for c in conditions)
