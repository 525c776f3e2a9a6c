"""LocalCluster: a real Kubernetes control plane on loopback, with KWOK fake nodes, no containers.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok run as detached processes
(see :mod:`localcluster.process`), optionally followed by Volcano (vc-scheduler,
vc-controller-manager, then vc-webhook-manager; :mod:`localcluster.volcano`) and Kueue
(:mod:`localcluster.kueue`). Their state lives in ``state_dir``::

    state_dir/
      kubeconfig.yaml          admin kubeconfig, context "trainer-local"
      ports.json               loopback ports, reused by later starts
      pki/                     CA, serving and client certificates, service-account keys
      kubeconfigs/             one kubeconfig per component
      etcd/                    etcd data (wiped on every cold start: each start is a fresh cluster)
      run/<component>.pid      pids of the running processes
      logs/<component>.log     their output
      volcano/scheduler.conf   vc-scheduler's configuration (alone in its directory: it is watched)
      volcano-webhook/         vc-webhook-manager's port, serving certificate and webhook configurations
      kueue/config.yaml        Kueue's Configuration; kueue/webhook-certs/ its serving certificate;
                               kueue/crds/ its CRDs as applied (conversion by its webhook server);
                               kueue/webhooks.yaml its admission webhooks as applied

Start order: the core, then the CRDs of the requested optional components and the ``extra_crds``
(one server-side apply, in that order, waited Established), then Volcano and Kueue; ``stop()``
goes in reverse.

A second ``start()`` on a healthy running cluster only makes sure the nodes exist, re-applies the
CRDs and starts the requested optional components that are not running, so the cluster started
by one command survives it and is stopped later by ``stop()`` from another one.
"""

from __future__ import annotations

import json
import random
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from localcluster import kueue, volcano
from localcluster.api import ApiClient
from localcluster.binaries import binary_paths, component_dir, crd_dir, ensure_binaries
from localcluster.crds import FIELD_MANAGER, apply_crds
from localcluster.pki import (
    POD_GATEWAY,
    SERVICE_IP,
    Pki,
    ensure_client_cert,
    ensure_pki,
    write_kubeconfig,
    write_serving_cert,
)
from localcluster.process import Component

STAGES_FILE = Path(__file__).resolve().parent / "kwok-stages.yaml"
CONTEXT = "trainer-local"
SERVICE_CIDR = f"{SERVICE_IP.rsplit('.', 1)[0]}.0/24"  # 10.0.0.0/24
POD_CIDR = "10.1.0.1/16"  # fake pod IPs handed out by kwok
NODE_IP = "127.0.0.1"  # InternalIP of every node: loopback, so nothing ever leaves the machine
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
# The Workload API (scheduling.k8s.io/v1beta1 Workload and PodGroup, beta in Kubernetes 1.37 but off by
# default) and the kube-scheduler's gang scheduling of a PodGroup: GenericWorkload on the apiserver, the
# scheduler and the controller manager (its PodGroup protection controller releases the finalizer the
# apiserver's admission puts on a PodGroup that pods use). Dynamic Resource Allocation is on by default.
FEATURE_GATES = "GenericWorkload=true"
RUNTIME_CONFIG = "scheduling.k8s.io/v1beta1=true"
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
VOLCANO_COMPONENTS = ("vc-scheduler", "vc-controller-manager", "vc-webhook-manager")
VOLCANO_WEBHOOK = "vc-webhook-manager"  # started once Volcano's queues are Open (see localcluster.volcano)
KUEUE_COMPONENTS = ("kueue",)
OPTIONAL_COMPONENTS = (*VOLCANO_COMPONENTS, *KUEUE_COMPONENTS)
# Client identities of the optional components: kubeconfig name -> (common name, organization).
OPTIONAL_USERS: dict[str, tuple[str, str]] = {
    "volcano": ("volcano", "system:masters"),
    "kueue": ("kueue", "system:masters"),
}
PORT_NAMES = ("etcd_client", "etcd_peer", "apiserver")
NODE_PREFIX = "kwok-node-"


def _stderr(message: str) -> None:
    print(f"[cluster] {message}", file=sys.stderr, flush=True)


def free_ports(count: int) -> list[int]:
    """``count`` distinct free TCP ports on 127.0.0.1 (all bound at once, then released)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


RESERVED_PORTS = range(24000, 32000)
"""Below Linux's ephemeral range (32768-60999): no outgoing connection and no port-0 bind takes one."""

CLUSTER_PORTS = range(20000, 24000)
"""The local clusters' own ports (etcd's, the apiserver's): below the ephemeral range too, so that a
restarted apiserver finds its port free, and apart from :data:`RESERVED_PORTS`, which are chosen minutes
before they are bound (a cluster started meanwhile must not take one)."""


def reserved_ports(count: int, ports: range = RESERVED_PORTS) -> list[int]:
    """``count`` distinct ports of ``ports`` (default :data:`RESERVED_PORTS`) free on 127.0.0.1 now, in
    random order: for ports chosen long before they are bound (at import) or bound again after a restart,
    which a port of the ephemeral range would not survive (any connection made meanwhile may take it).
    Raises ``RuntimeError`` when too few are free."""
    chosen: list[int] = []
    for port in random.sample(ports, len(ports)):
        if _port_is_free(port):
            chosen.append(port)
            if len(chosen) == count:
                return chosen
    raise RuntimeError(f"fewer than {count} free ports in {ports}")


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Like the Go servers: a port whose old connections linger in TIME_WAIT is reusable.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class LocalCluster:
    """A local control plane with ``nodes`` KWOK nodes, kept in ``state_dir``.

    As a pytest session fixture::

        @pytest.fixture(scope="session")
        def cluster(tmp_path_factory):
            with LocalCluster(tmp_path_factory.mktemp("cluster"), volcano=True) as c:
                yield c

    ``volcano`` and ``kueue`` add those real components (off by default); ``extra_crds`` are CRD
    manifests (files or directories) applied once the core is up and before they start.

    ``pod_ready_delay`` and ``pod_complete_delay`` (seconds, None: the defaults of
    ``kwok-stages.yaml``, 0 and 1) are how long a pod without the KWOK delay annotations stays
    Pending before Running and Ready (a kubelet pulling its image and starting it), then Running
    before Succeeded (its containers' run time), for workloads whose manifests cannot carry those
    annotations.

    ``service_account_admission`` turns on the apiserver's ServiceAccount admission plugin (off by
    default: fake pods need no token volume, and pods need not wait for their namespace's
    ServiceAccount), as a real cluster has it: pods get ``serviceAccountName: default`` and its
    token volume, and a pod may carry a projected ServiceAccount token of its own.

    ``apiserver_profiling`` serves the apiserver's Go profiles (``--profiling=true``,
    ``/debug/pprof/``, to clients allowed ``get`` on that path: the admin); off by default, as every
    other component's.
    """

    def __init__(
        self,
        state_dir: Path,
        nodes: int = 4,
        node_cpu: str = "16",
        node_memory: str = "64Gi",
        pods_per_node: int = 110,
        timeout: float = 180.0,
        log: Callable[[str], None] = _stderr,
        volcano: bool = False,
        kueue: bool = False,
        extra_crds: Sequence[Path] = (),
        pod_ready_delay: float | None = None,
        pod_complete_delay: float | None = None,
        service_account_admission: bool = False,
        apiserver_profiling: bool = False,
    ) -> None:
        """Describe the cluster; nothing is started before :meth:`start`."""
        self.apiserver_profiling = apiserver_profiling
        self.state_dir = Path(state_dir).resolve()
        self.pod_delays = {"pod-ready": pod_ready_delay, "pod-complete": pod_complete_delay}
        self.service_account_admission = service_account_admission
        self.volcano = volcano
        self.kueue = kueue
        self.extra_crds = [Path(path).resolve() for path in extra_crds]
        self.nodes = nodes
        self.node_cpu = node_cpu
        self.node_memory = node_memory
        self.pods_per_node = pods_per_node
        self.timeout = timeout
        self.log = log
        self.binaries: dict[str, Path] = binary_paths()
        unknown = [name for name in self.optional_components() if name not in self.binaries]
        if unknown:
            raise ValueError(f"no version of {', '.join(unknown)} in localcluster/versions.env")
        # Every component known to this checkout, requested or not, so that stop() stops them all.
        self._components = {
            name: Component(name, self.binaries[name], self.state_dir / "run", self.state_dir / "logs")
            for name in (*COMPONENTS, *OPTIONAL_COMPONENTS)
            if name in self.binaries
        }

    # --- paths and accessors -------------------------------------------------------------------

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig (context ``trainer-local``)."""
        return self.state_dir / "kubeconfig.yaml"

    @property
    def kubectl(self) -> Path:
        """The kubectl built with the cluster's Kubernetes version."""
        return self.binaries["kubectl"]

    @property
    def bin_dir(self) -> dict[str, Path]:
        """The directory of each binary (e.g. ``bin_dir["kubectl"]``), for PATH or direct calls."""
        return {name: path.parent for name, path in self.binaries.items()}

    @property
    def ports(self) -> dict[str, int]:
        """The loopback ports recorded in ``ports.json`` (empty before the first start)."""
        try:
            data = json.loads((self.state_dir / "ports.json").read_text())
        except (OSError, ValueError):
            return {}
        return {name: int(data[name]) for name in PORT_NAMES if name in data}

    @property
    def server(self) -> str:
        """The kube-apiserver URL."""
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    def env(self) -> dict[str, str]:
        """Environment variables pointing clients at this cluster (merge into ``os.environ``)."""
        return {"KUBECONFIG": str(self.kubeconfig)}

    def run_kubectl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run the built kubectl against this cluster and capture its output."""
        return subprocess.run(
            [str(self.kubectl), f"--kubeconfig={self.kubeconfig}", *args],
            check=check,
            capture_output=True,
            text=True,
        )

    def api(self) -> ApiClient:
        """An admin API client (client certificate of user ``admin``)."""
        pki = Pki(self.state_dir / "pki")
        return ApiClient(self.server, pki.ca_cert, pki.client_cert("admin"), pki.client_key("admin"))

    # --- lifecycle -----------------------------------------------------------------------------

    def __enter__(self) -> LocalCluster:
        """Start (or reuse) the cluster."""
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop the cluster."""
        self.stop()

    def status(self) -> dict[str, int | None]:
        """The pid of each component, optional ones included, ``None`` for one that is not running."""
        return {name: component.pid() for name, component in self._components.items()}

    def is_running(self) -> bool:
        """Whether every core component runs and the kube-apiserver reports ready."""
        if not all(self._components[name].is_alive() for name in self.core_components()):
            return False
        return self.apiserver_ready()

    def core_components(self) -> list[str]:
        """The components every start runs: kwok only with fake nodes (``nodes`` > 0)."""
        return [name for name in COMPONENTS if name != "kwok" or self.nodes > 0]

    def optional_components(self) -> list[str]:
        """The optional components this cluster asks for, in start order."""
        return [*(VOLCANO_COMPONENTS if self.volcano else ()), *(KUEUE_COMPONENTS if self.kueue else ())]

    def start(self) -> None:
        """Start the cluster, or reuse it if it is already running and healthy.

        Returns once the API server is ready, the controller manager has created the ``default``
        ServiceAccount, the ``nodes`` KWOK nodes are Ready and untainted, the ``extra_crds`` are
        Established and the requested optional components are ready: Volcano's ``default`` queue
        Open, Kueue's ``/readyz`` answering.
        """
        began = time.monotonic()
        # Built first, or waited for (another run may be building it: localcluster/build.sh holds one
        # lock per cache); the timeout is for starting, and counts from here.
        self.binaries = ensure_binaries(optional=self.optional_components(), kwok=self.nodes > 0)
        deadline = time.monotonic() + self.timeout
        if self.is_running():
            self.log(f"reusing the running cluster in {self.state_dir}")
            self._ensure_nodes(deadline)
            started: list[str] = []
            try:
                self._start_optional(deadline, started)
            except BaseException:
                stopping = f"; stopping {', '.join(started)}" if started else ""
                self.log(f"starting the optional components failed{stopping}")
                for name in reversed(started):
                    self._components[name].stop()
                raise
            self.log(f"ready in {time.monotonic() - began:.1f}s")
            return
        if any(component.is_alive() for component in self._components.values()):
            self.log("a previous cluster is partly running or unhealthy: stopping it")
            self.stop()

        self.state_dir.mkdir(parents=True, exist_ok=True)
        ports = self._ensure_ports()
        pki = ensure_pki(self.state_dir / "pki")
        server = f"https://127.0.0.1:{ports['apiserver']}"
        kubeconfigs = self.state_dir / "kubeconfigs"
        kubeconfigs.mkdir(exist_ok=True)
        write_kubeconfig(self.kubeconfig, pki, "admin", server, CONTEXT)
        for user in ("kube-controller-manager", "kube-scheduler", "kwok"):
            write_kubeconfig(kubeconfigs / f"{user}.yaml", pki, user, server, CONTEXT)

        try:
            self._start_etcd(ports)
            self._wait("etcd healthy", deadline, lambda: self._etcd_healthy(ports["etcd_client"]), "etcd")
            self._start_apiserver(ports)
            self._wait("kube-apiserver ready", deadline, self.apiserver_ready, "kube-apiserver")
            self._start_controller_manager()
            self._start_scheduler()
            if self.nodes > 0:
                self._start_kwok()
            self._wait("default ServiceAccount", deadline, self._default_service_account, "kube-controller-manager")
            self._ensure_nodes(deadline)
            self._start_optional(deadline, [])
            for name in (*self.core_components(), *self.optional_components()):
                component = self._components[name]
                if not component.is_alive():
                    raise RuntimeError(f"{component.name} exited during start:\n{component.log_tail()}")
        except BaseException:
            self.log(f"start failed, logs in {self.state_dir / 'logs'}; stopping")
            self.stop()
            raise
        self.log(f"cluster up in {time.monotonic() - began:.1f}s: KUBECONFIG={self.kubeconfig}")

    def stop(self, purge: bool = False) -> None:
        """Stop every component (SIGTERM, then SIGKILL), optional ones included, in reverse start order.

        With ``purge`` the whole ``state_dir`` is deleted afterwards.
        """
        for component in reversed(self._components.values()):
            component.stop()
        if purge:
            shutil.rmtree(self.state_dir, ignore_errors=True)

    # --- restarting the API server alone -------------------------------------------------------

    def stop_apiserver(self, timeout: float = 2.0) -> None:
        """Stop the kube-apiserver alone: SIGTERM, then SIGKILL after ``timeout`` seconds (it stops
        listening at once, but its graceful shutdown can outlast open watch connections by seconds).
        etcd and every other component keep running; their clients retry until it is back."""
        self._components["kube-apiserver"].stop(timeout)
        self.log("stopped kube-apiserver")

    def start_apiserver(self, timeout: float | None = None) -> float:
        """Start the kube-apiserver with the flags, ports and certificates of :meth:`start` (a no-op
        when it runs) and wait until ``/readyz`` answers 200.

        Returns the ``time.monotonic()`` (seconds) of the first 200 (polled every 50 ms).
        Raises ``RuntimeError`` when etcd is not running, the cluster was never started (no
        ports) or the apiserver exits while starting, ``TimeoutError`` after ``timeout`` seconds
        (default: the cluster's ``timeout``).
        """
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        ports = self.ports
        if len(ports) != len(PORT_NAMES):
            raise RuntimeError(f"no ports recorded in {self.state_dir / 'ports.json'}: start() the cluster first")
        if not self._components["etcd"].is_alive():
            raise RuntimeError("etcd is not running: start() the whole cluster instead")
        if not self._components["kube-apiserver"].is_alive():
            # A stopped apiserver's socket is released when its process is gone, not when it is signalled.
            self._wait("kube-apiserver's port free", deadline, lambda: _port_is_free(ports["apiserver"]))
            self._start_apiserver(ports)
        return self._wait("kube-apiserver ready", deadline, self.apiserver_ready, "kube-apiserver", interval=0.05)

    def restart_apiserver(self, timeout: float | None = None) -> float:
        """Stop the kube-apiserver (:meth:`stop_apiserver`) and start it again (:meth:`start_apiserver`).

        Returns the ``time.monotonic()`` at which ``/readyz`` answered 200 again. Every component
        that ran before still runs then (each reconnects by itself, client-go's reflectors with
        their backoff); raises ``RuntimeError`` naming any that exited meanwhile, with its log
        tail, and what :meth:`start_apiserver` raises.
        """
        running = [name for name, component in self._components.items() if component.is_alive()]
        if "kube-apiserver" not in running:
            raise RuntimeError("kube-apiserver is not running: nothing to restart")
        self.stop_apiserver()
        ready = self.start_apiserver(timeout)
        died = [name for name in running if not self._components[name].is_alive()]
        if died:
            tails = "\n".join(f"{name} log:\n{self._components[name].log_tail()}" for name in died)
            raise RuntimeError(f"{', '.join(died)} exited while the kube-apiserver restarted:\n{tails}")
        return ready

    # --- components ----------------------------------------------------------------------------

    def _ensure_ports(self) -> dict[str, int]:
        ports = self.ports
        if len(ports) != len(PORT_NAMES) or not all(_port_is_free(port) for port in ports.values()):
            # Not ephemeral ports: a connection made while the apiserver is down may take one (CLUSTER_PORTS).
            ports = dict(zip(PORT_NAMES, reserved_ports(len(PORT_NAMES), CLUSTER_PORTS), strict=True))
            (self.state_dir / "ports.json").write_text(json.dumps(ports, indent=2) + "\n")
        return ports

    def _start(self, name: str, args: list[str], env: dict[str, str] | None = None) -> None:
        pid = self._components[name].start(args, env=env, cwd=self.state_dir)
        self.log(f"started {name} (pid {pid})")

    def _start_etcd(self, ports: dict[str, int]) -> None:
        data_dir = self.state_dir / "etcd"
        shutil.rmtree(data_dir, ignore_errors=True)  # every cold start is a fresh cluster
        client = f"http://127.0.0.1:{ports['etcd_client']}"
        peer = f"http://127.0.0.1:{ports['etcd_peer']}"
        self._start(
            "etcd",
            [
                "--name=trainer-local",
                f"--data-dir={data_dir}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=trainer-local={peer}",
                "--initial-cluster-state=new",
                "--unsafe-no-fsync=true",
                # 8 GiB instead of 2: a 50,000-TrainJob bench keeps ~250,000 objects and their history.
                "--quota-backend-bytes=8589934592",
                # A single member on loopback: healthy ~0.13 s after its start instead of ~0.74 s with the
                # defaults (100 and 1000 ms). Its raft ticks cost CPU all its life: idle, 1.3 % of a core
                # at 50 ms against 2.6 % at 10 ms and 0.7 % at 100 ms (etcd v3.5.35, 60 s each, 2 cores).
                "--heartbeat-interval=50",
                "--election-timeout=250",
                "--log-level=warn",
            ],
        )

    def _start_apiserver(self, ports: dict[str, int]) -> None:
        pki = ensure_pki(self.state_dir / "pki")
        self._start(
            "kube-apiserver",
            [
                f"--etcd-servers=http://127.0.0.1:{ports['etcd_client']}",
                f"--cert-dir={pki.dir}",
                f"--tls-cert-file={pki.apiserver_cert}",
                f"--tls-private-key-file={pki.apiserver_key}",
                f"--client-ca-file={pki.ca_cert}",
                f"--secure-port={ports['apiserver']}",
                # Loopback for the host's clients, and the pod gateway for pods on real nodes: the
                # "kubernetes" Service's endpoint is that address (kube-proxy routes its ClusterIP there).
                "--bind-address=0.0.0.0",
                f"--advertise-address={POD_GATEWAY}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--allow-privileged=true",
                "--authorization-mode=RBAC",
                f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
                f"--service-account-key-file={pki.sa_pub}",
                f"--service-account-signing-key-file={pki.sa_key}",
                # Fake pods need no token volume, and pods need not wait for their ServiceAccount.
                *([] if self.service_account_admission else ["--disable-admission-plugins=ServiceAccount"]),
                f"--feature-gates={FEATURE_GATES}",
                f"--runtime-config={RUNTIME_CONFIG}",
                f"--profiling={'true' if self.apiserver_profiling else 'false'}",
            ],
        )

    def _start_controller_manager(self) -> None:
        pki = ensure_pki(self.state_dir / "pki")
        self._start(
            "kube-controller-manager",
            [
                f"--kubeconfig={self.state_dir / 'kubeconfigs' / 'kube-controller-manager.yaml'}",
                "--secure-port=0",
                "--leader-elect=false",
                "--controllers=*",
                "--use-service-account-credentials=false",
                f"--service-account-private-key-file={pki.sa_key}",
                f"--root-ca-file={pki.ca_cert}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                f"--feature-gates={FEATURE_GATES}",
                "--profiling=false",
            ],
        )

    def _start_scheduler(self) -> None:
        self._start(
            "kube-scheduler",
            [
                f"--kubeconfig={self.state_dir / 'kubeconfigs' / 'kube-scheduler.yaml'}",
                "--secure-port=0",
                "--leader-elect=false",
                f"--feature-gates={FEATURE_GATES}",
                "--profiling=false",
            ],
        )

    def _start_kwok(self) -> None:
        self._start(
            "kwok",
            [
                f"--kubeconfig={self.state_dir / 'kubeconfigs' / 'kwok.yaml'}",
                f"--config={self._stages_file()}",
                "--manage-all-nodes=false",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                "--manage-nodes-with-label-selector=",
                # Deprecated but honoured: a pod or node annotated kwok.x-k8s.io/status=custom is
                # left alone, so a test can write its status itself (e.g. make a pod fail).
                "--disregard-status-with-annotation-selector=kwok.x-k8s.io/status=custom",
                f"--cidr={POD_CIDR}",
                f"--node-ip={NODE_IP}",
            ],
            # kwok also reads $KWOK_WORKDIR/kwok.yaml (default ~/.kwok): keep it in state_dir.
            env={"KWOK_WORKDIR": str(self.state_dir / "kwok")},
        )

    def _stages_file(self) -> Path:
        """``kwok-stages.yaml``, or a copy in ``state_dir`` with the pod delays asked for."""
        delays = {name: delay for name, delay in self.pod_delays.items() if delay is not None}
        if not delays:
            return STAGES_FILE
        stages = list(yaml.safe_load_all(STAGES_FILE.read_text()))
        for stage in stages:
            if stage["metadata"]["name"] in delays:
                stage["spec"]["delay"]["durationMilliseconds"] = round(delays[stage["metadata"]["name"]] * 1000)
        path = self.state_dir / "kwok-stages.yaml"
        path.write_text(yaml.safe_dump_all(stages, sort_keys=False))
        return path

    # --- optional components: CRDs, Volcano, Kueue ----------------------------------------------

    def _start_optional(self, deadline: float, started: list[str]) -> None:
        """Apply the CRDs, start the requested optional components that are not running, wait.

        The names of the components started are appended to ``started`` as they start (for
        the caller's cleanup on failure).
        """
        wanted = self.optional_components()
        to_start = [name for name in wanted if not self._components[name].is_alive()]
        # The caller's CRDs go last: one of theirs replaces a bundled one of the same name (say the
        # project's own MPIJob CRD and the mpi-operator one that comes with Kueue's).
        crds: list[Path] = []
        if any(name in to_start for name in VOLCANO_COMPONENTS):
            crds.append(crd_dir("volcano"))
        kueue_ports: kueue.KueuePorts | None = None
        if any(name in to_start for name in KUEUE_COMPONENTS):
            # The ports first: the CRDs Kueue converts name its webhook server's.
            kueue_ports = self._new_kueue_ports()
            crds.append(
                kueue.write_crds(
                    crd_dir("kueue"),
                    component_dir("kueue") / "conversion",
                    self._kueue_dir / "crds",
                    Pki(self.state_dir / "pki").ca_cert,
                    kueue_ports.webhook,
                )
            )
            # Kueue's admission webhooks, applied with the CRDs (the same server-side apply).
            crds.append(
                kueue.write_webhooks(
                    component_dir("kueue") / "webhooks" / "manifests.yaml",
                    self._kueue_dir / "webhooks.yaml",
                    Pki(self.state_dir / "pki").ca_cert,
                    kueue_ports.webhook,
                )
            )
        crds += self.extra_crds
        if crds:
            began = time.monotonic()
            remaining = max(1.0, deadline - time.monotonic())
            names = apply_crds(self.kubectl, self.kubeconfig, self.api(), crds, timeout=remaining)
            self.log(f"{len(names)} CRDs applied and Established ({time.monotonic() - began:.1f}s)")
        if not wanted:
            return

        pki = Pki(self.state_dir / "pki")
        users = [user for user, wanted_user in (("volcano", self.volcano), ("kueue", self.kueue)) if wanted_user]
        for user in users:
            common_name, organization = OPTIONAL_USERS[user]
            ensure_client_cert(pki, user, common_name, organization)
            write_kubeconfig(self.state_dir / "kubeconfigs" / f"{user}.yaml", pki, user, self.server, CONTEXT)
        starters: dict[str, Callable[[], None]] = {
            "vc-scheduler": self._start_vc_scheduler,
            "vc-controller-manager": self._start_vc_controller_manager,
            "kueue": lambda: self._start_kueue(kueue_ports or self._new_kueue_ports()),
        }
        for name in to_start:
            if name != VOLCANO_WEBHOOK:
                starters[name]()
                started.append(name)

        if self.volcano:
            self._wait(
                f"Volcano queue(s) {', '.join(volcano.READY_QUEUES)} Open",
                deadline,
                lambda: volcano.queues_open(self.api()),
                *(name for name in VOLCANO_COMPONENTS if name != VOLCANO_WEBHOOK),
            )
            if VOLCANO_WEBHOOK in to_start:
                self._start_vc_webhook_manager()
                started.append(VOLCANO_WEBHOOK)
            port = int((self._volcano_webhook_dir / "port").read_text())
            self._wait("Volcano admission serving", deadline, lambda: volcano.serving(port), VOLCANO_WEBHOOK)
        if self.kueue:
            ports = kueue.read_ports(self._kueue_dir / "config.yaml")
            if ports is None:
                raise RuntimeError(f"kueue runs but {self._kueue_dir / 'config.yaml'} names no ports")
            self._wait("Kueue ready", deadline, lambda: kueue.ready(ports), *KUEUE_COMPONENTS)

    @property
    def _kueue_dir(self) -> Path:
        return self.state_dir / "kueue"

    def _start_vc_scheduler(self) -> None:
        kubeconfig = self.state_dir / "kubeconfigs" / "volcano.yaml"
        conf = volcano.write_scheduler_conf(self.state_dir / "volcano")
        self._start(
            "vc-scheduler",
            volcano.scheduler_args(kubeconfig, conf, self.state_dir / "logs"),
            env=volcano.env(kubeconfig, self.state_dir / "run"),
        )

    def _start_vc_controller_manager(self) -> None:
        kubeconfig = self.state_dir / "kubeconfigs" / "volcano.yaml"
        self._start(
            "vc-controller-manager",
            volcano.controller_manager_args(kubeconfig),
            env=volcano.env(kubeconfig, self.state_dir / "run"),
        )

    @property
    def _volcano_webhook_dir(self) -> Path:
        return self.state_dir / "volcano-webhook"

    def _start_vc_webhook_manager(self) -> None:
        """Install vc-webhook-manager's webhook configurations for a new port, then start it."""
        directory = self._volcano_webhook_dir
        pki = Pki(self.state_dir / "pki")
        (port,) = free_ports(1)
        write_serving_cert(pki, directory / "certs", "volcano-webhook")
        manifest = directory / "webhooks.yaml"
        manifest.write_text(yaml.safe_dump_all(volcano.webhook_configurations(pki.ca_cert, port), sort_keys=False))
        result = self.run_kubectl(
            "apply", "--server-side", "--force-conflicts", f"--field-manager={FIELD_MANAGER}", "-f", str(manifest)
        )
        (directory / "port").write_text(str(port))
        kubeconfig = self.state_dir / "kubeconfigs" / "volcano.yaml"
        self.log(f"Volcano admission configured on port {port}: {' '.join(result.stdout.split())}")
        self._start(
            VOLCANO_WEBHOOK,
            volcano.webhook_manager_args(kubeconfig, directory / "certs", pki.ca_cert, port),
            env=volcano.env(kubeconfig, self.state_dir / "run"),
        )

    def _new_kueue_ports(self) -> kueue.KueuePorts:
        """The ports of the last Kueue of this cluster when they are all free, else new ones."""
        ports = kueue.read_ports(self._kueue_dir / "config.yaml")
        if ports is None or not all(_port_is_free(p) for p in (ports.webhook, ports.metrics, ports.health)):
            ports = kueue.KueuePorts(*free_ports(3))
        return ports

    def _start_kueue(self, ports: kueue.KueuePorts, wait_for_pods_ready: dict[str, Any] | None = None) -> None:
        config = kueue.prepare(self._kueue_dir, Pki(self.state_dir / "pki"), ports, wait_for_pods_ready)
        self._start("kueue", kueue.args(config, self.state_dir / "kubeconfigs" / "kueue.yaml"))

    def restart_kueue(self, wait_for_pods_ready: dict[str, Any] | None = None, timeout: float = 60.0) -> None:
        """Stop Kueue and start it again with ``wait_for_pods_ready`` as its Configuration's
        ``waitForPodsReady`` (``None``: Kueue's defaults, as :meth:`start` runs it); return once its
        ``/readyz`` answers.

        Kueue comes back on the same ports (its CRDs' conversion and its admission webhooks name
        its webhook server's). Raises ``RuntimeError`` when this cluster runs no Kueue or Kueue
        exits while starting, ``TimeoutError`` when a port stays taken or Kueue is not ready
        within ``timeout`` seconds.
        """
        ports = kueue.read_ports(self._kueue_dir / "config.yaml")
        if not self.kueue or ports is None or not self._components["kueue"].is_alive():
            raise RuntimeError("this cluster runs no Kueue: start() it with kueue=True first")
        deadline = time.monotonic() + timeout
        self._components["kueue"].stop()
        self._wait(
            "Kueue's ports free",
            deadline,
            lambda: all(_port_is_free(p) for p in (ports.webhook, ports.metrics, ports.health)),
        )
        self._start_kueue(ports, wait_for_pods_ready)
        self._wait("Kueue ready", deadline, lambda: kueue.ready(ports), *KUEUE_COMPONENTS)

    # --- readiness -----------------------------------------------------------------------------

    def _wait(
        self, what: str, deadline: float, ready: Callable[[], bool], *components: str, interval: float = 0.1
    ) -> float:
        """Poll ``ready`` every ``interval`` seconds until it holds; fail early if one of ``components``
        died, or at ``deadline``. Returns the ``time.monotonic()`` at which it held."""
        began = time.monotonic()
        while not ready():
            for name in components:
                proc = self._components[name]
                if not proc.is_alive():
                    raise RuntimeError(f"{name} exited while waiting for {what}:\n{proc.log_tail()}")
            if time.monotonic() > deadline:
                tails = "\n".join(f"{name} log:\n{self._components[name].log_tail()}" for name in components)
                raise TimeoutError(f"timed out waiting for {what}; {tails}")
            time.sleep(interval)
        held = time.monotonic()
        self.log(f"{what} ({held - began:.1f}s)")
        return held

    @staticmethod
    def _etcd_healthy(port: int) -> bool:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
                return bool(json.load(resp).get("health") == "true")
        except (OSError, ValueError):
            return False

    def apiserver_ready(self) -> bool:
        """Whether the kube-apiserver answers ``/readyz`` with 200."""
        if "apiserver" not in self.ports:
            return False
        try:
            status, _ = self.api().get("/readyz")
        except OSError:
            return False
        return status == 200

    def _default_service_account(self) -> bool:
        status, _ = self.api().get("/api/v1/namespaces/default/serviceaccounts/default")
        return status == 200

    # --- nodes ---------------------------------------------------------------------------------

    def node_manifest(self, name: str) -> dict[str, Any]:
        """The Node object of one fake node, managed by kwok through its annotation."""
        resources = {"cpu": self.node_cpu, "memory": self.node_memory, "pods": str(self.pods_per_node)}
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
                "labels": {
                    "type": "kwok",
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "node-role.kubernetes.io/agent": "",
                },
            },
            "spec": {},
            "status": {"allocatable": resources, "capacity": resources},
        }

    def _ensure_nodes(self, deadline: float) -> None:
        api = self.api()
        names = [f"{NODE_PREFIX}{index}" for index in range(self.nodes)]
        for name in names:
            status, body = api.create("/api/v1/nodes", self.node_manifest(name))
            if status not in (201, 409):
                raise RuntimeError(f"creating node {name} failed ({status}): {body}")

        def all_ready() -> bool:
            status, body = api.get("/api/v1/nodes?labelSelector=type%3Dkwok")
            if status != 200:
                return False
            ready = {item["metadata"]["name"] for item in body.get("items", []) if _node_schedulable(item)}
            return ready.issuperset(names)

        self._wait(f"{len(names)} nodes Ready and untainted", deadline, all_ready, "kwok")


def _node_schedulable(node: dict[str, Any]) -> bool:
    """Ready condition True and no taints (the node lifecycle controller removes not-ready)."""
    conditions = node.get("status", {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    return ready and not node.get("spec", {}).get("taints")
