"""The operator as its own process (``python -m trainer``), as the end-to-end tests, the demo and the
benchmarks run it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from localcluster import ROOT, ExternalCluster, LocalCluster
from localcluster.operator_sa import NAMESPACE as OPERATOR_NAMESPACE
from localcluster.operator_sa import operator_kubeconfig
from trainer.webhook import server as webhook_server


def flag(args: list[str], name: str) -> str | None:
    """The value of ``--name`` in ``args`` (``--name value`` or ``--name=value``; the last one wins),
    None when absent."""
    found = None
    for i, arg in enumerate(args):
        if arg == f"--{name}" and i + 1 < len(args):
            found = args[i + 1]
        elif arg.startswith(f"--{name}="):
            found = arg.split("=", 1)[1]
    return found


def webhook_url(args: list[str]) -> str | None:
    """``https://<--webhook-host>:<--webhook-port>``, the base URL the webhook configurations must call
    for an operator run out of the cluster with ``args``; None without both flags (or port 0)."""
    host, port = flag(args, "webhook-host"), flag(args, "webhook-port")
    return f"https://{host}:{port}" if host and port and port != "0" else None


class Operator:
    """One operator process (``python -m trainer``), restartable, logging JSON to ``log_path``; ``env``
    is added to the environment (e.g. ``TRAINER_<FLAG>`` defaults, which its flags override)."""

    def __init__(self, kubeconfig: Path, log_path: Path, args: list[str], env: dict[str, str] | None = None) -> None:
        self.kubeconfig, self.log_path, self.args, self.env = kubeconfig, log_path, args, env or {}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "trainer",
                    "--kubeconfig",
                    str(self.kubeconfig),
                    "--log-format",
                    "json",
                    # Loopback and a free port each: two operators never collide (args may override).
                    "--metrics-bind-address",
                    "127.0.0.1:0",
                    "--health-probe-bind-address",
                    "127.0.0.1:0",
                    *self.args,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
                env={**os.environ, **self.env},
            )

    async def serving(self, timeout: float = 60.0) -> None:
        """Wait until its webhook server (``--webhook-host``/``--webhook-port``) takes connections, at most
        ``timeout`` seconds (a restarted operator imports and syncs its caches first). Raises
        ``TimeoutError``; returns at once when it serves no webhook."""
        host, port = flag(self.args, "webhook-host"), flag(self.args, "webhook-port")
        if not (host and port and port != "0"):
            return
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            try:
                _, writer = await asyncio.open_connection(host, int(port))
            except OSError:
                if asyncio.get_running_loop().time() > deadline:
                    raise TimeoutError(f"the operator serves no webhook on {host}:{port} after {timeout} s") from None
                await asyncio.sleep(0.2)
                continue
            writer.close()
            return

    def kill(self) -> None:
        """SIGKILL (``kill -9``: no cleanup, in-flight requests cut) and reap it; :meth:`start` runs a
        new one. Does nothing when none runs."""
        if self.proc is None:
            return
        self.proc.kill()
        self.proc.wait()
        self.proc = None

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 15 s; fails the test if the operator crashed."""
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        code, self.proc = self.proc.returncode, None
        assert code in (0, -15), f"operator exited with {code}; see {self.log_path}"


@contextlib.contextmanager
def running_operator(
    cluster: LocalCluster | ExternalCluster, gang: str, extra: list[str], log_name: str, workdir: Path
) -> Iterator[Operator]:
    """One operator process run with ``--gang-scheduler-name <gang>`` and ``extra`` flags while the
    block runs, logging JSON to ``<cluster state>/logs/<log_name>``; stopped after it (the block fails
    if the operator crashed).

    With ``--webhook-host`` and ``--webhook-port`` in ``extra`` the webhook configurations are applied
    first (written into ``workdir``), calling that URL (as an installer would: the operator only
    patches their caBundle), and deleted once the operator stopped (with ``failurePolicy: Fail`` they
    would refuse every write once nothing serves them).

    With ``TRAINER_E2E_OPERATOR_SA=1`` it runs as its own ServiceAccount with the RBAC of ``config/``
    (the overlay of ``gang``; see :mod:`localcluster.operator_sa`), not as admin, and its Lease and certificate
    Secrets default to that account's namespace, where its Roles are."""
    kubeconfig = cluster.kubeconfig
    env = {}
    if os.environ.get("TRAINER_E2E_OPERATOR_SA"):
        kubeconfig = operator_kubeconfig(cluster, gang, cluster.state_dir / "operator-sa")
        env = {"TRAINER_WEBHOOK_NAMESPACE": OPERATOR_NAMESPACE, "TRAINER_LEADER_ELECTION_NAMESPACE": OPERATOR_NAMESPACE}
    url = webhook_url(extra)
    configs = workdir / "configurations.yaml"
    if url:
        configs.write_text(webhook_server.render(url))
        cluster.run_kubectl("apply", "--server-side", "--force-conflicts", "-f", str(configs))
    op = Operator(kubeconfig, cluster.state_dir / "logs" / log_name, ["--gang-scheduler-name", gang, *extra], env)
    op.start()
    try:
        yield op
    finally:
        try:
            op.stop()
        finally:
            if url:
                cluster.run_kubectl("delete", "--ignore-not-found", "-f", str(configs))
