"""The status server's CA, carried to the trainer pods.

Each TrainJob this operator runs gets the ConfigMap ``<trainjob>-tls-config`` (``ca.crt``: the PEM of
the status server's CA), owned by the TrainJob, which its pods mount through the projected volume of
:mod:`~trainer.trainjob.spec.injection` (upstream
``pkg/runtime/framework/plugins/trainjobstatus/trainjobstatus.go``); it is made for every TrainJob
and updated when the CA changes.
"""

from __future__ import annotations

import asyncio

import structlog

from trainer.api.jobkinds import TRAINJOB
from trainer.api.kinds import CONFIGMAPS, TRAINJOBS
from trainer.api.labels import JOBSET_NAME
from trainer.framework.controller import Reader
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import Key, key_of
from trainer.framework.kube.client import ApiError
from trainer.framework.meta import meta
from trainer.framework.owner import owned_config_map
from trainer.framework.permissions import Permission
from trainer.jobs.child_writer import ChildWriter
from trainer.jobs.facts import managed_by_us
from trainer.trainjob.spec.injection import CA_KEY, ca_config_map_name

log = structlog.get_logger("trainer.statusserver")
PERMISSIONS = (Permission(CONFIGMAPS, ("create", "patch", "get"), "the `<trainjob>-tls-config` ConfigMaps (ca.crt)"),)


def ca_config_map(trainjob: JSON, ca: str) -> JSON:
    """The ConfigMap ``<trainjob>-tls-config`` in the TrainJob's namespace with ``ca.crt`` = ``ca``
    (PEM, one or more CAs), labelled ``jobset.sigs.k8s.io/jobset-name`` and owned by the TrainJob (a
    JSON object with a uid), so that it goes with it. Raises ``ValueError`` without a uid."""
    name = trainjob["metadata"]["name"]
    return owned_config_map(trainjob, ca_config_map_name(name), {CA_KEY: ca}, {JOBSET_NAME: name})


def _ours(obj: JSON) -> bool:
    return not meta(obj).deletion and managed_by_us(obj, TRAINJOB.run_policy)


class CAPublisher:
    """Keeps ConfigMap ``<trainjob>-tls-config`` (``ca.crt``) current for every TrainJob this operator
    runs, from the TrainJob and ConfigMap caches of ``reader`` (the TrainJob controller's): fed by
    :meth:`on_trainjob` (an informer handler) and :meth:`set_ca` (the certificate keeper's installer),
    written by :meth:`run` through ``writer``, the one writer of a TrainJob's children (created with
    POST, server-side applied when it changes; a refusal is a Warning event on the TrainJob). Failed
    writes are retried after ``retry_delay`` seconds."""

    def __init__(self, writer: ChildWriter, reader: Reader, retry_delay: float = 5.0) -> None:
        self.writer, self.reader, self.retry_delay = writer, reader, retry_delay
        self.ca: str | None = None
        self._pending: set[Key] = set()
        self._written: set[str] = set()
        """The uids of the TrainJobs whose ConfigMap this process wrote with :attr:`ca` (one string each, held
        by the TrainJob's cached object too): not due again before the watch brings that ConfigMap."""
        self._wake = asyncio.Event()

    def _due(self, obj: JSON) -> bool:
        if self.ca is None or not _ours(obj):
            return False
        if obj["metadata"].get("uid") in self._written:
            return False
        ns, name = key_of(obj)
        cm = self.reader.get(CONFIGMAPS, ns, ca_config_map_name(name))
        return cm is None or (cm.get("data") or {}).get(CA_KEY) != self.ca

    def on_trainjob(self, old: JSON | None, new: JSON | None) -> None:
        """Informer handler: queue a TrainJob whose ConfigMap is missing or stale."""
        if new is None:
            if old is not None:
                self._written.discard(old["metadata"].get("uid"))
            return
        if self._due(new):
            self._pending.add(key_of(new))
            self._wake.set()

    async def set_ca(self, ca: str) -> None:
        """Publish ``ca`` (PEM) to every TrainJob's ConfigMap from now on (the writes happen in
        :meth:`run`)."""
        if ca != self.ca:
            self._written.clear()
        self.ca = ca
        self._pending |= {key_of(o) for o in self.reader.items(TRAINJOBS) if self._due(o)}
        self._wake.set()

    async def publish(self, key: Key) -> None:
        """Create or update the ConfigMap of TrainJob ``key`` when due. Raises :class:`ApiError` (but
        for a namespace or TrainJob that is gone)."""
        obj = self.reader.get(TRAINJOBS, *key)
        if obj is None or self.ca is None or not self._due(obj):
            return
        ca, body = self.ca, ca_config_map(obj, self.ca)
        try:
            refusal, _ = await self.writer.apply(obj, body, self.reader.get(CONFIGMAPS, *key_of(body)))
        except ApiError as e:
            if e.namespace_terminating or e.not_found:
                return
            raise
        if refusal is not None:  # told on the TrainJob; sent again after a backoff
            log.warning(
                "status server CA refused", configmap=f"{key[0]}/{body['metadata']['name']}", error=refusal.message
            )
            return
        if ca == self.ca:  # not replaced while the write was under way
            self._written.add(obj["metadata"].get("uid"))
        log.info("status server CA published", configmap=f"{key[0]}/{body['metadata']['name']}")

    async def run(self) -> None:
        """Write what is queued until cancelled; failures are logged and retried."""
        while True:
            await self._wake.wait()
            self._wake.clear()
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
