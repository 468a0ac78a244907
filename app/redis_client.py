"""Redis clients: the one place that opens one, with every timeout named and its reason.

The lifespan (app/main.py) makes one :class:`RedisConnector` when ``REDIS_URL`` is set and
hands it to each part that keeps something in Redis; each part opens its own client through
it, with the timeouts of its use, and closes that client itself. Opening connects nothing:
redis-py connects on the first command.

The timeouts per use (seconds):

| use | connect | reply | health check |
|---|---|---|---|
| ``LIMITS``: rate limits, before each request | 1 | 1 | off |
| ``CHAT``: sessions and the stream log, inside a turn | 5 | 5 | off |
| ``JOBS``: the feedback queue (saq) and its records | 5 | 10 | off |

Health checks are off everywhere: redis-py already retries a command once its connection
turns out dropped, and a PING before each command after an idle spell would add a round
trip to the chat's hot path.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import SecretStr
from redis.asyncio import Redis

__all__ = ["CHAT", "JOBS", "LIMITS", "RedisConnector", "RedisTimeouts", "redis_connector"]


@dataclass(frozen=True, slots=True)
class RedisTimeouts:
    """How long a client waits, in seconds."""

    connect: float  # to open a connection (``socket_connect_timeout``)
    reply: float  # for each command's reply (``socket_timeout``)
    health_check: int = 0  # idle seconds after which a PING checks a connection; 0: never


#: Past it the request is admitted without counting (app/web/limits.py): a slow Redis must
#: not slow every request.
LIMITS = RedisTimeouts(connect=1.0, reply=1.0)
#: A dead Redis fails the turn (sessions) or stops copying the stream (its log) instead of
#: hanging it.
CHAT = RedisTimeouts(connect=5.0, reply=5.0)
#: A worker's dequeue blocks on the server for up to a second (queue_saq.py), and an enqueue
#: may wait behind it on a busy Redis: longer than a chat command may.
JOBS = RedisTimeouts(connect=5.0, reply=10.0)


class RedisConnector:
    """Opens clients for one Redis URL (``redis://``, ``rediss://`` or ``unix://``)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def client(self, timeouts: RedisTimeouts) -> Redis:
        """A new client with these timeouts; the caller closes it (``aclose``)."""
        return Redis.from_url(
            self.url,
            socket_connect_timeout=timeouts.connect,
            socket_timeout=timeouts.reply,
            health_check_interval=timeouts.health_check,
        )


def redis_connector(url: SecretStr | None) -> RedisConnector | None:
    """The connector for ``REDIS_URL``; None without one (every part then keeps to memory)."""
    return None if url is None else RedisConnector(url.get_secret_value())
