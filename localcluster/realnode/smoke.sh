#!/usr/bin/env bash
# Smoke test for REAL pods and cluster DNS on this machine: the project's local cluster (python -m
# localcluster up), two real nodes plus CoreDNS (python -m localcluster.realnode.node up), a headless Service
# and two busybox pods, one per node; the second must resolve the first as <host>.<subdomain>
# (search path) and <host>.<subdomain>.<ns>.svc.cluster.local, and reach it over TCP.
#
# Usage: localcluster/realnode/smoke.sh up     # everything below; leaves it running
#        localcluster/realnode/smoke.sh down   # stop the nodes, CoreDNS and the cluster
# Work dir: $RN (default /tmp/trainer-realnode). Needs root, Debian, the Go toolchain.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
RN="${RN:-/tmp/trainer-realnode}"
py="$repo/.venv/bin/python"; [ -x "$py" ] || py=python3
export KUBECONFIG="$RN/cluster/kubeconfig.yaml" PYTHONDONTWRITEBYTECODE=1
log() { printf '[realnode %s] %s\n' "$(date +%T)" "$*" >&2; }
kubectl() { "${TRAINER_CACHE:-$HOME/.cache/trainer}/bin/kubernetes-$(. "$repo/localcluster/versions.env"; echo "$KUBERNETES_VERSION")/kubectl" "$@"; }

up() {
  local t0=$SECONDS
  (cd "$repo" && "$py" -m localcluster up --dir "$RN/cluster" --nodes 1 >/dev/null)
  (cd "$repo" && "$py" -m localcluster.realnode.node up --cluster "$RN/cluster" --nodes 2 --dir "$RN/nodes")
  kubectl delete pod,svc -l app=smoke --ignore-not-found --wait=true >/dev/null
  kubectl apply -f - >&2 <<'EOP'
apiVersion: v1
kind: Service
metadata: {name: sub, labels: {app: smoke}}
spec: {clusterIP: None, publishNotReadyAddresses: true, selector: {app: smoke}, ports: [{name: p, port: 4321}]}
---
apiVersion: v1
kind: Pod
metadata: {name: a, labels: {app: smoke}}
spec:
  nodeName: realnode-0
  hostname: a
  subdomain: sub
  terminationGracePeriodSeconds: 0
  containers:
  - {name: m, image: "localhost/realnode/busybox:1", imagePullPolicy: Never,
     command: [sh, -c, "while true; do nc -l -p 4321 -e echo pong-from-a; done"]}
---
apiVersion: v1
kind: Pod
metadata: {name: b, labels: {app: smoke}}
spec:
  nodeName: realnode-1
  hostname: b
  subdomain: sub
  terminationGracePeriodSeconds: 0
  containers:
  - {name: m, image: "localhost/realnode/busybox:1", imagePullPolicy: Never, command: [sleep, "3600"]}
EOP
  kubectl wait --for=condition=Ready pod/a pod/b --timeout=90s >&2
  kubectl exec b -- nslookup a.sub.default.svc.cluster.local >&2
  kubectl exec b -- ping -c1 -W2 a.sub >&2   # the short name, through the search path
  kubectl exec b -- sh -c 'nc -w 3 a.sub 4321 </dev/null' | grep -qx pong-from-a
  log "OK: real pods on 2 nodes, DNS and pod-to-pod TCP work ($((SECONDS - t0))s)"
}

down() {
  (cd "$repo" && "$py" -m localcluster.realnode.node down --cluster "$RN/cluster" --nodes 2 --dir "$RN/nodes") || true
  (cd "$repo" && "$py" -m localcluster down --dir "$RN/cluster") || true
}

case "${1:-up}" in up) up ;; down) down ;; *) echo "usage: $0 up|down" >&2; exit 2 ;; esac
