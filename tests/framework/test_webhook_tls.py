"""The webhook certificate's lifecycle without a cluster: renewal decisions, the shared Secret (a fake
apiserver with resourceVersions and a watch), and certificates reloaded in place on a live listener.

Trust is checked the way a client checks it: real TLS handshakes (OpenSSL through ``ssl``) whose
client trusts only the caBundle that would be installed.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import datetime
import hashlib
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from trainer.api.kinds import SECRETS, Resource
from trainer.framework.certs import Bundle, fingerprint, generate, issue
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError
from trainer.framework.tls import SECRET_NAME, WebhookTLS, check_interval, renew, serving_names

DAY = datetime.timedelta(days=1)
NS = "ops"
DNS, IPS = serving_names("trainer-webhook-service", NS, "127.0.0.1")


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def handshake(tmp: Path, bundle: Bundle, cadata: str, host: str = "127.0.0.1") -> bytes:
    """A TLS handshake in memory: a server presenting ``bundle``'s certificate, a client trusting only
    ``cadata`` and checking ``host``. The server's certificate (DER); raises ``ssl.SSLError`` when the
    client refuses it."""
    cert, key = tmp / "hs.crt", tmp / "hs.key"
    cert.write_text(bundle.cert)
    key.write_text(bundle.key)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    client_ctx = ssl.create_default_context(cadata=cadata)
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname=host)
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(20):
        for name, side in (("client", client), ("server", server)):
            if not done[name]:
                try:
                    side.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            peer = client.getpeercert(binary_form=True)
            assert peer is not None
            return peer
    raise AssertionError("handshake did not finish")


def der_fingerprint(der: bytes) -> str:
    return hashlib.sha256(der).hexdigest()


# ----------------------------------------------------------------------------- renewal decisions


def test_serving_rotation_keeps_the_ca_and_the_ca_bundle(tmp_path: Path) -> None:
    t0 = utcnow() - 25 * DAY
    old = generate(DNS, IPS, t0, validity=30 * DAY)
    assert renew(old, DNS, IPS, t0 + 15 * DAY, validity=30 * DAY) is None  # not yet in its last third
    new = renew(old, DNS, IPS, utcnow(), validity=30 * DAY)
    assert new is not None
    assert new.ca == old.ca and new.ca_key == old.ca_key  # the caBundle does not move
    assert new.cert != old.cert and new.key != old.key
    signer = new.signing_ca()
    assert signer is not None and new.issued_by(signer)
    assert new.not_after() - utcnow() > 29 * DAY
    assert not new.needs_rotation()
    # Replicas still on the old certificate and those on the new one verify under the same caBundle.
    assert der_fingerprint(handshake(tmp_path, old, old.ca)) == fingerprint(old.cert)
    assert der_fingerprint(handshake(tmp_path, new, old.ca)) == fingerprint(new.cert)
    assert handshake(tmp_path, new, new.ca, host="trainer-webhook-service.ops.svc")


def test_ca_rotation_publishes_both_cas_and_the_bundle_verifies_old_and_new_certificates(tmp_path: Path) -> None:
    t0 = utcnow() - 70 * DAY  # the CA (100 days) is in its last third now; the serving certificate still valid
    old = generate(DNS, IPS, t0, validity=90 * DAY, ca_validity=100 * DAY)
    new = renew(old, DNS, IPS, utcnow(), validity=90 * DAY, ca_validity=100 * DAY)
    assert new is not None
    old_ca, new_ca = old.cas(), new.cas()
    assert len(old_ca) == 1 and len(new_ca) == 2 and new_ca[0] == old_ca[0]
    assert new.ca_key != old.ca_key
    signer = new.signing_ca()
    assert signer == new_ca[1] and new.issued_by(signer) and not new.issued_by(old_ca[0])
    # The installed bundle (old + new CA) verifies both certificates...
    assert der_fingerprint(handshake(tmp_path, old, new.ca)) == fingerprint(old.cert)
    assert der_fingerprint(handshake(tmp_path, new, new.ca)) == fingerprint(new.cert)
    # ...while the old bundle alone would refuse the new certificate: why the bundle goes in first.
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(tmp_path, new, old.ca)

    # Once the old CA has expired it leaves the bundle; the certificates stay.
    later = utcnow() + 31 * DAY
    pruned = renew(new, DNS, IPS, later, validity=90 * DAY, ca_validity=100 * DAY)
    assert pruned is not None
    assert pruned.cas() == [new_ca[1]] and (pruned.cert, pruned.ca_key) == (new.cert, new.ca_key)
    assert renew(pruned, DNS, IPS, later, validity=90 * DAY, ca_validity=100 * DAY) is None


def test_a_secret_without_ca_key_moves_to_a_new_ca_keeping_the_old_one_trusted() -> None:
    legacy = generate(DNS, IPS, utcnow())
    legacy = Bundle(ca=legacy.ca, cert=legacy.cert, key=legacy.key)  # as written before ca.key existed
    assert Bundle.from_secret_data(legacy.to_secret_data()) == legacy
    new = renew(legacy, DNS, IPS)
    assert new is not None and new.cas()[0] == legacy.cas()[0] and len(new.cas()) == 2
    assert new.ca_key and new.signing_ca() == new.cas()[1]


def test_a_certificate_outliving_a_shortened_validity_is_renewed_but_not_one_within_it() -> None:
    now = utcnow()
    year = generate(DNS, IPS, now)
    short = renew(year, DNS, IPS, now, validity=datetime.timedelta(seconds=30))
    assert short is not None and short.ca == year.ca
    assert short.not_after() - now <= datetime.timedelta(seconds=30)
    assert renew(short, DNS, IPS, now + datetime.timedelta(seconds=5), validity=datetime.timedelta(seconds=30)) is None
    assert renew(short, DNS, IPS, now + datetime.timedelta(seconds=21), validity=datetime.timedelta(seconds=30))


def test_a_serving_key_that_does_not_fit_its_certificate_is_replaced() -> None:
    a, b = generate(DNS, IPS), generate(DNS, IPS)
    broken = Bundle(ca=a.ca, cert=a.cert, key=b.key, ca_key=a.ca_key)
    fixed = renew(broken, DNS, IPS)
    assert fixed is not None and fixed.ca == a.ca and fixed.cert != a.cert


def test_a_certificate_without_a_host_now_configured_is_reissued_for_both_and_then_kept(tmp_path: Path) -> None:
    """An operator started with another --status-server-host (the pods' gateway) than the one that made
    the Secret: the certificate gets the new address too (same CA), and keeps the old one for a replica
    still configured with it; then nothing more changes."""
    now = utcnow()
    old = generate(DNS, IPS, now)
    with pytest.raises(ssl.SSLError):
        handshake(tmp_path, old, old.ca, host="10.88.0.1")
    dns, ips = serving_names("trainer-webhook-service", NS, "10.88.0.1")
    new = renew(old, dns, ips, now)
    assert new is not None and new.ca == old.ca
    handshake(tmp_path, new, old.ca, host="10.88.0.1")
    handshake(tmp_path, new, old.ca, host="127.0.0.1")
    assert renew(new, dns, ips, now) is None
    assert renew(new, DNS, IPS, now) is None


def test_check_interval_derives_from_the_validity() -> None:
    assert check_interval(365 * 86400) == 3600
    assert check_interval(30) == 5
    assert check_interval(3) == 1


# ----------------------------------------------------------------------------- the shared Secret


class FakeKube:
    """The part of the apiserver the certificate keeper uses: one namespace of Secrets with
    resourceVersions (updates at a stale version fail with 409) and a watch."""

    def __init__(self) -> None:
        self.objects: dict[str, JSON] = {}
        self.rv = 0
        self.updates = 0
        self.selectors: list[str | None] = []
        self._watchers: list[asyncio.Queue[tuple[str, JSON]]] = []

    def _stored(self, obj: JSON, kind: str) -> JSON:
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.objects[obj["metadata"]["name"]] = obj
        for q in self._watchers:
            q.put_nowait((kind, copy.deepcopy(obj)))
        return copy.deepcopy(obj)

    async def get_or_none(self, res: Resource, namespace: str | None, name: str) -> JSON | None:
        await asyncio.sleep(0)
        obj = self.objects.get(name)
        return copy.deepcopy(obj) if obj else None

    async def create(self, res: Resource, namespace: str | None, obj: JSON) -> JSON:
        await asyncio.sleep(0)
        if obj["metadata"]["name"] in self.objects:
            raise ApiError(409, {"reason": "AlreadyExists", "message": "exists"})
        return self._stored(obj, "ADDED")

    async def update(self, res: Resource, namespace: str | None, obj: JSON) -> JSON:
        await asyncio.sleep(0)
        current = self.objects.get(obj["metadata"]["name"])
        if current is None:
            raise ApiError(404, {"reason": "NotFound", "message": "gone"})
        if obj["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise ApiError(409, {"reason": "Conflict", "message": "the object has been modified"})
        self.updates += 1
        return self._stored(obj, "MODIFIED")

    def delete(self, name: str) -> None:
        obj = self.objects.pop(name)
        for q in self._watchers:
            q.put_nowait(("DELETED", copy.deepcopy(obj)))

    async def list(
        self, res: Resource, namespace: str | None = None, label_selector: str | None = None, **kw: Any
    ) -> tuple[list[JSON], str]:
        self.selectors.append(kw.get("field_selector"))
        return [copy.deepcopy(o) for o in self.objects.values()], str(self.rv)

    async def watch(
        self, res: Resource, namespace: str | None, resource_version: str, **kw: Any
    ) -> AsyncIterator[tuple[str, JSON]]:
        self.selectors.append(kw.get("field_selector"))
        q: asyncio.Queue[tuple[str, JSON]] = asyncio.Queue()
        self._watchers.append(q)
        try:
            while True:
                yield await q.get()
        finally:
            self._watchers.remove(q)

    def secret(self) -> Bundle:
        return Bundle.from_secret_data(self.objects[SECRET_NAME]["data"])

    def put(self, bundle: Bundle) -> None:
        """Another writer replaces the Secret's data."""
        obj = self.objects.get(SECRET_NAME) or {"metadata": {"name": SECRET_NAME, "namespace": NS}}
        self._stored({**obj, "data": bundle.to_secret_data()}, "MODIFIED" if SECRET_NAME in self.objects else "ADDED")


class Clock:
    def __init__(self, now: datetime.datetime) -> None:
        self.now = now

    def __call__(self) -> datetime.datetime:
        return self.now


def keeper(kube: FakeKube, **kw: Any) -> WebhookTLS:
    return WebhookTLS(kube, NS, DNS, IPS, **kw)  # type: ignore[arg-type]


async def test_start_writes_the_secret_with_the_ca_key_and_a_second_replica_serves_the_same() -> None:
    kube = FakeKube()
    a, b = keeper(kube), keeper(kube)
    first = await a.start()
    assert kube.objects[SECRET_NAME]["type"] == "kubernetes.io/tls"
    assert set(kube.objects[SECRET_NAME]["data"]) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
    assert await b.start() == first and kube.rv == 1  # read, not rewritten
    assert not a.trust_changed and not b.trust_changed


async def test_replicas_finding_the_certificate_due_write_once_and_the_loser_takes_the_winners() -> None:
    kube = FakeKube()
    clock = Clock(utcnow())
    a, b = keeper(kube, validity=30 * 86400, clock=clock), keeper(kube, validity=30 * 86400, clock=clock)
    start = await a.start()
    await b.start()
    clock.now += 21 * DAY
    results = await asyncio.gather(a.sync(), b.sync())  # both read the due Secret before either writes
    assert kube.updates == 1
    assert results[0] == results[1] == kube.secret()
    assert results[0].cert != start.cert and results[0].ca == start.ca
    assert a.bundle == b.bundle == kube.secret()


async def test_ca_rotation_installs_the_new_bundle_before_loading_a_certificate_of_the_new_ca() -> None:
    kube = FakeKube()
    clock = Clock(utcnow())
    seen: list[tuple[str, str]] = []
    tls: WebhookTLS

    async def install(ca: str) -> None:
        assert tls.bundle is not None
        seen.append((ca, tls.bundle.cert))  # what was served while the bundle went in

    tls = keeper(kube, validity=30 * 86400, ca_validity=90 * 86400, install=install, clock=clock)
    first = await tls.start()
    await tls.install()
    clock.now += 21 * DAY
    second = await tls.sync()  # serving certificate only: the caBundle stays, nothing installed
    assert second.ca == first.ca and second.cert != first.cert and len(seen) == 1
    clock.now += 40 * DAY  # the CA is 61 of 90 days old
    third = await tls.sync()
    assert len(seen) == 2
    installed, served_meanwhile = seen[1]
    assert served_meanwhile == second.cert  # the old certificate was still served while installing
    assert installed == third.ca and len(third.cas()) == 2 and third.cas()[0] == first.cas()[0]
    signer = third.signing_ca()
    assert signer is not None and signer in third.cas() and tls.bundle == third


async def test_a_failed_install_loads_nothing_and_the_next_check_retries() -> None:
    kube = FakeKube()
    clock = Clock(utcnow())
    fail = [True]

    async def install(ca: str) -> None:
        if fail[0]:
            raise ApiError(500, {"message": "etcd unavailable"})

    tls = keeper(kube, validity=30 * 86400, ca_validity=90 * 86400, install=install, clock=clock)
    first = await tls.start()
    fail[0] = False
    await tls.install()
    fail[0] = True
    clock.now += 61 * DAY
    with pytest.raises(ApiError):
        await tls.sync()
    assert tls.bundle == first  # still the old certificate, which the installed bundle trusts
    assert kube.secret().ca != first.ca  # the renewed Secret was written all the same
    fail[0] = False
    assert await tls.sync() == kube.secret() == tls.bundle and tls.installed == kube.secret().ca


async def test_a_deleted_secret_is_written_back_from_memory_keeping_the_ca() -> None:
    kube = FakeKube()
    tls = keeper(kube)
    first = await tls.start()
    kube.delete(SECRET_NAME)
    assert await tls.sync() == first == kube.secret()


# ----------------------------------------------------------------------------- reloading in place


@pytest.fixture
async def listener() -> AsyncIterator[tuple[WebhookTLS, FakeKube, int]]:
    """A keeper started on a fake apiserver and a real HTTPS listener on 127.0.0.1 serving its context."""
    kube = FakeKube()
    tls = keeper(kube, check_every=1000)  # only the watch triggers checks here
    await tls.start()

    async def hello(_: web.Request) -> web.Response:
        return web.Response(text="hello")

    app = web.Application()
    app.router.add_get("/", hello)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls.context)
    await site.start()
    server = site._server
    assert isinstance(server, asyncio.Server)
    port = int(server.sockets[0].getsockname()[1])
    try:
        yield tls, kube, port
    finally:
        await runner.cleanup()
        tls.close()


async def connect(port: int, cadata: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, str]:
    """A TLS connection trusting only ``cadata``, and the fingerprint of the certificate presented."""
    ctx = ssl.create_default_context(cadata=cadata)
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="127.0.0.1")
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    return reader, writer, der_fingerprint(der)


async def get(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
    writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    return await reader.readexactly(5)


async def test_a_secret_change_seen_by_the_watch_is_served_to_new_connections_on_the_same_listener(
    listener: tuple[WebhookTLS, FakeKube, int],
) -> None:
    tls, kube, port = listener
    old = tls.bundle
    assert old is not None
    r1, w1, seen = await connect(port, old.ca)
    assert seen == fingerprint(old.cert)

    task = asyncio.create_task(tls.run())
    try:
        await asyncio.sleep(0.1)  # the watch is up
        cert, key = issue(old.ca, old.ca_key, DNS, IPS)  # another replica renewed it
        rotated = Bundle(ca=old.ca, cert=cert, key=key, ca_key=old.ca_key)
        kube.put(rotated)
        for _ in range(100):
            if tls.bundle == rotated:
                break
            await asyncio.sleep(0.05)
        assert tls.bundle == rotated, "the watch did not bring the new certificate"
        r2, w2, seen = await connect(port, old.ca)  # the same caBundle trusts it
        assert seen == fingerprint(rotated.cert) != fingerprint(old.cert)
        assert await get(r2, w2) == b"hello"
        assert await get(r1, w1) == b"hello"  # the connection made before keeps working
        for w in (w1, w2):
            w.close()
            await w.wait_closed()
        assert set(kube.selectors) == {f"metadata.name={SECRET_NAME}"}  # the watch narrowed to the Secret
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_a_due_secret_seen_by_the_watch_is_renewed_and_served(
    listener: tuple[WebhookTLS, FakeKube, int],
) -> None:
    tls, kube, port = listener
    old = tls.bundle
    assert old is not None
    task = asyncio.create_task(tls.run())
    try:
        await asyncio.sleep(0.1)
        due = generate(DNS, IPS, utcnow() - 300 * DAY)  # someone wrote a certificate in its last third
        assert due.needs_rotation()
        kube.put(due)
        for _ in range(100):
            if tls.bundle is not None and tls.bundle.cert not in (old.cert, due.cert):
                break
            await asyncio.sleep(0.05)
        assert kube.updates == 1, "the watch event did not lead to a renewal"
        assert tls.bundle == kube.secret() and tls.bundle.cert not in (old.cert, due.cert)
        assert not tls.bundle.needs_rotation() and tls.bundle.ca == due.ca  # renewed with the Secret's CA
        _, w, seen = await connect(port, due.ca)
        assert seen == fingerprint(tls.bundle.cert)
        w.close()
        await w.wait_closed()
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def test_secret_data_is_base64_of_pem() -> None:
    bundle = generate(DNS, IPS)
    data = bundle.to_secret_data()
    assert base64.b64decode(data["ca.key"]).startswith(b"-----BEGIN PRIVATE KEY-----")
    assert Bundle.from_secret_data(data) == bundle
    assert SECRETS.plural == "secrets"
