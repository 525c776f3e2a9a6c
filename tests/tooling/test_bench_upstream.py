"""The upstream side of the bench (``bench.upstream``: build check, configuration, start-up commands,
the metrics reader, the owner of a child) and the side-by-side figures of ``bench.burst`` (create to
children, the tail, gauges, ours / upstream / raw). No timings are asserted."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from bench.burst import (
    REST_METRIC,
    SIDE_FIGURES,
    create_to_children,
    gauge_sum,
    parse_args,
    parse_reconciles,
    parse_requests,
    pods_needed,
    raw_values,
    read_delta,
    side_by_side,
    side_values,
    tail,
)
from bench.upstream import (
    BUILT,
    JOBSET_BINARY,
    METRICS_READER,
    TRAINER_BINARY,
    TRAINER_CONTROLLER,
    WEBHOOK_COLLECTIONS,
    Upstream,
    jobset_config,
    jobset_version,
    metrics_reader_objects,
    missing,
    trainer_config,
    upstream_dir,
    upstream_owner,
    webhook_configurations,
)
from localcluster.binaries import VERSIONS_FILE
from localcluster.pki import ensure_pki
from trainer.framework.json_codec import JSON

# --- the build -----------------------------------------------------------------------------------------


def test_upstream_dir_is_the_versioned_directory_of_the_pinned_version(tmp_path: Path) -> None:
    assert upstream_dir({"UPSTREAM_TRAINER_VERSION": "v2.3.0"}, tmp_path) == tmp_path / "bin" / "upstream-v2.3.0"
    with pytest.raises(KeyError):
        upstream_dir({}, tmp_path)


def test_versions_env_pins_an_upstream_trainer_version() -> None:
    assert "UPSTREAM_TRAINER_VERSION=v2." in VERSIONS_FILE.read_text()


def test_missing_names_what_the_build_left_out_and_wants_executable_binaries(tmp_path: Path) -> None:
    assert missing(tmp_path) == list(BUILT)
    for rel in BUILT:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    assert missing(tmp_path) == [TRAINER_BINARY, JOBSET_BINARY]  # files, not executables yet
    for rel in (TRAINER_BINARY, JOBSET_BINARY):
        os.chmod(tmp_path / rel, 0o755)
    assert missing(tmp_path) == []
    (tmp_path / "runtimes" / "torch_distributed.yaml").unlink()
    assert missing(tmp_path) == ["runtimes/torch_distributed.yaml"]


def test_jobset_version_reads_the_file_the_build_writes(tmp_path: Path) -> None:
    assert jobset_version(tmp_path) == "?"
    (tmp_path / "JOBSET_VERSION").write_text("v0.12.0\n")
    assert jobset_version(tmp_path) == "v0.12.0"


# --- configuration and start-up -----------------------------------------------------------------------


def test_trainer_config_keeps_upstream_defaults_and_turns_off_what_needs_a_cluster() -> None:
    cfg = trainer_config(18080, 18081, 19443)
    assert cfg["kind"] == "Configuration" and cfg["apiVersion"] == "config.trainer.kubeflow.org/v1alpha1"
    assert cfg["metrics"] == {"bindAddress": "127.0.0.1:18080", "secureServing": False}
    assert cfg["health"]["healthProbeBindAddress"] == "127.0.0.1:18081"
    assert cfg["webhook"] == {"port": 19443, "host": "127.0.0.1"}
    assert cfg["leaderElection"] == {"leaderElect": False}
    assert cfg["certManagement"] == {"enable": False}
    assert cfg["clientConnection"] == {"qps": 50, "burst": 100}
    assert cfg["controller"]["groupKindConcurrency"]["TrainJob.trainer.kubeflow.org"] == 5


def test_jobset_config_serves_its_webhook_from_the_given_certificates(tmp_path: Path) -> None:
    cfg = jobset_config(1, 2, 3, tmp_path)
    assert cfg["apiVersion"] == "config.jobset.x-k8s.io/v1alpha1"
    assert cfg["webhook"] == {"port": 3, "host": "127.0.0.1", "certDir": str(tmp_path)}
    assert cfg["metrics"] == {"bindAddress": "127.0.0.1:1"}
    assert cfg["health"] == {"healthProbeBindAddress": "127.0.0.1:2"}
    assert cfg["internalCertManagement"] == {"enable": False}
    assert cfg["leaderElection"] == {"leaderElect": False}


def test_upstream_writes_configs_and_certificates_and_commands_both_processes(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path / "pki")
    kubeconfig = tmp_path / "kubeconfig.yaml"
    up = Upstream(tmp_path / "bin", kubeconfig, tmp_path, pki)
    trainer_certs = tmp_path / "trainer-tmp" / "k8s-webhook-server" / "serving-certs"
    for d in (trainer_certs, tmp_path / "jobset-certs"):
        assert (d / "tls.crt").is_file() and (d / "tls.key").is_file()
    trainer_cfg = yaml.safe_load(up.trainer_conf.read_text())
    assert trainer_cfg["webhook"]["port"] == up.trainer_ports["webhook"]
    assert trainer_cfg["metrics"]["bindAddress"] == f"127.0.0.1:{up.trainer_ports['metrics']}"
    jobset_cfg = yaml.safe_load(up.jobset_conf.read_text())
    assert jobset_cfg["webhook"]["certDir"] == str(tmp_path / "jobset-certs")
    ports = [*up.trainer_ports.values(), *up.jobset_ports.values()]
    assert len(set(ports)) == 6
    cmds = up.commands()
    argv, env = cmds["trainer"]
    assert argv == [str(tmp_path / "bin" / TRAINER_BINARY), f"--config={up.trainer_conf}"]
    # controller-runtime reads the webhook certificate from $TMPDIR/k8s-webhook-server/serving-certs
    assert env == {"KUBECONFIG": str(kubeconfig), "TMPDIR": str(tmp_path / "trainer-tmp")}
    argv, env = cmds["jobset"]
    assert argv[0] == str(tmp_path / "bin" / JOBSET_BINARY) and f"--kubeconfig={kubeconfig}" in argv
    assert f"--config={up.jobset_conf}" in argv and env == {"KUBECONFIG": str(kubeconfig)}
    with pytest.raises(RuntimeError, match="not started"):
        _ = up.pid


def test_metrics_reader_may_get_metrics_only() -> None:
    objs = metrics_reader_objects("default")
    assert [o["kind"] for _, o in objs] == ["ServiceAccount", "ClusterRole", "ClusterRoleBinding"]
    assert all(o["metadata"]["name"] == METRICS_READER for _, o in objs)
    assert objs[1][1]["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    assert objs[2][1]["subjects"] == [{"kind": "ServiceAccount", "name": METRICS_READER, "namespace": "default"}]
    assert objs[0][0] == "/api/v1/namespaces/default/serviceaccounts"


def ref(kind: str, api_version: str, name: str) -> JSON:
    return {"metadata": {"ownerReferences": [{"kind": kind, "apiVersion": api_version, "name": name, "uid": "u"}]}}


def test_upstream_owner_is_the_trainjob_or_the_jobset_of_the_same_name() -> None:
    assert upstream_owner(ref("TrainJob", "trainer.kubeflow.org/v1alpha1", "burst-3")) == "burst-3"
    assert upstream_owner(ref("JobSet", "jobset.x-k8s.io/v1alpha2", "burst-4")) == "burst-4"
    assert upstream_owner(ref("JobSet", "other.io/v1", "burst-4")) is None
    assert upstream_owner(ref("Pod", "v1", "p")) is None
    assert upstream_owner({"metadata": {}}) is None


# --- metrics of the upstream processes ---------------------------------------------------------------


def client_go_text(methods: list[tuple[str, str]], controller: str, reconciles: int, depth: float) -> str:
    """A controller-runtime process's text: client-go's requests, reconciles and a queue depth."""
    r = CollectorRegistry()
    rest = Counter("rest_client_requests", "requests", ["code", "host", "method"], registry=r)
    for method, code in methods:
        rest.labels(code, "127.0.0.1:6443", method).inc()
    rec = Counter("controller_runtime_reconcile", "reconciles", ["controller", "result"], registry=r)
    rec.labels(controller, "success").inc(reconciles)
    Gauge("workqueue_depth", "depth", ["name"], registry=r).labels(controller).set(depth)
    Gauge("controller_runtime_active_workers", "busy", ["controller"], registry=r).labels(controller).set(1)
    return generate_latest(r).decode()


def test_upstream_texts_give_writes_by_method_reconciles_and_queue() -> None:
    trainer = client_go_text([("POST", "201"), ("PUT", "200"), ("GET", "200")], TRAINER_CONTROLLER, 3, 2)
    jobset = client_go_text([("POST", "201"), ("POST", "201")], "jobset", 7, 0)
    rows = parse_requests(trainer, REST_METRIC)
    assert rows[("POST", "*", "201")] == 1 and rows[("GET", "*", "200")] == 1
    assert parse_requests(jobset, REST_METRIC)[("POST", "*", "201")] == 2
    assert parse_reconciles(trainer, TRAINER_CONTROLLER) == 3 and parse_reconciles(jobset, TRAINER_CONTROLLER) == 0
    assert gauge_sum(trainer, "workqueue_depth", "name") == 2
    assert gauge_sum(trainer, "workqueue_depth", "name", ["other"]) == 0
    assert gauge_sum(jobset, "controller_runtime_active_workers", "controller", ["jobset"]) == 1


# --- create to children and the tail ----------------------------------------------------------------


def test_create_to_children_takes_the_last_child_of_every_kind() -> None:
    created = {"a": 10.0, "b": 11.0, "c": 12.0}
    jobs = {"a": 10.5, "b": 13.0}
    services = {"a": 10.75, "b": 12.0, "x": 1.0}
    assert create_to_children(created, [jobs, services]) == [0.75, 2.0]
    assert create_to_children({"a": 10.0}, [{"a": 9.0}]) == [0.0]  # seen before the create returned


def test_tail_gives_median_p99_and_max() -> None:
    assert tail([]) is None
    assert tail([2.0]) == {"median": 2.0, "p99": 2.0, "max": 2.0}
    t = tail([float(i) for i in range(1, 101)])
    assert t is not None and t["median"] == 50.5 and t["max"] == 100.0 and 99.0 <= t["p99"] <= 100.0


# --- side by side ---------------------------------------------------------------------------------------


def operator_run(children: float, cpu: float, writes: float, p99: float, median: float) -> JSON:
    return {
        "keep": None,
        "operator": {
            "children_seconds": children,
            "complete_seconds": None,
            "cpu_ms_per_trainjob": cpu,
            "writes_per_trainjob_total": writes,
            "reconciles_per_trainjob": 1.0,
            "rss_mib": {"peak": 100.0},
            "apiserver_cpu_seconds": 5.0,
            "create_to_children": {"median": median, "p99": p99, "max": p99},
        },
    }


def test_side_by_side_gives_ours_over_upstream_and_ours_over_raw() -> None:
    ours = operator_run(4.0, 2.0, 3.0, 1.5, 0.5)
    ours["baseline"] = {
        "seconds": 3.2,
        "writes_per_trainjob": 3.0,
        "apiserver_cpu_seconds": 4.0,
        "create_to_children": {"median": 0.25, "p99": 0.5, "max": 0.6},
    }
    rows = side_by_side(ours, operator_run(10.0, 8.0, 12.0, 6.0, 3.0))
    assert rows["children_seconds"] == {
        "ours": 4.0,
        "upstream": 10.0,
        "raw": 3.2,
        "ours/upstream": 0.4,
        "ours/raw": 1.25,
    }
    assert rows["cpu_ms_per_trainjob"]["ours/upstream"] == 0.25 and rows["cpu_ms_per_trainjob"]["raw"] is None
    assert rows["writes_per_trainjob"]["ours/raw"] == 1.0
    assert rows["p99_over_median"]["ours"] == 3.0 and rows["p99_over_median"]["upstream"] == 2.0
    assert "ready_seconds" not in rows and "complete_seconds" not in rows
    assert set(rows) <= {key for key, _ in SIDE_FIGURES}


def test_side_values_of_a_restart_and_raw_values_of_no_baseline() -> None:
    run: JSON = {
        "keep": None,
        "restart": {
            "ready_seconds": 2.0,
            "queue_empty_seconds": 20.0,
            "writes": 0,
            "cpu_seconds_to_empty": 9.0,
            "rss_peak_mib": 300.0,
            "apiserver_cpu_seconds": 4.0,
        },
    }
    values = side_values(run)
    assert (values["ready_seconds"], values["queue_empty_seconds"], values["restart_writes"]) == (2.0, 20.0, 0)
    assert values["restart_cpu_seconds"] == 9.0 and values["children_seconds"] is None
    assert all(v is None for v in raw_values(None).values())
    rows = side_by_side(run, None)
    assert rows["restart_writes"] == {"ours": 0, "upstream": None, "raw": None, "ours/upstream": None, "ours/raw": None}


def test_modes_and_pods_needed() -> None:
    assert pods_needed(parse_args(["--n", "300"])) == 600
    assert pods_needed(parse_args(["--n", "300", "--suspend"])) == 0
    assert pods_needed(parse_args(["--n", "3000", "--keep", "--batch", "1000"])) == 2000
    assert pods_needed(parse_args(["--n", "3000", "--restart"])) == 0
    assert parse_args(["--upstream"]).upstream
    for bad in (["--keep", "--restart"], ["--upstream", "--compare", "HEAD"]):
        with pytest.raises(SystemExit):
            parse_args(bad)


def test_webhook_configurations_call_a_url_with_the_ca_and_carry_the_prefix() -> None:
    def config(kind: str, name: str, hook: str, path: str) -> JSON:
        service = {"name": "webhook-service", "namespace": "system", "path": path}
        webhook = {"name": hook, "clientConfig": {"service": service}, "failurePolicy": "Fail"}
        meta = {"name": name}
        return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": meta, "webhooks": [webhook]}

    text = yaml.safe_dump_all(
        [
            config(
                "MutatingWebhookConfiguration",
                "mutating-webhook-configuration",
                "mjobset.kb.io",
                "/mutate-jobset-x-k8s-io-v1alpha2-jobset",
            ),
            None,
            config(
                "ValidatingWebhookConfiguration", "validating-webhook-configuration", "vpod.kb.io", "/validate--v1-pod"
            ),
        ]
    )
    out = webhook_configurations(text, "https://127.0.0.1:9443/", b"PEM", "jobset-")
    assert [c["metadata"]["name"] for c in out] == [
        "jobset-mutating-webhook-configuration",
        "jobset-validating-webhook-configuration",
    ]
    assert out[0]["webhooks"][0]["clientConfig"] == {
        "url": "https://127.0.0.1:9443/mutate-jobset-x-k8s-io-v1alpha2-jobset",
        "caBundle": "UEVN",
    }
    assert out[0]["webhooks"][0]["failurePolicy"] == "Fail"
    assert out[1]["webhooks"][0]["clientConfig"]["url"] == "https://127.0.0.1:9443/validate--v1-pod"
    assert {c["kind"] for c in out} == set(WEBHOOK_COLLECTIONS)


def test_read_delta_keeps_reads_only_largest_first() -> None:
    before = {("LIST", "jobs", "200"): 1.0, ("GET", "trainjobs", "200"): 2.0}
    after = {
        ("LIST", "jobs", "200"): 4.0,
        ("GET", "trainjobs", "200"): 2.0,
        ("POST", "jobs", "201"): 9.0,
        ("WATCH", "jobs", "200"): 1.0,
    }
    assert read_delta(before, after) == {"LIST jobs": 3.0, "WATCH jobs": 1.0}
