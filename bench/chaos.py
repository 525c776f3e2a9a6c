"""Chaos at scale: a burst of TrainJobs and MPIJobs while the operator is killed and the apiserver restarted.

``python -m bench.chaos [--n 320] [--mpijobs 32] [--kills 5] [--apiserver-restarts 1]`` starts the
local cluster (KWOK nodes; the binaries of ``localcluster/build.sh``) in a temporary directory, runs the
operator as its own process, creates ``--n`` TrainJobs (a third on the mpi runtime
``deepspeed-distributed``, the others on ``torch-distributed``) and ``--mpijobs`` MPIJobs in one
burst, their pods running a few seconds, while the operator gets ``--kills`` ``kill -9`` (started
again at once) and the kube-apiserver ``--apiserver-restarts`` restarts, spread over the run. Then
it checks what :mod:`localcluster.chaos` checks (every job succeeded; each child created exactly once, none
extra, none lost, none orphaned; SSH keys and runtime snapshots never rewritten) and prints the counts
and times. Exits 1 on any violation.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from bench.cluster import local_cluster, machine
from localcluster import LocalCluster, chaos
from localcluster.client import Client
from localcluster.operator_process import Operator
from trainer.framework.kube.client import Kube

NAMESPACE = "chaos"


async def measure(cluster: LocalCluster, operator: Operator, args: argparse.Namespace) -> chaos.Run:
    """One run of :func:`localcluster.chaos.run` in namespace ``chaos``."""
    client = await Client.connect(cluster)
    watch = await Kube.connect(str(cluster.kubeconfig))
    try:
        await client.create_namespace(NAMESPACE)
        for rt in chaos.runtimes():
            await client.apply(rt)
        parents = chaos.workload(args.n, mpi_share=args.mpi_share, mpijobs=args.mpijobs, run=(args.run[0], args.run[1]))
        return await chaos.run(
            client.kube,
            watch,
            NAMESPACE,
            parents,
            operator,
            cluster.restart_apiserver,
            args.kills,
            args.apiserver_restarts,
            timeout=args.timeout,
            settle=5.0,
            concurrency=16,
        )
    finally:
        await watch.close()
        await client.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=320, help="TrainJobs (default 320)")
    p.add_argument("--mpi-share", type=float, default=1 / 3, help="share of them on the mpi runtime (default 1/3)")
    p.add_argument("--mpijobs", type=int, default=32, help="MPIJobs (default 32)")
    p.add_argument("--kills", type=int, default=5, help="operator kill -9s (default 5)")
    p.add_argument("--apiserver-restarts", type=int, default=1, help="apiserver restarts (default 1)")
    p.add_argument(
        "--run", type=float, nargs=2, default=[2.0, 5.0], metavar=("MIN", "MAX"), help="pod run time, seconds"
    )
    p.add_argument("--timeout", type=float, default=900, help="seconds for every job to finish (default 900)")
    args = p.parse_args()
    with local_cluster("bench-chaos-", pods_per_node=250) as cluster:
        # a restartable Operator: localcluster.chaos kills it with kill -9 and starts it again
        operator = Operator(cluster.kubeconfig, cluster.state_dir / "operator.log", ["--gang-scheduler-name", "none"])
        try:
            operator.start()
            result = asyncio.run(measure(cluster, operator, args))
        finally:
            operator.stop()
    print(
        f"machine: {machine()['cores']} cores; --n {args.n} --mpijobs {args.mpijobs} --kills {args.kills} "
        f"--apiserver-restarts {args.apiserver_restarts}"
    )
    print("\n".join(result.lines))
    failures = result.failures()
    for line in failures:
        print(f"  {line}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
