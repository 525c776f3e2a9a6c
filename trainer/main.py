"""The operator's command line: ``trainer-operator [flags]`` (also ``python -m trainer``).

Every flag can also be given as an environment variable named ``TRAINER_<FLAG>`` (upper case,
dashes as underscores); the flag wins.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Coroutine, Sequence
from typing import Any

import structlog

from trainer import gang
from trainer.kube.cache import wait_synced
from trainer.kube.client import Kube
from trainer.manager import Manager, Settings
from trainer.webhook.server import WebhookServer, WebhookSettings, cache_facts


def _env(flag: str, default: str | None = None) -> str | None:
    return os.environ.get("TRAINER_" + flag.upper().replace("-", "_"), default)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the flags (see ``--help``)."""
    p = argparse.ArgumentParser(prog="trainer-operator", description="Run the trainer operator.")
    p.add_argument(
        "--kubeconfig", default=_env("kubeconfig"), help="kubeconfig path; default: in-cluster or $KUBECONFIG"
    )
    p.add_argument("--namespace", default=_env("namespace"), help="watch only this namespace; default: all")
    p.add_argument(
        "--max-concurrent-reconciles",
        type=int,
        default=int(_env("max-concurrent-reconciles", "4") or 4),
        help="reconciles running at once (default 4)",
    )
    p.add_argument(
        "--gang-scheduler-name",
        choices=sorted(gang.SCHEDULERS),
        default=_env("gang-scheduler-name", "none"),
        help="gang scheduler the pods are handed to: volcano, kueue, scheduler-plugins or none (default none)",
    )
    p.add_argument(
        "--webhook-port",
        type=int,
        default=int(_env("webhook-port", "0") or 0),
        help="port of the admission webhook (TLS); 0 (default) disables it",
    )
    p.add_argument(
        "--webhook-host",
        default=_env("webhook-host"),
        help="host the apiserver calls the webhook at (URL mode, e.g. 127.0.0.1); default: through --webhook-service",
    )
    p.add_argument(
        "--webhook-service",
        default=_env("webhook-service", "trainer-webhook-service"),
        help="Service in front of the webhook (default trainer-webhook-service)",
    )
    p.add_argument(
        "--webhook-namespace",
        default=_env("webhook-namespace", "default"),
        help="namespace of the webhook Service and of its certificate Secret (default default)",
    )
    p.add_argument(
        "--log-format",
        choices=["auto", "json", "console"],
        default=_env("log-format", "auto"),
        help="json, console, or auto: console on a terminal, json otherwise",
    )
    p.add_argument("--log-level", default=_env("log-level", "info"), help="debug, info, warning, error")
    return p.parse_args(argv)


def configure_logging(fmt: str, level: str) -> None:
    """Structured logs: JSON lines, or a readable console format on a terminal."""
    console = fmt == "console" or (fmt == "auto" and sys.stderr.isatty())
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer() if console else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper(), logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
    )


async def run(args: argparse.Namespace) -> None:
    """Connect, run the manager until SIGTERM/SIGINT, then stop cleanly."""
    log = structlog.get_logger("trainer")
    kube = await Kube.connect(args.kubeconfig)
    settings = Settings(
        namespace=args.namespace,
        max_concurrent_reconciles=args.max_concurrent_reconciles,
        gang_scheduler_name=args.gang_scheduler_name,
    )
    manager = Manager(kube, settings)
    log.info(
        "starting",
        namespace=args.namespace or "(all)",
        max_concurrent_reconciles=args.max_concurrent_reconciles,
        gang_scheduler_name=args.gang_scheduler_name,
    )
    parts: list[Coroutine[Any, Any, Any]] = [manager.run()]
    if args.webhook_port:
        webhook = WebhookServer(
            kube,
            WebhookSettings(
                port=args.webhook_port,
                host=args.webhook_host,
                namespace=args.webhook_namespace,
                service=args.webhook_service,
            ),
            cache_facts(manager, args.gang_scheduler_name),
        )
        synced = asyncio.Event()

        async def when_synced() -> None:
            await wait_synced(manager.informers)  # answers need the caches
            synced.set()

        parts += [when_synced(), webhook.run(synced)]
    task = asyncio.ensure_future(asyncio.gather(*parts))
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    try:
        await task
    except asyncio.CancelledError:
        log.info("stopping")
    finally:
        await kube.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = parse_args(argv)
    configure_logging(args.log_format, args.log_level)
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
