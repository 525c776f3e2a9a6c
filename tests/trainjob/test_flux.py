"""``mlPolicy.flux`` builds what kubeflow/trainer's flux plugin builds (``pkg/runtime/framework/plugins/flux``,
v2.3): the ``node`` pods' installer, volumes, mounts and wrapped command, the entrypoint ConfigMap and the
curve Secret, for upstream's ``flux-distributed`` runtime with upstream's e2e TrainJob and its LAMMPS
example; the expected values are read from upstream's Go and its tests (``flux_test.go``), the curve keys
are those Go's ``crypto/ecdh`` derives for the same uid."""

from __future__ import annotations

import base64
import copy
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import SAMPLES, info, runtime_patch
from trainer.api.trainer_v1alpha1 import ClusterTrainingRuntime, FluxMLPolicySource, TrainJob
from trainer.framework.curve import curve_keypair, z85encode
from trainer.framework.json_codec import JSON
from trainer.framework.merge import find_named
from trainer.trainjob.children import Children, build_children
from trainer.trainjob.policies import policy_of
from trainer.trainjob.policies.flux import (
    FLUX,
    curve_certificate,
    hostlist,
    id_range,
    original_command,
    settings,
)
from trainer.trainjob.policies.flux_scripts import ENTRYPOINT_BODY, INIT_BODY
from trainer.trainjob.spec.shape import replicated_jobs
from trainer.trainjob.validation import runtime_errors, trainjob_errors

RUNTIME: JSON = yaml.safe_load((SAMPLES / "upstream" / "flux-distributed.yaml").read_text())
LAMMPS = ["lmp", "-v", "x", "4", "-v", "y", "4", "-v", "z", "4", "-in", "in.reaxc.hns", "-nocite"]
"""The command of upstream's ``examples/flux/lammps-train-job.yaml``."""


def runtime(edit: Any = None) -> ClusterTrainingRuntime:
    raw = copy.deepcopy(RUNTIME)
    if edit is not None:
        edit(raw)
    return ClusterTrainingRuntime.model_validate(raw)


def trainjob(name: str = "e2e-test-flux", uid: str = "u-1", **trainer: Any) -> TrainJob:
    spec: JSON = {"runtimeRef": {"name": "flux-distributed"}}
    if trainer:
        spec["trainer"] = trainer
    return TrainJob.model_validate({"metadata": {"name": name, "namespace": "ns", "uid": uid}, "spec": spec})


def e2e_trainjob() -> TrainJob:
    """Upstream's e2e It "should create TrainJob with Flux runtime reference" (test/e2e/e2e_test.go)."""
    return trainjob(numNodes=2, image="ubuntu:22.04", command=["flux", "getattr", "rank"])


def built(tj: TrainJob, rt: ClusterTrainingRuntime | None = None) -> Children:
    return build_children(info(tj, rt or runtime()), suspend=False)


def pod(children: Children) -> JSON:
    spec: JSON = children.jobs[0]["spec"]["template"]["spec"]
    return spec


def node(children: Children) -> JSON:
    container = find_named(pod(children)["containers"], "node")
    assert container is not None
    return container


def scripts(children: Children) -> dict[str, str]:
    (cm,) = children.config_maps
    data: dict[str, str] = cm["data"]
    return data


def variables(script: str) -> dict[str, str]:
    """The values a rendered script sets at its top (before its constant body), as bash reads them."""
    body = ENTRYPOINT_BODY if script.endswith(ENTRYPOINT_BODY) else INIT_BODY
    assert script.endswith(body)
    head = script.removesuffix(body)
    names = re.findall(r"^([a-z_]+)=", head, flags=re.MULTILINE)
    shown = subprocess.run(
        ["bash", "-c", head + "".join(f'printf "%s\\0" "${n}"\n' for n in names)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    return dict(zip(names, shown, strict=False))


TJ_OWNER = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "e2e-test-flux", "uid": "u-1"}


def test_the_upstream_runtime_selects_flux_and_is_valid() -> None:
    rt = runtime()
    assert policy_of(rt.spec) is FLUX
    assert rt.spec.ml_policy is not None and rt.spec.ml_policy.flux == FluxMLPolicySource(num_proc_per_node=1)
    assert runtime_errors(rt.spec) == []
    assert trainjob_errors(info(e2e_trainjob(), rt).info) == []


def test_the_node_pods_get_upstreams_installer_volumes_mounts_and_wrapped_command() -> None:
    children = built(e2e_trainjob())
    assert [j["metadata"]["name"] for j in children.jobs] == ["e2e-test-flux-node-0"]
    assert children.jobs[0]["spec"]["parallelism"] == children.jobs[0]["spec"]["completions"] == 2
    spec = pod(children)
    assert spec["initContainers"] == [
        {
            "name": "flux-installer",
            "image": "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy",
            "command": ["/bin/bash", "/etc/flux-config/init.sh"],
            "volumeMounts": [
                {"name": "flux-install", "mountPath": "/mnt/flux"},
                {"name": "e2e-test-flux-flux-entrypoint", "mountPath": "/etc/flux-config", "readOnly": True},
            ],
        }
    ]
    assert spec["volumes"] == [
        {"name": "spack-install", "emptyDir": {}},
        {"name": "flux-install", "emptyDir": {}},
        {
            "name": "e2e-test-flux-flux-entrypoint",
            "configMap": {"name": "e2e-test-flux-flux-entrypoint", "defaultMode": 0o755},
        },
        {"name": "shared-memory", "emptyDir": {"medium": "Memory"}},
        {"name": "flux-curve", "secret": {"secretName": "e2e-test-flux-flux-curve", "defaultMode": 0o400}},
    ]
    assert node(children) == {
        "name": "node",
        "image": "ubuntu:22.04",
        "command": ["/bin/bash", "/etc/flux-config/entrypoint.sh", "flux getattr rank"],
        "volumeMounts": [
            {"name": "flux-install", "mountPath": "/mnt/flux"},
            {"name": "spack-install", "mountPath": "/opt/software"},
            {"name": "e2e-test-flux-flux-entrypoint", "mountPath": "/etc/flux-config", "readOnly": True},
            {"name": "flux-curve", "mountPath": "/curve", "readOnly": True},
            {"name": "shared-memory", "mountPath": "/dev/shm", "readOnly": True},
        ],
    }
    assert spec["subdomain"] == "e2e-test-flux", "the brokers' host names resolve under the TrainJob's name"


def test_the_entrypoint_config_map_and_curve_secret_are_owned_children() -> None:
    children = built(e2e_trainjob())
    (cm,) = children.config_maps
    (secret,) = children.secrets
    expected = ((cm, "ConfigMap", "e2e-test-flux-flux-entrypoint"), (secret, "Secret", "e2e-test-flux-flux-curve"))
    for obj, kind, name in expected:
        assert obj["kind"] == kind and obj["metadata"]["name"] == name and obj["metadata"]["namespace"] == "ns"
        assert obj["metadata"]["ownerReferences"] == [{**TJ_OWNER, "controller": True, "blockOwnerDeletion": True}]
        assert obj["metadata"]["labels"] == {"jobset.sigs.k8s.io/jobset-name": "e2e-test-flux"}
    assert set(cm["data"]) == {"init.sh", "entrypoint.sh"}
    assert set(secret["data"]) == {"curve.cert"}


def test_the_curve_certificate_is_upstreams_for_the_uid() -> None:
    """Keys from Go's ``crypto/ecdh`` X25519 on sha256(uid), Z85-encoded, as upstream's ``buildCurveSecret``."""
    (secret,) = built(e2e_trainjob()).secrets
    assert base64.b64decode(secret["data"]["curve.cert"]).decode() == (
        "#  ZeroMQ CURVE Secret Certificate\n"
        "#  Generated by Kubeflow Trainer\n\n"
        "metadata\n"
        '    name = "e2e-test-flux"\n'
        "curve\n"
        '    public-key = "+4[tRlK7PBptM5<F(hNUEf>KO:YDbp)NU.tl-Ju]"\n'
        '    secret-key = "QdP]n[{5$Z}YzlBp<q#-8h.U$5Di?1+)L?gaYtL#"\n'
    )
    cert = curve_certificate("test-job", "12345-67890")
    assert '    public-key = "=5tz+^nr>fsG0r)APsh9&*hw22n>C@sC.y{pn0q="' in cert
    assert '    secret-key = "9v+V-VmP1<i#7s}ZY#SyyUlHmlYNsC{u@t=@rKRv"' in cert


def test_the_curve_certificate_is_deterministic_per_uid() -> None:
    assert curve_certificate("job", "uid-123") == curve_certificate("job", "uid-123")
    assert curve_certificate("job", "uid-123") != curve_certificate("job", "different-uid")
    again = built(e2e_trainjob()).secrets
    assert again == built(e2e_trainjob()).secrets, "every reconcile applies the same Secret"


def test_z85_is_the_specs_encoding() -> None:
    """ZeroMQ RFC 32's test vector, and upstream's cases (``TestEncodeZ85``)."""
    assert z85encode(bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])) == "HelloWorld"
    assert z85encode(bytes(4)) == "00000"
    assert len(z85encode(bytes(32))) == 40
    with pytest.raises(ValueError, match="multiple of 4"):
        z85encode(b"\x01\x02\x03")


def test_x25519_is_rfc_7748s() -> None:
    """RFC 7748 section 6.1: Alice's key pair; the secret key is kept as given (clamped only when used)."""
    secret = bytes.fromhex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
    public, kept = curve_keypair(secret)
    assert public.hex() == "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"
    assert kept == secret


def test_the_e2e_trainjobs_scripts() -> None:
    data = scripts(built(e2e_trainjob()))
    assert variables(data["entrypoint.sh"]) == {
        "resources": "--cores=0",
        "main_host": "e2e-test-flux-node-0-0",
        "flux_run_flags": "-N 2 -n 2",
        "retry_seconds": "15",
    }
    init = variables(data["init.sh"])
    assert init["flux_root"] == "/opt/view" and init["hosts"] == "e2e-test-flux-node-0-[0-1]"
    assert tomllib.loads(init["broker_config"]) == {
        "access": {"allow-guest-user": True, "allow-root-owner": True},
        "resource": {"path": "/mnt/flux/config/etc/flux/system/R"},
        "bootstrap": {
            "curve_cert": "/mnt/flux/config/etc/curve/curve.cert",
            "default_port": 8050,
            "default_bind": "tcp://eth0:%p",
            "default_connect": "tcp://%h.e2e-test-flux.ns.svc.cluster.local:%p",
            "hosts": [{"host": "e2e-test-flux-node-0-[0-1]"}],
        },
        "archive": {
            "dbpath": "/mnt/flux/config/var/lib/flux/job-archive.sqlite",
            "period": "1m",
            "busytimeout": "50s",
        },
        "sched-fluxion-qmanager": {"queue-policy": "fcfs"},
    }


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_scripts_are_bash(tmp_path: Path) -> None:
    for name, text in scripts(built(e2e_trainjob())).items():
        (tmp_path / name).write_text(text)
        checked = subprocess.run(["bash", "-n", str(tmp_path / name)], capture_output=True, text=True, check=False)
        assert checked.returncode == 0, checked.stderr


def test_upstreams_lammps_example() -> None:
    """``examples/flux/lammps-train-job.yaml``: 2 nodes of 4 tasks, the view image set by the TrainJob's env."""
    view = "ghcr.io/converged-computing/flux-view-ubuntu:tag-noble"
    tj = trainjob(
        "lammps-flux",
        numNodes=2,
        numProcPerNode=4,
        image="ghcr.io/converged-computing/metric-lammps:latest",
        command=LAMMPS,
        env=[{"name": "FLUX_VIEW_IMAGE", "value": view}],
    )
    children = built(tj)
    assert node(children)["command"] == ["/bin/bash", "/etc/flux-config/entrypoint.sh", " ".join(LAMMPS)]
    assert pod(children)["initContainers"][0]["image"] == view
    assert {"name": "FLUX_VIEW_IMAGE", "value": view} in node(children)["env"], "the TrainJob's env stays"
    got = variables(scripts(children)["entrypoint.sh"])
    assert (got["resources"], got["flux_run_flags"]) == ("--cores=0-3", "-N 2 -n 8")


def test_gpus_per_node_become_gpu_ids_and_gpus_per_task() -> None:
    tj = trainjob(numNodes=3, numProcPerNode=2, resourcesPerNode={"limits": {"nvidia.com/gpu": 4}})
    got = variables(scripts(built(tj))["entrypoint.sh"])
    assert (got["resources"], got["flux_run_flags"]) == ("--cores=0-1 --gpu=0-3", "-N 3 -n 6 -g 4")


def test_unset_numbers_fall_back_to_the_runtimes() -> None:
    """kubeflow/trainer#3904: no ``trainer.numNodes`` → ``mlPolicy.numNodes``; the policy's ``numProcPerNode``."""

    def edit(raw: JSON) -> None:
        raw["spec"]["mlPolicy"] = {"numNodes": 3, "flux": {"numProcPerNode": 2}}

    children = built(trainjob(), runtime(edit))
    got = variables(scripts(children)["entrypoint.sh"])
    assert (got["resources"], got["flux_run_flags"]) == ("--cores=0-1", "-N 3 -n 6")
    assert variables(scripts(children)["init.sh"])["hosts"] == "e2e-test-flux-node-0-[0-2]"
    assert node(children)["command"] == ["/bin/bash", "/etc/flux-config/entrypoint.sh", ""]


def test_settings_come_from_the_runtime_then_the_trainjob() -> None:
    def edit(raw: JSON) -> None:
        container = raw["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        container["containers"][0]["env"] = [
            {"name": "FLUX_NETWORK_DEVICE", "value": "ib0"},
            {"name": "FLUX_QUEUE_POLICY", "value": "easy"},
            {"name": "FLUX_VIEW_IMAGE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ]

    rt = runtime(edit)
    tj = trainjob(numNodes=1, env=[{"name": "FLUX_QUEUE_POLICY", "value": "conservative"}])
    assert settings(tj, replicated_jobs(rt.spec)) == {
        "FLUX_VIEW_IMAGE": "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy",  # a valueFrom is not read
        "FLUX_NETWORK_DEVICE": "ib0",
        "FLUX_QUEUE_POLICY": "conservative",
    }
    broker = tomllib.loads(variables(scripts(built(tj, rt))["init.sh"])["broker_config"])
    assert broker["bootstrap"]["default_bind"] == "tcp://ib0:%p"
    assert broker["sched-fluxion-qmanager"]["queue-policy"] == "conservative"
    from_secret = {"name": "FLUX_QUEUE_POLICY", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
    got = settings(trainjob(numNodes=1, env=[from_secret]), replicated_jobs(rt.spec))
    assert got["FLUX_QUEUE_POLICY"] == "", "as upstream reads a TrainJob's valueFrom"


def test_original_command_is_upstreams() -> None:
    """``TestGetOriginalCommand``'s cases, and the runtime's command when the TrainJob sets none."""
    rjobs = replicated_jobs(runtime().spec)
    assert original_command(trainjob(command=["python"], args=["train.py", "--epochs", "10"]), rjobs) == (
        "python train.py --epochs 10"
    )
    assert original_command(trainjob(command=["  python  "], args=[" script.py "]), rjobs) == "python    script.py"

    def edit(raw: JSON) -> None:
        container = raw["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        container["containers"][0]["command"] = ["mpirun", "hostname"]
        container["containers"][0]["args"] = ["--runtime-arg"]

    rt = runtime(edit)
    tj = trainjob(numNodes=1, args=["--mine"])
    assert original_command(tj, replicated_jobs(rt.spec)) == "mpirun hostname --mine"
    got = node(built(tj, rt))
    assert got["command"] == ["/bin/bash", "/etc/flux-config/entrypoint.sh", "mpirun hostname --mine"]
    assert got["args"] == ["--runtime-arg"], "upstream clears the TrainJob's args only: the runtime's stay"


def test_range_and_hostlist_are_upstreams() -> None:
    """``TestGenerateRange`` and ``TestGenerateHostlist``."""
    assert [id_range(1), id_range(4), id_range(3, 10)] == ["0", "0-3", "10-12"]
    assert hostlist("lammps-job", 1) == "lammps-job-node-0-[0]"
    assert hostlist("flux-cluster", 4) == "flux-cluster-node-0-[0-3]"
    assert hostlist("", 2) == "-node-0-[0-1]"


def test_an_existing_volume_or_mount_of_the_same_name_or_path_is_replaced() -> None:
    def edit(raw: JSON) -> None:
        spec = raw["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        spec["volumes"] = [{"name": "flux-install", "hostPath": {"path": "/x"}}, {"name": "data", "emptyDir": {}}]
        spec["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/dev/shm"}]

    children = built(e2e_trainjob(), runtime(edit))
    volumes = pod(children)["volumes"]
    assert [v["name"] for v in volumes] == [
        "flux-install",
        "data",
        "spack-install",
        "e2e-test-flux-flux-entrypoint",
        "shared-memory",
        "flux-curve",
    ]
    assert volumes[0] == {"name": "flux-install", "emptyDir": {}}
    mounts = node(children)["volumeMounts"]
    assert mounts[0] == {"name": "shared-memory", "mountPath": "/dev/shm", "readOnly": True}


def test_the_installer_name_is_reserved() -> None:
    def edit(raw: JSON) -> None:
        spec = raw["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        spec["initContainers"] = [{"name": "flux-installer", "image": "mine"}]

    rt = runtime(edit)
    message = "spec.trainer.initContainers: InitContainer 'flux-installer' is reserved"
    assert message in trainjob_errors(info(e2e_trainjob(), rt).info)
    patched = e2e_trainjob().to_dict()
    patched["spec"]["runtimePatches"] = [runtime_patch({"initContainers": [{"name": "flux-installer", "image": "x"}]})]
    assert message in trainjob_errors(info(TrainJob.model_validate(patched), runtime()).info)
    other = e2e_trainjob().to_dict()
    other["spec"]["runtimePatches"] = [runtime_patch({"initContainers": [{"name": "wait", "image": "x"}]})]
    assert trainjob_errors(info(TrainJob.model_validate(other), runtime()).info) == []


def test_a_string_num_proc_per_node_is_refused() -> None:
    errors = trainjob_errors(info(trainjob(numNodes=2, numProcPerNode="auto"), runtime()).info)
    assert any(e.startswith("spec.trainer.numProcPerNode: must be an integer for a Flux TrainJob") for e in errors)


def test_num_proc_per_node_below_one_is_refused_by_the_model() -> None:
    with pytest.raises(ValueError, match="NumProcPerNode in fluxPolicy must be >= 1"):
        FluxMLPolicySource(num_proc_per_node=0)


def test_no_flux_no_children_or_mutation() -> None:
    torch = ClusterTrainingRuntime.model_validate(yaml.safe_load((SAMPLES / "torch-distributed.yaml").read_text()))
    meta = {"name": "t", "namespace": "ns", "uid": "u"}
    tj = TrainJob.model_validate({"metadata": meta, "spec": {"runtimeRef": {"name": "torch-distributed"}}})
    children = built(tj, torch)
    assert children.secrets == [] and children.config_maps == []
    assert "initContainers" not in pod(children)
