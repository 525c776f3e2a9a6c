"""The ``flux`` ML policy: a Flux broker in every pod of the ``node`` replicated job, the first one running
the TrainJob's command under ``flux run`` (HPC: MPI and batch jobs scheduled by Flux inside the TrainJob).

Mirrors kubeflow/trainer ``pkg/runtime/framework/plugins/flux/flux.go`` (v2.3; names and paths from
``pkg/constants/constants.go``; with kubeflow/trainer#3904's ``numNodes`` fallback):

- Settings: ``FLUX_VIEW_IMAGE`` (the image of the install, default
  ``ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy``), ``FLUX_NETWORK_DEVICE`` (``eth0``) and
  ``FLUX_QUEUE_POLICY`` (``fcfs``): the defaults, over which the literal ``value`` of a same-named variable of
  the runtime's trainer ``node`` container, then any of ``spec.trainer.env`` (a ``valueFrom`` one gives
  ``""``, as upstream reads it) (:func:`settings`).
- The ``node`` replicated job's pods: init container ``flux-installer`` (the view image,
  ``/bin/bash /etc/flux-config/init.sh``, mounting ``flux-install`` at ``/mnt/flux`` and the entrypoint
  ConfigMap read-only at ``/etc/flux-config``); volumes ``spack-install`` (emptyDir), ``flux-install``
  (emptyDir), ``<trainjob>-flux-entrypoint`` (the ConfigMap, mode 0755), ``shared-memory`` (emptyDir in
  Memory) and ``flux-curve`` (Secret ``<trainjob>-flux-curve``, mode 0400), upserted by name; on its
  ``node`` container, mounts (upserted by mount path) of ``flux-install`` at ``/mnt/flux``, ``spack-install``
  at ``/opt/software``, the ConfigMap at ``/etc/flux-config`` (read-only), ``flux-curve`` at ``/curve``
  (read-only) and ``shared-memory`` at ``/dev/shm`` (read-only) (:meth:`Flux.mutate_pod`).
- The trainer's ``node`` container runs ``["/bin/bash", "/etc/flux-config/entrypoint.sh", "<command>"]``,
  ``<command>`` being the runtime's command of that container (the TrainJob's ``trainer.command`` when set)
  and the TrainJob's ``trainer.args``, joined by spaces; the TrainJob's args are not passed again (upstream
  clears them; the runtime's own ``args`` stay) (:func:`original_command`).
- ConfigMap ``<trainjob>-flux-entrypoint`` (``init.sh``, ``entrypoint.sh``: :mod:`.flux_scripts`) and Secret
  ``<trainjob>-flux-curve`` (``curve.cert``: :func:`curve_certificate`), both owned by the TrainJob and applied
  every reconcile through the child writer, as upstream's ``Build`` server-side applies them. Both also carry
  the ``jobset.sigs.k8s.io/jobset-name`` label (upstream's have none): this operator watches its children by it.
- The brokers: hostlist ``<trainjob>-node-0-[0-<N-1>]`` (N = ``trainer.numNodes``, else the runtime's
  ``mlPolicy.numNodes``), the lead ``<trainjob>-node-0-0``, bound on ``tcp://<FLUX_NETWORK_DEVICE>:%p``,
  connecting to ``tcp://%h.<trainjob>.<namespace>.svc.cluster.local:%p``; ``flux R encode --cores=0-<T-1>
  [--gpu=0-<G-1>]`` and ``flux run -N <N> -n <T*N> [-g <G>]``, T = ``trainer.numProcPerNode``, else
  ``mlPolicy.flux.numProcPerNode`` (default 1), G = GPUs per node (``resourcesPerNode``, else the runtime's
  ``node`` container's; upstream passes it as ``-g``, GPUs per task).

Validation (``Validate``): an init container named ``flux-installer`` in the ``node`` replicated job (the
runtime's, or one a TrainJob's ``runtimePatches`` add, as upstream validates the patched runtime) is refused
with upstream's message, and ``spec.trainer.numProcPerNode`` must be an integer (upstream's field is one).
"""

from __future__ import annotations

import base64
import hashlib

from trainer.api.jobset_v1alpha2 import ReplicatedJob
from trainer.api.labels import JOBSET_NAME
from trainer.api.trainer_v1alpha1 import NODE_CONTAINER, FluxMLPolicySource, TrainingRuntimeSpec, TrainJob
from trainer.framework.curve import curve_keypair, z85encode
from trainer.framework.json_codec import JSON, copy_json
from trainer.framework.merge import find_named, replace_named
from trainer.framework.owner import owned_config_map, owner_reference
from trainer.framework.resources import gpus_per_node
from trainer.trainjob.policies.base import Expanded, Expansion, Policy
from trainer.trainjob.policies.flux_scripts import broker_toml, entrypoint_script, init_script
from trainer.trainjob.spec.overrides import patches_for
from trainer.trainjob.spec.shape import node_resources, num_nodes, pod_spec, replicated_jobs, trainer_rjob

NODE_RJOB = "node"
"""The replicated job whose pods run the brokers (``constants.Node``)."""
INSTALLER = "flux-installer"
"""The init container that installs Flux (``FluxInstallerContainerName``); reserved."""
VIEW_IMAGE = "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy"
"""The default Flux view image (``FluxInstallerImage``)."""
SETTINGS = {"FLUX_VIEW_IMAGE": VIEW_IMAGE, "FLUX_NETWORK_DEVICE": "eth0", "FLUX_QUEUE_POLICY": "fcfs"}
"""The settings a runtime or TrainJob may change through its environment, with their defaults."""
INSTALL_VOLUME, INSTALL_PATH = "flux-install", "/mnt/flux"
CONFIG_PATH = "/etc/flux-config"
"""Where the entrypoint ConfigMap is mounted (upstream's ``FluxConfigVolumeName``)."""
CURVE_VOLUME, CURVE_PATH = "flux-curve", "/curve"
MEMORY_VOLUME, MEMORY_PATH = "shared-memory", "/dev/shm"
SPACK_VOLUME, SPACK_PATH = "spack-install", "/opt/software"
CURVE_KEY = "curve.cert"
"""The Secret's key."""
INIT_KEY, ENTRYPOINT_KEY = "init.sh", "entrypoint.sh"
"""The ConfigMap's keys."""
RESERVED_MESSAGE = "InitContainer 'flux-installer' is reserved"
"""Upstream's message (``Validate``), at ``spec.trainer.initContainers``."""


def entrypoint_name(job: TrainJob) -> str:
    """``<trainjob>-flux-entrypoint``: the ConfigMap of the scripts."""
    return f"{job.metadata.name}-flux-entrypoint"


def curve_name(job: TrainJob) -> str:
    """``<trainjob>-flux-curve``: the Secret of the curve certificate."""
    return f"{job.metadata.name}-flux-curve"


def _named(items: object, name: str) -> JSON | None:
    return find_named(items if isinstance(items, list) else None, name)


def _trainer_node(rjobs: list[ReplicatedJob]) -> JSON | None:
    rjob = trainer_rjob(rjobs)
    return _named(pod_spec(rjob).get("containers"), NODE_CONTAINER) if rjob is not None else None


def settings(job: TrainJob, rjobs: list[ReplicatedJob]) -> dict[str, str]:
    """The Flux settings (:data:`SETTINGS`): the defaults, the runtime's trainer ``node`` container's
    literal values, then ``spec.trainer.env`` (``brokerSettingsFromEnvironment``)."""
    out = dict(SETTINGS)
    for env in (_trainer_node(rjobs) or {}).get("env") or []:
        if env.get("name") in out and env.get("value") is not None:
            out[env["name"]] = str(env["value"])
    for var in (job.spec.trainer.env if job.spec.trainer else None) or []:
        if var.name in out:
            out[var.name] = var.value or ""
    return out


def original_command(job: TrainJob, rjobs: list[ReplicatedJob]) -> str:
    """The command the entrypoint wraps (``getOriginalCommand``): the runtime's trainer ``node`` command,
    replaced by ``trainer.command`` when set, then ``trainer.args``, joined by spaces, trimmed."""
    command = list((_trainer_node(rjobs) or {}).get("command") or [])
    trainer = job.spec.trainer
    args: list[str] = []
    if trainer is not None:
        if trainer.command is not None:
            command = list(trainer.command)
        args = list(trainer.args or [])
    return " ".join(command + args).strip()


def nodes_of(job: TrainJob, runtime: TrainingRuntimeSpec) -> int:
    """Brokers: ``trainer.numNodes``, else the runtime's ``mlPolicy.numNodes`` (default 1; kubeflow/trainer#3904)."""
    n = num_nodes(job, runtime)
    return 1 if n is None else n


def tasks_per_node(job: TrainJob, source: FluxMLPolicySource) -> int:
    """Tasks per node: ``trainer.numProcPerNode`` when an integer, else the policy's (default 1)."""
    value = job.spec.trainer.num_proc_per_node if job.spec.trainer else None
    if isinstance(value, int):
        return value
    return source.num_proc_per_node or 1


def id_range(size: int, start: int = 0) -> str:
    """``start`` when ``size`` is 1, else ``<start>-<start+size-1>`` (``generateRange``)."""
    return str(start) if size == 1 else f"{start}-{start + size - 1}"


def hostlist(prefix: str, size: int) -> str:
    """The brokers' hostlist, ``<prefix>-node-0-[<range>]`` (``generateHostlist``)."""
    return f"{prefix}-{NODE_RJOB}-0-[{id_range(size)}]"


def init_sh(job: TrainJob, nodes: int, values: dict[str, str]) -> str:
    """``init.sh`` of ``job`` with ``nodes`` brokers and the settings ``values``."""
    name, namespace = str(job.metadata.name), str(job.metadata.namespace)
    hosts = hostlist(name, nodes)
    bind = f"tcp://{values['FLUX_NETWORK_DEVICE']}:%p"
    connect = f"tcp://%h.{name}.{namespace}.svc.cluster.local:%p"
    return init_script(hosts, broker_toml(bind, connect, hosts, values["FLUX_QUEUE_POLICY"]))


def entrypoint_sh(job: TrainJob, nodes: int, tasks: int, gpus: int) -> str:
    """``entrypoint.sh`` of ``job``: ``nodes`` brokers, ``tasks`` per node, ``gpus`` per node."""
    flags = f"-N {nodes} -n {tasks * nodes}"
    resources = f"--cores={id_range(tasks)}"
    if gpus > 0:
        flags += f" -g {gpus}"
        resources += f" --gpu={id_range(gpus)}"
    return entrypoint_script(resources, f"{job.metadata.name}-{NODE_RJOB}-0-0", flags)


def curve_certificate(name: str, uid: str) -> str:
    """The curve certificate of TrainJob ``name`` (flux keygen's ZeroMQ format): its secret key the SHA-256
    of ``uid``, its public key the X25519 one of it, both in Z85 (``buildCurveSecret``). The same for the
    same uid: every broker of the TrainJob, and every reconcile, get the same one."""
    public, secret = curve_keypair(hashlib.sha256(uid.encode()).digest())
    return (
        "#  ZeroMQ CURVE Secret Certificate\n"
        "#  Generated by Kubeflow Trainer\n\n"
        "metadata\n"
        f'    name = "{name}"\n'
        "curve\n"
        f'    public-key = "{z85encode(public)}"\n'
        f'    secret-key = "{z85encode(secret)}"\n'
    )


def curve_secret(owner: JSON, job: TrainJob) -> JSON:
    """Secret ``<trainjob>-flux-curve`` holding ``curve.cert`` (:func:`curve_certificate`), owned by ``owner``."""
    cert = curve_certificate(str(job.metadata.name), str(job.metadata.uid or ""))
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": curve_name(job),
            "namespace": job.metadata.namespace,
            "labels": {JOBSET_NAME: str(job.metadata.name)},
            "ownerReferences": [owner_reference(owner)],
        },
        "data": {CURVE_KEY: base64.b64encode(cert.encode()).decode()},
    }


def volumes(job: TrainJob) -> list[JSON]:
    """The volumes the ``node`` pods get, in upstream's order (``getViewVolumes``, then the curve)."""
    cm = entrypoint_name(job)
    return [
        {"name": SPACK_VOLUME, "emptyDir": {}},
        {"name": INSTALL_VOLUME, "emptyDir": {}},
        {"name": cm, "configMap": {"name": cm, "defaultMode": 0o755}},
        {"name": MEMORY_VOLUME, "emptyDir": {"medium": "Memory"}},
        {"name": CURVE_VOLUME, "secret": {"secretName": curve_name(job), "defaultMode": 0o400}},
    ]


def installer(job: TrainJob, image: str) -> JSON:
    """The ``flux-installer`` init container."""
    return {
        "name": INSTALLER,
        "image": image,
        "command": ["/bin/bash", f"{CONFIG_PATH}/{INIT_KEY}"],
        "volumeMounts": [
            {"name": INSTALL_VOLUME, "mountPath": INSTALL_PATH},
            {"name": entrypoint_name(job), "mountPath": CONFIG_PATH, "readOnly": True},
        ],
    }


def node_mounts(job: TrainJob) -> list[JSON]:
    """The mounts of the ``node`` container, in upstream's order."""
    return [
        {"name": INSTALL_VOLUME, "mountPath": INSTALL_PATH},
        {"name": SPACK_VOLUME, "mountPath": SPACK_PATH},
        {"name": entrypoint_name(job), "mountPath": CONFIG_PATH, "readOnly": True},
        {"name": CURVE_VOLUME, "mountPath": CURVE_PATH, "readOnly": True},
        {"name": MEMORY_VOLUME, "mountPath": MEMORY_PATH, "readOnly": True},
    ]


def upsert_mount(container: JSON, mount: JSON) -> None:
    """Replace the mount at ``mount``'s path, else append it (upstream's ``UpsertVolumeMounts``)."""
    mounts = container.setdefault("volumeMounts", [])
    for i, m in enumerate(mounts):
        if m.get("mountPath") == mount["mountPath"]:
            mounts[i] = copy_json(mount)
            return
    mounts.append(copy_json(mount))


class Flux(Policy):
    """``mlPolicy.flux``."""

    field = "flux"

    def source(self, runtime: TrainingRuntimeSpec) -> FluxMLPolicySource | None:
        return runtime.ml_policy.flux if runtime.ml_policy is not None else None

    def mutate_pod(self, x: Expansion, rjob: ReplicatedJob, is_trainer: bool, pod: JSON, env: list[JSON]) -> None:
        """The installer, volumes and mounts on the ``node`` replicated job's pods; the wrapped command on
        the trainer's ``node`` container (``EnforceMLPolicy``)."""
        if self.source(x.runtime) is None:
            return
        rjobs = replicated_jobs(x.runtime)
        spec = pod.setdefault("spec", {})
        containers = spec.get("containers") or []
        node = find_named(containers, NODE_CONTAINER)
        if is_trainer and node is not None:
            wrapped = original_command(x.job, rjobs)
            node["command"] = ["/bin/bash", f"{CONFIG_PATH}/{ENTRYPOINT_KEY}", wrapped]
            runtime_args = (_named(pod_spec(rjob).get("containers"), NODE_CONTAINER) or {}).get("args")
            if runtime_args is None:
                node.pop("args", None)
            else:
                node["args"] = list(runtime_args)
        if rjob.name != NODE_RJOB:
            return
        for volume in volumes(x.job):
            spec["volumes"] = replace_named(spec.get("volumes"), volume)
        image = settings(x.job, rjobs)["FLUX_VIEW_IMAGE"]
        spec["initContainers"] = [*(spec.get("initContainers") or []), installer(x.job, image)]
        if node is not None:
            for mount in node_mounts(x.job):
                upsert_mount(node, mount)

    def config_maps(self, info: Expanded) -> list[JSON]:
        """ConfigMap ``<trainjob>-flux-entrypoint`` with ``init.sh`` and ``entrypoint.sh``."""
        source = self.source(info.runtime)
        if source is None:
            return []
        job = info.job
        nodes, tasks = nodes_of(job, info.runtime), tasks_per_node(job, source)
        gpus = gpus_per_node(node_resources(job, info.rjobs, info.trainer))
        data = {
            ENTRYPOINT_KEY: entrypoint_sh(job, nodes, tasks, gpus),
            INIT_KEY: init_sh(job, nodes, settings(job, info.rjobs)),
        }
        return [owned_config_map(info.obj, entrypoint_name(job), data, {JOBSET_NAME: str(job.metadata.name)})]

    def secrets(self, info: Expanded) -> list[JSON]:
        """Secret ``<trainjob>-flux-curve`` (:func:`curve_secret`)."""
        return [] if self.source(info.runtime) is None else [curve_secret(info.obj, info.job)]

    def trainjob_errors(self, info: Expanded) -> list[str]:
        """``flux-installer`` is reserved in the ``node`` replicated job (upstream's ``Validate``);
        ``spec.trainer.numProcPerNode`` must be an integer."""
        errors = []
        node = next((r for r in info.rjobs if r.name == NODE_RJOB), None)
        if node is not None:
            inits = [pod_spec(node).get("initContainers")]
            patches = [p for p, strategic in patches_for(info.job, NODE_RJOB) if strategic]  # runtimePatches
            inits += [(p.get("spec") or {}).get("initContainers") for p in patches]
            if any(_named(i, INSTALLER) is not None for i in inits):
                errors.append(f"spec.trainer.initContainers: {RESERVED_MESSAGE}")
        trainer = info.job.spec.trainer
        if trainer is not None and isinstance(trainer.num_proc_per_node, str):
            errors.append(
                "spec.trainer.numProcPerNode: must be an integer for a Flux TrainJob (tasks per node of flux run)"
            )
        return errors


FLUX = Flux()
