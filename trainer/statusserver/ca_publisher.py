"""The status server's CA, carried to the trainer pods.

Each TrainJob this operator runs gets the ConfigMap ``<trainjob>-tls-config`` (``ca.crt``: the PEM of
the status server's CA), owned by the TrainJob, which its pods mount through the projected volume of
:mod:`~trainer.trainjob.spec.injection` (upstream
``pkg/runtime/framework/plugins/trainjobstatus/trainjobstatus.go``); it is made for every TrainJob
and updated when the CA changes.

These ConfigMaps are not cached: their content is the same CA for every TrainJob, so a cached copy per
TrainJob would cost memory (about 1.5 MiB per 1,000 TrainJobs) to learn one bit each. The publisher
keeps the uids of the TrainJobs whose ConfigMap carries the current CA instead, learnt from one list
when the CA is installed or changes (label ``trainer.kubeflow.org/trainjob-name``, read page by page)
and from its own writes after it. They carry that label, not ``jobset.sigs.k8s.io/jobset-name``
(upstream's carry none), so the TrainJob controller's label-narrowed ConfigMap cache does not hold them.
"""

from __future__ import annotations

import asyncio
import sys

import structlog

from trainer.api.jobkinds import TRAINJOB
from trainer.api.kinds import CONFIGMAPS, TRAINJOBS
from trainer.api.labels import TRAINJOB_NAME
from trainer.framework.controller import Reader
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import Key, controller_of, key_of, pages
from trainer.framework.kube.client import ApiError, Lister
from trainer.framework.meta import meta
from trainer.framework.owner import owned_config_map
from trainer.framework.permissions import Permission
from trainer.jobs.child_writer import ChildWriter
from trainer.jobs.facts import managed_by_us
from trainer.trainjob.spec.injection import CA_KEY, ca_config_map_name

log = structlog.get_logger("trainer.statusserver")
PERMISSIONS = (
    Permission(CONFIGMAPS, ("create", "patch", "get", "list"), "the `<trainjob>-tls-config` ConfigMaps (ca.crt)"),
)


def ca_config_map(trainjob: JSON, ca: str) -> JSON:
    """The ConfigMap ``<trainjob>-tls-config`` in the TrainJob's namespace with ``ca.crt`` = ``ca``
    (PEM, one or more CAs), labelled ``trainer.kubeflow.org/trainjob-name`` and owned by the TrainJob (a
    JSON object with a uid), so that it goes with it. Raises ``ValueError`` without a uid."""
    name = trainjob["metadata"]["name"]
    return owned_config_map(trainjob, ca_config_map_name(name), {CA_KEY: ca}, {TRAINJOB_NAME: name})


def carrier(cm: JSON, ca: str) -> str | None:
    """The uid of the TrainJob whose ``<trainjob>-tls-config`` ``cm`` is (its controller owner reference,
    a TrainJob of the name the ConfigMap's is made of) when it carries ``ca``; None otherwise."""
    ref = controller_of(cm)
    if ref is None or ref.get("kind") != TRAINJOB.resource.kind or not ref.get("uid"):
        return None
    if meta(cm).name != ca_config_map_name(str(ref.get("name"))) or (cm.get("data") or {}).get(CA_KEY) != ca:
        return None
    return sys.intern(str(ref["uid"]))


def _ours(obj: JSON) -> bool:
    return not meta(obj).deletion and managed_by_us(obj, TRAINJOB.run_policy)


class CAPublisher:
    """Keeps ConfigMap ``<trainjob>-tls-config`` (``ca.crt``) current for every TrainJob this operator
    runs, from the TrainJob cache of ``reader`` (the TrainJob controller's): fed by :meth:`on_trainjob`
    (an informer handler) and :meth:`set_ca` (the certificate keeper's installer), written by
    :meth:`run` through ``writer``, the one writer of a TrainJob's children (created with POST; one that
    exists is read and, when the TrainJob controls it, server-side applied; anyone else's is a refusal,
    a Warning event on the TrainJob). Which ConfigMaps carry the CA is listed with ``kube`` in
    ``namespace`` (None: every namespace) when a CA is installed. Failed lists and writes are retried
    after ``retry_delay`` seconds."""

    def __init__(
        self, writer: ChildWriter, reader: Reader, kube: Lister, namespace: str | None, retry_delay: float = 5.0
    ) -> None:
        self.writer, self.reader, self.kube, self.namespace = writer, reader, kube, namespace
        self.retry_delay = retry_delay
        self.ca: str | None = None
        self._pending: set[Key] = set()
        self._written: set[str] | None = None
        """The uids of the TrainJobs whose ConfigMap carries :attr:`ca` (one string each, held by the
        TrainJob's cached object too); None until listed for this CA."""
        self._retrying: set[Key] = set()
        """TrainJobs whose ConfigMap was refused (a name someone else holds), queued again after a backoff."""
        self._wake = asyncio.Event()

    def _due(self, obj: JSON) -> bool:
        if self.ca is None or self._written is None or not _ours(obj):
            return False
        return obj["metadata"].get("uid") not in self._written

    def on_trainjob(self, old: JSON | None, new: JSON | None) -> None:
        """Informer handler: queue a TrainJob whose ConfigMap does not carry the CA."""
        if new is None:
            if old is not None and self._written is not None:
                self._written.discard(old["metadata"].get("uid"))
            return
        if self._due(new):
            self._pending.add(key_of(new))
            self._wake.set()

    async def set_ca(self, ca: str) -> None:
        """Publish ``ca`` (PEM) to every TrainJob's ConfigMap from now on (the list and the writes happen
        in :meth:`run`)."""
        if ca != self.ca:
            self.ca, self._written = ca, None
        self._wake.set()

    async def _carrying(self, ca: str) -> set[str]:
        """The uids of the TrainJobs whose ConfigMap carries ``ca`` (:func:`carrier`), listed a page at a
        time. Raises :class:`ApiError`."""
        found: set[str] = set()
        async for page, _ in pages(self.kube, CONFIGMAPS, self.namespace, TRAINJOB_NAME, None):
            found.update(uid for cm in page if (uid := carrier(cm, ca)) is not None)
        return found

    async def publish(self, key: Key) -> None:
        """Create or update the ConfigMap of TrainJob ``key`` when due. Raises :class:`ApiError` (but
        for a namespace or TrainJob that is gone)."""
        obj = self.reader.get(TRAINJOBS, *key)
        if obj is None or self.ca is None or not self._due(obj):
            return
        ca, body = self.ca, ca_config_map(obj, self.ca)
        try:
            refusal, _ = await self.writer.apply(obj, body, None)
        except ApiError as e:
            if e.namespace_terminating or e.not_found:
                return
            raise
        if refusal is not None:  # told on the TrainJob; sent again after the writer's backoff
            log.warning(
                "status server CA refused", configmap=f"{key[0]}/{body['metadata']['name']}", error=refusal.message
            )
            self._retry_at(key, refusal.retry_at - self.writer.clock())
            return
        if ca == self.ca and self._written is not None:  # not replaced while the write was under way
            self._written.add(obj["metadata"].get("uid"))
        log.info("status server CA published", configmap=f"{key[0]}/{body['metadata']['name']}")

    def _retry_at(self, key: Key, delay: float) -> None:
        """Queue ``key`` again in ``delay`` seconds (once, however often it is refused meanwhile)."""
        if key in self._retrying:
            return
        self._retrying.add(key)

        def again() -> None:
            self._retrying.discard(key)
            self._pending.add(key)
            self._wake.set()

        asyncio.get_running_loop().call_later(max(delay, 0.0), again)

    async def _list(self) -> bool:
        """List which ConfigMaps carry the CA when not yet known for it, then queue every TrainJob whose
        does not. False when the list failed (logged)."""
        ca = self.ca
        if ca is None or self._written is not None:
            return True
        try:
            written = await self._carrying(ca)
        except Exception as e:  # an ApiError, a connection's: retried
            log.warning("status server CA ConfigMaps not listed", error=str(e))
            return False
        if ca == self.ca:  # else a newer CA came meanwhile: listed again for it
            self._written = written
            self._pending |= {key_of(o) for o in self.reader.items(TRAINJOBS) if self._due(o)}
        return True

    async def run(self) -> None:
        """List and write what is due until cancelled; failures are logged and retried."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not await self._list():
                await asyncio.sleep(self.retry_delay)
                self._wake.set()
                continue
            keys, self._pending = self._pending, set()
            failed = set()
            for key in sorted(keys):
                try:
                    await self.publish(key)
                except Exception as e:
                    log.warning("status server CA not published", trainjob=f"{key[0]}/{key[1]}", error=str(e))
                    failed.add(key)
            if failed:
                await asyncio.sleep(self.retry_delay)
                self._pending |= failed
                self._wake.set()
