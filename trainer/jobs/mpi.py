"""MPI machinery shared by MPIJob (:mod:`trainer.mpijob.children`) and TrainJobs with an ``mpi`` ML
policy (:mod:`trainer.trainjob.policies.mpi`): hostfile, SSH keys, launcher environment.

Follows kubeflow/mpi-operator ``pkg/controller/mpi_job_controller.go`` (hostfile formats per
implementation, ``discover_hosts.sh``, the launcher environment) and kubeflow/trainer
``pkg/runtime/framework/plugins/mpi`` (ECDSA P-521 keys in a ``kubernetes.io/ssh-auth`` Secret,
mounted as ``id_rsa``, ``id_rsa.pub`` and ``authorized_keys``).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from trainer.framework.json_codec import JSON
from trainer.framework.merge import upsert_env
from trainer.framework.owner import owned_config_map, owner_reference

CONFIG_MOUNT = "/etc/mpi"
HOSTFILE = "hostfile"
DISCOVER_HOSTS = "discover_hosts.sh"
SSH_VOLUME = "ssh-auth"
CONFIG_VOLUME = "mpi-job-config"
RSH_ARGS = "-o ConnectionAttempts=10"


@dataclass(frozen=True)
class Host:
    """One hostfile entry: a pod's FQDN and its slots."""

    fqdn: str
    slots: int


def hostfile(implementation: str, hosts: list[Host]) -> str:
    """The hostfile text: ``<host> slots=<n>`` for OpenMPI, ``<host>:<n>`` for Intel MPI and MPICH."""
    if implementation == "OpenMPI":
        lines = [f"{h.fqdn} slots={h.slots}" for h in hosts]
    else:
        lines = [f"{h.fqdn}:{h.slots}" for h in hosts]
    return "".join(line + "\n" for line in lines)


def discover_hosts(hosts: list[Host]) -> str:
    """``discover_hosts.sh`` for elastic Horovod: prints ``<host>:<slots>`` per line."""
    return "#!/bin/sh\n" + "".join(f"echo {h.fqdn}:{h.slots}\n" for h in hosts)


def launcher_env(implementation: str, slots: int) -> list[JSON]:
    """Environment of the launcher container for the implementation. Open MPI gets both its 4.x
    (ORTE, ``OMPI_MCA_orte_*``) and its 5.x (PRRTE, ``PRTE_MCA_*``) names, each release ignoring the
    other's, so one runtime is right on both (kubeflow/trainer #4029; without them Open MPI 5 reads no
    hostfile and runs every rank on the launcher). ``prte_keep_fqdn_hostnames`` is false: the hostfile's
    short ``<pod>.<service>`` names never match what PRRTE resolves for itself, and with it true a
    launcher that runs as a node would ssh to itself."""
    path = f"{CONFIG_MOUNT}/{HOSTFILE}"
    if implementation == "OpenMPI":
        return [
            {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"},
            {"name": "OMPI_MCA_orte_default_hostfile", "value": path},
            {"name": "OMPI_MCA_plm_rsh_args", "value": RSH_ARGS},
            {"name": "OMPI_MCA_orte_set_default_slots", "value": str(slots)},
            {"name": "PRTE_MCA_prte_keep_fqdn_hostnames", "value": "false"},
            {"name": "PRTE_MCA_prte_default_hostfile", "value": path},
            {"name": "PRTE_MCA_plm_ssh_args", "value": RSH_ARGS},
            {"name": "PRTE_MCA_prte_set_default_slots", "value": str(slots)},
        ]
    if implementation == "Intel":
        return [
            {"name": "I_MPI_HYDRA_HOST_FILE", "value": path},
            {"name": "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", "value": RSH_ARGS},
            {"name": "I_MPI_PERHOST", "value": str(slots)},
        ]
    return [
        {"name": "HYDRA_HOST_FILE", "value": path},
        {"name": "HYDRA_LAUNCH_EXTRA_ARGS", "value": RSH_ARGS},
    ]


def config_map(owner: JSON, name: str, implementation: str, hosts: list[Host]) -> JSON:
    """The ConfigMap holding ``hostfile`` and ``discover_hosts.sh``."""
    data = {HOSTFILE: hostfile(implementation, hosts), DISCOVER_HOSTS: discover_hosts(hosts)}
    return owned_config_map(owner, name, data)


def generate_ssh_keypair() -> tuple[str, str]:
    """A fresh ECDSA P-521 key pair: (PEM private key, OpenSSH public key). Not pure: random."""
    key = ec.generate_private_key(ec.SECP521R1())
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    ).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    return private, public


def ssh_secret(owner: JSON, name: str, private_key: str, public_key: str) -> JSON:
    """The ``kubernetes.io/ssh-auth`` Secret with keys ``ssh-privatekey`` and ``ssh-publickey``."""
    meta = owner["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/ssh-auth",
        "metadata": {"name": name, "namespace": meta["namespace"], "ownerReferences": [owner_reference(owner)]},
        "data": {
            "ssh-privatekey": base64.b64encode(private_key.encode()).decode(),
            "ssh-publickey": base64.b64encode((public_key + "\n").encode()).decode(),
        },
    }


def new_ssh_secret(owner: JSON, name: str, labels: dict[str, str]) -> JSON:
    """A Secret ``name`` with a fresh key pair (:func:`generate_ssh_keypair`; not pure: random), owned by
    ``owner`` and carrying ``labels``. Made once per job: a new key under running pods breaks every ssh."""
    secret = ssh_secret(owner, name, *generate_ssh_keypair())
    secret["metadata"]["labels"] = dict(labels)
    return secret


def add_once(items: list[JSON], entry: JSON) -> None:
    """Append ``entry`` to ``items`` unless an entry of the same name is there (in place)."""
    if not any(i.get("name") == entry["name"] for i in items):
        items.append(entry)


def mount_ssh(pod: JSON, secret: str, mount_path: str) -> None:
    """Mount the SSH Secret at ``mount_path`` in every container of ``pod`` (in place)."""
    spec = pod.setdefault("spec", {})
    keys = [("ssh-privatekey", "id_rsa"), ("ssh-publickey", "id_rsa.pub"), ("ssh-publickey", "authorized_keys")]
    items = [{"key": k, "path": p} for k, p in keys]
    secret_source = {"secretName": secret, "defaultMode": 0o600, "items": items}
    add_once(spec.setdefault("volumes", []), {"name": SSH_VOLUME, "secret": secret_source})
    for container in spec.get("containers") or []:
        add_once(container.setdefault("volumeMounts", []), {"name": SSH_VOLUME, "mountPath": mount_path})


def mount_config(pod: JSON, config_map_name: str, implementation: str, slots: int, container: str | None) -> None:
    """Mount the hostfile ConfigMap at /etc/mpi and add the launcher environment to ``container``
    (the first container when None) of ``pod`` (in place)."""
    spec = pod.setdefault("spec", {})
    items = [
        {"key": HOSTFILE, "path": HOSTFILE, "mode": 0o444},
        {"key": DISCOVER_HOSTS, "path": DISCOVER_HOSTS, "mode": 0o555},
    ]
    add_once(
        spec.setdefault("volumes", []), {"name": CONFIG_VOLUME, "configMap": {"name": config_map_name, "items": items}}
    )
    containers = spec.get("containers") or []
    target = next((c for c in containers if c.get("name") == container), containers[0] if containers else None)
    if target is None:
        return
    add_once(target.setdefault("volumeMounts", []), {"name": CONFIG_VOLUME, "mountPath": CONFIG_MOUNT})
    upsert_env(target, launcher_env(implementation, slots))
