"""A read-only view over an object's ``metadata`` (k8s.io/apimachinery ``ObjectMeta``), the one way the
operator reads it from JSON.

``meta(obj).name`` reads what ``(obj.get("metadata") or {}).get("name")`` did: an object without
metadata, or whose metadata is None or not a mapping, has none of it. Scalars come back as stored
(None when unset; each caller keeps its own default, e.g. ``meta(obj).uid or ""``); labels,
annotations and owner references come back empty when unset. The view copies nothing: it reads the
object's own dict, so it never goes stale and costs one allocation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from trainer.framework.json_codec import JSON


class Meta:
    """The metadata of one object (JSON): see the module docstring."""

    __slots__ = ("data",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.data = data
        """The metadata itself (empty when the object has none)."""

    def _str(self, key: str) -> str | None:
        return cast("str | None", self.data.get(key))

    @property
    def name(self) -> str | None:
        return self._str("name")

    @property
    def namespace(self) -> str | None:
        return self._str("namespace")

    @property
    def uid(self) -> str | None:
        return self._str("uid")

    @property
    def resource_version(self) -> str | None:
        """``resourceVersion``."""
        return self._str("resourceVersion")

    @property
    def generation(self) -> int | None:
        return cast("int | None", self.data.get("generation"))

    @property
    def deletion(self) -> str | None:
        """``deletionTimestamp``: set once the object is being deleted."""
        return self._str("deletionTimestamp")

    @property
    def creation_timestamp(self) -> str | None:
        """``creationTimestamp``."""
        return self._str("creationTimestamp")

    @property
    def labels(self) -> dict[str, str]:
        """The labels (empty when unset)."""
        return cast("dict[str, str]", self.data.get("labels") or {})

    @property
    def annotations(self) -> dict[str, str]:
        """The annotations (empty when unset)."""
        return cast("dict[str, str]", self.data.get("annotations") or {})

    @property
    def owner_references(self) -> list[JSON]:
        """``ownerReferences`` (empty when unset)."""
        return cast("list[JSON]", self.data.get("ownerReferences") or [])

    @property
    def managed_fields(self) -> list[JSON] | None:
        """``managedFields`` as stored (None when unset)."""
        return cast("list[JSON] | None", self.data.get("managedFields"))


_NONE: Mapping[str, Any] = {}


def meta(obj: Mapping[str, Any] | None) -> Meta:
    """The metadata of ``obj`` (JSON; None or an object without a metadata mapping has an empty one)."""
    data = obj.get("metadata") if obj is not None else None
    return Meta(data if isinstance(data, Mapping) else _NONE)
