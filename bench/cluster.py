"""The cluster and the operator of a bench: the project's local cluster (:class:`localcluster.LocalCluster`,
KWOK nodes, the binaries of ``localcluster/build.sh``) started in a temporary directory, and the operator
(``python -m trainer``) run against it as its own process, with its ``/metrics`` text and its CPU and
memory read from ``/proc``.

Also here: the machine a bench ran on (:func:`machine`), printed first by every bench.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from bench.mem_profile import done_path
from localcluster import ROOT, LocalCluster
from localcluster.cluster import free_ports

NODES = 8
"""KWOK nodes of a bench's cluster."""
CRDS = ROOT / "config" / "crd" / "bases"
"""The CRDs of this checkout, applied when the cluster starts."""


class PhaseTimeout(Exception):
    """A phase did not finish in time; the message names it and the counts it reached."""


# --- pure parts: /proc text, node capacity -----------------------------------------------------------


def cpu_seconds(stat: str, ticks_per_second: int) -> float:
    """User plus system CPU seconds of a process from the text of ``/proc/<pid>/stat`` (fields 14
    ``utime`` and 15 ``stime``, in clock ticks; proc(5)). The command name (field 2) may hold spaces
    and parentheses: fields are counted after its last ``)``. Raises ``ValueError`` on other text."""
    rest = stat[stat.rindex(")") + 1 :].split()  # rest[0] is field 3, state
    return (int(rest[11]) + int(rest[12])) / ticks_per_second


def status_mib(status: str, key: str) -> float:
    """The ``key`` line (``VmRSS``, ``VmHWM``...) of ``/proc/<pid>/status`` (or ``MemTotal`` of
    ``/proc/meminfo``), in kB there, as MiB. Raises ``KeyError`` when the line is missing."""
    for line in status.splitlines():
        name, _, value = line.partition(":")
        if name == key:
            return int(value.split()[0]) / 1024
    raise KeyError(key)


def pods_per_node(pods: int, nodes: int = NODES) -> int:
    """Pod capacity each of ``nodes`` KWOK nodes needs so that ``pods`` fit at once (at least 110,
    the kubelet's default), with a margin of 10 per node."""
    return max(110, math.ceil(pods / nodes) + 10)


# --- the machine and the cluster ---------------------------------------------------------------------


def machine() -> dict[str, Any]:
    """``{"cores": int | None, "memory_gib": float}``: cores (``os.cpu_count()``) and memory
    (``MemTotal`` of ``/proc/meminfo``, GiB, one decimal)."""
    mem = status_mib(Path("/proc/meminfo").read_text(), "MemTotal") / 1024
    return {"cores": os.cpu_count(), "memory_gib": round(mem, 1)}


@contextlib.contextmanager
def local_cluster(
    prefix: str,
    pods_per_node: int,
    node_cpu: str = "64",
    node_memory: str = "64Gi",
    crds: Path = CRDS,
    apiserver_profiling: bool = False,
) -> Iterator[LocalCluster]:
    """A started :class:`LocalCluster` of :data:`NODES` KWOK nodes (each ``node_cpu`` cores,
    ``node_memory`` and room for ``pods_per_node`` pods) with the CRDs of ``crds`` Established, its
    state in a temporary directory named ``prefix...`` (``apiserver_profiling``: the apiserver serves its
    Go profiles, :class:`LocalCluster`); on exit (or when the start fails) every
    component is stopped and the directory deleted. Raises what :meth:`LocalCluster.start` raises
    (``RuntimeError``, ``TimeoutError``)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        cluster = LocalCluster(
            Path(tmp),
            nodes=NODES,
            node_cpu=node_cpu,
            node_memory=node_memory,
            pods_per_node=pods_per_node,
            extra_crds=[crds],
            apiserver_profiling=apiserver_profiling,
        )
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.stop()


# --- the operator process ----------------------------------------------------------------------------


@dataclass
class Usage:
    """One reading of a process: CPU seconds (user + system), RSS and peak RSS (MiB)."""

    cpu: float
    rss: float
    peak: float


def read_usage(pid: int) -> Usage:
    """The :class:`Usage` of ``pid`` now (Linux ``/proc``). Raises ``OSError`` when it is gone."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    status = Path(f"/proc/{pid}/status").read_text()
    return Usage(
        cpu=cpu_seconds(stat, os.sysconf("SC_CLK_TCK")),
        rss=status_mib(status, "VmRSS"),
        peak=status_mib(status, "VmHWM"),
    )


async def wait_readyz(proc: subprocess.Popen[bytes] | None, port: int, deadline: float, what: str, log: Path) -> None:
    """Wait until ``http://127.0.0.1:<port>/readyz`` answers 200 (read every 0.2 s). Raises
    :class:`PhaseTimeout` naming ``what`` at ``deadline`` (monotonic) and ``RuntimeError`` naming
    ``log`` when ``proc`` exits."""
    async with aiohttp.ClientSession() as http:
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"{what} exited ({proc.returncode}); log: {log}")
            try:
                async with http.get(f"http://127.0.0.1:{port}/readyz") as r:
                    if r.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)
    raise PhaseTimeout(f"{what} start: /readyz not 200 in time")


class Operator:
    """``python -m trainer`` of the checkout at ``root`` (its cwd and ``PYTHONPATH``, so that checkout's
    ``trainer`` package is imported; this interpreter) on the cluster as its own process, with its
    defaults but for the namespace it watches (every one when ``namespace`` is ``None``), loopback
    metrics and probe ports and the flags of ``args``; its output goes to ``log``. Without ``args``
    only flags every version of the operator has are passed."""

    def __init__(
        self,
        kubeconfig: Path,
        namespace: str | None,
        log: Path,
        root: Path = ROOT,
        args: Sequence[str] = (),
        profile: Path | None = None,
        memory: Path | None = None,
    ) -> None:
        """Describe the process; nothing runs before :meth:`start`. With ``profile``, the operator runs
        under :mod:`cProfile` timed by its CPU time (:mod:`bench.cpu_profile`), which writes its statistics
        to that file when the process exits (after :meth:`stop`; read them with :mod:`pstats`). With
        ``memory``, it runs with :mod:`tracemalloc` on (:mod:`bench.mem_profile`; not with ``profile``), and
        :meth:`memory_snapshot` writes where its memory is to that file."""
        if profile is not None and memory is not None:
            raise ValueError("profile and memory: one at a time (each slows the other's figures)")
        self.memory = memory
        self.metrics_port, self.health_port = free_ports(2)
        self.root = root
        watched = [] if namespace is None else ["--namespace", namespace]
        profiled = (
            ["-m", "bench.cpu_profile", "-o", str(profile)]
            if profile is not None
            else ["-m", "bench.mem_profile", "-o", str(memory)]
            if memory is not None
            else []
        )
        self.args = [
            sys.executable,
            *profiled,
            "-m",
            "trainer",
            "--kubeconfig",
            str(kubeconfig),
            *watched,
            "--log-format",
            "json",
            "--metrics-bind-address",
            f"127.0.0.1:{self.metrics_port}",
            "--health-probe-bind-address",
            f"127.0.0.1:{self.health_port}",
            *args,
        ]
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        """The process id. Raises ``RuntimeError`` before :meth:`start`."""
        if self.proc is None:
            raise RuntimeError("the operator is not started")
        return self.proc.pid

    def start(self) -> None:
        """Start the process (returns at once; see :meth:`wait_ready`)."""
        path = os.pathsep.join(p for p in (str(self.root), os.environ.get("PYTHONPATH", "")) if p)
        env = {**os.environ, "PYTHONPATH": path}
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT, cwd=self.root, env=env)

    async def wait_ready(self, timeout: float) -> None:
        """Wait until ``/readyz`` answers 200 (caches synced). Raises :class:`PhaseTimeout` after
        ``timeout`` seconds and ``RuntimeError`` when the process exits."""
        await wait_readyz(self.proc, self.health_port, time.monotonic() + timeout, "operator", self.log)

    async def metrics(self) -> str:
        """The Prometheus text exposition of its ``/metrics`` now. Raises ``aiohttp.ClientError`` when
        it does not answer."""
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"http://127.0.0.1:{self.metrics_port}/metrics") as r,
        ):
            return await r.text()

    def usage(self) -> Usage:
        """Its CPU and memory now (see :func:`read_usage`)."""
        return read_usage(self.pid)

    async def memory_snapshot(self, timeout: float = 300.0) -> Path:
        """Ask the process (started with ``memory``) for a snapshot of where its memory is and wait until
        it is written; returns its path. Raises ``RuntimeError`` without ``memory``, ``TimeoutError``
        after ``timeout`` seconds."""
        if self.memory is None:
            raise RuntimeError("the operator runs without tracemalloc (memory=None)")
        done = done_path(self.memory)
        done.unlink(missing_ok=True)
        os.kill(self.pid, signal.SIGUSR1)
        deadline = time.monotonic() + timeout
        while not done.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"no memory snapshot in {self.memory} after {timeout} s")
            await asyncio.sleep(0.5)
        return self.memory

    def kill(self) -> None:
        """SIGKILL, and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 30 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """A bench's ``--help``: its module docstring as written, and every flag's default."""
