"""Webhook certificate rotation without an outage, on the real local cluster.

Two operator replicas (leader election on their own Lease) serve admission on one port of 127.0.0.1,
shared with SO_REUSEPORT, from one certificate Secret. Their serving certificates are valid 30 s, so
the Secret is renewed every 20-25 s while TrainJobs are created every 0.3 s for a minute: none may be
refused, the caBundle installed in the webhook configurations never changes (only the serving
certificate rotates), and a TLS client trusting only that caBundle, connecting anew every half second
(so to either replica), sees the certificates change.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import os
import ssl
import time
from pathlib import Path
from typing import Any

import pytest

from e2e.helpers import log_events, webhook_ca_patched
from e2e.test_trainjob import rjob, runtime, trainjob
from localcluster.client import Client, wait_for
from localcluster.cluster import reserved_ports
from localcluster.operator_process import Operator
from localcluster.operator_sa import NAMESPACE as OPERATOR_NAMESPACE
from trainer.api.kinds import SECRETS, VALIDATING_WEBHOOKS
from trainer.framework.certs import fingerprint
from trainer.framework.tls import SECRET_NAME
from trainer.webhook.server import CONFIG_NAME

pytestmark = pytest.mark.e2e


(PORT,) = reserved_ports(1)
VALIDITY = 30
"""Seconds of a serving certificate: renewed 20-25 s after it is made."""
CREATE_FOR = 60.0
CREATE_EVERY = 0.3
SECRET_NS = OPERATOR_NAMESPACE if os.environ.get("TRAINER_E2E_OPERATOR_SA") else "default"
"""The operator's namespace (``--webhook-namespace``, as the ``operator`` fixture sets it)."""
OPERATOR_ARGS = [
    "--leader-elect",
    "--leader-election-id=e2e-webhook-rotation",
    "--webhook-port",
    str(PORT),
    "--webhook-host",
    "127.0.0.1",
    "--webhook-reuse-port",
    f"--webhook-cert-validity={VALIDITY}",
]


def size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


@pytest.fixture(scope="module", autouse=True)
async def webhook_installed(client: Client, operator: Operator) -> None:
    """Wait for the operator to patch the caBundle of the webhook configurations the ``operator``
    fixture applied (it deletes them once this module's operator stopped)."""
    await wait_for(lambda: webhook_ca_patched(client.kube), "webhook configurations patched")


async def installed_ca(client: Client) -> str:
    """The caBundle (PEM) the apiserver verifies the webhook with."""
    config = await client.kube.get(VALIDATING_WEBHOOKS, None, CONFIG_NAME)
    bundles = {h["clientConfig"]["caBundle"] for h in config["webhooks"]}
    assert len(bundles) == 1, "every webhook of the configuration carries the same caBundle"
    return base64.b64decode(bundles.pop()).decode()


async def served_certificate(ca: str) -> str:
    """The SHA-256 fingerprint of the certificate a new TLS connection to the webhook port is shown,
    verified as the apiserver verifies it: trusting only ``ca``, for the host 127.0.0.1. Raises
    ``ssl.SSLError`` when verification fails, ``OSError`` when nothing answers."""
    ctx = ssl.create_default_context(cadata=ca)
    _, writer = await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", PORT, ssl=ctx, server_hostname="127.0.0.1"), timeout=5
    )
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    finally:
        writer.close()
        with contextlib.suppress(OSError, ssl.SSLError):
            await writer.wait_closed()
    return hashlib.sha256(der).hexdigest()


async def test_two_replicas_rotate_the_serving_certificate_while_every_create_is_admitted(
    client: Client, cluster: Any, ns: str, operator: Operator
) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer")), ns)
    b = Operator(
        operator.kubeconfig,
        cluster.state_dir / "logs" / "operator-webhook-rotation-b.log",
        ["--gang-scheduler-name", "none", *OPERATOR_ARGS],
        operator.env,
    )
    a_offset, b_offset = size(operator.log_path), size(b.log_path)
    b.start()
    try:

        async def b_serving() -> bool:
            return any(e.get("event") == "webhook serving" for e in log_events(b.log_path, b_offset))

        await wait_for(b_serving, "the second replica serving the webhook", timeout=60)

        secret_certs: list[str] = []
        served: list[str] = []
        bundles: set[str] = set()
        tls_errors: list[str] = []
        stop = asyncio.Event()

        async def observe() -> None:
            while not stop.is_set():
                secret = await client.kube.get(SECRETS, SECRET_NS, SECRET_NAME)
                cert = fingerprint(base64.b64decode(secret["data"]["tls.crt"]).decode())
                if cert not in secret_certs:
                    secret_certs.append(cert)
                ca = await installed_ca(client)
                bundles.add(ca)
                try:
                    seen = await served_certificate(ca)
                except (OSError, ssl.SSLError, TimeoutError) as e:
                    tls_errors.append(repr(e))
                else:
                    if seen not in served:
                        served.append(seen)
                await asyncio.sleep(0.5)

        watcher = asyncio.create_task(observe())
        refused: list[str] = []
        created = 0
        began = time.monotonic()
        try:
            while time.monotonic() - began < CREATE_FOR:
                name = f"rot-{created + len(refused)}"
                try:
                    await client.apply(trainjob(name, "rt", suspend=True), ns)
                    created += 1
                except Exception as e:  # any refusal or error fails the test
                    refused.append(f"{name} after {time.monotonic() - began:.1f}s: {e!r}")
                await asyncio.sleep(CREATE_EVERY)
        finally:
            stop.set()
            await watcher
        print(
            f"\n[webhook rotation] {created} TrainJobs admitted in {CREATE_FOR:.0f}s; "
            f"{len(secret_certs)} certificates in the Secret, {len(served)} seen served"
        )

        assert not refused, refused[:5]
        assert created >= CREATE_FOR / (CREATE_EVERY + 1)
        assert not tls_errors, tls_errors[:5]
        assert len(secret_certs) >= 3, "at least two rotations of the serving certificate"
        assert len(served) >= 2 and set(served) <= set(secret_certs)
        assert len(bundles) == 1, "a serving rotation leaves the caBundle alone"
        for who, path, offset in (("first", operator.log_path, a_offset), ("second", b.log_path, b_offset)):
            loads = [e for e in log_events(path, offset) if e.get("event") == "webhook certificate loaded"]
            assert len(loads) >= 2, f"the {who} replica reloaded its certificate in place"
            assert not [e for e in log_events(path, offset) if e.get("event") == "webhook certificate check failed"]
    finally:
        b.stop()
