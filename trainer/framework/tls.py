"""The webhook certificate's lifecycle: the shared Secret, when to renew what, and reloading in place.

Every replica serves the certificate of one Secret (:data:`SECRET_NAME`, keys ``ca.crt``, ``ca.key``,
``tls.crt``, ``tls.key``; see :class:`~trainer.framework.certs.Bundle`) and watches it. Renewal
(:func:`renew`):

* the serving certificate, in the last third of its lifetime, is replaced by one signed by the same CA:
  ``ca.crt``, and so the webhook configurations' caBundle, stay as they are;
* the CA, in the last third of its (ten year) lifetime, is replaced by a new one that signs the new
  serving certificate; ``ca.crt`` then holds the old and the new CA, so certificates of either verify
  while the replicas move over; CAs drop out of ``ca.crt`` once expired.

The replica that finds the Secret due writes the renewed one with optimistic concurrency (update at the
resourceVersion it read); when another replica was first (409) it takes theirs. Every replica, on every
change of the Secret, first puts ``ca.crt`` into the webhook configurations' caBundle when it changed (the
configurations themselves are installed with the operator), then loads the
certificate into the very :class:`ssl.SSLContext` its listener uses: the next handshakes present the new
certificate, connections already open keep theirs, nothing restarts. So no replica presents a
certificate signed by a CA the installed caBundle lacks.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import os
import shutil
import ssl
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

import structlog
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from trainer.api.kinds import SECRETS
from trainer.framework.certs import (
    CA_VALIDITY,
    MAX_BACKDATE,
    VALIDITY,
    Bundle,
    due,
    fingerprint,
    generate,
    issue,
    new_ca,
)
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import Informer
from trainer.framework.kube.client import ApiError, KubeClient
from trainer.framework.meta import meta
from trainer.framework.permissions import Permission

log = structlog.get_logger("trainer.framework.tls")
SECRET_NAME = "trainer-webhook-certs"
SECRET_TYPE = "kubernetes.io/tls"
ROLE = "trainer-webhook-certificates"
"""The Role, in the operator's namespace, that grants the certificate Secrets' verbs."""
KEEPER_VERBS = ("get", "update", "list", "watch")
"""What a keeper asks of its Secret by name: read, rotate, and watch it by ``metadata.name``."""
PERMISSIONS = (
    Permission(
        SECRETS,
        KEEPER_VERBS,
        "the webhook's certificate: read, watch (by name), rotate",
        names=(SECRET_NAME,),
        role=ROLE,
    ),
    Permission(
        SECRETS,
        ("create",),
        "the first replica writes a certificate Secret; RBAC cannot restrict create by name (the name is in "
        "the body, not the URL), so this is any Secret, in the operator's namespace only",
        role=ROLE,
    ),
)
MAX_CHECK_INTERVAL = 3600.0
"""Seconds between two checks of the Secret at most (besides the checks its changes trigger)."""
RETRY_DELAY = 5.0
"""Seconds before a failed check is tried again at most."""

Installer = Callable[[str], Awaitable[None]]
"""Puts the given caBundle (PEM) where clients read it (the webhook configurations' caBundle); raises
when it could not."""


def serving_names(service: str, namespace: str, host: str | None = None) -> tuple[list[str], list[str]]:
    """The SANs a serving certificate needs: ``(DNS names, IP addresses)`` for the Service
    ``service.namespace``, localhost and 127.0.0.1, and ``host`` (a name or an address) when given."""
    dns = [f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local", "localhost"]
    ips = ["127.0.0.1"]
    if host:
        try:
            ipaddress.ip_address(host)
        except ValueError:
            dns.insert(0, host)
        else:
            if host not in ips:
                ips.append(host)
    return dns, ips


def check_interval(validity: float) -> float:
    """Seconds between checks for a serving certificate valid ``validity`` seconds: a sixth of it, so a
    due certificate is renewed with at least a sixth of its life left, capped at an hour, at least 1."""
    return max(1.0, min(MAX_CHECK_INTERVAL, validity / 6))


def _pems(certs: list[x509.Certificate]) -> str:
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)


def _key_fits(bundle: Bundle, cert: x509.Certificate) -> bool:
    try:
        key = serialization.load_pem_private_key(bundle.key.encode(), password=None)
    except (ValueError, TypeError):
        return False
    return key.public_key() == cert.public_key()


def _serving_due(
    bundle: Bundle, signer: x509.Certificate, now: datetime.datetime, validity: datetime.timedelta
) -> bool:
    """True when the serving certificate must be replaced: unreadable, not matching its key, not signed
    by ``signer``, in its last third, or outliving the configured ``validity`` (which was shortened)."""
    try:
        cert = bundle.serving()
    except ValueError:
        return True
    if not _key_fits(bundle, cert) or not bundle.issued_by(signer) or due(cert, now):
        return True
    return cert.not_valid_after_utc > now + validity + max(MAX_BACKDATE, validity / 10)


def sans(cert: x509.Certificate) -> tuple[list[str], list[str]]:
    """The DNS names and IP addresses (as strings) of ``cert``'s subjectAltName; empty without one."""
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return [], []
    return ext.get_values_for_type(x509.DNSName), [str(i) for i in ext.get_values_for_type(x509.IPAddress)]


def _missing_sans(bundle: Bundle, dns_names: list[str], ips: list[str]) -> bool:
    """True when the serving certificate does not name every one of ``dns_names`` and ``ips`` (the
    operator was started with another ``--status-server-host``, say), or cannot be read."""
    try:
        have_dns, have_ips = sans(bundle.serving())
    except ValueError:
        return True
    return not (set(dns_names) <= set(have_dns) and {str(ipaddress.ip_address(i)) for i in ips} <= set(have_ips))


def _union(bundle: Bundle, dns_names: list[str], ips: list[str]) -> tuple[list[str], list[str]]:
    """``dns_names`` and ``ips`` plus the names the current serving certificate has, in that order: a new
    certificate still serves a replica started with the other names, so two never take turns."""
    try:
        have_dns, have_ips = sans(bundle.serving())
    except ValueError:
        return dns_names, ips
    return list(dict.fromkeys([*dns_names, *have_dns])), list(dict.fromkeys([*ips, *have_ips]))


def renew(
    bundle: Bundle | None,
    dns_names: list[str],
    ips: list[str],
    now: datetime.datetime | None = None,
    validity: datetime.timedelta = VALIDITY,
    ca_validity: datetime.timedelta = CA_VALIDITY,
) -> Bundle | None:
    """The bundle that must replace ``bundle`` at ``now``, or None while it is good.

    * None, or no readable CA: a fresh CA and serving certificate.
    * No key of a CA in ``ca.crt``, or that CA in the last third of its lifetime: a new CA (valid
      ``ca_validity``) appended to the unexpired CAs, and a serving certificate signed by it.
    * The serving certificate due (see :func:`_serving_due`) or not naming every one of ``dns_names``
      and ``ips``: a new one (valid ``validity``, for those plus the names it had) signed by the same
      CA; ``ca.crt`` keeps its unexpired CAs.
    * Only an expired CA in ``ca.crt``: the same certificates, that CA dropped.

    Raises ``ValueError`` for empty SANs or a non-positive validity.
    """
    now = now or datetime.datetime.now(datetime.UTC)
    if bundle is None:
        return generate(dns_names, ips, now, validity, ca_validity)
    try:
        cas = bundle.cas()
    except ValueError:
        return generate(dns_names, ips, now, validity, ca_validity)
    live = [c for c in cas if c.not_valid_after_utc > now]
    try:
        signer = bundle.signing_ca()
    except (ValueError, TypeError):
        signer = None
    if signer is None or due(signer, now):
        ca_cert, ca_key = new_ca(now, ca_validity)
        cert, key = issue(ca_cert, ca_key, dns_names, ips, now, validity)
        return Bundle(ca=_pems(live) + ca_cert, cert=cert, key=key, ca_key=ca_key)
    if _serving_due(bundle, signer, now, validity) or _missing_sans(bundle, dns_names, ips):
        names, addresses = _union(bundle, dns_names, ips)
        cert, key = issue(_pems([signer]), bundle.ca_key, names, addresses, now, validity)
        return Bundle(ca=_pems(live), cert=cert, key=key, ca_key=bundle.ca_key)
    if len(live) < len(cas):
        return Bundle(ca=_pems(live), cert=bundle.cert, key=bundle.key, ca_key=bundle.ca_key)
    return None


def _bundle_of(secret: JSON | None) -> Bundle | None:
    if secret is None:
        return None
    try:
        return Bundle.from_secret_data(secret.get("data") or {})
    except (KeyError, ValueError):
        return None


class WebhookTLS:
    """The webhook's server TLS context, kept serving the certificate of the shared Secret.

    ``validity`` and ``ca_validity`` are in seconds; the Secret is checked every
    ``check_every`` seconds (default :func:`check_interval` of ``validity``) and on each of its changes.
    ``install`` is called with the new caBundle before a certificate of a changed ``ca.crt`` is loaded.
    ``clock`` gives the time renewal decisions are made at (default: now, UTC).
    """

    def __init__(
        self,
        kube: KubeClient,
        namespace: str,
        dns_names: list[str],
        ips: list[str],
        *,
        validity: float = VALIDITY.total_seconds(),
        ca_validity: float = CA_VALIDITY.total_seconds(),
        secret_name: str = SECRET_NAME,
        install: Installer | None = None,
        check_every: float | None = None,
        clock: Callable[[], datetime.datetime] | None = None,
    ) -> None:
        if validity <= 0 or ca_validity <= 0:
            raise ValueError(f"validities must be positive, not {validity} and {ca_validity}")
        self.kube, self.namespace, self.secret_name = kube, namespace, secret_name
        self.dns_names, self.ips = dns_names, ips
        self.validity = datetime.timedelta(seconds=validity)
        self.ca_validity = datetime.timedelta(seconds=ca_validity)
        self.check_every = check_every if check_every is not None else check_interval(validity)
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        """The context the listener serves with; certificates are loaded into it in place."""
        self.bundle: Bundle | None = None
        """The bundle whose certificate :attr:`context` presents (None before :meth:`start`)."""
        self.installed: str | None = None
        """The caBundle last installed through ``install``."""
        self.trust_changed = False
        """Set by :meth:`start` when it changed the CAs of an existing Secret: configurations installed
        earlier may not trust the loaded certificate, so install before answering."""
        self.informer = Informer(kube, SECRETS, namespace, field_selector=f"metadata.name={secret_name}")
        self.informer.add_handler(self._on_change)
        self._install = install
        self._clock = clock or (lambda: datetime.datetime.now(datetime.UTC))
        self._wake = asyncio.Event()
        self._replaced_rv: str | None = None
        self._dir: Path | None = None

    def _on_change(self, _old: JSON | None, _new: JSON | None) -> None:
        self._wake.set()

    # ---------------------------------------------------------------- the Secret

    async def _read(self) -> JSON | None:
        """The Secret: from the watch's cache once it listed (unless that still shows the version this
        replica replaced), else from the apiserver."""
        if self.informer.synced.is_set():
            cached = self.informer.get(self.namespace, self.secret_name)
            if cached is None or meta(cached).resource_version != self._replaced_rv:
                return cached
        return await self.kube.get_or_none(SECRETS, self.namespace, self.secret_name)

    async def _settle(self, secret: JSON | None) -> Bundle:
        """The bundle to serve given the Secret read (None: missing), after writing a renewed one when
        due; a missing or unreadable Secret is written back from memory when there is one. Raises
        :class:`ApiError` (409 when another replica wrote an unreadable Secret meanwhile) and
        ``ValueError`` as :func:`renew`."""
        stored = _bundle_of(secret)
        current = stored or self.bundle  # a deleted or unreadable Secret: put back what is served
        fresh = renew(current, self.dns_names, self.ips, self._clock(), self.validity, self.ca_validity)
        if fresh is None and stored is not None:
            return stored
        target = fresh or current
        assert target is not None  # renew() gives a bundle whenever there is none
        meta: JSON = {"name": self.secret_name, "namespace": self.namespace}
        body: JSON = {"apiVersion": "v1", "kind": "Secret", "type": SECRET_TYPE, "metadata": meta}
        body["data"] = target.to_secret_data()
        try:
            if secret is None:
                await self.kube.create(SECRETS, self.namespace, body)
            else:
                old = secret.get("metadata") or {}
                meta.update({k: old[k] for k in ("labels", "annotations") if old.get(k)})
                meta["resourceVersion"] = self._replaced_rv = str(old.get("resourceVersion") or "")
                body["type"] = secret.get("type") or SECRET_TYPE
                await self.kube.update(SECRETS, self.namespace, body)
        except ApiError as e:
            if not e.conflict:
                raise
            theirs = await self.kube.get_or_none(SECRETS, self.namespace, self.secret_name)
            bundle = _bundle_of(theirs)
            if bundle is None:
                raise
            log.info("webhook certificate written by another replica", secret=self._where())
            return bundle
        log.info(
            "webhook certificate written",
            secret=self._where(),
            renewed="all" if current is None else ("ca" if target.ca_key != current.ca_key else "serving"),
            not_after=str(target.not_after()),
        )
        return target

    def _where(self) -> str:
        return f"{self.namespace}/{self.secret_name}"

    # ---------------------------------------------------------------- the context

    def _load(self, bundle: Bundle) -> None:
        """Load ``bundle``'s certificate and key into :attr:`context`. Raises ``ssl.SSLError`` when they
        do not fit, leaving :attr:`context` as it was."""
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="trainer-webhook-"))
        cert, key = self._dir / "tls.crt", self._dir / "tls.key"
        cert.write_text(bundle.cert)
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(bundle.key)
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)  # a trial first
        self.context.load_cert_chain(cert, key)
        self.bundle = bundle
        log.info("webhook certificate loaded", fingerprint=fingerprint(bundle.cert), not_after=str(bundle.not_after()))

    async def install(self, ca: str | None = None) -> None:
        """Install the webhook configurations with caBundle ``ca`` (default: the loaded bundle's).
        Raises what the installer raises; does nothing without an installer or a bundle."""
        ca = ca if ca is not None else (self.bundle.ca if self.bundle else None)
        if self._install is None or ca is None:
            return
        await self._install(ca)
        self.installed = ca

    async def _apply(self, bundle: Bundle) -> None:
        """Install the configurations when ``bundle.ca`` differs from the installed caBundle, then load
        ``bundle``'s certificate unless it is the one loaded. When installing fails nothing is loaded."""
        if self._install is not None and bundle.ca != self.installed:
            await self.install(bundle.ca)
            log.info("webhook configurations installed with a new caBundle", cas=bundle.ca.count("BEGIN CERT"))
        if self.bundle is None or (bundle.cert, bundle.key) != (self.bundle.cert, self.bundle.key):
            self._load(bundle)
        self.bundle = bundle

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> Bundle:
        """Read the Secret (writing a new or renewed one when missing or due) and load its certificate
        into :attr:`context`; installs nothing (the caller does once it listens, see
        :attr:`trust_changed`). Raises :class:`ApiError` when the Secret cannot be read or written."""
        secret = await self.kube.get_or_none(SECRETS, self.namespace, self.secret_name)
        before = _bundle_of(secret)
        bundle = await self._settle(secret)
        self.trust_changed = before is not None and before.ca != bundle.ca
        self._load(bundle)
        return bundle

    async def sync(self) -> Bundle:
        """One check: read the Secret, renew it when due, then install and load as :meth:`_apply`.
        Raises :class:`ApiError`, ``ssl.SSLError`` or ``ValueError``; the certificate served is then
        unchanged."""
        bundle = await self._settle(await self._read())
        await self._apply(bundle)
        return bundle

    async def run(self) -> None:
        """Watch the Secret and check it on every change and every :attr:`check_every` seconds, until
        cancelled. Failed checks are logged and retried within :data:`RETRY_DELAY` seconds."""
        watcher = asyncio.ensure_future(self.informer.run())
        delay = self.check_every
        self._wake.set()  # a first check at once: the Secret may have changed since start()
        try:
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), delay)
                self._wake.clear()
                try:
                    await self.sync()
                    delay = self.check_every
                except Exception:
                    delay = min(self.check_every, RETRY_DELAY)
                    log.exception("webhook certificate check failed", secret=self._where(), retry_in=delay)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

    def close(self) -> None:
        """Remove the certificate files (the context keeps what it loaded)."""
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
