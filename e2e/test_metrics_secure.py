"""``--metrics-secure`` against a real apiserver (kubeflow/trainer#3912): /metrics over HTTPS with the
certificate the operator keeps in Secret ``trainer-metrics-certs``, answering 401 without a token,
403 to a ServiceAccount no rule lets ``get /metrics`` and 200 once a ClusterRole granting it is bound,
the TokenReview and SubjectAccessReview made by the operator, as docs/operating.md tells a scraper."""

from __future__ import annotations

import base64
import ssl
import uuid
from typing import Any

import aiohttp
import pytest

from localcluster.client import Client, wait_for
from localcluster.cluster import reserved_ports
from localcluster.operator_process import Operator
from trainer.api.kinds import SECRETS
from trainer.framework.probes import METRICS_SECRET

pytestmark = pytest.mark.e2e
(PORT,) = reserved_ports(1)
OPERATOR_ARGS = [f"--metrics-bind-address=127.0.0.1:{PORT}", "--metrics-secure"]


def home(operator: Operator) -> str:
    """The operator's own namespace (``--webhook-namespace``): where it keeps the Secret, and the
    namespace of ``--metrics-service``'s default name; ``default`` unless it runs as its ServiceAccount."""
    return operator.env.get("TRAINER_WEBHOOK_NAMESPACE", "default")


async def scrape(trust: ssl.SSLContext, token: str | None, server_name: str) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=trust)) as http,
        http.get(f"https://127.0.0.1:{PORT}/metrics", headers=headers, server_hostname=server_name) as r,
    ):
        return r.status, await r.text()


async def test_only_a_scraper_granted_get_metrics_reads_them(
    cluster: Any, client: Client, ns: str, operator: Operator
) -> None:
    server_name = f"trainer-operator-metrics.{home(operator)}.svc"  # --metrics-service's default
    secret = await wait_for(
        lambda: client.kube.get_or_none(SECRETS, home(operator), METRICS_SECRET), "the metrics certificate Secret"
    )
    trust = ssl.create_default_context(cadata=base64.b64decode(secret["data"]["ca.crt"]).decode())
    cluster.run_kubectl("create", "serviceaccount", "scraper", "-n", ns)
    token = cluster.run_kubectl("create", "token", "scraper", "-n", ns).stdout.strip()

    async def answered() -> tuple[int, str] | None:
        try:
            return await scrape(trust, None, server_name)
        except aiohttp.ClientConnectionError:
            return None

    assert (await wait_for(answered, "/metrics over HTTPS"))[0] == 401
    status, body = await scrape(trust, token, server_name)
    assert status == 403 and f"user=system:serviceaccount:{ns}:scraper, verb=get, path=/metrics" in body, body

    role = f"metrics-reader-{uuid.uuid4().hex[:6]}"
    cluster.run_kubectl("create", "clusterrole", role, "--verb=get", "--non-resource-url=/metrics")
    cluster.run_kubectl("create", "clusterrolebinding", role, f"--clusterrole={role}", f"--serviceaccount={ns}:scraper")
    try:

        async def allowed() -> str | None:  # a refusal is kept 10 s
            status, body = await scrape(trust, token, server_name)
            return body if status == 200 else None

        body = await wait_for(allowed, "the bound scraper to read /metrics", timeout=30)
        assert "controller_runtime_reconcile_total" in body
        with pytest.raises(aiohttp.ClientError):  # plain HTTP is not served
            async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{PORT}/metrics") as r:
                await r.text()
    finally:
        cluster.run_kubectl("delete", "clusterrolebinding", role, check=False)
        cluster.run_kubectl("delete", "clusterrole", role, check=False)
