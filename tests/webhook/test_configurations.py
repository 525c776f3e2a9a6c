"""The webhook configurations: rendered once (config/, the chart, a URL for an operator out of the
cluster) and, at run time, only their caBundle patched by the operator, by name; a missing one is said
(``/readyz``, logs) and waited for, never fatal."""

from __future__ import annotations

import asyncio
import base64
import copy
from typing import Any

import pytest
import yaml

from tests.framework.test_webhook_tls import FakeKube
from trainer.api.kinds import MUTATING_WEBHOOKS, SECRETS, VALIDATING_WEBHOOKS, Resource
from trainer.framework import tls
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError
from trainer.webhook import rules
from trainer.webhook.server import (
    CONFIG_NAME,
    MUTATE,
    VALIDATE,
    ConfigurationMissing,
    WebhookServer,
    WebhookSettings,
    ca_bundle_ops,
    configurations,
    install_problem,
    render,
)

CA = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"


def facts() -> rules.AdmissionFacts:
    return rules.AdmissionFacts(
        runtime=lambda _k, _n, _ns: None,
        active_pods=lambda _k, _ns, _n: 0,
        volcano_queues=lambda: None,
        local_queue_exists=lambda _ns, _name: None,
        gang="none",
    )


def _apply(obj: JSON, ops: list[JSON]) -> JSON:
    """RFC 6902 ``test`` and ``add`` on object members and list indices, as the apiserver applies them;
    a failed test is the apiserver's 422."""
    obj = copy.deepcopy(obj)
    for op in ops:
        *parents, last = op["path"].lstrip("/").split("/")
        at: Any = obj
        for part in parents:
            at = at[int(part)] if isinstance(at, list) else at[part]
        key: Any = int(last) if isinstance(at, list) else last
        if op["op"] == "test":
            if at[key] != op["value"]:
                raise ApiError(422, {"reason": "Invalid", "message": f"test failed at {op['path']}"})
        else:
            assert op["op"] == "add", op
            at[key] = op["value"]
    return obj


class ConfigKube(FakeKube):
    """:class:`FakeKube` (the certificate Secret) plus the two webhook configurations, read and
    JSON-patched by name; every patch is recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.configs: dict[Resource, JSON] = {}
        self.patches: list[tuple[str, str, list[JSON]]] = []

    async def get_or_none(self, res: Resource, namespace: str | None, name: str) -> JSON | None:
        if res == SECRETS:
            return await super().get_or_none(res, namespace, name)
        assert namespace is None and res in (VALIDATING_WEBHOOKS, MUTATING_WEBHOOKS)
        obj = self.configs.get(res)
        return copy.deepcopy(obj) if obj and obj["metadata"]["name"] == name else None

    async def json_patch(self, res: Resource, namespace: str | None, name: str, ops: list[JSON]) -> JSON:
        self.patches.append((res.kind, name, ops))
        if res not in self.configs:
            raise ApiError(404, {"reason": "NotFound", "message": f"{res.kind} {name} not found"})
        self.configs[res] = _apply(self.configs[res], ops)
        return copy.deepcopy(self.configs[res])

    def install(self, url: str | None = None) -> None:
        """The configurations as the chart or ``kubectl apply -k`` installs them."""
        validating, mutating = configurations(url)
        self.configs = {VALIDATING_WEBHOOKS: validating, MUTATING_WEBHOOKS: mutating}

    def bundles(self) -> set[str | None]:
        return {h["clientConfig"].get("caBundle") for c in self.configs.values() for h in c["webhooks"]}


def server(kube: ConfigKube, port: int = 0) -> WebhookServer:
    return WebhookServer(kube, WebhookSettings(port=port, bind_address="127.0.0.1", namespace="ops"), facts())  # type: ignore[arg-type]


def test_configurations_call_the_service_or_a_url_and_carry_no_ca_bundle() -> None:
    validating, mutating = configurations()
    assert (validating["kind"], mutating["kind"]) == ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
    assert validating["metadata"] == mutating["metadata"] == {"name": CONFIG_NAME}
    hooks = validating["webhooks"] + mutating["webhooks"]
    assert [h["clientConfig"]["service"]["path"] for h in hooks] == [*VALIDATE, *MUTATE]
    assert {h["clientConfig"]["service"]["name"] for h in hooks} == {"trainer-webhook-service"}
    assert all("caBundle" not in h["clientConfig"] for h in hooks)
    jobs, pods = hooks[:-1], hooks[-1]
    assert {(h["failurePolicy"], tuple(h["rules"][0]["operations"])) for h in jobs} == {("Fail", ("CREATE", "UPDATE"))}
    assert (pods["failurePolicy"], pods["rules"][0]["operations"], pods["rules"][0]["resources"]) == (
        "Fail",
        ["CREATE"],
        ["pods"],
    )
    assert pods["objectSelector"]["matchLabels"] == {
        "training.kubeflow.org/operator-name": "mpi-operator",
        "training.kubeflow.org/replica-type": "worker",
    }, "only MPIJob worker pods are sent"
    url = configurations("https://127.0.0.1:9443")
    assert url[0]["webhooks"][0]["clientConfig"] == {"url": "https://127.0.0.1:9443/validate-trainjob"}
    assert list(yaml.safe_load_all(render("https://127.0.0.1:9443"))) == url


async def test_install_patches_only_the_ca_bundle_of_each_webhook_and_nothing_when_current() -> None:
    kube = ConfigKube()
    kube.install()
    before = copy.deepcopy(kube.configs)
    s = server(kube)
    assert s.not_ready() == "webhook configurations not patched yet"
    await s.install(CA)
    assert s.not_ready() is None
    assert kube.bundles() == {base64.b64encode(CA.encode()).decode()}
    for res, config in copy.deepcopy(kube.configs).items():  # everything else as installed
        for hook in config["webhooks"]:
            hook["clientConfig"].pop("caBundle")
        assert config == before[res]
    ops = [op for _, _, patch in kube.patches for op in patch]
    assert {op["op"] for op in ops} == {"test", "add"}
    assert all(op["path"].endswith(("/name", "/clientConfig/caBundle")) for op in ops)
    assert {(kind, name) for kind, name, _ in kube.patches} == {
        ("ValidatingWebhookConfiguration", CONFIG_NAME),
        ("MutatingWebhookConfiguration", CONFIG_NAME),
    }
    kube.patches.clear()
    await s.install(CA)
    assert kube.patches == []


def test_ca_bundle_ops_test_the_name_before_each_add() -> None:
    validating, _ = configurations()
    ops = ca_bundle_ops(validating, CA)
    assert ops[:2] == [
        {"op": "test", "path": "/webhooks/0/name", "value": "validate.trainjobs.trainer.kubeflow.org"},
        {"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": base64.b64encode(CA.encode()).decode()},
    ]
    assert ca_bundle_ops(_apply(validating, ops), CA) == []


def test_install_problem_names_the_configuration_and_how_to_install_it() -> None:
    validating, mutating = configurations()
    assert install_problem(validating, validating) is None
    missing = install_problem(mutating, None)
    assert missing and missing.startswith("MutatingWebhookConfiguration trainer-webhook not found: install it")
    assert "config/default or the Helm chart" in missing and "python -m trainer.webhook.server --url" in missing
    older = {**validating, "webhooks": validating["webhooks"][:1]}
    lacking = install_problem(validating, older)
    assert lacking and "lacks webhooks validate.trainingruntimes.trainer.kubeflow.org" in lacking


async def test_install_without_the_configurations_raises_naming_them_and_is_not_ready() -> None:
    kube = ConfigKube()
    s = server(kube)
    with pytest.raises(ConfigurationMissing, match="ValidatingWebhookConfiguration trainer-webhook not found"):
        await s.install(CA)
    assert kube.patches == []  # nothing is created or patched
    assert (s.not_ready() or "").startswith("ValidatingWebhookConfiguration trainer-webhook not found")
    kube.install()
    await s.install(CA)
    assert s.not_ready() is None


async def test_a_missing_configuration_is_waited_for_while_serving_not_fatal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tls, "RETRY_DELAY", 0.05)
    kube = ConfigKube()
    s = server(kube)
    ready = asyncio.Event()
    ready.set()
    task = asyncio.ensure_future(s.run(ready))
    try:
        for _ in range(200):
            await asyncio.sleep(0.02)
            if len(kube.objects) and s.tls is not None and s.tls.informer.synced.is_set():
                break
        assert not task.done(), task
        assert "not found" in (s.not_ready() or "")
        kube.install("https://127.0.0.1:1")
        for _ in range(200):
            await asyncio.sleep(0.02)
            if s.not_ready() is None:
                break
        assert s.not_ready() is None and not task.done()
        assert s.tls is not None and s.tls.bundle is not None
        assert kube.bundles() == {base64.b64encode(s.tls.bundle.ca.encode()).decode()}
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
