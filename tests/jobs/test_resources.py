"""Quantities and per-pod requests against the Kubernetes rules.

Every expected number is worked out by hand from ``PodRequests`` (kubernetes/kubernetes
``staging/src/k8s.io/component-helpers/resource/helpers.go``), the apiserver defaulting of
``pkg/apis/core/v1/defaults.go`` and the Quantity grammar of
``staging/src/k8s.io/apimachinery/pkg/api/resource/quantity.go``; the comments show the sums.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trainer.framework.json_codec import JSON
from trainer.framework.resources import binary_resources, format_quantity, parse_quantity, pod_requests
from trainer.jobs.gang.base import PodSet, gang_resources

Gi = 2**30
Mi = 2**20


def c(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None, sidecar: bool = False) -> JSON:
    """A container asking for ``requests`` (and ``limits``); a native sidecar if ``sidecar``."""
    resources: JSON = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    out: JSON = {"name": "c", "image": "busybox", "resources": resources}
    if sidecar:
        out["restartPolicy"] = "Always"
    return out


def pod(containers: list[JSON], init: list[JSON] | None = None, **spec: Any) -> JSON:
    return {"metadata": {}, "spec": {"containers": containers, "initContainers": init or [], **spec}}


# ----------------------------------------------------------------------------- native sidecars


def test_a_native_sidecar_runs_beside_the_container_so_its_request_adds() -> None:
    # containers 1 + sidecar 1 = 2; the sidecar's init step (1) is smaller.
    template = pod([c({"cpu": "1"})], [c({"cpu": "1"}, sidecar=True)])
    assert pod_requests(template) == {"cpu": Decimal(2)}


def test_a_regular_init_container_after_a_sidecar_runs_beside_it() -> None:
    template = pod(
        [c({"cpu": "1", "memory": "1Gi"})],
        [c({"cpu": "500m", "memory": "256Mi"}, sidecar=True), c({"cpu": "2", "memory": "1Gi"})],
    )
    # cpu: running = 1 + 0.5 = 1.5; init steps: sidecar 0.5, regular 2 + 0.5 = 2.5 -> 2.5
    #   (the old max(sum, largest init) said max(1.5, 2) = 2: under-asking by 0.5).
    # memory: running = 1Gi + 256Mi = 1280Mi; steps 256Mi, 1Gi + 256Mi = 1280Mi -> 1280Mi.
    assert pod_requests(template) == {"cpu": Decimal("2.5"), "memory": 1280 * Mi}


def test_sidecars_accumulate_and_every_later_init_step_carries_them() -> None:
    template = pod(
        [c({"cpu": "1"})],
        [c({"cpu": "1"}, sidecar=True), c({"cpu": "2"}, sidecar=True), c({"cpu": "2"})],
    )
    # running = 1 + 1 + 2 = 4; steps: 1, 1 + 2 = 3, 2 + 3 = 5 -> 5
    assert pod_requests(template) == {"cpu": Decimal(5)}


def test_a_regular_init_container_before_a_sidecar_does_not_carry_it() -> None:
    template = pod([c({"cpu": "1"})], [c({"cpu": "2500m"}), c({"cpu": "1"}, sidecar=True)])
    # running = 1 + 1 = 2; steps: regular 2.5 (no sidecar started yet), sidecar 1 -> 2.5 (not 3.5)
    assert pod_requests(template) == {"cpu": Decimal("2.5")}


def test_a_large_regular_init_container_dominates() -> None:
    template = pod([c({"cpu": "1"}), c({"cpu": "2", "memory": "1Gi"})], [c({"cpu": "8", "memory": "4Gi"})])
    # cpu: running 1 + 2 = 3, init step 8 -> 8; memory: running 1Gi, init 4Gi -> 4Gi
    assert pod_requests(template) == {"cpu": Decimal(8), "memory": 4 * Gi}


def test_a_resource_only_an_init_container_names_is_requested() -> None:
    template = pod([c({"cpu": "1"})], [c({"nvidia.com/gpu": "1"})])
    assert pod_requests(template) == {"cpu": Decimal(1), "nvidia.com/gpu": Decimal(1)}


def test_only_restart_policy_always_makes_a_sidecar() -> None:
    init = c({"cpu": "1"})
    init["restartPolicy"] = "OnFailure"  # not a valid init policy; anything but Always is a regular init
    assert pod_requests(pod([c({"cpu": "1"})], [init])) == {"cpu": Decimal(1)}


# ----------------------------------------------------------------------------- defaulting, overhead, pod-level


def test_overhead_is_added_after_the_containers() -> None:
    template = pod(
        [c({"cpu": "1", "memory": "1Gi"})],
        [c({"cpu": "1"}, sidecar=True)],
        overhead={"cpu": "250m", "memory": "120Mi", "ephemeral-storage": "1Gi"},
    )
    # cpu 1 + 1 + 0.25; memory 1Gi + 120Mi; ephemeral-storage only from the overhead
    assert pod_requests(template) == {"cpu": Decimal("2.25"), "memory": Gi + 120 * Mi, "ephemeral-storage": Gi}


def test_a_limit_without_a_request_is_the_request_per_container_and_resource() -> None:
    template = pod(
        [c(limits={"cpu": "2", "memory": "1Gi"}), c({"memory": "512Mi"}, limits={"cpu": "1", "memory": "2Gi"})],
        [c(limits={"cpu": "500m"}, sidecar=True), c(limits={"cpu": "4"})],
    )
    # containers: cpu 2 + 1 (limit stands in), memory 1Gi (limit) + 512Mi (its request, not its 2Gi limit)
    # sidecar 0.5 -> running cpu 3.5; regular init step 4 + 0.5 = 4.5 -> cpu 4.5
    assert pod_requests(template) == {"cpu": Decimal("4.5"), "memory": Gi + 512 * Mi}


def test_pod_level_requests_replace_the_containers_for_cpu_and_memory_only() -> None:
    template = pod(
        [c({"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}), c({"cpu": "1"})],
        [c({"cpu": "1"}, sidecar=True)],
        resources={"requests": {"cpu": "4"}},
        overhead={"cpu": "100m"},
    )
    # cpu: pod-level 4 replaces 1 + 1 + 1 = 3, then overhead 0.1; memory and gpu stay the containers'
    assert pod_requests(template) == {"cpu": Decimal("4.1"), "memory": Gi, "nvidia.com/gpu": Decimal(1)}


def test_pod_level_limits_default_the_pod_request_only_where_no_container_asks() -> None:
    template = pod([c({"cpu": "1"})], resources={"limits": {"cpu": "3", "memory": "2Gi"}})
    # memory: no container asks -> pod-level request defaults to the 2Gi limit;
    # cpu: a container asks -> the pod-level request defaults to the containers' 1, not the limit 3
    assert pod_requests(template) == {"cpu": Decimal(1), "memory": 2 * Gi}


def test_quantities_are_rounded_up_to_millis_as_the_apiserver_stores_them() -> None:
    template = pod([c({"cpu": "0.1m", "memory": "100n"})])
    assert pod_requests(template) == {"cpu": Decimal("0.001"), "memory": Decimal("0.001")}


def test_zero_and_empty() -> None:
    assert pod_requests({}) == {}
    assert pod_requests(pod([c()])) == {}
    assert pod_requests(pod([c({"cpu": "0"})])) == {"cpu": 0}


def test_gang_resources_count_sidecars_on_every_pod() -> None:
    template = pod([c({"cpu": "1"})], [c({"cpu": "1"}, sidecar=True)])
    # 2 pods x (1 + 1) CPU
    assert gang_resources([PodSet("node", jobs=1, pods_per_job=2, template=template)]) == {"cpu": "4"}


# ----------------------------------------------------------------------------- quantities


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Decimal("0.5")),
        ("1", Decimal(1)),
        ("1.5", Decimal("1.5")),
        ("+2", Decimal(2)),
        (".5", Decimal("0.5")),
        ("1.", Decimal(1)),
        ("100n", Decimal("1e-7")),
        ("250u", Decimal("0.00025")),
        ("1k", Decimal(1000)),
        ("3M", Decimal(3 * 10**6)),
        ("2G", Decimal(2 * 10**9)),
        ("1T", Decimal(10**12)),
        ("1P", Decimal(10**15)),
        ("2E", Decimal(2 * 10**18)),
        ("1Ki", Decimal(1024)),
        ("128Mi", Decimal(128 * Mi)),
        ("1.5Gi", Decimal(3 * 2**29)),
        ("2Ti", Decimal(2 * 2**40)),
        ("1Pi", Decimal(2**50)),
        ("1Ei", Decimal(2**60)),
        ("1e3", Decimal(1000)),
        ("1E3", Decimal(1000)),
        ("12e+2", Decimal(1200)),
        ("5e-1", Decimal("0.5")),
        ("1.5e6", Decimal(1_500_000)),
        ("0.1n", Decimal("1e-9")),  # finer than a nano: rounded up to 1n
        (3, Decimal(3)),
        (0.5, Decimal("0.5")),
    ],
)
def test_parse_quantity(text: str | int | float, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["lots", "", "1K", "1 Gi", " 1", "1Gib", "e3", "1e", "1e1.5", "Gi", "NaN", "1_000"])
def test_parse_quantity_refuses_what_kubernetes_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_quantity(text)


def test_parse_quantity_refuses_non_numbers() -> None:
    for value in (True, None, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            parse_quantity(value)  # type: ignore[arg-type]


def test_parse_quantity_is_exact_for_large_binary_values() -> None:
    # 123456789.123456789 x 2^60 has 36 digits: more than a default decimal context keeps
    assert parse_quantity("123456789.123456789Ei") == Decimal(f"{123456789123456789 * 2**60}e-9")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (Decimal(4), "4"),
        (Decimal("4.000"), "4"),
        (Decimal(3 * Gi), str(3 * Gi)),
        (Decimal("1.25"), "1250m"),
        (Decimal("0.0005"), "1m"),
        (Decimal(0), "0"),
    ],
)
def test_format_quantity(value: Decimal, text: str) -> None:
    assert format_quantity(value) == text


@pytest.mark.parametrize(
    ("value", "binary", "text"),
    [  # what Go's resource.Quantity.String() prints (apimachinery quantity.go CanonicalizeBytes)
        (Decimal(1000), False, "1k"),
        (Decimal(8 * 10**9), False, "8G"),
        (Decimal(12 * 10**12), False, "12T"),
        (Decimal("0.5"), False, "500m"),
        (Decimal(8 * Gi), True, "8Gi"),
        (Decimal(1536 * 2**20), True, "1536Mi"),
        (Decimal(3 * Gi + 1), True, str(3 * Gi + 1)),
        (Decimal(512), True, "512"),  # below 1024: decimal
        (Decimal(2000), True, "2000"),  # not a multiple of 1024: no binary suffix, and not "2k"
        (Decimal("1.5"), True, "1500m"),
    ],
)
def test_format_quantity_prints_what_kubernetes_prints(value: Decimal, binary: bool, text: str) -> None:
    assert format_quantity(value, binary) == text
    assert parse_quantity(text) == value


def test_binary_resources_follow_the_first_nonzero_quantity_naming_each_resource() -> None:
    template = {
        "spec": {
            "containers": [
                {"resources": {"requests": {"memory": "0", "cpu": "1"}}},
                {"resources": {"limits": {"memory": "2Gi", "nvidia.com/gpu": "1"}}},
            ],
            "initContainers": [{"resources": {"requests": {"memory": "1G", "ephemeral-storage": "1Ki"}}}],
        }
    }
    assert binary_resources(template) == {"memory", "ephemeral-storage"}
    # The gang's minResources keep that format: 4 pods x 2Gi, not 8589934592.
    assert gang_resources([PodSet("node", jobs=1, pods_per_job=4, template=template)]) == {
        "cpu": "4",
        "ephemeral-storage": "4Ki",
        "memory": "8Gi",
        "nvidia.com/gpu": "4",
    }


# ----------------------------------------------------------------------------- properties

RESOURCES = ("cpu", "memory", "example.com/gpu")


@st.composite
def containers(draw: st.DrawFn) -> tuple[JSON, dict[str, Decimal]]:
    """A container and the request Kubernetes assigns it per resource (millis known by construction)."""
    amounts = draw(st.dictionaries(st.sampled_from(RESOURCES), st.integers(0, 50_000), max_size=3))
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    for name, millis in amounts.items():
        text = f"{millis}m"
        kind = draw(st.sampled_from(["request", "limit only", "both"]))
        if kind == "limit only":
            limits[name] = text
        else:
            requests[name] = text
            if kind == "both":
                limits[name] = f"{millis + draw(st.integers(0, 1000))}m"
        # the request is the millis either way (a limit stands in for a missing request)
    container = c(requests or None, limits or None, sidecar=draw(st.booleans()))
    return container, {k: Decimal(v) / 1000 for k, v in amounts.items()}


specs = st.tuples(
    st.lists(containers(), min_size=1, max_size=4),
    st.lists(containers(), max_size=4),
)


def _template(regular: list[tuple[JSON, dict[str, Decimal]]], init: list[tuple[JSON, dict[str, Decimal]]]) -> JSON:
    plain = [{k: v for k, v in ct.items() if k != "restartPolicy"} for ct, _ in regular]
    return pod(plain, [ct for ct, _ in init])


@given(specs)
def test_the_pod_requests_at_least_what_any_one_container_requests(
    spec: tuple[list[tuple[JSON, dict[str, Decimal]]], list[tuple[JSON, dict[str, Decimal]]]],
) -> None:
    regular, init = spec
    total = pod_requests(_template(regular, init))
    for _, asked in regular + init:
        for name, qty in asked.items():
            assert total[name] >= qty


@given(specs, containers(), st.sampled_from(["container", "init"]), st.integers(0, 4))
def test_adding_a_container_never_lowers_the_pod_request(
    spec: tuple[list[tuple[JSON, dict[str, Decimal]]], list[tuple[JSON, dict[str, Decimal]]]],
    extra: tuple[JSON, dict[str, Decimal]],
    where: str,
    at: int,
) -> None:
    regular, init = spec
    before = pod_requests(_template(regular, init))
    if where == "container":
        regular = [*regular[:at], extra, *regular[at:]]
    else:
        init = [*init[:at], extra, *init[at:]]
    after = pod_requests(_template(regular, init))
    for name, qty in before.items():
        assert after[name] >= qty


@given(st.lists(containers(), min_size=1, max_size=4), st.integers(0, 5000))
def test_without_init_containers_the_request_is_the_sum_plus_overhead(
    regular: list[tuple[JSON, dict[str, Decimal]]], overhead_millis: int
) -> None:
    expected: dict[str, Decimal] = {}
    for _, asked in regular:
        for name, qty in asked.items():
            expected[name] = expected.get(name, Decimal(0)) + qty
    expected["cpu"] = expected.get("cpu", Decimal(0)) + Decimal(overhead_millis) / 1000
    template = _template(regular, [])
    template["spec"]["overhead"] = {"cpu": f"{overhead_millis}m"}
    assert pod_requests(template) == expected
