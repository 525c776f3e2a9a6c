"""A kubeconfig that runs nothing, read without importing kubernetes_asyncio.

Importing kubernetes_asyncio loads its whole generated client (every API group and model), several
times the CPU a short command like ``trainer get`` spends on everything else. A kubeconfig whose user
is a token, a token file, a client certificate or a user name and password needs none of it: this
module reads such a kubeconfig into an :class:`Endpoint` exactly as kubernetes_asyncio's
``load_kube_config`` would fill its ``Configuration`` (kubernetes_asyncio
``kubernetes_asyncio/config/kube_config.py``: ``KubeConfigMerger``, ``KubeConfigLoader``,
``FileOrData``), and :class:`~trainer.framework.kube.client.Kube` builds its TLS session from it as
kubernetes_asyncio's ``RESTClientObject`` does (``kubernetes_asyncio/client/rest.py``).

Everything else is left to kubernetes_asyncio itself: a user with an ``exec`` plugin or an
``auth-provider`` (whose credentials are refreshed while the connection lives), the in-cluster
configuration, and any kubeconfig this module cannot read (a file missing, not YAML, a key missing):
:func:`read_endpoint` then raises :class:`LeftToLibrary`, and the caller loads it with
kubernetes_asyncio, which connects or raises its own error. The tests compare both readers on every
kind of kubeconfig (``tests/framework/test_kubeconfig.py``).

The semantics are kubernetes_asyncio's, where they differ from client-go's
(k8s.io/client-go ``tools/clientcmd/loader.go``): of several files (``$KUBECONFIG``, separated by
``os.pathsep``) the first to name a cluster, context or user wins, as in client-go, but the last
``current-context`` wins; a relative path is taken from the directory of the file that names it (a
user's client certificate from its cluster's file).
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

DEFAULT_PATH = "~/.kube/config"
"""Where a kubeconfig is looked for when neither a file nor ``$KUBECONFIG`` names one."""
PLUGINS = ("exec", "auth-provider")
"""User keys whose credentials a program supplies and refreshes: left to kubernetes_asyncio."""
LISTS = ("clusters", "contexts", "users")
"""The named lists of a kubeconfig, merged across files by name."""


class LeftToLibrary(Exception):
    """The kubeconfig is not one :func:`read_endpoint` reads (a plugin user, no file, not YAML, a key
    missing...): load it with kubernetes_asyncio, which reads it or says what is wrong."""


@dataclass(frozen=True)
class Source:
    """A file or inline data of the kubeconfig (a CA, a client certificate or key): ``path`` of the
    file, or ``data`` decoded from its ``-data`` key; never both."""

    path: str | None = None
    data: bytes | None = None

    def __bool__(self) -> bool:
        return self.path is not None or bool(self.data)


@dataclass(frozen=True)
class Endpoint:
    """What a connection needs of a kubeconfig: the fields kubernetes_asyncio's loader copies into its
    ``Configuration`` (``host``, ``ssl_ca_cert``, ``cert_file``, ``key_file``, ``verify_ssl``,
    ``tls_server_name``, ``proxy``, ``api_key["BearerToken"]``)."""

    host: str
    """The apiserver's URL without a trailing slash."""
    ca: Source = Source()
    """The CA bundle (PEM) the server's certificate is checked against; empty: the system's."""
    client_certificate: Source = Source()
    client_key: Source = Source()
    verify: bool = True
    """False when the cluster sets ``insecure-skip-tls-verify: true``."""
    tls_server_name: str | None = None
    """The name the server's certificate is checked for, when not the URL's host."""
    proxy: str | None = None
    """The cluster's ``proxy-url``."""
    authorization: str | None = None
    """The ``Authorization`` header: ``Bearer <token>`` or ``Basic <base64 user:password>``; None: none."""


def kubeconfig_paths(config_file: str | None = None, environ: Mapping[str, str] | None = None) -> list[str]:
    """The files a kubeconfig is read from, in order: those of ``config_file`` (else ``$KUBECONFIG``,
    else ``~/.kube/config``), split at ``os.pathsep``, user-expanded, that exist."""
    env = os.environ if environ is None else environ
    spec = config_file if config_file is not None else env.get("KUBECONFIG", DEFAULT_PATH)
    paths = (os.path.expanduser(p) for p in spec.split(os.pathsep) if p)
    return [p for p in paths if os.path.exists(p)]


@dataclass(frozen=True)
class Entry:
    """One named entry of a kubeconfig list and the file it came from."""

    value: Mapping[str, Any]
    path: str

    @property
    def directory(self) -> str:
        """The directory relative paths of this entry are taken from."""
        return os.path.abspath(os.path.dirname(self.path))


@dataclass(frozen=True)
class Merged:
    """The kubeconfig files merged: each list's entries by name (the first file's win) and the
    ``current-context`` (the last file's that sets it)."""

    lists: Mapping[str, list[Entry]]
    current_context: Any

    def named(self, item: str, name: Any) -> Entry | None:
        """The entry of list ``item`` called ``name``, if any."""
        return next((e for e in self.lists[item] if e.value["name"] == name), None)


def merge(paths: list[str]) -> Merged:
    """Read and merge the kubeconfig ``paths``. Raises :class:`LeftToLibrary` when there is none,
    and YAML's, ``OSError``, ``KeyError``, ``TypeError`` or ``AttributeError`` for a file that is
    not a kubeconfig."""
    if not paths:
        raise LeftToLibrary("no kubeconfig file")
    lists: dict[str, list[Entry]] = {item: [] for item in LISTS}
    current: Any = None
    for path in paths:
        with open(path) as f:
            doc = yaml.safe_load(f)
        for item in LISTS:
            for entry in doc.get(item, []) or []:
                if not any(e.value["name"] == entry["name"] for e in lists[item]):
                    lists[item].append(Entry(entry, path))
        if "current-context" in doc:
            current = doc["current-context"]
    return Merged(lists, current)


def _required(node: Mapping[str, Any], key: str) -> Any:
    """``node[key]``, which must be set (kubernetes_asyncio's ``ConfigNode.__getitem__``)."""
    value = node.get(key) if isinstance(node, Mapping) else None
    if value is None:
        raise LeftToLibrary(f"no {key}")
    return value


def _source(node: Mapping[str, Any], key: str, directory: str) -> Source:
    """The file or data of ``key`` in ``node``, as kubernetes_asyncio's ``FileOrData(...).as_file()``:
    ``<key>-data`` (base64) wins over ``<key>`` (a path, relative to ``directory``) whenever it is
    present, even empty; a named file must exist."""
    if f"{key}-data" in node:
        data = node[f"{key}-data"]
        if not data:
            return Source()
        return Source(data=base64.standard_b64decode(data.encode() if isinstance(data, str) else data))
    if key in node:
        path = os.path.normpath(os.path.join(directory, node[key]))
        if not os.path.isfile(path):
            raise LeftToLibrary(f"file does not exist: {path}")
        return Source(path=path)
    return Source()


def _authorization(user: Mapping[str, Any], directory: str) -> str | None:
    """The ``Authorization`` header of a user without plugins: its ``token`` (else the content of
    its ``tokenFile``), else basic authentication with ``username`` and ``password``."""
    if "token" in user:
        token = user["token"]
    elif "tokenFile" in user:
        with open(os.path.normpath(os.path.join(directory, user["tokenFile"]))) as f:
            token = f.read()
    else:
        token = None
    if token:
        return f"Bearer {token}"
    if "username" in user and "password" in user:
        basic = f"{user['username']}:{user['password']}"
        return "Basic " + base64.b64encode(basic.encode()).decode("utf-8")
    return None


def _endpoint(merged: Merged, context: str | None) -> Endpoint:
    """The endpoint of ``context`` (default: the current one) of ``merged``."""
    name = context if context is not None else merged.current_context
    if name is None:
        raise LeftToLibrary("no current-context")
    found = merged.named("contexts", name)
    if found is None:
        raise LeftToLibrary(f"no context {name}")
    ctx = _required(found.value, "context")
    user: Mapping[str, Any] | None = None
    user_entry = merged.named("users", ctx["user"]) if ctx.get("user") and merged.lists["users"] else None
    if user_entry is not None:
        user = _required(user_entry.value, "user")
        if not isinstance(user, Mapping):
            raise LeftToLibrary("user is not a mapping")
        if any(key in user for key in PLUGINS):
            raise LeftToLibrary("a plugin supplies the credentials")
    cluster_entry = merged.named("clusters", _required(ctx, "cluster"))
    if cluster_entry is None:
        raise LeftToLibrary("no such cluster")
    cluster = _required(cluster_entry.value, "cluster")
    server = cluster.get("server")
    if not isinstance(server, str):
        raise LeftToLibrary("no server")
    host = server.rstrip("/")
    ca = cert = key = Source()
    if host.startswith("https"):
        if user is None:
            raise LeftToLibrary("no user")  # kubernetes_asyncio fails on it (and falls back to in-cluster)
        ca = _source(cluster, "certificate-authority", cluster_entry.directory)
        cert = _source(user, "client-certificate", cluster_entry.directory)
        key = _source(user, "client-key", cluster_entry.directory)
    return Endpoint(
        host=host,
        ca=ca,
        client_certificate=cert,
        client_key=key,
        verify=not cluster["insecure-skip-tls-verify"] if "insecure-skip-tls-verify" in cluster else True,
        tls_server_name=cluster.get("tls-server-name"),
        proxy=cluster.get("proxy-url"),
        authorization=_authorization(user, user_entry.directory) if user is not None and user_entry else None,
    )


def read_endpoint(config_file: str | None = None, context: str | None = None) -> Endpoint:
    """The endpoint of the kubeconfig ``config_file`` (else ``$KUBECONFIG``, else ``~/.kube/config``;
    several files separated by ``os.pathsep`` are merged) and its ``context`` (default: the current
    one). Raises :class:`LeftToLibrary` for a kubeconfig left to kubernetes_asyncio: a user with an
    ``exec`` plugin or an ``auth-provider``, no file, or one that cannot be read."""
    try:
        return _endpoint(merge(kubeconfig_paths(config_file)), context)
    except LeftToLibrary:
        raise
    except Exception as e:  # whatever is wrong, kubernetes_asyncio's loader says it in its own words
        raise LeftToLibrary(f"{type(e).__name__}: {e}") from e


def context_namespace(config_file: str | None = None, context: str | None = None) -> str | None:
    """The ``namespace`` of the kubeconfig's ``context`` (default: the current one), None when it sets
    none. Raises :class:`LeftToLibrary` when the kubeconfig cannot be read."""
    try:
        merged = merge(kubeconfig_paths(config_file))
        name = context if context else merged.current_context
        found = merged.named("contexts", name)
        namespace = ((found.value if found else {}).get("context") or {}).get("namespace")
    except LeftToLibrary:
        raise
    except Exception as e:
        raise LeftToLibrary(f"{type(e).__name__}: {e}") from e
    return str(namespace) if namespace else None
