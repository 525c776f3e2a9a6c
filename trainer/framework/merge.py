"""Pure merges of Kubernetes JSON objects used by the builders.

Lists of objects that carry a ``name`` (containers, env, volumes, volumeMounts, schedulingGates,
imagePullSecrets) merge by name, as their ``+listMapKey=name`` says; other lists (tolerations)
append the entries that are not already present; maps merge key by key; scalars are replaced.
"""

from __future__ import annotations

from typing import Any

from trainer.framework.json_codec import JSON, copy_json


def merge_named(base: list[Any] | None, patch: list[Any] | None, key: str = "name") -> list[Any]:
    """Merge ``patch`` into ``base`` by ``key`` (a strategic merge patch's ``patchMergeKey``; ``name`` unless
    told, ``mountPath`` for a container's ``volumeMounts``): entries with a known key are deep-merged in
    place, new ones appended. Entries without the key are appended unless an equal entry exists."""
    out = [copy_json(x) for x in base or []]
    for item in patch or []:
        if isinstance(item, dict) and key in item:
            for i, cur in enumerate(out):
                if isinstance(cur, dict) and cur.get(key) == item[key]:
                    out[i] = deep_merge(cur, item)
                    break
            else:
                out.append(copy_json(item))
        elif item not in out:
            out.append(copy_json(item))
    return out


def deep_merge(base: JSON, patch: JSON) -> JSON:
    """A new object: ``base`` with ``patch`` merged in (maps recursively, lists by name)."""
    out = copy_json(base)
    for key, value in patch.items():
        if value is None:
            continue
        cur = out.get(key)
        if isinstance(value, dict) and isinstance(cur, dict):
            out[key] = deep_merge(cur, value)
        elif isinstance(value, list) and isinstance(cur, list):
            out[key] = merge_named(cur, value)
        else:
            out[key] = copy_json(value)
    return out


def merge_patch(base: JSON, patch: JSON) -> JSON:
    """A new object: ``base`` with ``patch`` merged in as a JSON merge patch (RFC 7386) merges, null values
    aside: maps key by key, recursively; lists and scalars replaced whole. A strategic merge patch does the
    same to a struct whose lists carry no patch strategy, as ``corev1.SecurityContext`` and
    ``PodSecurityContext`` (``capabilities.add``, ``supplementalGroups``, ``sysctls`` are replaced)."""
    out = copy_json(base)
    for key, value in patch.items():
        if value is None:
            continue
        cur = out.get(key)
        out[key] = merge_patch(cur, value) if isinstance(value, dict) and isinstance(cur, dict) else copy_json(value)
    return out


def upsert_env(container: JSON, env: list[JSON]) -> None:
    """Set each variable of ``env`` on ``container`` in place, replacing one of the same name."""
    container["env"] = merge_named_replace(container.get("env"), env)


def merge_named_replace(base: list[JSON] | None, patch: list[JSON]) -> list[JSON]:
    """Like :func:`merge_named`, but an entry of ``patch`` replaces the same-named one whole
    (an env var's ``value`` and ``valueFrom`` must not both survive)."""
    out = [copy_json(x) for x in base or []]
    for item in patch:
        for i, cur in enumerate(out):
            if cur.get("name") == item["name"]:
                out[i] = copy_json(item)
                break
        else:
            out.append(copy_json(item))
    return out


def find_named(items: list[JSON] | None, name: str) -> JSON | None:
    """The entry of ``items`` whose ``name`` is ``name``, or None."""
    for item in items or []:
        if item.get("name") == name:
            return item
    return None


def replace_named(items: list[JSON] | None, entry: JSON) -> list[JSON]:
    """A new list: ``items`` with the entry named like ``entry`` replaced by it whole, in its place, else
    ``entry`` appended (a strategic merge patch's ``retainKeys``, as Pod ``resourceClaims`` merge)."""
    out = [copy_json(i) for i in items or []]
    for i, cur in enumerate(out):
        if isinstance(cur, dict) and cur.get("name") == entry.get("name"):
            out[i] = copy_json(entry)
            return out
    out.append(copy_json(entry))
    return out
