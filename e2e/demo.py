"""Run the sample TrainJob on the local cluster and show it progressing to Complete.

``python -m e2e.demo`` (what ``make demo`` runs): starts the local cluster if it is not running
(building its binaries on first use), installs the CRDs and the samples, runs the operator, and
prints the TrainJob's state, jobsStatus and pods as they change until it is Complete. The cluster
is left running for ``kubectl``; ``python -m e2e.cluster down --dir DIR`` stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

from api.kinds import TRAINJOBS
from e2e.cluster import LocalCluster
from e2e.helpers import ROOT, Client, condition

DEFAULT_DIR = Path(os.environ.get("TRAINER_CACHE", Path.home() / ".cache" / "trainer")) / "clusters" / "demo"
SAMPLE = ROOT / "config" / "samples" / "trainjob.yaml"
NAME, NAMESPACE = "pytorch-simple", "default"


def say(message: str) -> None:
    print(f"[demo {time.strftime('%H:%M:%S')}] {message}", flush=True)


async def watch_sample(cluster: LocalCluster, timeout: float) -> bool:
    """Re-create the sample TrainJob and print its progress; True when it completes."""
    client = await Client.connect(cluster)
    try:
        await client.apply_file(ROOT / "config" / "samples" / "torch-distributed.yaml")
        if await client.kube.delete(TRAINJOBS, NAMESPACE, NAME):
            say(f"deleted the previous TrainJob {NAMESPACE}/{NAME}; waiting for its Jobs to go")
            while await client.trainjob(NAMESPACE, NAME) is not None or await client.jobs(NAMESPACE, NAME):
                await asyncio.sleep(0.2)
        await client.apply_file(SAMPLE, NAMESPACE)
        say(f"created TrainJob {NAMESPACE}/{NAME} from {SAMPLE.relative_to(ROOT)}")
        deadline, last = time.monotonic() + timeout, ""
        while time.monotonic() < deadline:
            tj = await client.trainjob(NAMESPACE, NAME) or {}
            conditions = (tj.get("status") or {}).get("conditions") or []
            state = conditions[-1]["type"] if conditions else "Created"
            pods = await client.pods(NAMESPACE, f"jobset.sigs.k8s.io/jobset-name={NAME}")
            phases = ", ".join(f"{p['metadata']['name']}={p['status'].get('phase')}" for p in pods) or "none yet"
            line = f"state={state} jobsStatus={(tj.get('status') or {}).get('jobsStatus')} pods: {phases}"
            if line != last:
                say(line)
                last = line
            done = condition(tj, "Complete")
            if done and done.get("status") == "True":
                return True
            failed = condition(tj, "Failed")
            if failed and failed.get("status") == "True":
                say(f"TrainJob failed: {failed.get('message')}")
                return False
            await asyncio.sleep(0.3)
        say(f"TrainJob did not complete within {timeout:.0f}s")
        return False
    finally:
        await client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--dir", type=Path, default=DEFAULT_DIR, help=f"cluster state directory (default {DEFAULT_DIR})"
    )
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for Complete")
    args = parser.parse_args(argv)
    started = time.monotonic()
    cluster = LocalCluster(args.dir, nodes=4)
    cluster.start()
    say(f"cluster up in {time.monotonic() - started:.1f}s")
    cluster.run_kubectl("apply", "--server-side", "-f", str(ROOT / "config" / "crd" / "bases"))
    cluster.run_kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
    log_path = cluster.state_dir / "logs" / "operator.log"
    with log_path.open("ab") as log:
        operator = subprocess.Popen(
            [
                *(sys.executable, "-m", "trainer", "--kubeconfig", str(cluster.kubeconfig), "--log-format", "json"),
                *("--metrics-bind-address=127.0.0.1:0", "--health-probe-bind-address=127.0.0.1:0"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
    say(f"operator running (pid {operator.pid}, log {log_path})")
    try:
        ok = asyncio.run(watch_sample(cluster, args.timeout))
    finally:
        operator.terminate()
        operator.wait(timeout=15)
    say(f"{'Complete' if ok else 'NOT complete'} after {time.monotonic() - started:.1f}s in all")
    print(
        f"\nkubeconfig: {cluster.kubeconfig}\n"
        f"  {cluster.kubectl} --kubeconfig {cluster.kubeconfig} get trainjobs,jobs,pods -A\n"
        f"stop the cluster: python -m e2e.cluster down --dir {cluster.state_dir}",
        flush=True,
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
