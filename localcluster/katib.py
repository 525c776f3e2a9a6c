"""Katib (kubeflow/katib ``KATIB_VERSION``) in a local cluster with real nodes, as its own
``katib-external-db`` install deploys it (``manifests/v1beta1/installs/katib-external-db``, rendered by the
built ``kubectl kustomize``):

- the database is MariaDB (Debian's ``mariadb-server-core``), a process on this machine listening on the
  pod network's gateway (:data:`localcluster.realnode.node.GATEWAY`), where pods reach the host: the
  install's ``katib-mysql-secrets`` get its address, port, user and password (:class:`MariaDB`);
- the controller, the DB manager, the file metrics collector (Katib's StdOut and File collectors) and the
  Goptuna suggestion service are the binaries ``localcluster/build.sh katib`` built from Katib's module, each
  in an image of its own laid out as Katib's Dockerfiles lay theirs out (``/app/<binary>``, run as root;
  the suggestion in ``/opt/katib``), imported into the real nodes;
- ``katib-config`` lists TrainJob among its trial resources, as the ``katib-standalone`` install's does
  (:data:`TRAINJOB_RESOURCE`), and names those images: the collectors' (TensorFlowEvent, a Python image,
  left out) and, for the algorithms Katib's Goptuna service implements (:data:`ALGORITHMS`), the
  suggestion's. Katib's own config maps ``random`` and ``tpe`` to its hyperopt image, which is Python
  and not built here; the other algorithms and early stopping (Python images too) are left out;
- Katib's UI is left out;
- Katib's own namespace (:data:`NAMESPACE`) is not labelled for the metrics collector
  (:data:`INJECTION_LABEL`), so trials run in a namespace of their own that is. Upstream's install labels it,
  and then its pod webhook (``mutator.pod.katib.kubeflow.org``, failure policy Fail) also guards the
  creation of the controller's and DB manager's own pods, which wait on the controller they would start:
  upstream's install usually wins that race, and lost it once here (``failed calling webhook
  "mutator.pod.katib.kubeflow.org": ... connect: connection refused``, neither pod created in 300 s).

    db = MariaDB(work / "db")
    db.start()
    install(cluster, nodes, db, work)   # applied server-side; controller and DB manager rolled out
    ...
    db.stop()
"""

from __future__ import annotations

import base64
import copy
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from localcluster.binaries import component_dir, ensure, versions
from localcluster.cluster import LocalCluster, free_ports
from localcluster.process import Component
from localcluster.realnode.images import binary_image
from localcluster.realnode.node import GATEWAY, RealNodes, installed

NAMESPACE = "kubeflow"
INJECTION_LABEL = "katib.kubeflow.org/metrics-collector-injection"
"""A namespace so labelled (``enabled``) gets Katib's metrics collector in its trials' pods."""
ALGORITHMS = ("random", "tpe", "cmaes", "sobol")
"""The algorithms of Katib's Goptuna suggestion service (``pkg/suggestion/v1beta1/goptuna``)."""
TRAINJOB_RESOURCE = "TrainJob.v1alpha1.trainer.kubeflow.org"
"""The trial resource Katib's ``katib-standalone`` config lists and its ``katib-external-db`` config (v0.19.0)
lacks: without it Katib never watches its TrainJob trials and they stay Running."""
PACKAGES = ("mariadb-server-core", "mariadb-client-core")
DATABASE = USER = "katib"
IMAGES = {
    # binary: (path in the image, working directory)
    "katib-controller": ("app/katib-controller", "/app"),
    "katib-db-manager": ("app/katib-db-manager", "/app"),
    "file-metricscollector": ("app/file-metricscollector", "/app"),
    "goptuna-suggestion": ("opt/katib/goptuna-suggestion", "/opt/katib"),
}
"""Katib's images as its Dockerfiles lay them out (``cmd/*/Dockerfile``)."""


def _log(message: str) -> None:
    print(f"[katib] {message}", file=sys.stderr, flush=True)


class MariaDB:
    """A MariaDB server of its own under ``work`` (data, socket, log), on ``host``:<a free port>, with
    database and user :data:`DATABASE` (a random password); installed from Debian when missing."""

    def __init__(self, work: Path, host: str = GATEWAY) -> None:
        self.work, self.host = work.resolve(), host
        (self.port,) = free_ports(1)
        self.password = secrets.token_hex(12)
        self.component = Component("mariadbd", Path("/usr/sbin/mariadbd"), self.work, self.work)

    @property
    def socket(self) -> Path:
        return self.work / "mariadbd.sock"

    def sql(self, statement: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``statement`` as the server's root, over its socket."""
        cmd = ["mariadb", "--no-defaults", f"--socket={self.socket}", "-uroot", "-e", statement]
        return subprocess.run(cmd, capture_output=True, text=True, check=check)

    def start(self, timeout: float = 60.0) -> None:
        """Install the packages if missing, make the data directory if missing, start the server and
        (re)create the database and the user. Raises ``RuntimeError`` (the log's tail) when it does not
        answer within ``timeout`` seconds."""
        missing = [p for p in PACKAGES if not installed(p)]
        if missing:
            _log(f"apt-get install {' '.join(missing)}")
            env = {"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
            subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, stdout=sys.stderr)
            subprocess.run(["apt-get", "install", "-y", "-qq", *missing], check=True, env=env, stdout=sys.stderr)
        data = self.work / "data"
        if not data.exists():
            self.work.mkdir(parents=True, exist_ok=True)
            install = ["mariadb-install-db", "--no-defaults", "--user=root", f"--datadir={data}"]
            install += ["--auth-root-authentication-method=socket", "--skip-test-db"]
            subprocess.run(install, check=True, capture_output=True, text=True)
        self.component.start(
            [
                "--no-defaults",
                "--user=root",
                f"--datadir={data}",
                f"--socket={self.socket}",
                f"--bind-address={self.host}",
                f"--port={self.port}",
                f"--pid-file={self.work / 'mariadbd.pid-file'}",
                "--skip-name-resolve",
            ]
        )
        deadline = time.monotonic() + timeout
        while self.sql("SELECT 1", check=False).returncode != 0:
            if time.monotonic() > deadline or not self.component.is_alive():
                raise RuntimeError(f"MariaDB did not come up:\n{self.component.log_tail()}")
            time.sleep(0.3)
        self.sql(
            f"CREATE DATABASE IF NOT EXISTS {DATABASE}; "
            f"CREATE OR REPLACE USER '{USER}'@'%' IDENTIFIED BY '{self.password}'; "
            f"GRANT ALL PRIVILEGES ON {DATABASE}.* TO '{USER}'@'%';"
        )
        _log(f"MariaDB on {self.host}:{self.port}, database {DATABASE}")

    def stop(self) -> None:
        self.component.stop(timeout=20)


def images() -> dict[str, tuple[str, Path]]:
    """Katib's images, binary -> (name, archive), built when missing (the binaries too)."""
    version = versions()["KATIB_VERSION"]
    built = ensure(*IMAGES)
    return {
        binary: binary_image(
            f"localhost/katib/{binary}:{version}", f"katib-{binary}", built[binary], path, workdir, "0:0"
        )
        for binary, (path, workdir) in IMAGES.items()
    }


def _config(text: str, images: dict[str, str]) -> str:
    """``katib-config.yaml`` with TrainJob among the trial resources (:data:`TRAINJOB_RESOURCE`) and our
    images: the StdOut and File collectors', and the Goptuna suggestion's for :data:`ALGORITHMS`; every
    other collector, suggestion and early stopping left out."""
    config = yaml.safe_load(text)
    controller = config["init"]["controller"]
    resources = controller.setdefault("trialResources", [])
    if TRAINJOB_RESOURCE not in resources:
        resources.insert(0, TRAINJOB_RESOURCE)
    runtime = config["runtime"]
    runtime["metricsCollectors"] = [
        {**c, "image": images["file-metricscollector"]}
        for c in runtime.get("metricsCollectors") or []
        if c["kind"] in ("StdOut", "File")
    ]
    runtime["suggestions"] = [{"algorithmName": a, "image": images["goptuna-suggestion"]} for a in ALGORITHMS]
    runtime.pop("earlyStoppings", None)
    return yaml.safe_dump(config, sort_keys=False)


def manifests(cluster: LocalCluster, db: MariaDB, images: dict[str, str]) -> list[dict[str, Any]]:
    """The ``katib-external-db`` install rendered, its UI left out, its namespace without
    :data:`INJECTION_LABEL`, its secret pointing at ``db``, its Deployments running ``images``
    (binary -> image name) and its ``katib-config`` naming them."""
    root = component_dir("katib") / "manifests" / "installs" / "katib-external-db"
    rendered = cluster.run_kubectl("kustomize", str(root)).stdout
    out = []
    for doc in yaml.safe_load_all(rendered):
        if not doc or doc["metadata"]["name"].startswith("katib-ui"):
            continue
        doc = copy.deepcopy(doc)
        kind, name = doc["kind"], doc["metadata"]["name"]
        if kind == "Secret" and name.startswith("katib-mysql-secrets"):
            values = {
                "KATIB_MYSQL_DB_DATABASE": DATABASE,
                "KATIB_MYSQL_DB_HOST": db.host,
                "KATIB_MYSQL_DB_PORT": str(db.port),
                "DB_USER": USER,
                "DB_PASSWORD": db.password,
            }
            doc["data"] = {k: base64.b64encode(v.encode()).decode() for k, v in values.items()}
        elif kind == "Deployment" and name in images:
            for container in doc["spec"]["template"]["spec"]["containers"]:
                container["image"] = images[name]
                container["imagePullPolicy"] = "IfNotPresent"
        elif kind == "Namespace" and name == NAMESPACE:
            doc["metadata"].get("labels", {}).pop(INJECTION_LABEL, None)
        elif kind == "ConfigMap" and name == "katib-config":
            doc["data"]["katib-config.yaml"] = _config(doc["data"]["katib-config.yaml"], images)
        out.append(doc)
    return out


def state(cluster: LocalCluster, deployment: str) -> str:
    """For an error message: Katib's pods, their events and ``deployment``'s logs (this run's and the last)."""
    parts = [
        cluster.run_kubectl("get", "pods", "-n", NAMESPACE, "-o", "wide", check=False).stdout,
        cluster.run_kubectl("get", "events", "-n", NAMESPACE, "--sort-by=.lastTimestamp", check=False).stdout,
    ]
    for previous in ("--previous=false", "--previous=true"):
        logs = cluster.run_kubectl(
            "logs", "-n", NAMESPACE, f"deployment/{deployment}", previous, "--tail=40", check=False
        )
        parts.append(f"--- logs {previous}\n{logs.stdout}{logs.stderr}")
    return "\n".join(parts)


def install(
    cluster: LocalCluster, nodes: RealNodes, db: MariaDB, work: Path, timeout: str = "300s"
) -> dict[str, float]:
    """Build and import Katib's images into ``nodes``, apply :func:`manifests` server-side (CRDs
    Established first) and wait for the controller's and DB manager's rollouts; returns the seconds
    each step took. Raises ``CalledProcessError`` (kubectl's output) when a step fails, ``RuntimeError``
    (:func:`state`) when a Deployment does not roll out within ``timeout``."""
    timings: dict[str, float] = {}
    t = time.monotonic()
    built = images()
    nodes.import_archives(list(built.values()))
    timings["images"] = round(time.monotonic() - t, 1)
    t = time.monotonic()
    docs = manifests(cluster, db, {binary: name for binary, (name, _) in built.items()})
    crds = work / "katib-crds.yaml"
    crds.write_text(yaml.safe_dump_all([d for d in docs if d["kind"] == "CustomResourceDefinition"]))
    cluster.run_kubectl("apply", "--server-side", "-f", str(crds))
    cluster.run_kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(crds))
    rest = work / "katib.yaml"
    rest.write_text(yaml.safe_dump_all([d for d in docs if d["kind"] != "CustomResourceDefinition"]))
    cluster.run_kubectl("apply", "--server-side", "-f", str(rest))
    timings["apply"] = round(time.monotonic() - t, 1)
    t = time.monotonic()
    for deployment in ("katib-db-manager", "katib-controller"):
        done = cluster.run_kubectl(
            "rollout", "status", f"deployment/{deployment}", "-n", NAMESPACE, f"--timeout={timeout}", check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{deployment} did not roll out: {done.stderr}\n{state(cluster, deployment)}")
    timings["rollout"] = round(time.monotonic() - t, 1)
    _log(f"Katib {versions()['KATIB_VERSION']} installed; timings {timings}")
    return timings
