"""Command line: ``python -m localcluster up|down|status [--dir DIR] [--nodes N] [--purge]``, and
``python -m localcluster multicluster up|down|status [--dir DIR] [--purge]``.

``up`` starts the cluster (or reuses the one running from DIR) and prints ``export KUBECONFIG=...``
and ``export PATH=...`` (the built kubectl, and helm once built) on stdout, for ``eval``; the
processes keep running after the command exits, until ``down``. ``up --volcano`` and ``up --kueue``
add those components, ``up --crds PATH...`` applies CRD manifests (files or directories) before they
start; ``down`` stops whatever runs, optional components included.

``multicluster up`` starts a MultiKueue manager and two worker clusters, each with Kueue and the
operator (:mod:`localcluster.multicluster`), and prints ``export KUBECONFIG=<manager>`` on stdout
and the workers' kubeconfigs on stderr.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from localcluster.binaries import binary_paths, cache_dir
from localcluster.cluster import LocalCluster


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m localcluster", description=__doc__)
    parser.add_argument("command", choices=["up", "down", "status"])
    parser.add_argument(
        "--dir",
        type=Path,
        default=cache_dir() / "cluster",
        help="state directory (default: $TRAINER_CACHE/cluster, i.e. ~/.cache/trainer/cluster)",
    )
    parser.add_argument("--nodes", type=int, default=4, help="number of KWOK nodes (up)")
    parser.add_argument("--purge", action="store_true", help="also delete the state directory (down)")
    parser.add_argument("--volcano", action="store_true", help="also run Volcano's scheduler and controllers (up)")
    parser.add_argument("--kueue", action="store_true", help="also run Kueue (up)")
    parser.add_argument(
        "--crds",
        type=Path,
        nargs="+",
        action="extend",
        default=[],
        metavar="PATH",
        help="CRD manifests (files or directories) to apply before Volcano and Kueue start (up)",
    )
    for stage, default in (("ready", 0), ("complete", 1)):
        parser.add_argument(
            f"--pod-{stage}-delay",
            type=float,
            metavar="SECONDS",
            help=f"seconds before a pod without KWOK delay annotations is {stage} (default {default}; up)",
        )
    return parser


def _multicluster_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m localcluster multicluster",
        description="A MultiKueue manager cluster and two worker clusters (worker-a: 1 CPU queue, worker-b: 8).",
    )
    parser.add_argument("command", choices=["up", "down", "status"])
    parser.add_argument(
        "--dir",
        type=Path,
        default=cache_dir() / "multicluster",
        help="state directory (default: $TRAINER_CACHE/multicluster, i.e. ~/.cache/trainer/multicluster)",
    )
    parser.add_argument("--purge", action="store_true", help="also delete the state directory (down)")
    return parser


def multicluster_main(argv: list[str]) -> int:
    """Run one ``multicluster`` command; return the process exit code."""
    # Imported here: the MultiKueue setup loads the operator's webhook code, a single cluster needs none of it.
    from localcluster.multicluster import MultiCluster

    args = _multicluster_parser().parse_args(argv)
    mc = MultiCluster(args.dir)
    if args.command == "up":
        mc.start()
        for name, worker in mc.workers.items():
            print(f"{name}: KUBECONFIG={worker.kubeconfig}", file=sys.stderr)
        print(f"export KUBECONFIG={mc.manager.kubeconfig}")
        return 0
    if args.command == "down":
        mc.stop(purge=args.purge)
        print(f"stopped the clusters in {args.dir}" + (" and deleted them" if args.purge else ""), file=sys.stderr)
        return 0
    up = True
    for name, (running, operator) in mc.status().items():
        up = up and running and operator is not None
        state = "running" if running else "not running"
        print(f"{name:10} {state:12} operator {'pid ' + str(operator) if operator else 'not running'}")
        print(f"{'':10} kubeconfig {mc.clusters[name].kubeconfig}")
    return 0 if up else 1


def main(argv: list[str] | None = None) -> int:
    """Run one command; return the process exit code."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["multicluster"]:
        return multicluster_main(argv[1:])
    args = _parser().parse_args(argv)
    cluster = LocalCluster(
        args.dir,
        nodes=args.nodes,
        volcano=args.volcano,
        kueue=args.kueue,
        extra_crds=args.crds,
        pod_ready_delay=args.pod_ready_delay,
        pod_complete_delay=args.pod_complete_delay,
    )
    if args.command == "up":
        cluster.start()
        print(f"export KUBECONFIG={cluster.kubeconfig}")
        tools = [binary_paths()[name] for name in ("kubectl", "helm")]
        dirs = dict.fromkeys(str(path.parent) for path in tools if path.exists())
        print(f"export PATH={':'.join(dirs)}:$PATH")
        return 0
    if args.command == "down":
        cluster.stop(purge=args.purge)
        print(f"stopped the cluster in {args.dir}" + (" and deleted it" if args.purge else ""), file=sys.stderr)
        return 0
    for name, pid in cluster.status().items():
        print(f"{name:24} {'pid ' + str(pid) if pid else 'not running'}")
    print(f"{'kube-apiserver /readyz':24} {'ok' if cluster.apiserver_ready() else 'not ready'}")
    running = cluster.is_running()
    print(f"{'cluster':24} {'running' if running else 'not running (up restarts it)'}")
    if running:
        print(f"{'server':24} {cluster.server}")
        print(f"{'kubeconfig':24} {cluster.kubeconfig}")
    return 0 if running else 1


if __name__ == "__main__":
    sys.exit(main())
