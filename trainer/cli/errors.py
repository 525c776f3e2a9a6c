"""How a CLI command fails and exits: the exit codes, one line on stderr per error, and
:func:`run`, which connects, runs a command's body and turns what it raises into a line and a code.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import NoReturn, TypeVar

import aiohttp
import typer
import yaml

from trainer.api.kinds import Resource
from trainer.cli.root import Settings
from trainer.client import AsyncTrainerClient, NotFoundError, TrainerClientError, WaitTimeoutError
from trainer.client.manifest import yaml_error_text
from trainer.framework.kube.client import ApiError

T = TypeVar("T")


EXIT_OK = 0


EXIT_ERROR = 1
"""The job Failed (``wait``), or any error: bad manifest, API error, object not found."""


EXIT_USAGE = 2
"""Wrong command line (unknown option, missing argument, bad choice)."""


EXIT_TIMEOUT = 3
"""A wait ran out of time (``wait --timeout``, ``logs --pod-timeout``)."""


EXIT_INTERRUPTED = 130


CRD_INSTALL = (
    "install with `helm install trainer charts/trainer -n trainer-system --create-namespace` "
    "or `kubectl apply --server-side -k config/default`"
)


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Print ``error: <message>`` on one line to stderr and exit with ``code``."""
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    raise typer.Exit(code)


def exit_code(error: BaseException) -> int:
    """The exit code an error ends the command with: :data:`EXIT_TIMEOUT` for a wait that ran
    out, :data:`EXIT_ERROR` for everything else (a Failed job included)."""
    return EXIT_TIMEOUT if isinstance(error, WaitTimeoutError) else EXIT_ERROR


def error_message(error: BaseException) -> str:
    """The one-line message of an error the CLI reports."""
    if isinstance(error, ApiError) and not isinstance(error, TrainerClientError):  # the SDK's say it already
        return f"the apiserver refused: {error}"
    if is_config_error(error):
        return f"cannot load a kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config) or in-cluster config: {error}"
    if isinstance(error, aiohttp.ClientError):
        return f"cannot reach the apiserver: {error}"
    if isinstance(error, FileNotFoundError) and not isinstance(error, TrainerClientError):
        return f"{error.strerror}: {error.filename}"
    return str(error) or type(error).__name__


def is_config_error(error: BaseException) -> bool:
    """Whether ``error`` is kubernetes_asyncio's ``ConfigException`` (no configuration could be loaded).
    Only a connection that kubernetes_asyncio configured raises it, and only after importing it: a
    command that never needed it does not import it to ask."""
    module = sys.modules.get("kubernetes_asyncio.config.config_exception")
    return module is not None and isinstance(error, module.ConfigException)


HANDLED: tuple[type[BaseException], ...] = (
    TrainerClientError,
    ApiError,
    aiohttp.ClientError,
    OSError,
    ValueError,
)


class KubeconfigError(TrainerClientError):
    """No configuration to connect with: the kubeconfig is missing or not YAML."""


class CRDNotInstalledError(TrainerClientError):
    """The apiserver does not serve a kind: its CustomResourceDefinition is not installed."""

    def __init__(self, res: Resource) -> None:
        super().__init__(f"{res.kind} CRD not installed; {CRD_INSTALL}")


def kubeconfig_problem(kubeconfig: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """Why no configuration can be loaded, known before trying: ``$KUBECONFIG`` names no file that
    exists, or there is neither a kubeconfig nor a pod's in-cluster config. None when one may load
    (an explicit ``kubeconfig`` is checked by :meth:`AsyncTrainerClient.connect`)."""
    env = os.environ if environ is None else environ
    if kubeconfig:
        return None
    paths = [p for p in env.get("KUBECONFIG", "").split(os.pathsep) if p]
    if paths:
        if not any(Path(p).expanduser().is_file() for p in paths):
            return f"kubeconfig not found: {env['KUBECONFIG']} ($KUBECONFIG)"
        return None
    if Path("~/.kube/config").expanduser().is_file() or env.get("KUBERNETES_SERVICE_HOST"):
        return None
    return "no kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config) and not running in a cluster"


async def connect(s: Settings) -> AsyncTrainerClient:
    """The client of the settings. Raises :class:`KubeconfigError` (one line) for a kubeconfig that
    is missing or not YAML, or what :meth:`AsyncTrainerClient.connect` raises."""
    problem = kubeconfig_problem(s.kubeconfig)
    if problem:
        raise KubeconfigError(problem)
    paths = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    kubeconfig = s.kubeconfig or (paths[0] if len(paths) == 1 else None)  # as set now, not at import
    try:
        return await AsyncTrainerClient.connect(kubeconfig, s.namespace)
    except yaml.YAMLError as e:
        where = s.kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise KubeconfigError(f"cannot read the kubeconfig {where}: {yaml_error_text(e)}") from None


async def crd_installed(client: AsyncTrainerClient, res: Resource) -> bool:
    """Whether the apiserver serves ``res`` (its group/version's discovery lists it). Raises
    :class:`ApiError` on failures other than 404."""
    try:
        found = await client.kube.request("GET", f"/apis/{res.group}/{res.version}")
    except ApiError as e:
        if e.not_found:
            return False
        raise
    return any(r.get("name") == res.plural for r in found.get("resources") or [])


def run(s: Settings, body: Callable[[AsyncTrainerClient], Awaitable[T]], crd: Resource | None = None) -> T:
    """Connect with the settings, run ``body`` and close; errors become one line and an exit code.
    When ``body`` finds nothing (404) and the apiserver does not serve ``crd``, the error says so
    (:class:`CRDNotInstalledError`)."""

    async def go() -> T:
        client = await connect(s)
        async with client:
            try:
                return await body(client)
            except (NotFoundError, ApiError) as e:
                if isinstance(e, ApiError) and not e.not_found:
                    raise
                if crd is not None and not await crd_installed(client, crd):
                    raise CRDNotInstalledError(crd) from None
                raise

    try:
        return asyncio.run(go())
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except Exception as e:
        if not (isinstance(e, HANDLED) or is_config_error(e)):
            raise
        fail(error_message(e), exit_code(e))
