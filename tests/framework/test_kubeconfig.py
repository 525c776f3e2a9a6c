"""The kubeconfig reader that spares short commands the import of kubernetes_asyncio
(:mod:`trainer.framework.kube.kubeconfig`) reads every kubeconfig it accepts exactly as
kubernetes_asyncio's ``load_kube_config`` does (the two are compared on each kind of kubeconfig), leaves
the others (exec plugins, auth-providers, broken files) to it, and :meth:`Kube.connect` then connects
with either: an exec plugin's token and a CA given inline reach a real server."""

from __future__ import annotations

import base64
import json
import os
import ssl
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from kubernetes_asyncio import client, config

from tests.http_double import without_proxies
from trainer.api.kinds import CONFIGMAPS
from trainer.framework.certs import generate
from trainer.framework.kube.client import Kube, PlainApi, ssl_context
from trainer.framework.kube.kubeconfig import Endpoint, LeftToLibrary, Source, context_namespace, read_endpoint

Doc = dict[str, Any]


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def kubeconfig(
    cluster: Doc, user: Doc | None = None, *, name: str = "c", current: str | None = "ctx", namespace: str | None = None
) -> Doc:
    """A kubeconfig of one cluster, one user (none when ``user`` is None) and one context ``ctx``
    joining them, all called ``name``."""
    context: Doc = {"cluster": name, "user": name}
    if namespace:
        context["namespace"] = namespace
    doc: Doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": user}] if user is not None else [],
        "contexts": [{"name": "ctx", "context": context}],
    }
    if current is not None:
        doc["current-context"] = current
    return doc


def write(path: Path, doc: Doc) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    return str(path)


@pytest.fixture
def pem(tmp_path: Path) -> dict[str, str]:
    """A CA, a certificate it signed for 127.0.0.1 and ``localhost``, and its key (PEM), also written
    as ``ca.crt``, ``tls.crt`` and ``tls.key`` in ``tmp_path/certs``."""
    bundle = generate(["localhost"], ["127.0.0.1"])
    files = {"ca": bundle.ca, "cert": bundle.cert, "key": bundle.key}
    (tmp_path / "certs").mkdir()
    for name, text in (("ca.crt", bundle.ca), ("tls.crt", bundle.cert), ("tls.key", bundle.key)):
        (tmp_path / "certs" / name).write_text(text)
    return files


async def library_view(paths: str, context: str | None = None) -> dict[str, Any]:
    """What kubernetes_asyncio's ``load_kube_config`` puts in a ``Configuration``, in the terms of
    :class:`Endpoint` (files read: a temporary file of inline data compares as its content)."""
    cfg = client.Configuration()
    await config.load_kube_config(config_file=paths, context=context, client_configuration=cfg)

    def content(path: str | None) -> bytes | None:
        return Path(path).read_bytes() if path else None

    return {
        "host": cfg.host,
        "ca": content(cfg.ssl_ca_cert),
        "client_certificate": content(cfg.cert_file),
        "client_key": content(cfg.key_file),
        "verify": cfg.verify_ssl,
        "tls_server_name": cfg.tls_server_name,
        "proxy": cfg.proxy,
        "authorization": cfg.api_key.get("BearerToken"),
    }


def plain_view(endpoint: Endpoint) -> dict[str, Any]:
    """:func:`library_view` of what :func:`read_endpoint` read."""

    def content(source: Source) -> bytes | None:
        if source.path:
            return Path(source.path).read_bytes()
        return source.data or None

    return {
        "host": endpoint.host,
        "ca": content(endpoint.ca),
        "client_certificate": content(endpoint.client_certificate),
        "client_key": content(endpoint.client_key),
        "verify": endpoint.verify,
        "tls_server_name": endpoint.tls_server_name,
        "proxy": endpoint.proxy,
        "authorization": endpoint.authorization,
    }


def cases(tmp: Path, pem: dict[str, str]) -> dict[str, tuple[str, str | None]]:
    """Kubeconfigs of every kind the reader accepts: name -> (paths, context)."""
    (tmp / "secrets").mkdir()
    (tmp / "secrets" / "token").write_text("file-token")
    https = "https://127.0.0.1:6443/"
    ca_file = {"server": https, "certificate-authority": "certs/ca.crt"}
    first = kubeconfig(ca_file, {"token": "first"}, name="shared", current="ctx")
    second = kubeconfig({"server": "https://other:1"}, {"token": "second"}, name="shared", current="ctx2")
    second["clusters"].append({"name": "two", "cluster": {"server": "https://two:2"}})
    second["contexts"] = [{"name": "ctx2", "context": {"cluster": "two", "user": "shared", "namespace": "ns2"}}]
    certificates = {"client-certificate": "certs/tls.crt", "client-key": "certs/tls.key"}
    users_apart = {"apiVersion": "v1", "kind": "Config", "users": [{"name": "c", "user": certificates}]}
    return {
        "token and CA file (relative)": (write(tmp / "a", kubeconfig(ca_file, {"token": "t0ken"})), None),
        "inline CA, client certificate and key": (
            write(
                tmp / "b",
                kubeconfig(
                    {"server": https, "certificate-authority-data": b64(pem["ca"])},
                    {"client-certificate-data": b64(pem["cert"]), "client-key-data": b64(pem["key"])},
                ),
            ),
            None,
        ),
        "client certificate files (relative)": (
            write(
                tmp / "c",
                kubeconfig(ca_file, {"client-certificate": "certs/tls.crt", "client-key": "certs/tls.key"}),
            ),
            None,
        ),
        "token file (relative)": (write(tmp / "d", kubeconfig(ca_file, {"tokenFile": "secrets/token"})), None),
        "token data wins over a token file": (
            write(tmp / "e", kubeconfig(ca_file, {"token": "inline", "tokenFile": "secrets/token"})),
            None,
        ),
        "user name and password": (
            write(tmp / "f", kubeconfig(ca_file, {"username": "ada", "password": "s3cret"})),
            None,
        ),
        "an empty token falls to the password": (
            write(tmp / "g", kubeconfig(ca_file, {"token": "", "username": "ada", "password": "pw"})),
            None,
        ),
        "insecure, TLS server name, proxy": (
            write(
                tmp / "h",
                kubeconfig(
                    {
                        "server": https,
                        "insecure-skip-tls-verify": True,
                        "tls-server-name": "kubernetes",
                        "proxy-url": "http://proxy:3128",
                    },
                    {"token": "t"},
                ),
            ),
            None,
        ),
        "plain http: no TLS material read": (
            write(tmp / "i", kubeconfig({"server": "http://127.0.0.1:8080"}, {"client-certificate": "missing"})),
            None,
        ),
        "a context named": (write(tmp / "j", kubeconfig(ca_file, {"token": "t"}, current="other")), "ctx"),
        "several files: first entry by name wins, last current-context": (
            os.pathsep.join([write(tmp / "k1", first), write(tmp / "sub" / "k2", second)]),
            None,
        ),
        "several files, a context named": (
            os.pathsep.join([write(tmp / "l1", first), write(tmp / "sub" / "l2", second)]),
            "ctx",
        ),
        "a user without credentials": (write(tmp / "m", kubeconfig(ca_file, {})), None),
        "a user in another file: its certificates from the cluster's directory": (
            os.pathsep.join([write(tmp / "n1", kubeconfig(ca_file, None)), write(tmp / "sub" / "n2", users_apart)]),
            None,
        ),
    }


async def test_the_reader_reads_as_kubernetes_asyncio_does(tmp_path: Path, pem: dict[str, str]) -> None:
    for name, (paths, context) in cases(tmp_path, pem).items():
        expected = await library_view(paths, context)
        assert plain_view(read_endpoint(paths, context)) == expected, name


def test_the_several_files_case_reads_what_it_says(tmp_path: Path, pem: dict[str, str]) -> None:
    paths, _ = cases(tmp_path, pem)["several files: first entry by name wins, last current-context"]
    endpoint = read_endpoint(paths)
    assert (endpoint.host, endpoint.authorization) == ("https://two:2", "Bearer first")
    assert read_endpoint(paths, "ctx").ca.path == str(tmp_path / "certs" / "ca.crt")
    assert context_namespace(paths) == "ns2"
    assert context_namespace(paths, "ctx") is None


def test_kubeconfig_is_read_from_the_environment(
    tmp_path: Path, pem: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    paths, _ = cases(tmp_path, pem)["several files: first entry by name wins, last current-context"]
    monkeypatch.setenv("KUBECONFIG", paths + os.pathsep + str(tmp_path / "absent"))
    assert read_endpoint().host == "https://two:2"
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    with pytest.raises(LeftToLibrary):
        read_endpoint()


def left_to_library(tmp: Path) -> dict[str, tuple[str, str | None]]:
    """Kubeconfigs the reader leaves to kubernetes_asyncio: name -> (paths, context)."""
    ok = {"server": "https://127.0.0.1:6443"}
    exec_user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "true"}}
    oidc = {"auth-provider": {"name": "oidc", "config": {"id-token": "x"}}}
    (tmp / "not-yaml").write_text("clusters: [")
    return {
        "an exec plugin": (write(tmp / "a", kubeconfig(ok, exec_user)), None),
        "an auth-provider": (write(tmp / "b", kubeconfig(ok, oidc)), None),
        "no such file": (str(tmp / "absent"), None),
        "not YAML": (str(tmp / "not-yaml"), None),
        "no current-context": (write(tmp / "c", kubeconfig(ok, {"token": "t"}, current=None)), None),
        "no such context": (write(tmp / "d", kubeconfig(ok, {"token": "t"})), "nope"),
        "a CA file that is missing": (
            write(tmp / "e", kubeconfig({**ok, "certificate-authority": "absent.crt"}, {"token": "t"})),
            None,
        ),
        "a token file that is missing": (write(tmp / "f", kubeconfig(ok, {"tokenFile": "absent"})), None),
        "no server": (write(tmp / "g", kubeconfig({}, {"token": "t"})), None),
    }


def test_what_it_does_not_read_is_left_to_kubernetes_asyncio(tmp_path: Path) -> None:
    for name, (paths, context) in left_to_library(tmp_path).items():
        with pytest.raises(LeftToLibrary):
            read_endpoint(paths, context)
            pytest.fail(name)


def test_the_tls_context_is_built_alike_from_files_and_inline_data(tmp_path: Path, pem: dict[str, str]) -> None:
    files = ssl_context(
        Endpoint(
            "https://x",
            ca=Source(path=str(tmp_path / "certs" / "ca.crt")),
            client_certificate=Source(path=str(tmp_path / "certs" / "tls.crt")),
            client_key=Source(path=str(tmp_path / "certs" / "tls.key")),
        )
    )
    inline = ssl_context(
        Endpoint(
            "https://x",
            ca=Source(data=pem["ca"].encode()),
            client_certificate=Source(data=pem["cert"].encode()),
            client_key=Source(data=pem["key"].encode()),
        )
    )
    assert files.get_ca_certs() == inline.get_ca_certs() and len(inline.get_ca_certs()) == 1
    assert inline.verify_mode == ssl.CERT_REQUIRED and inline.check_hostname
    insecure = ssl_context(Endpoint("https://x", verify=False))
    assert insecure.verify_mode == ssl.CERT_NONE and not insecure.check_hostname
    with pytest.raises(ssl.SSLError):
        ssl_context(Endpoint("https://x", client_certificate=Source(data=b"not a certificate")))


@pytest.fixture
async def tls_server(tmp_path: Path, pem: dict[str, str]) -> AsyncIterator[tuple[str, list[web.Request]]]:
    """An HTTPS server on 127.0.0.1 (certificate of :func:`pem`) answering ConfigMap n/x to
    everything; its URL and the requests it received."""
    received: list[web.Request] = []

    async def answer(request: web.Request) -> web.Response:
        received.append(request)
        return web.json_response({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(tmp_path / "certs" / "tls.crt", tmp_path / "certs" / "tls.key")
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"https://127.0.0.1:{port}", received
    finally:
        await runner.cleanup()


async def test_connect_reads_a_plain_kubeconfig_itself(
    tls_server: tuple[str, list[web.Request]], tmp_path: Path, pem: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    without_proxies(monkeypatch)
    url, received = tls_server
    path = write(
        tmp_path / "kc",
        kubeconfig({"server": url, "certificate-authority-data": b64(pem["ca"])}, {"token": "plain"}),
    )
    kube = await Kube.connect(path)
    try:
        assert isinstance(kube.api, PlainApi)
        assert (await kube.get(CONFIGMAPS, "n", "x"))["metadata"]["name"] == "x"
    finally:
        await kube.close()
    assert [r.headers.get("Authorization") for r in received] == ["Bearer plain"]


async def test_connect_leaves_an_exec_plugin_to_kubernetes_asyncio(
    tls_server: tuple[str, list[web.Request]], tmp_path: Path, pem: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    without_proxies(monkeypatch)
    url, received = tls_server
    plugin = tmp_path / "plugin"
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "kind": "ExecCredential",
        "status": {"token": "from-exec"},
    }
    plugin.write_text(f"#!{sys.executable}\nprint({json.dumps(json.dumps(credential))})\n")
    plugin.chmod(plugin.stat().st_mode | stat.S_IEXEC)
    exec_user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": str(plugin)}}
    path = write(tmp_path / "kc", kubeconfig({"server": url, "certificate-authority-data": b64(pem["ca"])}, exec_user))
    kube = await Kube.connect(path)
    try:
        assert not isinstance(kube.api, PlainApi)
        await kube.get(CONFIGMAPS, "n", "x")
    finally:
        await kube.close()
    assert [r.headers.get("Authorization") for r in received] == ["Bearer from-exec"]
