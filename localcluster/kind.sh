#!/usr/bin/env bash
# The end-to-end suite on kind, for machines with Docker (the local binary cluster needs none).
#
# Creates (or reuses) kind cluster "trainer-e2e", installs KWOK in it with the same Stages as the
# local cluster (localcluster/kwok-stages.yaml), adds 4 fake nodes, and runs `pytest e2e` against
# it through TRAINER_E2E_KUBECONFIG. Needs: docker, kind, kubectl, and `make venv` done.
#
# Usage: localcluster/kind.sh [pytest args...]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source localcluster/versions.env

name="${KIND_CLUSTER_NAME:-trainer-e2e}"
kubeconfig="${KIND_KUBECONFIG:-$HOME/.kube/kind-$name.yaml}"
mkdir -p "$(dirname "$kubeconfig")"

kind get clusters | grep -qx "$name" || kind create cluster --name "$name" --kubeconfig "$kubeconfig"
kind get kubeconfig --name "$name" >"$kubeconfig"
export KUBECONFIG="$kubeconfig"

# KWOK controller (its release manifest), then our Stages instead of its default ones.
kubectl apply -f "https://github.com/kubernetes-sigs/kwok/releases/download/$KWOK_VERSION/kwok.yaml"
kubectl apply -f localcluster/kwok-stages.yaml
kubectl -n kube-system rollout status deployment/kwok-controller --timeout=120s

# Fake nodes, the same objects the local cluster creates.
.venv/bin/python - <<'PY' | kubectl apply -f -
import json, tempfile
from pathlib import Path
from localcluster import LocalCluster
c = LocalCluster(Path(tempfile.mkdtemp()), nodes=4)
print(json.dumps({"apiVersion": "v1", "kind": "List",
                  "items": [c.node_manifest(f"kwok-node-{i}") for i in range(c.nodes)]}))
PY
kubectl wait --for=condition=Ready node -l type=kwok --timeout=120s

TRAINER_E2E_KUBECONFIG="$kubeconfig" .venv/bin/python -m pytest e2e -v "$@"
