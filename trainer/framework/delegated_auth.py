"""Delegated authentication and authorization of HTTP requests: the apiserver decides who may.

Follows controller-runtime's ``filters.WithAuthenticationAndAuthorization``
(sigs.k8s.io/controller-runtime ``pkg/metrics/filters/filters.go``), which guards a manager's secure
metrics endpoint (kubeflow/trainer#3912 asks for it): a bearer token is authenticated by an
``authentication.k8s.io/v1`` TokenReview, then its user is authorized by an
``authorization.k8s.io/v1`` SubjectAccessReview for the request's verb on its path as a non-resource
URL (``get /metrics``), so a ClusterRole rule ``nonResourceURLs: ["/metrics"], verbs: ["get"]`` bound to
the scraper's ServiceAccount lets it in. Answers (:class:`Decision`):

* 401 without a bearer token, or when the TokenReview does not authenticate it;
* 403 when the SubjectAccessReview does not allow it (the message names the user, verb and path);
* 200 otherwise.

Decisions are cached per (token, verb, path): :data:`ALLOWED_TTL` seconds when allowed, :data:`DENIED_TTL`
when not (as the apiserver's delegated authorizer caches), so a scraper every 15 s costs one pair of
reviews a minute.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from trainer.api.kinds import SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS
from trainer.framework.bounded import BoundedDict
from trainer.framework.kube.client import KubeClient
from trainer.framework.permissions import Permission

ALLOWED_TTL = 60.0
"""Seconds an allowed token is let in without new reviews."""
DENIED_TTL = 10.0
"""Seconds a refused token stays refused without new reviews."""
CACHE_SIZE = 1024
PERMISSIONS = (
    Permission(TOKEN_REVIEWS, ("create",), "--metrics-secure: whose is the scraper's bearer token"),
    Permission(SUBJECT_ACCESS_REVIEWS, ("create",), "--metrics-secure: may the scraper's token get /metrics"),
)
"""Decisions kept at most; the oldest go first."""


def bearer_token(header: str | None) -> str:
    """The credentials of an RFC 7235 ``Bearer`` Authorization header (scheme in any case, any
    whitespace), "" unless it holds exactly one (kubeflow/trainer ``extractRawToken``)."""
    parts = (header or "").split()
    return parts[1] if len(parts) == 2 and parts[0].lower() == "bearer" else ""


@dataclass(frozen=True)
class Decision:
    """Whether a request may go on: ``code`` 200, 401 or 403, and why (for the answer's body)."""

    code: int
    message: str

    @property
    def allowed(self) -> bool:
        """True for 200."""
        return self.code == 200


class DelegatedAuth:
    """Decides requests by TokenReview and SubjectAccessReview (see the module docstring), caching the
    decisions; ``clock`` (monotonic seconds) is for tests."""

    def __init__(
        self,
        kube: KubeClient,
        *,
        allowed_ttl: float = ALLOWED_TTL,
        denied_ttl: float = DENIED_TTL,
        size: int = CACHE_SIZE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube, self.allowed_ttl, self.denied_ttl, self._clock = kube, allowed_ttl, denied_ttl, clock
        self._cache: BoundedDict[tuple[str, str, str], tuple[float, Decision]] = BoundedDict(size)
        self.reviews = 0
        """TokenReviews made so far."""

    async def decide(self, header: str | None, verb: str, path: str) -> Decision:
        """The decision for the Authorization ``header`` on ``verb`` (lower case, e.g. ``get``) of the
        non-resource URL ``path`` (e.g. ``/metrics``). Raises :class:`~trainer.framework.kube.client.ApiError`
        or aiohttp's errors when the apiserver could not answer (nothing cached)."""
        token = bearer_token(header)
        if not token:
            return Decision(401, "Unauthorized: a bearer token is required")
        key = (hashlib.sha256(token.encode()).hexdigest(), verb, path)
        hit = self._cache.get(key)
        if hit is not None and hit[0] > self._clock():
            return hit[1]
        decision = await self._review(token, verb, path)
        ttl = self.allowed_ttl if decision.allowed else self.denied_ttl
        self._cache.pop(key, None)
        self._cache[key] = (self._clock() + ttl, decision)
        return decision

    async def _review(self, token: str, verb: str, path: str) -> Decision:
        self.reviews += 1
        review = {"apiVersion": TOKEN_REVIEWS.api_version, "kind": TOKEN_REVIEWS.kind, "spec": {"token": token}}
        status = (await self.kube.create(TOKEN_REVIEWS, None, review)).get("status") or {}
        if not status.get("authenticated"):
            return Decision(401, f"Unauthorized: {status.get('error') or 'the token is not authenticated'}")
        user = status.get("user") or {}
        spec = {
            "user": user.get("username", ""),
            "groups": user.get("groups") or [],
            "uid": user.get("uid", ""),
            "extra": user.get("extra") or {},
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        access = {"apiVersion": SUBJECT_ACCESS_REVIEWS.api_version, "kind": SUBJECT_ACCESS_REVIEWS.kind, "spec": spec}
        answer = (await self.kube.create(SUBJECT_ACCESS_REVIEWS, None, access)).get("status") or {}
        if not answer.get("allowed") or answer.get("denied"):
            why = answer.get("reason") or answer.get("evaluationError") or "no rule allows it"
            return Decision(403, f"Forbidden (user={spec['user']}, verb={verb}, path={path}): {why}")
        return Decision(200, "ok")
