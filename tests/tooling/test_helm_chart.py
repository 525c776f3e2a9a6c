"""The Helm chart (``charts/trainer``) renders what ``config/`` renders.

For every gang scheduler, ``helm template`` of the chart (release ``trainer`` in ``trainer-system``,
``namespace.create=true``, ``--include-crds``) is compared with ``kubectl kustomize`` of the matching
``config/`` directory: the same (kind, name, namespace) objects, the same RBAC rules, and every
object equal once the labels are set aside (Helm's labels, and ``app.kubernetes.io/instance`` in the
selectors). The chart's CRDs and the rule files it reads are verbatim copies of ``config/``'s
(``make chart`` refreshes them). Then the values: the gang scheduler, replicas, webhook, metrics,
resources and image change what they should and nothing else; ``helm lint --strict`` passes. The
webhook configurations are the code's (:func:`trainer.webhook.server.configurations`), without caBundle.

helm and kubectl are the ones ``localcluster/build.sh`` builds (versions in ``localcluster/versions.env``).
"""

from __future__ import annotations

import copy
import functools
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from localcluster.binaries import ensure
from localcluster.operator_sa import OVERLAYS
from trainer.framework.permissions import policy_rules
from trainer.jobs.gang import SCHEDULERS
from trainer.render import rbac
from trainer.webhook import server as webhook

pytestmark = pytest.mark.builds("helm")

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "trainer"
CONFIG = ROOT / "config"
NAMESPACE = "trainer-system"
INSTANCE = "app.kubernetes.io/instance"

Doc = dict[str, Any]
Key = tuple[str, str, str]


@functools.cache
def tools() -> dict[str, Path]:
    """helm and kubectl, built by ``localcluster/build.sh`` on first use."""
    return ensure("helm", "kubectl")


def run(*args: str) -> str:
    """Run a command; on failure the assertion shows its stderr."""
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"{' '.join(args)} exited {proc.returncode}:\n{proc.stderr}{proc.stdout}"
    return proc.stdout


def docs(text: str) -> list[Doc]:
    """The documents of a YAML stream, read by libyaml's parser (PyYAML's ``CSafeLoader``): the same
    documents as ``yaml.safe_load_all``, in 0.11 s against 0.96 s for the chart's render (313 KiB)."""
    return [doc for doc in yaml.load_all(text, Loader=yaml.CSafeLoader) if doc]


def helm_template(*sets: str, release: str = "trainer") -> list[Doc]:
    """``helm template`` of the chart, with ``--set`` for each of ``sets``."""
    args = [str(tools()["helm"]), "template", release, str(CHART), "--namespace", NAMESPACE, "--include-crds"]
    for value in sets:
        args += ["--set", value]
    return docs(run(*args))


@functools.cache
def chart(gang: str) -> tuple[Doc, ...]:
    """The chart as it stands in for ``config/<OVERLAYS[gang]>``."""
    return tuple(helm_template(f"gangScheduler={gang}", "namespace.create=true"))


@functools.cache
def kustomize(gang: str) -> tuple[Doc, ...]:
    return tuple(docs(run(str(tools()["kubectl"]), "kustomize", str(CONFIG / OVERLAYS[gang]))))


def key(doc: Doc) -> Key:
    return doc["kind"], doc["metadata"]["name"], doc["metadata"].get("namespace", "")


def by_key(objects: tuple[Doc, ...] | list[Doc]) -> dict[Key, Doc]:
    out = {key(doc): doc for doc in objects}
    assert len(out) == len(objects), "two objects of the same kind, name and namespace"
    return out


def one(objects: tuple[Doc, ...] | list[Doc], kind: str) -> Doc:
    found = [doc for doc in objects if doc["kind"] == kind]
    assert len(found) == 1, f"{len(found)} {kind}s"
    return found[0]


def without_labels(doc: Doc) -> Doc:
    """``doc`` without its labels, and without the release's instance label in its selectors."""
    doc = copy.deepcopy(doc)
    doc["metadata"].pop("labels", None)
    spec = doc.get("spec", {})
    if doc["kind"] == "Service":
        spec.get("selector", {}).pop(INSTANCE, None)
    if doc["kind"] == "Deployment":
        spec["selector"]["matchLabels"].pop(INSTANCE, None)
        spec["template"]["metadata"]["labels"].pop(INSTANCE, None)
    return doc


def container(objects: tuple[Doc, ...] | list[Doc]) -> Doc:
    c: Doc = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    return c


def test_every_gang_scheduler_of_the_code_has_a_config_directory() -> None:
    assert set(OVERLAYS) == set(SCHEDULERS)
    assert all((CONFIG / d / "kustomization.yaml").is_file() for d in OVERLAYS.values())


def test_helm_lint_strict() -> None:
    helm = str(tools()["helm"])
    run(helm, "lint", "--strict", str(CHART))
    for gang in OVERLAYS:
        run(helm, "lint", "--strict", str(CHART), "--namespace", NAMESPACE, "--set", f"gangScheduler={gang}")
    run(helm, "lint", "--strict", str(CHART), "--set", "webhook.enabled=false,metrics.enabled=false,replicas=0")
    monitoring = "serviceMonitor.enabled=true,prometheusRule.enabled=true,grafanaDashboard.enabled=true"
    run(helm, "lint", "--strict", str(CHART), "--set", f"{monitoring},metrics.secure=true")


def test_crds_are_config_crds_byte_for_byte() -> None:
    bases = CONFIG / "crd" / "bases"
    config = {p.name: p.read_bytes() for p in bases.glob("*.yaml")}
    chart_crds = {p.name: p.read_bytes() for p in (CHART / "crds").iterdir()}
    assert sorted(chart_crds) == sorted(config), "charts/trainer/crds differs from config/crd/bases: run `make chart`"
    stale = [name for name in config if chart_crds[name] != config[name]]
    assert not stale, f"stale in charts/trainer/crds: {stale}: run `make chart`"


def test_rbac_files_are_config_files_byte_for_byte() -> None:
    """The rules the chart reads (``files/config/``) are the files ``python -m trainer.render.rbac`` writes."""
    files = CHART / "files" / "config"
    generated = {path.relative_to(CONFIG): text for path, text in rbac.files().items()}
    copied = {p.relative_to(files) for p in files.rglob("*") if p.is_file() and p.parent.name != "prometheus"}
    assert copied == set(generated), "charts/trainer/files/config differs from config/: run `make chart`"
    stale = [
        str(p)
        for p in sorted(generated)
        if (files / p).read_bytes() != (CONFIG / p).read_bytes() or (files / p).read_text() != generated[p]
    ]
    assert not stale, f"stale in charts/trainer/files/config: {stale}: run `make rbac`"


def test_prometheus_files_are_config_files_byte_for_byte() -> None:
    """The alerting rules and the dashboard the chart reads are ``config/prometheus``'s (not its rules test)."""
    copied = CHART / "files" / "config" / "prometheus"
    assert sorted(p.name for p in copied.iterdir()) == ["dashboard.json", "rules.yaml"], "run `make chart`"
    stale = [p.name for p in copied.iterdir() if p.read_bytes() != (CONFIG / "prometheus" / p.name).read_bytes()]
    assert not stale, f"stale in charts/trainer/files/config/prometheus: {stale}: run `make chart`"


@pytest.mark.parametrize("gang", OVERLAYS)
def test_same_objects_as_config(gang: str) -> None:
    assert sorted(by_key(chart(gang))) == sorted(by_key(kustomize(gang)))


@pytest.mark.parametrize("gang", OVERLAYS)
def test_same_rbac_as_config(gang: str) -> None:
    ours, theirs = by_key(chart(gang)), by_key(kustomize(gang))
    roles = [k for k in theirs if k[0] in ("Role", "ClusterRole")]
    assert {k[0] for k in roles} == {"Role", "ClusterRole"}
    for k in roles:
        assert ours[k]["rules"] == theirs[k]["rules"], k
    for k in (k for k in theirs if k[0] in ("RoleBinding", "ClusterRoleBinding")):
        assert (ours[k]["roleRef"], ours[k]["subjects"]) == (theirs[k]["roleRef"], theirs[k]["subjects"]), k
    cluster_role = ours[("ClusterRole", rbac.CLUSTER_ROLE, "")]
    assert cluster_role["rules"] == [*rbac.cluster_role()["rules"], *policy_rules(rbac.gang_only(gang))]


@pytest.mark.parametrize("gang", OVERLAYS)
def test_deployment_args_and_ports_as_config(gang: str) -> None:
    ours, theirs = container(chart(gang)), container(kustomize(gang))
    assert ours["args"] == theirs["args"]
    assert f"--gang-scheduler-name={gang}" in ours["args"]
    assert ours["ports"] == theirs["ports"]


@pytest.mark.parametrize("gang", OVERLAYS)
def test_every_object_equal_but_labels(gang: str) -> None:
    ours, theirs = by_key(chart(gang)), by_key(kustomize(gang))
    for k, doc in theirs.items():
        assert without_labels(ours[k]) == without_labels(doc), k
        if doc["kind"] != "CustomResourceDefinition":  # the chart's are config/crd/bases' files as they are
            assert doc["metadata"]["labels"].items() <= ours[k]["metadata"]["labels"].items(), k


def test_selectors_match_the_pods() -> None:
    objects = chart("none")
    pod_labels = one(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert one(objects, "Deployment")["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    for svc in (doc for doc in objects if doc["kind"] == "Service"):
        assert svc["spec"]["selector"].items() <= pod_labels.items(), svc["metadata"]["name"]
        assert svc["spec"]["selector"][INSTANCE] == "trainer"


def test_without_namespace_create_the_release_namespace_is_not_rendered() -> None:
    objects = helm_template()
    assert "Namespace" not in {doc["kind"] for doc in objects}
    assert {key(doc) for doc in objects} == set(by_key(chart("none"))) - {("Namespace", NAMESPACE, "")}


def test_replicas_image_resources_and_extra_args() -> None:
    objects = helm_template(
        "replicas=0",
        "image.repository=registry.example/trainer",
        "image.tag=9.9.9",
        "image.pullPolicy=Always",
        "resources.requests.cpu=2",
        "resources.limits.memory=2Gi",
        "extraArgs={--max-concurrent-reconciles=8}",
    )
    assert one(objects, "Deployment")["spec"]["replicas"] == 0
    # Available 5 s after ready: the endpoint is routed by then (the preStop sleep's other half).
    assert one(objects, "Deployment")["spec"]["minReadySeconds"] == 5
    c = container(objects)
    assert (c["image"], c["imagePullPolicy"]) == ("registry.example/trainer:9.9.9", "Always")
    assert c["resources"] == {"requests": {"cpu": 2, "memory": "192Mi"}, "limits": {"cpu": "1", "memory": "2Gi"}}
    assert c["args"] == [*container(chart("none"))["args"], "--max-concurrent-reconciles=8"]
    assert container(chart("none"))["image"] == "trainer-operator:0.1.0"


def test_webhook_off_and_on_another_port() -> None:
    default = container(chart("none"))
    off = helm_template("webhook.enabled=false")
    c = container(off)
    status = ("--webhook-", "--status-server-", "--training-metrics")
    assert not [a for a in c["args"] if a.startswith(status)]
    assert [a for a in default["args"] if not a.startswith(status)] == c["args"]
    assert not {"webhook", "status"} & {p["name"] for p in c["ports"]}, "the status server goes with the Service"
    assert ("Service", "trainer-webhook-service", NAMESPACE) not in by_key(off)
    assert not {doc["kind"] for doc in off} & {"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"}
    assert ("Role", "trainer-webhook-certificates", NAMESPACE) not in by_key(off)

    moved = container(helm_template("webhook.port=9444"))
    assert "--webhook-port=9444" in moved["args"]
    assert {"name": "webhook", "containerPort": 9444, "protocol": "TCP"} in moved["ports"]
    no_status = container(helm_template("statusServer.enabled=false"))
    assert "--webhook-port=9443" in no_status["args"]
    assert not [a for a in no_status["args"] if a.startswith(("--status-server-", "--training-metrics"))]


def test_training_metrics_follow_the_status_server_values() -> None:
    default = container(chart("none"))["args"]
    assert not [a for a in default if a.startswith("--training-metrics")], "the flags' defaults, as config/ has them"
    off = container(
        helm_template("statusServer.trainingMetrics=false", "statusServer.trainingMetricsMaxSeries=2000000")
    )
    assert {"--training-metrics=false", "--training-metrics-max-series=2000000"} <= set(off["args"])


def test_metrics_off_and_on_another_port() -> None:
    off = helm_template("metrics.enabled=false")
    c = container(off)
    assert "--metrics-bind-address=0" in c["args"]
    assert "metrics" not in {p["name"] for p in c["ports"]}
    assert ("Service", "trainer-operator-metrics", NAMESPACE) not in by_key(off)

    moved = helm_template("metrics.port=9090")
    assert "--metrics-bind-address=:9090" in container(moved)["args"]
    svc = by_key(moved)[("Service", "trainer-operator-metrics", NAMESPACE)]
    assert svc["spec"]["ports"] == [{"name": "http-metrics", "port": 9090, "targetPort": "metrics", "protocol": "TCP"}]


def test_metrics_secure_is_off_by_default_and_on_serves_https_to_the_metrics_reader() -> None:
    """kubeflow/trainer#3912: metrics.secure adds --metrics-secure (the Service's name for the
    certificate) and a ClusterRole granting get on /metrics, to bind to the scraper."""
    assert not any(a.startswith("--metrics-secure") for a in container(chart("none"))["args"])
    assert "ClusterRole" not in {k for k, _name, _ns in by_key(helm_template()) if _name.endswith("metrics-reader")}
    for webhook_on in ("true", "false"):
        objects = helm_template("metrics.secure=true", f"webhook.enabled={webhook_on}")
        args = container(objects)["args"]
        assert {"--metrics-secure=true", "--metrics-service=trainer-operator-metrics"} <= set(args)
        assert args.count("--webhook-namespace=$(POD_NAMESPACE)") == 1
        reader = by_key(objects)[("ClusterRole", "trainer-metrics-reader", "")]
        assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    assert (
        "--metrics-secure=true" not in container(helm_template("metrics.secure=true", "metrics.enabled=false"))["args"]
    )


def test_leader_election_off_drops_the_flag_and_the_lease_role() -> None:
    objects = helm_template("leaderElection.enabled=false")
    assert "--leader-elect" not in container(objects)["args"]
    roles = {(doc["kind"], doc["metadata"]["name"]) for doc in objects if doc["kind"] in ("Role", "RoleBinding")}
    assert roles == {
        ("Role", "trainer-webhook-certificates"),
        ("RoleBinding", "trainer-webhook-certificates"),
        ("Role", "kubeflow-trainer-public"),
        ("RoleBinding", "kubeflow-trainer-public"),
    }


def test_names_follow_the_release() -> None:
    objects = helm_template(release="team-a")
    names = {(doc["kind"], doc["metadata"]["name"]) for doc in objects if doc["kind"] != "CustomResourceDefinition"}
    assert names == {
        ("ServiceAccount", "team-a-trainer-operator"),
        ("ClusterRole", "team-a-trainer-operator"),
        ("ClusterRoleBinding", "team-a-trainer-operator"),
        ("Role", "team-a-trainer-leader-election"),
        ("RoleBinding", "team-a-trainer-leader-election"),
        ("Role", "team-a-trainer-webhook-certificates"),
        ("RoleBinding", "team-a-trainer-webhook-certificates"),
        ("Service", "team-a-trainer-operator-metrics"),
        ("Service", "team-a-trainer-webhook-service"),
        ("Deployment", "team-a-trainer-operator"),
        # The one name the kubeflow SDK asks for, in the release namespace.
        ("ConfigMap", "kubeflow-trainer-public"),
        ("Role", "kubeflow-trainer-public"),
        ("RoleBinding", "kubeflow-trainer-public"),
        # One per cluster whatever the release, like the CRDs they guard (the ClusterRole names them).
        ("ValidatingWebhookConfiguration", webhook.CONFIG_NAME),
        ("MutatingWebhookConfiguration", webhook.CONFIG_NAME),
    }
    assert "--webhook-service=team-a-trainer-webhook-service" in container(objects)["args"]
    for config in (doc for doc in objects if doc["kind"].endswith("WebhookConfiguration")):
        services = {
            (h["clientConfig"]["service"]["namespace"], h["clientConfig"]["service"]["name"])
            for h in config["webhooks"]
        }
        assert services == {(NAMESPACE, "team-a-trainer-webhook-service")}
    binding = one(objects, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == "team-a-trainer-operator"
    subject = {"kind": "ServiceAccount", "name": "team-a-trainer-operator", "namespace": NAMESPACE}
    assert binding["subjects"] == [subject]


def test_operator_name_names_the_deployment_its_service_account_and_cluster_role_only() -> None:
    objects = helm_template("operatorName=kubeflow-trainer-controller-manager", release="team-a")
    named = {(doc["kind"], doc["metadata"]["name"]) for doc in objects}
    for kind in ("Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"):
        assert (kind, "kubeflow-trainer-controller-manager") in named, kind
    assert ("Role", "team-a-trainer-leader-election") in named  # the rest still follows the prefix
    assert ("Service", "team-a-trainer-webhook-service") in named
    deployment = one(objects, "Deployment")
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "kubeflow-trainer-controller-manager"
    for binding in (doc for doc in objects if doc["kind"] in ("ClusterRoleBinding", "RoleBinding")):
        if binding["metadata"]["name"] != "kubeflow-trainer-public":
            assert binding["subjects"][0]["name"] == "kubeflow-trainer-controller-manager", binding["metadata"]


def test_values_outside_the_schema_are_refused() -> None:
    helm = str(tools()["helm"])
    bad_values = ("gangScheduler=yunikorn", "replicas=-1", "webhook.port=0", "logFormat=xml", "unknownValue=1")
    for bad in (*bad_values, "operatorName=Not_A_Name"):
        proc = subprocess.run(
            [helm, "template", "trainer", str(CHART), "--set", bad], capture_output=True, text=True, check=False
        )
        assert proc.returncode != 0, bad
        assert "schema" in proc.stderr, (bad, proc.stderr)


def test_the_webhook_configurations_are_the_codes_without_ca_bundle() -> None:
    """The chart's (and config/'s, equal by the tests above) configurations are
    :func:`trainer.webhook.server.configurations`, calling the release's Service: the operator only
    patches their caBundle, which neither sets (so an upgrade or a re-apply keeps the patched one)."""
    objects = chart("none")
    for expected in webhook.configurations(namespace=NAMESPACE, service="trainer-webhook-service"):
        ours = by_key(objects)[(expected["kind"], webhook.CONFIG_NAME, "")]
        assert {k: v for k, v in ours.items() if k != "metadata"} == {
            k: v for k, v in expected.items() if k != "metadata"
        }
        assert all("caBundle" not in h["clientConfig"] for h in ours["webhooks"])


def test_the_public_configmap_tells_the_sdk_the_trainer_version_everyone_may_read() -> None:
    """kubeflow/trainer ``manifests/overlays/manager/kustomization.yaml``: ConfigMap
    ``kubeflow-trainer-public``, key ``kubeflow_trainer_version``, in the install namespace; the value is
    the upstream release whose API this operator serves (``UPSTREAM_TRAINER_VERSION``)."""
    served = next(
        line.split("=", 1)[1].strip()
        for line in (ROOT / "localcluster" / "versions.env").read_text().splitlines()
        if line.startswith("UPSTREAM_TRAINER_VERSION=")
    )
    objects = by_key(helm_template())
    cm = objects[("ConfigMap", "kubeflow-trainer-public", NAMESPACE)]
    assert cm["data"] == {"kubeflow_trainer_version": served}
    role = objects[("Role", "kubeflow-trainer-public", NAMESPACE)]
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["kubeflow-trainer-public"],
            "verbs": ["get", "list", "watch"],
        }
    ]
    binding = objects[("RoleBinding", "kubeflow-trainer-public", NAMESPACE)]
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}
    ]
    assert by_key(helm_template("publicConfigMap.trainerVersion=v2.4.0"))[key(cm)]["data"] == {
        "kubeflow_trainer_version": "v2.4.0"
    }
    off = {key(doc) for doc in helm_template("publicConfigMap.enabled=false")}
    assert not {key(cm), key(role), key(binding)} & off


MONITORING = {"serviceMonitor": "ServiceMonitor", "prometheusRule": "PrometheusRule", "grafanaDashboard": "ConfigMap"}


def test_monitoring_objects_are_off_by_default_and_each_value_renders_its_own() -> None:
    default = by_key(helm_template())
    assert not {k for k in default if k[0] in ("ServiceMonitor", "PrometheusRule")}
    assert ("ConfigMap", "trainer-dashboard", NAMESPACE) not in default
    names = {
        "ServiceMonitor": "trainer-operator",
        "PrometheusRule": "trainer-operator",
        "ConfigMap": "trainer-dashboard",
    }
    for value, kind in MONITORING.items():
        added = set(by_key(helm_template(f"{value}.enabled=true"))) - set(default)
        assert added == {(kind, names[kind], NAMESPACE)}, value
    assert not {k[0] for k in by_key(helm_template("serviceMonitor.enabled=true", "metrics.enabled=false"))} & {
        "ServiceMonitor"
    }, "no metrics Service, nothing to scrape"


def test_service_monitor_scrapes_the_metrics_service_as_job_trainer_operator() -> None:
    objects = helm_template("serviceMonitor.enabled=true", "serviceMonitor.labels.release=kube-prometheus-stack")
    monitor, service = (
        one(objects, "ServiceMonitor"),
        by_key(objects)[("Service", "trainer-operator-metrics", NAMESPACE)],
    )
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    webhook_service = by_key(objects)[("Service", "trainer-webhook-service", NAMESPACE)]
    assert not monitor["spec"]["selector"]["matchLabels"].items() <= webhook_service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == service["spec"]["ports"][0]["name"] == "http-metrics"
    assert endpoint["honorLabels"] is True and endpoint["interval"] == "30s"
    assert endpoint["relabelings"] == [{"targetLabel": "job", "replacement": "trainer-operator"}]
    assert "scheme" not in endpoint and "tlsConfig" not in endpoint


def test_service_monitor_under_metrics_secure_sends_its_token_over_https_to_the_certificate_name() -> None:
    """docs/operating.md: HTTPS, Prometheus' ServiceAccount token, the CA of Secret trainer-metrics-certs."""
    (endpoint,) = one(helm_template("serviceMonitor.enabled=true", "metrics.secure=true"), "ServiceMonitor")["spec"][
        "endpoints"
    ]
    assert endpoint["scheme"] == "https"
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert endpoint["tlsConfig"] == {
        "ca": {"secret": {"name": "trainer-metrics-certs", "key": "ca.crt"}},
        "serverName": f"trainer-operator-metrics.{NAMESPACE}.svc",
    }


def test_prometheus_rule_is_the_rules_file_with_the_stuck_thresholds_of_the_values() -> None:
    source = yaml.safe_load((CONFIG / "prometheus" / "rules.yaml").read_text())
    default = one(helm_template("prometheusRule.enabled=true"), "PrometheusRule")
    assert default["spec"]["groups"] == source["groups"]
    changed = one(
        helm_template(
            "prometheusRule.enabled=true",
            "prometheusRule.jobsStuckCreatedFor=45m",
            "prometheusRule.jobsStuckSuspendedFor=1d",
            "prometheusRule.labels.role=alert-rules",
        ),
        "PrometheusRule",
    )
    assert changed["metadata"]["labels"]["role"] == "alert-rules"
    fors = {r["alert"]: r.get("for") for g in changed["spec"]["groups"] for r in g["rules"]}
    want = {r["alert"]: r.get("for") for g in source["groups"] for r in g["rules"]}
    want |= {"TrainerJobsStuckCreated": "45m", "TrainerJobsStuckSuspended": "1d"}
    assert fors == want


def test_dashboard_configmap_carries_the_dashboard_json_and_the_sidecar_label() -> None:
    default = by_key(helm_template("grafanaDashboard.enabled=true"))[("ConfigMap", "trainer-dashboard", NAMESPACE)]
    assert default["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert default["data"] == {"trainer.json": (CONFIG / "prometheus" / "dashboard.json").read_text().rstrip("\n")}
    other = helm_template(
        "grafanaDashboard.enabled=true",
        "grafanaDashboard.labels.grafana_dashboard=null",
        "grafanaDashboard.labels.dashboards=trainer",
        "grafanaDashboard.annotations.grafana_folder=Trainer",
        "grafanaDashboard.namespace=monitoring",
    )
    cm = by_key(other)[("ConfigMap", "trainer-dashboard", "monitoring")]
    assert "grafana_dashboard" not in cm["metadata"]["labels"] and cm["metadata"]["labels"]["dashboards"] == "trainer"
    assert cm["metadata"]["annotations"] == {"grafana_folder": "Trainer"}
