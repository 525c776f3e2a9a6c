"""Authentication of status posts: may this bearer token update this TrainJob?

Follows kubeflow/trainer ``pkg/statusserver/auth.go``. A ``authentication.k8s.io/v1`` TokenReview
with the TrainJob's audience (:func:`~trainer.statusserver.injection.token_audience`); the pod comes
from the user's extra ``authentication.kubernetes.io/pod-name`` and ``pod-uid`` (bound tokens, as the
kubelet mints for the projected volume), and is read to check its uid and label. Answers:

* 401 without a bearer token, or when the TokenReview does not authenticate it;
* 403 when the token is not a ServiceAccount token bound to a pod of this namespace whose label
  ``jobset.sigs.k8s.io/jobset-name`` names this TrainJob (upstream checks the namespace only and
  answers 403 for every refusal).

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

from api.kinds import PODS, TOKEN_REVIEWS
from trainer.bounded import BoundedDict
from trainer.builders.labels import JOBSET_NAME
from trainer.kube.client import KubeClient
from trainer.statusserver.injection import token_audience

CACHE_TTL = 60.0
"""Seconds an accepted token is trusted without a new TokenReview (never beyond its expiry)."""
REFUSED_TTL = 10.0
"""Seconds a refused token stays refused without a new TokenReview."""
CACHE_SIZE = 4096
"""Verdicts kept at most; the oldest go first."""
MAX_REVIEWS = 16
"""TokenReviews in flight at most."""
POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"
POD_UID_EXTRA = "authentication.kubernetes.io/pod-uid"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"


@dataclass(frozen=True)
class Verdict:
    """Whether a token may update a TrainJob: ``code`` 200 (yes), 401 or 403, with why."""

    code: int
    message: str
    pod: str = ""
    """The pod the token is bound to, when known."""

    @property
    def allowed(self) -> bool:
        """True for 200."""
        return self.code == 200


def bearer_token(header: str | None) -> str:
    """The credentials of an RFC 7235 ``Bearer`` Authorization header (scheme in any case, any
    whitespace), "" unless it holds exactly one (upstream ``extractRawToken``)."""
    parts = (header or "").split()
    return parts[1] if len(parts) == 2 and parts[0].lower() == "bearer" else ""


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
    verdicts. ``clock`` (monotonic seconds) and ``wall`` (Unix seconds) are for tests."""

    def __init__(
        self,
        kube: KubeClient,
        *,
        ttl: float = CACHE_TTL,
        refused_ttl: float = REFUSED_TTL,
        size: int = CACHE_SIZE,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.kube, self.ttl, self.refused_ttl, self.size = kube, ttl, refused_ttl, size
        self._clock, self._wall = clock, wall
        self._cache: BoundedDict[tuple[str, str, str], tuple[float, Verdict]] = BoundedDict(size)
        self._inflight: dict[tuple[str, str, str], asyncio.Future[tuple[Verdict, float]]] = {}
        self._reviews = asyncio.Semaphore(MAX_REVIEWS)
        self.reviews = 0
        """TokenReviews made so far."""

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
            future = asyncio.ensure_future(self._review(token, namespace, name))
            self._inflight[key] = future
            future.add_done_callback(lambda _f: self._inflight.pop(key, None))
        verdict, ttl = await asyncio.shield(future)
        if ttl > 0:
            self._cache[key] = (self._clock() + ttl, verdict)
        return verdict

    async def _review(self, token: str, namespace: str, name: str) -> tuple[Verdict, float]:
        """The verdict and how many seconds it may be cached."""
        review = {
            "apiVersion": TOKEN_REVIEWS.api_version,
            "kind": TOKEN_REVIEWS.kind,
            "spec": {"token": token, "audiences": [token_audience(namespace, name)]},
        }
        async with self._reviews:
            self.reviews += 1
            answer = await self.kube.create(TOKEN_REVIEWS, None, review)
        status = answer.get("status") or {}
        audience = token_audience(namespace, name)
        if not status.get("authenticated") or audience not in (status.get("audiences") or [audience]):
            why = status.get("error") or "not authenticated"
            return Verdict(401, f"the token is not valid for TrainJob {namespace}/{name}: {why}"), self.refused_ttl
        user = status.get("user") or {}
        extra = user.get("extra") or {}
        pod = next(iter(extra.get(POD_NAME_EXTRA) or []), "")
        pod_uid = next(iter(extra.get(POD_UID_EXTRA) or []), "")
        username = str(user.get("username") or "")
        sa_namespace = username.removeprefix(SERVICE_ACCOUNT_PREFIX).split(":")[0]
        if not username.startswith(SERVICE_ACCOUNT_PREFIX) or sa_namespace != namespace or not pod:
            message = f"{username or 'the user'} is not a pod's ServiceAccount token in namespace {namespace}"
            return Verdict(403, message), self.refused_ttl
        found = await self.kube.get_or_none(PODS, namespace, pod)
        meta = (found or {}).get("metadata") or {}
        if found is None or (pod_uid and meta.get("uid") != pod_uid):
            return Verdict(403, f"pod {namespace}/{pod} of the token does not exist", pod), self.refused_ttl
        if (meta.get("labels") or {}).get(JOBSET_NAME) != name:
            return Verdict(403, f"pod {namespace}/{pod} does not belong to TrainJob {namespace}/{name}", pod), (
                self.refused_ttl
            )
        ttl = self.ttl
        expiry = token_expiry(token)
        if expiry is not None:
            ttl = min(ttl, expiry - self._wall())
        return Verdict(200, "", pod), ttl
