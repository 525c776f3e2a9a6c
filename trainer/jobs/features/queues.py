"""Which scheduler queue a job asks for: the one rule of :mod:`api.queues`, which the SDK uses too."""

from __future__ import annotations

from api.queues import NO_QUEUE as NO_QUEUE
from api.queues import QueueChoice as QueueChoice
from api.queues import resolve_queue as resolve_queue
