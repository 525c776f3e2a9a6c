"""The files of a Flux TrainJob's entrypoint ConfigMap: ``init.sh`` (the ``flux-installer`` init container:
the broker configuration and the Flux install), ``entrypoint.sh`` (the ``node`` container: a broker per
pod, the first running the user's command under ``flux run``) and the ``broker.toml`` that ``init.sh``
writes.

The contract is kubeflow/trainer's (``pkg/runtime/framework/plugins/flux/templates/{init.sh,entrypoint.sh,
broker.toml}``, v2.3): the same paths (the install volume at ``/mnt/flux``, the Flux view copied to
``/mnt/flux/view`` and its software to ``/opt/software``, the configuration under ``/mnt/flux/config``, the
curve certificate read at ``/curve/curve.cert``), the same broker settings and options, ``flux R encode``
and ``flux run`` flags, and the same markers (``flux-operator-done.txt``, ``flux-operator-complete.txt``).
The scripts are this operator's; each takes its values as shell variables set at its top (quoted with
:func:`shlex.quote`), and the broker configuration is written through a quoted here-document, so no value
is ever read as shell. Differences from upstream's scripts: the broker configuration is written, not
appended (an init container run twice leaves one configuration), and the pod of the lead broker exits
with its ``flux start``'s status (upstream's exits 0 whatever the command did), so a failed command fails
the TrainJob as any other runtime's does.
"""

from __future__ import annotations

import json
import shlex

INSTALL_ROOT = "/mnt/flux"
"""The ``flux-install`` volume: the Flux view, its configuration and state."""
CONFIG_ROOT = f"{INSTALL_ROOT}/config"
"""Flux's configuration and run directories, under the install volume."""
FLUX_VIEW_ROOT = "/opt/view"
"""Where the flux-view images install Flux (github.com/converged-computing/flux-views)."""
BROKER_PORT = 8050
"""The brokers' TCP port (``bootstrap.default_port``)."""
RETRY_SECONDS = 15
"""Seconds a follower broker waits before it starts again when its ``flux start`` failed."""


def toml_string(value: str) -> str:
    """``value`` as a TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(value)


def broker_toml(bind: str, connect: str, hosts: str, queue_policy: str) -> str:
    """The brokers' configuration (``broker.toml``): guests and root-owned instances allowed, the
    resources of ``flux R encode``, the TBON bootstrap (curve certificate, port :data:`BROKER_PORT`,
    ``bind`` and ``connect`` URIs, ``%h`` the host and ``%p`` the port, one entry for the ``hosts``
    hostlist), the job archive and fluxion's ``queue-policy``."""
    lines = [
        "[access]",
        "allow-guest-user = true",
        "allow-root-owner = true",
        "",
        "[resource]",
        f"path = {toml_string(CONFIG_ROOT + '/etc/flux/system/R')}",
        "",
        "[bootstrap]",
        f"curve_cert = {toml_string(CONFIG_ROOT + '/etc/curve/curve.cert')}",
        f"default_port = {BROKER_PORT}",
        f"default_bind = {toml_string(bind)}",
        f"default_connect = {toml_string(connect)}",
        f"hosts = [{{ host = {toml_string(hosts)} }}]",
        "",
        "[archive]",
        f"dbpath = {toml_string(CONFIG_ROOT + '/var/lib/flux/job-archive.sqlite')}",
        'period = "1m"',
        'busytimeout = "50s"',
        "",
        "[sched-fluxion-qmanager]",
        f"queue-policy = {toml_string(queue_policy)}",
    ]
    return "\n".join(lines) + "\n"


def _assignments(values: dict[str, str]) -> str:
    return "".join(f"{name}={shlex.quote(value)}\n" for name, value in values.items())


INIT_BODY = r"""
# Runs in the flux-view image (the flux-installer init container): writes the broker configuration and
# copies the Flux install onto the shared volume, for the node container to use.
install_root=/mnt/flux
config_root=${install_root}/config
echo "$(hostname): preparing Flux from ${flux_root}"
export PATH=${flux_root}/bin:$PATH
mkdir -p ${flux_root}/bin \
  ${config_root}/etc/flux/system/cron.d \
  ${config_root}/etc/flux/config \
  ${config_root}/var/lib/flux \
  ${config_root}/run/flux \
  ${config_root}/etc/curve \
  ${install_root}/view

echo "${hosts}" > ${config_root}/etc/flux/system/hostlist
printf '%s' "${broker_config}" > ${config_root}/etc/flux/config/broker.toml
echo "Broker configuration:"
cat ${config_root}/etc/flux/config/broker.toml

# The view is a link farm under /opt/views/._view/<hash>, whose links point into /opt/software:
# both are copied, and the node container puts /opt/software back in place.
view="/opt/views/._view/$(ls /opt/views/._view/)"
cp -R ${view}/* ${install_root}/view
cp -R /opt/software ${install_root}/
touch ${install_root}/flux-operator-done.txt
echo "Flux is installed in ${install_root}"
"""

ENTRYPOINT_BODY = r"""
# Runs in the node container: puts the Flux view on the path, starts a Flux broker, and on the lead
# pod runs the command (the script's arguments) under flux run; the other pods are followers.
command="$*"
view_base=/mnt/flux
view_root=${view_base}/view
config_root=${view_base}/config
view_bin=${view_root}/bin
flux_uid=$(id -u "$(whoami)")

# After the container's own PATH, so its software (e.g. its Python) comes first.
export PATH=$PATH:${view_bin}
cp -R ${view_base}/software/* /opt/software/

# Flux's Python modules, from the view.
python_root=$(find ${view_root} -maxdepth 2 -type d -path "${view_root}/lib/python3*" 2>/dev/null | head -n 1)
python_bin=${view_bin}/$(basename "${python_root}")
echo "Flux Python: ${python_bin} (${python_root})"
if [[ -f "${python_bin}" ]]; then
  rm -rf ${view_bin}/python3 ${view_bin}/python
  ln -s ${python_bin} ${view_root}/lib/python || true
  ln -s ${python_bin} ${view_root}/lib/python3 || true
fi
export PYTHONPATH=${PYTHONPATH:-""}:${python_root}/site-packages
export FLUX_RC_EXTRA=${view_root}/etc/flux/rc1.d

# Helpers for an interactive session: load fluxion, and the environment of this view.
printf '%s\n' "flux module remove sched-simple" "flux module load sched-fluxion-resource" \
  "flux module load sched-fluxion-qmanager" > ${view_base}/load-fluxion.sh
{
  echo "#!/bin/bash"
  echo "export PATH=${PATH}"
  echo "export PYTHONPATH=${PYTHONPATH}"
  echo "export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-""}:${view_root}/lib"
  echo "export fluxsocket=local://${config_root}/run/flux/local"
} > ${view_base}/flux-view.sh

# The curve certificate, readable by its owner only.
curve_cert=${config_root}/etc/curve/curve.cert
cp /curve/curve.cert ${curve_cert}
chmod go-r ${curve_cert}
chown -R ${flux_uid} ${curve_cert}

# The resources of every broker, then the brokers.
hostlist=$(cat ${config_root}/etc/flux/system/hostlist)
flux R encode --hosts=${hostlist} ${resources} > /tmp/R
mv /tmp/R ${config_root}/etc/flux/system/R

export STATE_DIR=${config_root}/var/lib/flux
export FLUX_OUTPUT_DIR=/tmp/fluxout
mkdir -p ${STATE_DIR} ${FLUX_OUTPUT_DIR} ${config_root}/etc/flux/system/cron.d
broker_config=${config_root}/etc/flux/config
broker_options="-Scron.directory=${config_root}/etc/flux/system/cron.d -Stbon.fanout=256 \
  -Srundir=${config_root}/run/flux -Sstatedir=${STATE_DIR} -Slocal-uri=local://${config_root}/run/flux/local \
  -Slog-stderr-level=0 -Slog-stderr-mode=local"

status=0
if [ "$(hostname)" = "${main_host}" ]; then
  echo "Command: ${command}"
  if [ -z "${command}" ]; then
    echo "flux broker --config-path ${broker_config} ${broker_options}"
    flux broker --config-path ${broker_config} ${broker_options}
    status=$?
  else
    echo "flux start -o --config ${broker_config} ${broker_options} flux run ${flux_run_flags} ${command}"
    flux start -o --config ${broker_config} ${broker_options} flux run ${flux_run_flags} ${command}
    status=$?
  fi
else
  # A follower: starts its broker until it ends cleanly (when the lead broker is done).
  while true; do
    echo "flux start -o --config ${broker_config} ${broker_options}"
    flux start -o --config ${broker_config} ${broker_options}
    code=$?
    if [ "${code}" -eq 0 ]; then
      echo "The follower broker exited cleanly."
      break
    fi
    echo "The follower broker exited with ${code}; starting again in ${retry_seconds}s"
    sleep ${retry_seconds}
  done
fi

touch ${view_base}/flux-operator-complete.txt
exit ${status}
"""


def init_script(hosts: str, broker_config: str) -> str:
    """``init.sh``: the ``hosts`` hostlist and ``broker_config`` (:func:`broker_toml`) set at its top."""
    values = {"flux_root": FLUX_VIEW_ROOT, "hosts": hosts, "broker_config": broker_config}
    return "#!/bin/bash\n" + _assignments(values) + INIT_BODY


def entrypoint_script(resources: str, main_host: str, flux_run_flags: str) -> str:
    """``entrypoint.sh``: ``resources`` (``flux R encode``'s ``--cores=…`` and ``--gpu=…``), ``main_host``
    (the lead broker's host name) and ``flux_run_flags`` (``-N <nodes> -n <tasks> [-g <gpus>]``) set at its top."""
    values = {
        "resources": resources,
        "main_host": main_host,
        "flux_run_flags": flux_run_flags,
        "retry_seconds": str(RETRY_SECONDS),
    }
    return "#!/bin/bash\n" + _assignments(values) + ENTRYPOINT_BODY
