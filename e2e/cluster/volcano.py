"""Volcano's scheduler and controller manager in the local cluster: their config file and flags.

Checked against volcano.sh/volcano@v1.15.1 (cmd/scheduler, cmd/controller-manager,
pkg/scheduler/cache/cache.go, pkg/controllers/queue). Volcano's admission webhooks
(vc-webhook-manager) are not run, so nothing defaults or validates Volcano objects: write complete
ones (e.g. a PodGroup's ``spec.queue``).

- vc-scheduler creates the ``default`` and ``root`` queues at start (pkg/scheduler/cache:
  newDefaultAndRootQueue) and schedules the pods whose ``spec.schedulerName`` is ``volcano``; the
  queue controller of vc-controller-manager then marks them ``status.state: Open`` and gives every
  queue without ``spec.parent`` the parent ``root``.
- vc-controller-manager runs every controller but sharding by default; :data:`CONTROLLERS` are
  the ones that need no admission webhook.
- vc-scheduler watches the *directory* of ``--scheduler-conf`` and reloads the file when it
  changes, hence a directory of its own. Its metrics (``--enable-metrics``) and healthz
  (``--enable-healthz``) servers are off by default, so it listens on no TCP port; it does
  listen on a unix socket (klog level control) in ``$DEBUG_SOCKET_DIR`` (default
  ``/tmp/klog-socks``), moved into the state directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from e2e.cluster.api import ApiClient

SCHEDULER_NAME = "volcano"
DEFAULT_QUEUE = "default"
ROOT_QUEUE = "root"
# The queues whose status.state must be Open before Volcano counts as ready (see the module doc).
READY_QUEUES = (ROOT_QUEUE, DEFAULT_QUEUE)
QUEUES_PATH = "/apis/scheduling.volcano.sh/v1beta1/queues"
# Controllers that need no admission webhook (names from each controller's Name()); the jobflow
# and jobtemplate controllers are left out.
CONTROLLERS = ("queue-controller", "pg-controller", "gc-controller", "job-controller")

SCHEDULER_CONF: dict[str, Any] = {
    # reclaim: a queue below its weighted share takes back what others hold beyond theirs, so
    # weights hold however the pods arrived.
    "actions": "enqueue, allocate, backfill, reclaim",
    "tiers": [
        {"plugins": [{"name": name} for name in ("priority", "gang", "conformance")]},
        {
            "plugins": [
                # 1.5: room to enqueue more demand than the cluster holds, so that queue weights
                # (proportion) decide who runs; a gang larger than 1.5x the cluster stays Pending.
                {"name": "overcommit", "arguments": {"overcommit-factor": 1.5}},
                *({"name": name} for name in ("drf", "predicates", "proportion", "nodeorder", "binpack")),
            ]
        },
    ],
}


def write_scheduler_conf(directory: Path) -> Path:
    """Write ``directory/scheduler.conf`` (only if its content changes: the scheduler reloads it)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "scheduler.conf"
    text = yaml.safe_dump(SCHEDULER_CONF, sort_keys=False)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def scheduler_args(kubeconfig: Path, scheduler_conf: Path, dump_dir: Path) -> list[str]:
    """The flags of vc-scheduler."""
    return [
        f"--kubeconfig={kubeconfig}",
        f"--scheduler-conf={scheduler_conf.resolve()}",
        f"--scheduler-name={SCHEDULER_NAME}",
        f"--default-queue={DEFAULT_QUEUE}",
        "--leader-elect=false",
        "--enable-metrics=false",
        "--enable-healthz=false",
        # Where SIGUSR2 dumps the scheduler cache (default /tmp).
        f"--cache-dump-dir={dump_dir}",
    ]


def env(kubeconfig: Path, socket_dir: Path) -> dict[str, str]:
    """Environment of both binaries.

    ``KUBECONFIG``: the device plugins' package (pkg/scheduler/api/devices, NewClient) builds a
    client of its own from ``$KUBECONFIG`` or ``~/.kube/config``, ignoring ``--kubeconfig``.
    ``DEBUG_SOCKET_DIR``: vc-scheduler's klog control socket goes to ``socket_dir``, not
    /tmp/klog-socks.
    """
    return {"KUBECONFIG": str(kubeconfig), "DEBUG_SOCKET_DIR": str(socket_dir)}


def controller_manager_args(kubeconfig: Path) -> list[str]:
    """The flags of vc-controller-manager."""
    return [
        f"--kubeconfig={kubeconfig}",
        f"--scheduler-name={SCHEDULER_NAME}",
        "--leader-elect=false",
        "--enable-healthz=false",
        f"--controllers={','.join(CONTROLLERS)}",
    ]


def queues_open(api: ApiClient, names: tuple[str, ...] = READY_QUEUES) -> bool:
    """Whether every queue in ``names`` exists with ``status.state: Open``."""
    for name in names:
        try:
            status, body = api.get(f"{QUEUES_PATH}/{name}")
        except OSError:
            return False
        if status != 200 or (body.get("status") or {}).get("state") != "Open":
            return False
    return True
