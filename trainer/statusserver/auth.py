"""Authentication of status posts: may this bearer token update this TrainJob?

Follows kubeflow/trainer ``pkg/statusserver/auth.go``. A ``authentication.k8s.io/v1`` TokenReview
with the TrainJob's audience (:func:`~trainer.trainjob.spec.injection.token_audience`); the pod comes
from the user's extra ``authentication.kubernetes.io/pod-name`` and ``pod-uid`` (bound tokens, as the
kubelet mints for the projected volume). The pod must be the TrainJob's by its controller chain, which
only the controllers write: the Pod's controller owner reference is a batch Job (with that Job's uid),
whose controller owner reference is this TrainJob (kind ``TrainJob``, its uid). Labels decide nothing:
any pod creator can set ``jobset.sigs.k8s.io/jobset-name`` (upstream checks the namespace only). The
Job and the TrainJob are read from the operator's caches when it has them, else with a GET; the Pod
with a GET. Answers:

* 401 without a bearer token, when the TokenReview does not authenticate it, or when its
  ``status.audiences`` is empty or lacks the TrainJob's audience;
* 403 when the token is not a ServiceAccount token of this namespace bound to a pod that exists, or
  when that pod's controller chain does not lead to this TrainJob (the message says which link);
* 404 when the TrainJob does not exist;
* 429 (with :attr:`Verdict.retry_after`) when a new token would need a review while
  :data:`MAX_REVIEWS` run and :data:`MAX_WAITING` wait: nothing is queued beyond that.

Verdicts are cached per (token, TrainJob): a minute (at most until the token expires), ten seconds for
refusals; a burst of posts with one new token makes one review.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass

from trainer.api.kinds import JOBS, PODS, TOKEN_REVIEWS, TRAINJOBS, Resource
from trainer.framework.bounded import BoundedDict
from trainer.framework.controller import Reader
from trainer.framework.delegated_auth import bearer_token
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import controller_of
from trainer.framework.kube.client import KubeClient
from trainer.framework.meta import meta
from trainer.framework.permissions import Permission
from trainer.trainjob.spec.injection import token_audience

__all__ = ["TokenAuthenticator", "Verdict", "bearer_token", "token_expiry"]

CACHE_TTL = 60.0
"""Seconds an accepted token is trusted without a new TokenReview (never beyond its expiry)."""
REFUSED_TTL = 10.0
"""Seconds a refused token stays refused without a new TokenReview."""
CACHE_SIZE = 4096
"""Verdicts kept at most; the oldest go first."""
MAX_REVIEWS = 16
"""Reviews (a TokenReview and the reads of the pod's chain) running at once, at most."""
MAX_WAITING = 64
"""Reviews waiting for one of the :data:`MAX_REVIEWS` at most; a new token past that is answered 429."""
RETRY_AFTER = 1
"""Seconds a post answered 429 is told to wait (``Retry-After``)."""
POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"
POD_UID_EXTRA = "authentication.kubernetes.io/pod-uid"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
PERMISSIONS = (
    Permission(TOKEN_REVIEWS, ("create",), "the status server checks trainer pods' bearer tokens"),
    Permission(PODS, ("get",), "the status server checks a token's pod belongs to the TrainJob"),
    Permission(JOBS, ("get",), "the status server reads the Job controlling a token's pod when its cache lacks it"),
    Permission(
        TRAINJOBS,
        ("get",),
        "the status server reads the TrainJob a token's pod chain must reach when its cache lacks it, e.g. "
        "before the caches synced",
    ),
)


@dataclass(frozen=True)
class Verdict:
    """Whether a token may update a TrainJob: ``code`` 200 (yes), 401, 403, 404 or 429, with why."""

    code: int
    message: str
    pod: str = ""
    """The pod the token is bound to, when known."""
    retry_after: int | None = None
    """Seconds to wait before posting again (429 only)."""

    @property
    def allowed(self) -> bool:
        """True for 200."""
        return self.code == 200


def token_expiry(token: str) -> float | None:
    """The ``exp`` claim (Unix seconds) of a JWT, read without checking it (only after a TokenReview
    accepted the token), None when it has none."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return float(claims["exp"])
    except (IndexError, ValueError, KeyError, TypeError):
        return None


class TokenAuthenticator:
    """Decides whether a bearer token may update a TrainJob (see the module docstring), caching the
    verdicts. ``reader``: the TrainJob controller's caches (Jobs and TrainJobs), None to GET them;
    ``max_reviews``/``max_waiting`` bound the reviews running and waiting; ``clock`` (monotonic
    seconds) and ``wall`` (Unix seconds) are for tests."""

    def __init__(
        self,
        kube: KubeClient,
        reader: Reader | None = None,
        *,
        max_reviews: int = MAX_REVIEWS,
        max_waiting: int = MAX_WAITING,
        ttl: float = CACHE_TTL,
        refused_ttl: float = REFUSED_TTL,
        size: int = CACHE_SIZE,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.kube, self.reader, self.ttl, self.refused_ttl, self.size = kube, reader, ttl, refused_ttl, size
        self._clock, self._wall = clock, wall
        self._cache: BoundedDict[tuple[str, str, str], tuple[float, Verdict]] = BoundedDict(size)
        self._inflight: dict[tuple[str, str, str], asyncio.Future[tuple[Verdict, float]]] = {}
        self._reviews = asyncio.Semaphore(max_reviews)
        self.max_inflight = max_reviews + max_waiting
        """Reviews running or waiting at most."""
        self.reviews = 0
        """TokenReviews made so far."""
        self.turned_away = 0
        """Posts answered 429 so far."""

    async def authorize(self, header: str | None, namespace: str, name: str) -> Verdict:
        """The verdict for the Authorization ``header`` on TrainJob ``namespace/name``. Raises
        :class:`ApiError` or aiohttp's errors when the apiserver could not answer (nothing cached)."""
        token = bearer_token(header)
        if not token:
            return Verdict(401, "a bearer token is required")
        key = (hashlib.sha256(token.encode()).hexdigest(), namespace, name)
        hit = self._cache.get(key)
        if hit is not None:
            if hit[0] > self._clock():
                return hit[1]
            del self._cache[key]
        future = self._inflight.get(key)
        if future is None:
            if len(self._inflight) >= self.max_inflight:
                self.turned_away += 1
                why = f"{len(self._inflight)} token reviews are running or waiting; retry in {RETRY_AFTER} s"
                return Verdict(429, why, retry_after=RETRY_AFTER)
            future = asyncio.ensure_future(self._review(token, namespace, name))
            self._inflight[key] = future
            future.add_done_callback(lambda _f: self._inflight.pop(key, None))
        verdict, ttl = await asyncio.shield(future)
        if ttl > 0:
            self._cache[key] = (self._clock() + ttl, verdict)
        return verdict

    async def _review(self, token: str, namespace: str, name: str) -> tuple[Verdict, float]:
        """The verdict and how many seconds it may be cached, once one of the review slots is free."""
        async with self._reviews:
            verdict = await self._decide(token, namespace, name)
        if not verdict.allowed:
            return verdict, self.refused_ttl
        expiry = token_expiry(token)
        return verdict, self.ttl if expiry is None else min(self.ttl, expiry - self._wall())

    async def _decide(self, token: str, namespace: str, name: str) -> Verdict:
        audience = token_audience(namespace, name)
        review = {
            "apiVersion": TOKEN_REVIEWS.api_version,
            "kind": TOKEN_REVIEWS.kind,
            "spec": {"token": token, "audiences": [audience]},
        }
        self.reviews += 1
        answer = await self.kube.create(TOKEN_REVIEWS, None, review)
        status = answer.get("status") or {}
        if not status.get("authenticated"):
            why = status.get("error") or "not authenticated"
            return Verdict(401, f"the token is not valid for TrainJob {namespace}/{name}: {why}")
        audiences = status.get("audiences") or []
        if audience not in audiences:
            return Verdict(
                401,
                f"the token is not valid for TrainJob {namespace}/{name}: the TokenReview confirmed the "
                f"audiences {audiences}, not {audience!r}",
            )
        user = status.get("user") or {}
        extra = user.get("extra") or {}
        pod = next(iter(extra.get(POD_NAME_EXTRA) or []), "")
        pod_uid = next(iter(extra.get(POD_UID_EXTRA) or []), "")
        username = str(user.get("username") or "")
        sa_namespace = username.removeprefix(SERVICE_ACCOUNT_PREFIX).split(":")[0]
        if not username.startswith(SERVICE_ACCOUNT_PREFIX) or sa_namespace != namespace or not pod:
            return Verdict(
                403, f"{username or 'the user'} is not a pod's ServiceAccount token in namespace {namespace}"
            )
        found = await self.kube.get_or_none(PODS, namespace, pod)
        if found is None or (pod_uid and meta(found).uid != pod_uid):
            return Verdict(403, f"pod {namespace}/{pod} of the token does not exist", pod)
        return await self._chain(found, namespace, name)

    async def _chain(self, pod: JSON, namespace: str, name: str) -> Verdict:
        """Whether ``pod``'s controller chain (Pod -> Job -> TrainJob) ends at TrainJob ``namespace/name``."""
        pod_name = str(pod["metadata"]["name"])
        refused = f"pod {namespace}/{pod_name} does not belong to TrainJob {namespace}/{name}"
        ref = controller_of(pod)
        if not is_ref_to(ref, JOBS):
            return Verdict(403, f"{refused}: its controller is {describe(ref)}, not a Job", pod_name)
        assert ref is not None
        job_name = str(ref.get("name") or "")
        job = self.cached(JOBS, namespace, job_name) or await self.kube.get_or_none(JOBS, namespace, job_name)
        if job is None or meta(job).uid != ref.get("uid"):
            return Verdict(403, f"{refused}: its controller Job {job_name} does not exist", pod_name)
        owner = controller_of(job)
        if not is_ref_to(owner, TRAINJOBS) or (owner or {}).get("name") != name:
            return Verdict(403, f"{refused}: its Job {job_name} is controlled by {describe(owner)}", pod_name)
        assert owner is not None
        trainjob = self.cached(TRAINJOBS, namespace, name) or await self.kube.get_or_none(TRAINJOBS, namespace, name)
        if trainjob is None:
            return Verdict(404, "Train job not found", pod_name)
        uid = meta(trainjob).uid
        if uid != owner.get("uid"):
            why = f"its Job {job_name} is controlled by an earlier TrainJob of that name (uid {owner.get('uid')})"
            return Verdict(403, f"{refused}: {why}", pod_name)
        return Verdict(200, "", pod_name)

    def cached(self, res: Resource, namespace: str, name: str) -> JSON | None:
        """The cached object when the reader caches ``res``, else None (then it is read with a GET)."""
        if self.reader is None or not self.reader.declares(res):
            return None
        return self.reader.get(res, namespace, name)


def is_ref_to(ref: JSON | None, res: Resource) -> bool:
    """Whether owner reference ``ref`` names an object of ``res`` (its group and kind; any version)."""
    if ref is None:
        return False
    group = str(ref.get("apiVersion") or "").rpartition("/")[0]
    return ref.get("kind") == res.kind and group == res.group


def describe(ref: JSON | None) -> str:
    """``<Kind> <name>`` of an owner reference, ``nothing`` for None."""
    return "nothing" if ref is None else f"{ref.get('kind')} {ref.get('name')}"
