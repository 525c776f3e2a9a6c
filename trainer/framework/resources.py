"""Kubernetes resource quantities, and the requests of a Pod as Kubernetes computes them. Pure.

Two facts of Kubernetes live here, so that every caller (the gang schedulers' ``minResources``
first) asks the cluster for what kube-scheduler will actually reserve:

* the ``resource.Quantity`` grammar (``500m``, ``4Gi``, ``1e3``), after
  kubernetes/kubernetes ``staging/src/k8s.io/apimachinery/pkg/api/resource/quantity.go``;
* the effective requests of one Pod, after ``PodRequests`` in kubernetes/kubernetes
  ``staging/src/k8s.io/component-helpers/resource/helpers.go`` (Kubernetes v1.33; before v1.30
  the same rule lived in ``pkg/api/v1/resource/helpers.go``), applied to the Pod as the apiserver
  defaults it (``SetDefaults_Pod`` and ``SetDefaults_ResourceList`` in kubernetes/kubernetes
  ``pkg/apis/core/v1/defaults.go``).

Resource lists are ``dict[str, Decimal]``: resource name to amount in the resource's base unit
(cores for ``cpu``, bytes for ``memory`` and ``ephemeral-storage``, a count for extended
resources such as ``nvidia.com/gpu``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, ROUND_CEILING, ROUND_UP, Context, Decimal, localcontext
from typing import Any

from trainer.framework.json_codec import JSON

ResourceList = dict[str, Decimal]
"""Resource name -> amount in the resource's base unit (cores, bytes, count)."""

POD_LEVEL_RESOURCES = frozenset({"cpu", "memory"})
"""Resources that ``spec.resources`` (PodLevelResources, alpha in v1.33) may set for the whole Pod
(``supportedPodLevelResources`` of component-helpers; later versions add ``hugepages-*``)."""

_BINARY_SI = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
"""Binary suffix -> power of two."""
_DECIMAL_SI = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
"""Decimal suffix -> power of ten (``n`` and ``u`` are accepted by the parser though not in the grammar)."""
_DECIMAL_SUFFIXES = {power: suffix for suffix, power in _DECIMAL_SI.items()}
"""Power of ten -> the suffix Kubernetes prints for it."""
_BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
"""Power of 1024 -> the suffix Kubernetes prints for it."""
_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<binary>[KMGTPE]i)|[eE](?P<exponent>[+-]?[0-9]+)|(?P<decimal>[numkMGTPE]?))"
)
_NANO = Decimal("1e-9")
_MILLI = Decimal("1e-3")
_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)
"""Unrounded arithmetic: sums and products of quantities never lose digits."""

_ALWAYS = "Always"
"""``restartPolicy`` of a restartable init container (a native sidecar)."""


def _round_up(amount: Decimal, step: Decimal) -> Decimal:
    """``amount`` rounded away from zero to a multiple of ``step`` (a power of ten), when finer."""
    exponent, step_exponent = amount.as_tuple().exponent, step.as_tuple().exponent
    if isinstance(exponent, int) and isinstance(step_exponent, int) and exponent < step_exponent:
        return amount.quantize(step, rounding=ROUND_UP)
    return amount


def parse_quantity(value: str | int | float) -> Decimal:
    """The number a ``resource.Quantity`` denotes, in the resource's base unit.

    ``value`` is a Quantity string, ``<signedNumber><suffix>`` with the suffix one of ``Ki Mi Gi Ti
    Pi Ei`` (powers of 1024), ``n u m "" k M G T P E`` (powers of 1000) or ``e<int>``/``E<int>``
    (a power of ten), e.g. ``"500m"`` -> 0.5, ``"4Gi"`` -> 4294967296, ``"1e3"`` -> 1000; or a JSON
    number (``1``, ``0.5``), which Kubernetes reads as its decimal text. Like ``ParseQuantity``
    (kubernetes/kubernetes ``staging/src/k8s.io/apimachinery/pkg/api/resource/quantity.go``) a
    non-zero value finer than 1n is rounded away from zero to whole nanos; the int64 cap is not
    applied. Raises ``ValueError`` for anything else (``"lots"``, ``"1 Gi"``, ``"1K"``, ``""``,
    booleans, NaN). Pure, so its answers are kept (the same few quantities recur in every reconcile).
    """
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"not a quantity: {value!r}")
    return _parse_quantity(value)


@functools.lru_cache(maxsize=4096, typed=True)
def _parse_quantity(value: str | int | float) -> Decimal:
    """:func:`parse_quantity` of a string or number."""
    match = _QUANTITY.fullmatch(str(value))
    if match is None:
        raise ValueError(f"not a quantity: {value!r}")
    number = Decimal(match["number"])
    with localcontext(_EXACT):
        try:
            if match["binary"]:
                amount = number * (2 ** _BINARY_SI[match["binary"]])
            else:
                power = int(match["exponent"]) if match["exponent"] is not None else _DECIMAL_SI[match["decimal"]]
                amount = number.scaleb(power)
            amount = _round_up(amount, _NANO)
        except ArithmeticError as e:
            raise ValueError(f"quantity out of range: {value!r}") from e
    return amount


def format_quantity(value: Decimal, binary: bool = False) -> str:
    """``value`` rounded up to whole millis, as Kubernetes prints a ``resource.Quantity``
    (``Quantity.String``, ``CanonicalizeBytes`` in kubernetes/kubernetes
    ``staging/src/k8s.io/apimachinery/pkg/api/resource/quantity.go``): in the decimal format the
    integer mantissa of the largest exponent that is a multiple of 3 with its suffix (``"4"``,
    ``"1250m"``, ``"1k"``, ``"8G"``, ``"1073741824"``); with ``binary`` (a sum whose terms were
    written ``Ki``...``Ei``) a whole number of at least 1024 as the integer mantissa of the largest
    power of 1024 (``"8Gi"``, ``"1536Mi"``), anything else in the decimal format. Never raises for
    a finite ``value``."""
    with localcontext(_EXACT):
        value = _round_up(value, _MILLI)
        if value == 0:
            return "0"
        if binary and abs(value) >= 1024 and value == value.to_integral_value():
            mantissa, power = int(value), 0
            while mantissa % 1024 == 0 and power < len(_BINARY_SUFFIXES) - 1:
                mantissa, power = mantissa // 1024, power + 1
            return f"{mantissa}{_BINARY_SUFFIXES[power]}"
        mantissa, exponent = int(value.scaleb(3)), -3
    while mantissa % 10 == 0:
        mantissa, exponent = mantissa // 10, exponent + 1
    while exponent % 3:
        mantissa, exponent = mantissa * 10, exponent - 1
    suffix = _DECIMAL_SUFFIXES.get(exponent)
    return f"{mantissa}{suffix}" if suffix is not None else f"{mantissa}e{exponent}"


def is_binary_quantity(value: Any) -> bool:
    """Whether ``value`` is a Quantity string with a binary suffix (``"4Gi"``: Kubernetes keeps it
    in the ``BinarySI`` format)."""
    match = _QUANTITY.fullmatch(value) if isinstance(value, str) else None
    return bool(match and match["binary"])


def binary_resources(template: Mapping[str, Any]) -> frozenset[str]:
    """The resources of :func:`pod_requests` whose total Kubernetes keeps in the binary format:
    those whose first non-zero quantity is written with a binary suffix (Go's ``Quantity.Add``
    keeps the format of the first non-zero term of a sum), taken in the order ``spec.resources``
    (requests, then limits), each container's requests then limits, the init containers' likewise,
    ``spec.overhead``. For :func:`format_quantity`. (Where an init container's step exceeds the
    containers' sum, Kubernetes keeps that step's format instead; the first quantity decides here.)"""
    spec = template.get("spec") or {}
    lists: list[Mapping[str, Any]] = []
    for owner in [spec, *(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        res = owner.get("resources") or {}
        lists += [res.get("requests") or {}, res.get("limits") or {}]
    lists.append(spec.get("overhead") or {})
    seen: dict[str, bool] = {}
    for quantities in lists:
        for name, qty in quantities.items():
            try:
                if name not in seen and parse_quantity(qty) != 0:
                    seen[name] = is_binary_quantity(qty)
            except ValueError:
                continue
    return frozenset(name for name, binary in seen.items() if binary)


def resource_list(resources: Mapping[str, Any] | None) -> ResourceList:
    """A ``ResourceList`` of a Pod (``{"cpu": "500m"}``) as numbers, rounded up to whole millis as
    the apiserver stores it (``SetDefaults_ResourceList``: ``"0.1m"`` -> 0.001). Raises
    ``ValueError`` for a value that is not a quantity."""
    out: ResourceList = {}
    for name, qty in (resources or {}).items():
        with localcontext(_EXACT):
            out[str(name)] = _round_up(parse_quantity(qty), _MILLI)
    return out


def container_requests(container: Mapping[str, Any]) -> ResourceList:
    """The requests of one container (``{name, resources: {requests, limits}, ...}``) once the
    apiserver has defaulted the Pod: a resource with a limit and no request requests its limit
    (``SetDefaults_Pod`` in kubernetes/kubernetes ``pkg/apis/core/v1/defaults.go``), per resource.
    Raises ``ValueError`` for a value that is not a quantity."""
    res = container.get("resources") or {}
    return {**resource_list(res.get("limits")), **resource_list(res.get("requests"))}


def _add(into: ResourceList, more: Mapping[str, Decimal]) -> None:
    for name, qty in more.items():
        into[name] = into[name] + qty if name in into else qty


def _max(into: ResourceList, more: Mapping[str, Decimal]) -> None:
    for name, qty in more.items():
        if name not in into or qty > into[name]:
            into[name] = qty


def aggregate_container_requests(spec: Mapping[str, Any]) -> ResourceList:
    """The requests of a Pod's containers, ``spec`` being a PodSpec, after
    ``AggregateContainerRequests`` of kubernetes/kubernetes
    ``staging/src/k8s.io/component-helpers/resource/helpers.go`` (the sidecar rule of KEP-753):

    * the regular containers are summed;
    * init containers are taken in order. A restartable one (``restartPolicy: Always``, a native
      sidecar) keeps running: it is added to the sum and to the running total of sidecars, and its
      step needs that sidecar total. A regular one needs its own requests plus every sidecar
      started before it;
    * per resource, the result is the larger of the sum and the largest init step.

    Neither ``spec.resources`` nor ``spec.overhead`` is counted (see :func:`pod_requests`). Raises
    ``ValueError`` for a value that is not a quantity."""
    with localcontext(_EXACT):
        total: ResourceList = {}
        for c in spec.get("containers") or []:
            _add(total, container_requests(c))
        sidecars: ResourceList = {}
        init_peak: ResourceList = {}
        for c in spec.get("initContainers") or []:
            own = container_requests(c)
            if c.get("restartPolicy") == _ALWAYS:
                _add(total, own)
                _add(sidecars, own)
                step = dict(sidecars)
            else:
                step = dict(own)
                _add(step, sidecars)
            _max(init_peak, step)
        _max(total, init_peak)
    return total


def _pod_level_requests(spec: Mapping[str, Any], containers: ResourceList) -> ResourceList:
    """``spec.resources.requests`` for the pod-level resources, as the apiserver defaults them
    (``defaultPodRequests``): a pod-level limit with no pod-level request becomes the request when
    no container requests that resource (else the request is the containers' aggregate, which
    changes nothing here)."""
    res = spec.get("resources") or {}
    requests = {k: v for k, v in resource_list(res.get("requests")).items() if k in POD_LEVEL_RESOURCES}
    for name, qty in resource_list(res.get("limits")).items():
        if name in POD_LEVEL_RESOURCES and name not in requests and name not in containers:
            requests[name] = qty
    return requests


def pod_requests(template: Mapping[str, Any]) -> ResourceList:
    """The requests kube-scheduler reserves for one Pod made from ``template``, a Pod template
    ``{metadata, spec}``: ``PodRequests`` of kubernetes/kubernetes
    ``staging/src/k8s.io/component-helpers/resource/helpers.go`` (Kubernetes v1.33) with its
    default options, on the Pod as the apiserver defaults it.

    Per resource: the containers' aggregate (:func:`aggregate_container_requests`: regular
    containers and native sidecars summed, each init step counted with the sidecars before it,
    limits standing in for missing requests); then ``spec.resources.requests`` (PodLevelResources,
    defaulted from ``spec.resources.limits``) replaces that aggregate for ``cpu`` and ``memory``
    where it names them; then ``spec.overhead`` is added. A resource nothing names is absent.
    This assumes the PodLevelResources feature gate is on wherever ``spec.resources`` is set (with
    it off, the apiserver drops the field). Raises ``ValueError`` for a value that is not a
    quantity.

    Example: a 1-CPU container and a 1-CPU native sidecar request 2 CPU.
    """
    spec = template.get("spec") or {}
    with localcontext(_EXACT):
        requests = aggregate_container_requests(spec)
        requests.update(_pod_level_requests(spec, requests))
        _add(requests, resource_list(spec.get("overhead")))
    return requests


def _value(qty: Any) -> int:
    """``Quantity.Value()``: the amount rounded up to an integer; 0 for a value that is not a quantity."""
    try:
        return int(parse_quantity(qty).to_integral_value(rounding=ROUND_CEILING))
    except ValueError:
        return 0


def gpus_per_node(resources: Mapping[str, Any] | None) -> int:
    """GPUs of one training node, as kubeflow/trainer ``pkg/runtime/runtime.go`` ``GetNumGPUPerNode``
    counts them: the first request whose resource name contains ``gpu`` (``nvidia.com/gpu``,
    ``amd.com/gpu``), rounded up, else the first such limit; 0 when there is none.
    ``resources``: ``{requests, limits}``."""

    def first(field: str) -> int:
        items = ((resources or {}).get(field) or {}).items()
        return next((_value(q) for n, q in items if "gpu" in str(n).lower()), 0)

    return first("requests") or first("limits")


def gpus_requested(requests: Any) -> int:
    """GPUs a DRA claim asks for: the sum of ``exactly.count`` over ``requests`` (a ResourceClaimTemplate's
    ``spec.spec.devices.requests`` or a ResourceClaim's ``spec.devices.requests``, ``resource.k8s.io/v1``)
    whose ``name`` contains ``gpu``, as kubeflow/trainer KEP-2782 (``proposals/2782-dra-support/README.md``,
    "DRA-aware GPU detection") counts them. A request counts only when it is ``exactly`` (not
    ``firstAvailable``), its ``allocationMode`` is ``ExactCount`` (the default; ``All`` has no count before
    allocation) and it is not ``adminAccess``; ``count`` defaults to 1 (``resource.k8s.io/v1`` defaulting).
    0 when nothing counts or ``requests`` is not a list."""
    total = 0
    for request in requests if isinstance(requests, list) else []:
        exactly = request.get("exactly") if isinstance(request, dict) else None
        if not isinstance(exactly, dict) or "gpu" not in str(request.get("name") or "").lower():
            continue
        if (exactly.get("allocationMode") or "ExactCount") != "ExactCount" or exactly.get("adminAccess") is True:
            continue
        count = exactly.get("count", 1)
        total += count if isinstance(count, int) and count > 0 else 0
    return total


def cpus_per_node(resources: Mapping[str, Any] | None) -> int:
    """CPUs of one training node as kubeflow/trainer's torch plugin counts them (``getNumCPUPerNode``):
    the cpu request if non-zero, else the cpu limit, rounded up (``500m`` -> 1); 0 when neither is set."""
    requests, limits = (resources or {}).get("requests") or {}, (resources or {}).get("limits") or {}
    request = _value(requests["cpu"]) if "cpu" in requests else 0
    return request or (_value(limits["cpu"]) if "cpu" in limits else 0)


def merge_resources(base: Mapping[str, Any] | None, override: Mapping[str, Any] | None) -> JSON:
    """``override`` (a TrainJob's ``resourcesPerNode``) merged into ``base`` (the runtime container's
    ``resources``) as kubeflow/trainer v2.3 merges them (``MergeResourceRequirements``): requests and
    limits key by key, the override winning; claims by name (upstream v2.3 drops claims; kept here)."""
    out: JSON = {k: v for k, v in (base or {}).items()}
    for field in ("requests", "limits"):
        if (override or {}).get(field) is not None:
            out[field] = {**((base or {}).get(field) or {}), **(override or {})[field]}
    if (override or {}).get("claims") is not None:
        claims = {c.get("name"): c for c in (base or {}).get("claims") or []}
        claims.update({c.get("name"): c for c in (override or {})["claims"]})
        out["claims"] = list(claims.values())
    return out
