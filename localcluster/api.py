"""A minimal HTTPS client for the kube-apiserver, authenticating with a client certificate."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


class ApiClient:
    """Send JSON requests to ``server`` with the given CA bundle and client certificate."""

    def __init__(self, server: str, ca_cert: Path, client_cert: Path, client_key: Path) -> None:
        """Prepare a TLS context that trusts ``ca_cert`` and presents ``client_cert``."""
        self.server = server.rstrip("/")
        context = ssl.create_default_context(cafile=str(ca_cert))
        context.load_cert_chain(str(client_cert), str(client_key))
        # An empty ProxyHandler: the server is on loopback, never reach it through *_proxy variables.
        self._opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
        )

    def request(
        self, method: str, path: str, body: dict[str, Any] | None = None, timeout: float = 10.0
    ) -> tuple[int, Any]:
        """Send one request; return the HTTP status and the decoded JSON (or text) body.

        HTTP errors are returned as their status, not raised; connection failures raise ``OSError``.
        """
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            content_type = "application/merge-patch+json" if method == "PATCH" else "application/json"
            req.add_header("Content-Type", content_type)
        try:
            with self._opener.open(req, timeout=timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as err:
            status, raw = err.code, err.read()
        text = raw.decode(errors="replace")
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    def get(self, path: str) -> tuple[int, Any]:
        """``GET path``."""
        return self.request("GET", path)

    def create(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        """``POST body`` to the collection at ``path``."""
        return self.request("POST", path, body)
