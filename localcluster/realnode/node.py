"""Real nodes (kubelet + private containerd + runc) and cluster DNS (CoreDNS) for a running LocalCluster.

:class:`RealNodes` starts ``count`` nodes named ``realnode-0``, ``realnode-1``, ... on this machine,
each with its own containerd (config, root, state and socket in ``<dir>/<name>/containerd``; the root
in ``<store>/<name>`` when a store is given, to keep the images for the next set), its
own kubelet (``<dir>/<name>/kubelet``, free loopback ports, its own cgroup root ``/<name>``) and
its own pod address range, plus one CoreDNS serving ``cluster.local`` from the cluster's API::

    with RealNodes(cluster, 2, tmp / "realnodes") as nodes:   # or nodes.start() ... nodes.stop()
        ...   # pods with nodeSelector {"type": "realnode"} (or nodeName) run for real

Addresses (nothing is routed off the machine and nothing is masqueraded):

- Pods: :data:`POD_CIDR` (10.88.0.0/16) on one bridge, :data:`BRIDGE`, whose address
  :data:`GATEWAY` (10.88.0.1) is on the host; node ``i`` hands out 10.88.<i+1>.2-254 (host-local
  IPAM). Pods get no default route: only the pod network itself is reachable, over the bridge.
- Services: the cluster's :data:`~localcluster.cluster.SERVICE_CIDR` (10.0.0.0/24), routed into
  :data:`BRIDGE` on the host and through the gateway in pods; :class:`KubeProxy` (iptables mode, on
  the host) turns a ClusterIP into an endpoint, so pods reach Services (``kubernetes.default``: the
  apiserver at :data:`GATEWAY`) and the apiserver reaches webhooks behind a Service. An address of
  the range no Service has stays on the bridge: nothing of it leaves the machine.
- DNS: CoreDNS listens on :data:`GATEWAY`:53, the kubelets' ``clusterDNS``. It answers
  ``cluster.local`` (Services, ``<hostname>.<subdomain>.<ns>.svc.cluster.local`` records of pods
  behind headless Services) and NXDOMAIN for everything else (nothing is forwarded). Pods resolve
  ``<hostname>.<subdomain>`` through the search path the kubelet writes.

Settings this machine needs (a Firecracker VM, root without CAP_SYS_RESOURCE, cgroup v1, no systemd):
``restrict_oom_score_adj`` in containerd and ``oomScoreAdj: 0`` in the kubelet (no
CAP_SYS_RESOURCE here), and the Node's InternalIP 127.0.0.1 patched in by us (the kubelet refuses
a loopback ``--node-ip``).

    python -m localcluster.realnode.node up|down --cluster DIR [--nodes 2] [--dir DIR] [--images busybox,training]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from localcluster.api import ApiClient
from localcluster.binaries import cache_dir, versions
from localcluster.cluster import CONTEXT, SERVICE_CIDR, LocalCluster, free_ports
from localcluster.pki import POD_GATEWAY, Pki, ensure_client_cert, write_kubeconfig
from localcluster.process import Component
from localcluster.realnode import host, images

PACKAGES = (
    "containerd",
    "runc",
    "containernetworking-plugins",
    "busybox-static",
    "iproute2",
    "debootstrap",
    "iptables",
    "conntrack",
)
CNI_BIN = Path("/usr/lib/cni")  # Debian's containernetworking-plugins
POD_CIDR = "10.88.0.0/16"
GATEWAY = POD_GATEWAY
BRIDGE = "rn0"
CLUSTER_DOMAIN = "cluster.local"
NODE_LABEL = "type=realnode"
NODE_SELECTOR = {"type": "realnode"}
OWNER = Path("/run/trainer-realnodes/owner")
"""The directory of the real nodes that hold the machine's pod network now (one set at a time)."""
IMPORT_ATTEMPTS = 3  # a node's ``ctr images import`` of one archive, tried again after a failure


def _log(message: str) -> None:
    print(f"[realnode] {message}", file=sys.stderr, flush=True)


def status_server_args(port: int) -> list[str]:
    """The operator's flags for a status server that pods on real nodes call: on ``port``, at the pod
    network's gateway (:data:`GATEWAY`, where they reach the host), writing at most once a second."""
    return ["--status-server-port", str(port), "--status-server-host", GATEWAY, "--status-write-interval", "1"]


def unavailable() -> str | None:
    """Why real nodes cannot run on this machine (one line), None when they can: they need root
    (kubelet, containerd, network namespaces), cgroups, and Debian's packages (:data:`PACKAGES`,
    installed with apt-get when missing)."""
    if os.geteuid() != 0:
        return "real nodes need root (kubelet, containerd, network namespaces)"
    if not Path("/sys/fs/cgroup").is_dir():
        return "no /sys/fs/cgroup"
    if not shutil.which("apt-get") and not all(shutil.which(b) for b in ("containerd", "runc", "debootstrap")):
        return "containerd, runc and debootstrap are missing and there is no apt-get to install them"
    return None


def installed(package: str, admindir: Path | None = None) -> bool:
    """Whether Debian package ``package`` is installed: dpkg's status for it is ``ii`` (a package
    removed but not purged keeps its configuration files and a status, ``rc``, which ``dpkg -s``
    reports with exit code 0 although its programs are gone). ``admindir``: dpkg's database, when not
    the system's. False without dpkg."""
    if not shutil.which("dpkg-query"):
        return False
    where = [f"--admindir={admindir}"] if admindir is not None else []
    query = ["dpkg-query", *where, "--show", "--showformat=${db:Status-Abbrev}", package]
    status = subprocess.run(query, capture_output=True, text=True)
    return status.returncode == 0 and status.stdout.startswith("ii")


def ensure_packages() -> None:
    """Install the Debian packages real nodes need, when one is missing (:func:`installed`)."""
    missing = [p for p in PACKAGES if not installed(p)]
    if missing:
        _log(f"apt-get install {' '.join(missing)}")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, stdout=sys.stderr)
        subprocess.run(["apt-get", "install", "-y", "-qq", *missing], check=True, env=env, stdout=sys.stderr)


def ensure_bridge() -> None:
    """The pod bridge with the gateway address, made before any pod so that CoreDNS can bind to it.
    The CNI bridge plugin then finds it as it would have made it."""
    if subprocess.run(["ip", "link", "show", BRIDGE], capture_output=True).returncode != 0:
        subprocess.run(["ip", "link", "add", BRIDGE, "type", "bridge"], check=True)
    addrs = subprocess.run(["ip", "-4", "-o", "addr", "show", "dev", BRIDGE], capture_output=True, text=True).stdout
    if f" {GATEWAY}/" not in addrs:
        subprocess.run(["ip", "addr", "add", f"{GATEWAY}/{POD_CIDR.split('/')[1]}", "dev", BRIDGE], check=True)
    subprocess.run(["ip", "link", "set", BRIDGE, "up"], check=True)
    # The host's own calls to a ClusterIP (the apiserver's to a webhook Service) leave on the bridge, where
    # kube-proxy's rules turn them into an endpoint; without a rule they stay on the bridge.
    subprocess.run(["ip", "route", "replace", SERVICE_CIDR, "dev", BRIDGE, "src", GATEWAY], check=True)


def _cni_conflist(index: int, data_dir: Path) -> str:
    third = index + 1
    conf = {
        "cniVersion": "0.4.0",
        "name": "realnode",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": False,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(data_dir),
                    "ranges": [
                        [
                            {
                                "subnet": POD_CIDR,
                                "rangeStart": f"10.88.{third}.2",
                                "rangeEnd": f"10.88.{third}.254",
                                "gateway": GATEWAY,
                            }
                        ]
                    ],
                    "routes": [{"dst": SERVICE_CIDR}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }
    return json.dumps(conf, indent=2) + "\n"


def _containerd_config(work: Path, root: Path) -> str:
    default = subprocess.run(["containerd", "config", "default"], capture_output=True, text=True, check=True).stdout
    sock = work / "containerd.sock"
    replacements = [
        ('root = "/var/lib/containerd"', f'root = "{root}"'),
        ('state = "/run/containerd"', f'state = "{work / "state"}"'),
        ('address = "/run/containerd/containerd.sock"', f'address = "{sock}"'),
        ('bin_dir = "/opt/cni/bin"', f'bin_dir = "{CNI_BIN}"'),
        ('conf_dir = "/etc/cni/net.d"', f'conf_dir = "{work / "net.d"}"'),
        ("restrict_oom_score_adj = false", "restrict_oom_score_adj = true"),
    ]
    lines = []
    for line in default.splitlines():
        stripped = line.strip()
        for old, new in replacements:
            if stripped == old:
                line = line.replace(old, new)
        if stripped.startswith("sandbox_image = "):
            line = line.split("sandbox_image")[0] + f'sandbox_image = "{images.PAUSE_IMAGE}"'
        lines.append(line)
    text = "\n".join(lines) + "\n"
    for old, new in replacements:
        if new not in text:
            raise RuntimeError(f"containerd config default has no line {old!r}")
    return text


def _cgroup_root(name: str) -> str:
    """A cgroup root of its own per kubelet (``/<name>`` in every v1 hierarchy), so that no kubelet
    takes another's pod cgroups for orphans. cpuset children start empty on v1: copy the parent's."""
    base = Path("/sys/fs/cgroup")
    for hierarchy in sorted(base.iterdir()):
        if hierarchy.name == "unified" or not (hierarchy / "cgroup.procs").exists():
            continue
        path = hierarchy / name
        path.mkdir(exist_ok=True)
        if hierarchy.name == "cpuset":
            for f in ("cpuset.cpus", "cpuset.mems"):
                if not (path / f).read_text().strip():
                    (path / f).write_text((hierarchy / f).read_text())
    return f"/{name}"


def _kubelet_config(work: Path, ca: Path, sock: Path, port: int, healthz: int, cgroup_root: str) -> str:
    cfg = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": "127.0.0.1",
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz,
        # The apiserver has no --kubelet-client-certificate: logs and exec go through anonymously.
        "authentication": {
            "anonymous": {"enabled": True},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(ca)},
        },
        "authorization": {"mode": "AlwaysAllow"},
        "cgroupDriver": "cgroupfs",  # cgroup v1, no systemd
        "cgroupRoot": cgroup_root,
        "failCgroupV1": False,
        "failSwapOn": False,
        "oomScoreAdj": 0,  # no CAP_SYS_RESOURCE: the default -999 cannot be set
        "containerRuntimeEndpoint": f"unix://{sock}",
        "imageServiceEndpoint": f"unix://{sock}",
        "podLogsDir": str(work / "pod-logs"),
        "volumePluginDir": str(work / "volume-plugins"),
        "clusterDNS": [GATEWAY],
        "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": str(work / "resolv.conf"),  # empty: no host search domains or servers leak in
        # Imported images can never be pulled again: never garbage-collect them.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "serializeImagePulls": False,
        # A Secret written after its pod started reaches the pod's volume at the pod's next sync: within
        # 10 s rather than 1 min (webhook servers that make their own certificate wait for it: JobSet's).
        "syncFrequency": "10s",
        "maxPods": 20,
    }
    return json.dumps(cfg, indent=2) + "\n"


@dataclass
class RealNode:
    """One real node: its name, index (pod range 10.88.<index+1>.x) and directory; with a ``store``, its
    containerd root (images, unpacked layers) is ``<store>/<name>`` and outlives the node."""

    name: str
    index: int
    dir: Path
    store: Path | None = None

    @property
    def containerd_root(self) -> Path:
        return self.store / self.name if self.store else self.containerd_dir / "root"

    @property
    def containerd_dir(self) -> Path:
        return self.dir / "containerd"

    @property
    def kubelet_dir(self) -> Path:
        return self.dir / "kubelet"

    @property
    def sock(self) -> Path:
        return self.containerd_dir / "containerd.sock"

    @property
    def containerd(self) -> Component:
        return Component("containerd", Path(shutil.which("containerd") or "/usr/bin/containerd"), self.dir, self.dir)

    @property
    def kubelet(self) -> Component:
        return Component("kubelet", cache_dir() / "bin" / _k8s_dir() / "kubelet", self.dir, self.dir)

    def ctr(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ctr", "--address", str(self.sock), "--namespace", "k8s.io", *args],
            check=check,
            capture_output=True,
            text=True,
        )

    def start_containerd(self) -> None:
        work = self.containerd_dir
        for sub in ("state", "net.d", "ipam"):
            (work / sub).mkdir(parents=True, exist_ok=True)
        self.containerd_root.mkdir(parents=True, exist_ok=True)
        (work / "config.toml").write_text(_containerd_config(work, self.containerd_root))
        (work / "net.d" / "10-realnode.conflist").write_text(_cni_conflist(self.index, work / "ipam"))
        if not self.containerd.is_alive():
            self.containerd.start(["--config", str(work / "config.toml")])
        deadline = time.monotonic() + 20
        while self.ctr("version", check=False).returncode != 0:
            if time.monotonic() > deadline or not self.containerd.is_alive():
                raise RuntimeError(f"containerd of {self.name} did not come up:\n{self.containerd.log_tail()}")
            time.sleep(0.2)

    def import_images(self, archives: list[tuple[str, Path]]) -> None:
        """Import each (name, OCI archive) unless the node has that name at the archive's manifest digest.
        A failed ``ctr images import`` is tried again (:data:`IMPORT_ATTEMPTS` in all, 2 s then 4 s apart);
        raises ``RuntimeError`` with ctr's message and containerd's log when the last one fails."""
        have: dict[str, str] = {}
        for line in self.ctr("images", "ls").stdout.splitlines()[1:]:
            words = line.split()
            if len(words) >= 3:
                have[words[0]] = words[2]
        for name, archive in archives:
            if name in have and have[name] == images.manifest_digest(archive):
                continue
            began = time.monotonic()
            for attempt in range(1, IMPORT_ATTEMPTS + 1):
                # Unpacks into overlayfs, the CRI's snapshotter.
                done = self.ctr("images", "import", str(archive), check=False)
                if done.returncode == 0:
                    break
                why = (done.stderr or done.stdout).strip()
                if attempt == IMPORT_ATTEMPTS:
                    raise RuntimeError(
                        f"{self.name}: ctr images import {archive} failed {attempt} times, last: {why}\n"
                        f"containerd's log:\n{self.containerd.log_tail()}"
                    )
                _log(f"{self.name}: import of {name} failed (attempt {attempt}), again in {2**attempt}s: {why}")
                time.sleep(2**attempt)
            _log(f"{self.name}: imported {name} in {time.monotonic() - began:.1f}s")

    def start_kubelet(self, cluster: LocalCluster, timeout: float = 120.0) -> None:
        work = self.kubelet_dir
        work.mkdir(parents=True, exist_ok=True)
        (work / "resolv.conf").write_text("")
        pki = Pki(cluster.state_dir / "pki")
        user = f"kubelet-{self.name}"
        ensure_client_cert(pki, user, f"system:node:{self.name}", "system:masters")
        kubeconfig = write_kubeconfig(work / "kubeconfig.yaml", pki, user, cluster.server, CONTEXT)
        port, healthz = free_ports(2)
        config = work / "config.yaml"  # JSON is YAML
        config.write_text(_kubelet_config(work, pki.ca_cert, self.sock, port, healthz, _cgroup_root(self.name)))
        if not self.kubelet.is_alive():
            self.kubelet.start(
                [
                    f"--config={config}",
                    f"--kubeconfig={kubeconfig}",
                    f"--root-dir={work / 'root'}",
                    f"--cert-dir={work / 'pki'}",
                    f"--hostname-override={self.name}",
                    "--node-ip=127.0.0.1",
                    f"--node-labels={NODE_LABEL},kubernetes.io/os=linux",
                    "--v=1",
                ]
            )
        api = cluster.api()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.kubelet.is_alive():
                raise RuntimeError(f"kubelet of {self.name} exited:\n{self.kubelet.log_tail()}")
            if self._ready(api):
                return
            time.sleep(0.5)
        raise RuntimeError(f"node {self.name} not Ready after {timeout}s:\n{self.kubelet.log_tail()}")

    def _ready(self, api: ApiClient) -> bool:
        status, body = api.get(f"/api/v1/nodes/{self.name}")
        if status != 200:
            return False
        if not body.get("status", {}).get("addresses"):
            # The kubelet refuses a loopback --node-ip and then reports no address, so the apiserver
            # could not reach it for logs/exec. InternalIP only (a Hostname would be looked up).
            api.request(
                "PATCH",
                f"/api/v1/nodes/{self.name}/status",
                {"status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}]}},
            )
            return False
        conds = {c["type"]: c for c in body.get("status", {}).get("conditions") or []}
        return bool(conds.get("Ready", {}).get("status") == "True")

    def stop(self) -> None:
        """Stop the kubelet, every container (their shims outlive containerd), then containerd;
        unmount the kubelet's root and remove the pods' network namespaces."""
        self.kubelet.stop(timeout=10)
        if self.containerd.is_alive():
            tasks = self.ctr("tasks", "ls", "-q", check=False).stdout.split()
            for task in tasks:
                self.ctr("tasks", "kill", "-s", "SIGKILL", task, check=False)
            if tasks:
                time.sleep(1)
            for task in tasks:
                self.ctr("tasks", "delete", "-f", task, check=False)
            for container in self.ctr("containers", "ls", "-q", check=False).stdout.split():
                self.ctr("containers", "rm", container, check=False)
        self.containerd.stop(timeout=10)
        prefixes = tuple(str(d.resolve()) + "/" for d in (self.dir, self.containerd_root))
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
        for mount in sorted((m for m in mounts if m.startswith(prefixes)), reverse=True):
            subprocess.run(["umount", "-l", mount], check=False, capture_output=True)
        for cg in Path("/sys/fs/cgroup").glob(f"*/{self.name}"):
            _remove_cgroup(cg)


def _remove_cgroup(path: Path) -> None:
    for child in sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            child.rmdir()
    with contextlib.suppress(OSError):
        path.rmdir()


def _k8s_dir() -> str:
    return f"kubernetes-{versions()['KUBERNETES_VERSION']}"


class CoreDNS:
    """CoreDNS on the host, on the pod gateway address, serving ``cluster.local`` from the cluster."""

    def __init__(self, cluster: LocalCluster, work: Path) -> None:
        self.cluster, self.work = cluster, work
        version = images.realnode_versions()["COREDNS_VERSION"]
        self.component = Component("coredns", cache_dir() / "bin" / f"coredns-{version}" / "coredns", work, work)

    def start(self, timeout: float = 30.0) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        corefile = self.work / "Corefile"
        if self.component.is_alive() and corefile.exists():  # a running one (an earlier start): its port
            found = re.search(r"ready 127\.0\.0\.1:(\d+)", corefile.read_text())
            if found:
                self.component.wait_http_ok(f"http://127.0.0.1:{found.group(1)}/ready", timeout)
                return
        (ready,) = free_ports(1)
        corefile.write_text(
            f"{CLUSTER_DOMAIN}:53 {{\n"
            f"    bind {GATEWAY}\n"
            "    errors\n"
            f"    ready 127.0.0.1:{ready}\n"
            f"    kubernetes {CLUSTER_DOMAIN} {{\n"
            f"        kubeconfig {self.cluster.kubeconfig} {CONTEXT}\n"
            "        pods insecure\n"
            "        ttl 1\n"
            "    }\n"
            "}\n"
            ".:53 {\n"
            f"    bind {GATEWAY}\n"
            "    template ANY ANY {\n"
            "        rcode NXDOMAIN\n"
            "    }\n"
            "}\n"
        )
        self.component.stop()
        self.component.start(["-conf", str(corefile)], cwd=self.work)
        self.component.wait_http_ok(f"http://127.0.0.1:{ready}/ready", timeout)

    def stop(self) -> None:
        self.component.stop()


class KubeProxy:
    """kube-proxy on the host (iptables mode), for every real node at once: they share the host's network
    namespace and the pod bridge. Its chains are removed by :func:`host.restore` when the nodes stop."""

    def __init__(self, cluster: LocalCluster, work: Path, node_name: str) -> None:
        self.cluster, self.work, self.node_name = cluster, work, node_name
        binary = cache_dir() / "bin" / _k8s_dir() / "kube-proxy"
        self.component = Component("kube-proxy", binary, work, work)

    def start(self, timeout: float = 60.0) -> None:
        """Start kube-proxy, or keep the one running (an earlier start); return once ``/healthz`` answers."""
        self.work.mkdir(parents=True, exist_ok=True)
        port_file = self.work / "healthz-port"
        if self.component.is_alive() and port_file.exists():
            self.component.wait_http_ok(f"http://127.0.0.1:{int(port_file.read_text())}/healthz", timeout)
            return
        healthz, metrics = free_ports(2)
        port_file.write_text(f"{healthz}\n")
        self.component.stop()
        self.component.start(
            [
                f"--kubeconfig={self.cluster.kubeconfig}",
                f"--hostname-override={self.node_name}",
                "--proxy-mode=iptables",
                f"--cluster-cidr={POD_CIDR}",
                # Node ports only on the gateway, and none on loopback (that would set route_localnet).
                f"--nodeport-addresses={GATEWAY}/32",
                "--iptables-localhost-nodeports=false",
                "--conntrack-max-per-core=0",  # leave the host's conntrack table size alone
                f"--healthz-bind-address=127.0.0.1:{healthz}",
                f"--metrics-bind-address=127.0.0.1:{metrics}",
            ],
            cwd=self.work,
        )
        self.component.wait_http_ok(f"http://127.0.0.1:{healthz}/healthz", timeout)

    def stop(self) -> None:
        self.component.stop()


class RealNodes:
    """``count`` real nodes plus CoreDNS and kube-proxy for ``cluster``, kept under ``work``; ``image_names``
    (keys of :data:`images.BUILDERS`) are built if needed and imported into every node.

    ``store``: a directory that keeps each node's containerd root (``<store>/realnode-<i>``) after the
    nodes stop, so that the next set started with the same store finds its images unpacked (importing the
    training image takes about 40 s per node) instead of importing them again. Every container is removed
    when a node stops; one set uses a store at a time (:meth:`_claim` holds the machine for one set)."""

    def __init__(
        self,
        cluster: LocalCluster,
        count: int,
        work: Path,
        image_names: tuple[str, ...] = ("busybox",),
        store: Path | None = None,
    ) -> None:
        self.cluster, self.work = cluster, Path(work).resolve()
        root = Path(store).resolve() if store else None
        self.nodes = [RealNode(f"realnode-{i}", i, self.work / f"realnode-{i}", root) for i in range(count)]
        self.dns = CoreDNS(cluster, self.work / "coredns")
        self.proxy = KubeProxy(cluster, self.work / "kube-proxy", self.nodes[0].name if self.nodes else "realnode-0")
        self.image_names = image_names
        self.timings: dict[str, float] = {}

    @property
    def names(self) -> list[str]:
        return [n.name for n in self.nodes]

    def _timed(self, what: str, began: float) -> None:
        self.timings[what] = round(time.monotonic() - began, 1)

    def _claim(self) -> None:
        """Take the machine's one pod network (bridge, DNS address) for these nodes; raise
        ``RuntimeError`` naming the other set when real nodes of another directory still run."""
        if OWNER.exists():
            other = Path(OWNER.read_text().strip())
            if other != self.work and CoreDNS(self.cluster, other / "coredns").component.is_alive():
                raise RuntimeError(
                    f"real nodes of {other} run on this machine (bridge {BRIDGE}, DNS {GATEWAY}); stop them "
                    "first: python -m localcluster.demo --down, or "
                    f"python -m localcluster.realnode.node down --dir {other}"
                )
        OWNER.parent.mkdir(parents=True, exist_ok=True)
        OWNER.write_text(f"{self.work}\n")

    def start(self) -> None:
        t = time.monotonic()
        self._claim()
        host.record(self.work)
        ensure_packages()
        images.ensure_built("kubelet", "kube_proxy", "coredns", "pause")
        self._timed("packages+binaries", t)
        t = time.monotonic()
        archives = [images.pause_image()] + [images.BUILDERS[n]() for n in self.image_names]
        self._timed("images", t)
        try:
            ensure_bridge()
            t = time.monotonic()
            self.dns.start()
            self._timed("coredns", t)
            t = time.monotonic()
            # Each node unpacks its own copy (about 25 s for the training image): all at once.
            with ThreadPoolExecutor(len(self.nodes) or 1) as pool:
                list(pool.map(lambda node: (node.start_containerd(), node.import_images(archives)), self.nodes))
            self._timed("containerd+import", t)
            for node in self.nodes:
                t = time.monotonic()
                node.start_kubelet(self.cluster)
                self._timed(f"{node.name} kubelet Ready", t)
            t = time.monotonic()
            self.proxy.start()
            self._timed("kube-proxy", t)
        except BaseException:
            _log(f"start failed; logs under {self.work}; stopping")
            self.stop()
            raise
        _log(f"{', '.join(self.names)} Ready; timings {self.timings}")

    def add_images(self, *image_names: str) -> list[str]:
        """Build (when missing) and import ``image_names`` (keys of :data:`images.BUILDERS`) into every
        started node, all nodes at once; returns the images' references in the same order."""
        archives = [images.BUILDERS[n]() for n in image_names]
        t = time.monotonic()
        self.import_archives(archives)
        self._timed(f"import {','.join(image_names)}", t)
        return [name for name, _ in archives]

    def import_archives(self, archives: list[tuple[str, Path]]) -> None:
        """Import the OCI ``archives`` ((name, path) pairs) into every started node, all nodes at once
        (an image a node has already is skipped)."""
        with ThreadPoolExecutor(len(self.nodes) or 1) as pool:
            list(pool.map(lambda node: node.import_images(archives), self.nodes))

    def log_tails(self, lines: int = 40) -> str:
        """For a failure's message: the last ``lines`` lines of every node's kubelet and containerd log."""
        return "\n".join(
            f"--- {node.name} {component.name}\n{component.log_tail(lines)}"
            for node in self.nodes
            for component in (node.kubelet, node.containerd)
        )

    def stop(self) -> None:
        """Delete the nodes' pods, stop every node and CoreDNS, remove the Node objects and the bridge,
        and put back what the nodes changed on the host (:mod:`localcluster.realnode.host`)."""
        api = self.cluster.api() if self.cluster.is_running() else None
        if api is not None:
            self._delete_pods(api)
        for node in self.nodes:
            node.stop()
            if api is not None:
                api.request("DELETE", f"/api/v1/nodes/{node.name}")
        self.dns.stop()
        self.proxy.stop()
        subprocess.run(["ip", "link", "delete", BRIDGE], check=False, capture_output=True)
        # Network namespaces of sandboxes the kubelets had no time to tear down: no process is left in them.
        for netns in Path("/var/run/netns").glob("cni-*"):
            pids = subprocess.run(["ip", "netns", "pids", netns.name], capture_output=True, text=True).stdout
            if not pids.strip():
                subprocess.run(["ip", "netns", "delete", netns.name], check=False, capture_output=True)
        for change in host.restore(self.work):
            _log(f"put back: {change}")
        if OWNER.exists() and Path(OWNER.read_text().strip()) == self.work:
            OWNER.unlink()

    def _delete_pods(self, api: ApiClient, timeout: float = 20.0) -> None:
        """Delete the pods bound to our nodes at once, and give the kubelets ``timeout`` seconds to
        tear their sandboxes down (CNI DEL: netns and addresses released) before they stop."""

        def ours() -> list[tuple[str, str]]:
            status, body = api.get("/api/v1/pods")
            items = body.get("items", []) if status == 200 else []
            return [
                (p["metadata"]["namespace"], p["metadata"]["name"])
                for p in items
                if p.get("spec", {}).get("nodeName") in self.names
            ]

        for ns, name in ours():
            api.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}", {"gracePeriodSeconds": 0})
        deadline = time.monotonic() + timeout
        while ours() and time.monotonic() < deadline:
            time.sleep(0.5)

    def __enter__(self) -> RealNodes:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["up", "down"])
    p.add_argument(
        "--cluster", type=Path, required=True, help="state dir of a running local cluster (python -m localcluster up)"
    )
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--dir", type=Path, default=Path("/tmp/trainer-realnode/nodes"))
    p.add_argument("--images", default="busybox", help="comma-separated: busybox,training,torchtune")
    a = p.parse_args()
    cluster = LocalCluster(a.cluster)
    nodes = RealNodes(cluster, a.nodes, a.dir, tuple(filter(None, a.images.split(","))))
    if a.command == "up":
        nodes.start()
        print(f"service CIDR {SERVICE_CIDR}, pod CIDR {POD_CIDR}, DNS {GATEWAY}", file=sys.stderr)
    else:
        nodes.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
