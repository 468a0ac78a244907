"""Conversation state in Redis, shared by every gateway process (chosen when ``REDIS_URL`` is set).

Same interface and behaviour as :class:`app.chat.sessions.InMemorySessionStore`, with the
state kept in Redis so that any gateway process can serve any turn of a session.

Data layout, two keys per session, both under one hash tag so they share a cluster slot::

    {prefix}{<session_id>}:meta    hash   base_category, category (Category codes),
                                          location, work_type, updated_ms (server clock)
    {prefix}{<session_id>}:turns   list   one JSON ``[user, assistant, category code, [shown doc
                                          ids], asked, reply, replayed, [constraints],
                                          [told], topic]`` per turn, oldest first (older releases
                                          wrote fewer fields)

Atomicity: ``record`` is one Lua script (set the given fields, append the turn, trim the list
to ``max_turns``, ``PEXPIRE`` both keys, read the result back), and Redis runs a script with
nothing else interleaved, so concurrent ``record`` calls from any number of processes never
lose or split an update. ``load`` is a read-only script, so it never sees half an update.

Bounds: turns per session by ``LTRIM``; age by Redis expiry (``PEXPIRE ttl`` on every
``record``, so the TTL counts from last use; ``load`` does not extend it, as in memory).
There is no session-count bound here: size Redis with ``maxmemory`` and an eviction policy
(``volatile-ttl`` or ``allkeys-lru``) to cap memory instead. A key evicted or expired early
only means that session starts over, which the interface already allows.

Note: redis-py retries a command after a connection error; if the connection drops after a
``record`` script ran but before its reply arrived, that turn can be appended twice.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

from redis.asyncio import Redis

from app.chat.sessions import SessionState, SessionStore, SessionUpdate, Turn
from app.domain.categories import Category

__all__ = ["RedisSessionStore"]

# KEYS: meta hash, turns list. ARGV: ttl ms, max turns, turn JSON ("" for none), then field,
# value pairs to set. Returns {meta as a flat field/value array, turns, server now in ms}.
_RECORD = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local max_turns = tonumber(ARGV[2])
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[2])
end
redis.call('HSET', KEYS[1], 'updated_ms', now_ms, unpack(ARGV, 4))
if ARGV[3] ~= '' and max_turns > 0 then
  redis.call('RPUSH', KEYS[2], ARGV[3])
  redis.call('LTRIM', KEYS[2], -max_turns, -1)
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return {redis.call('HGETALL', KEYS[1]), redis.call('LRANGE', KEYS[2], 0, -1), now_ms}
"""

_LOAD = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local meta = redis.call('HGETALL', KEYS[1])
if #meta == 0 then
  return {meta, {}, now_ms}
end
return {meta, redis.call('LRANGE', KEYS[2], 0, -1), now_ms}
"""


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _category(code: str | None) -> Category | None:
    if not code:
        return None
    try:
        return Category[code]
    except KeyError:  # a code from an older or newer release: forget it, do not fail the chat
        return None


def _turn(raw: object) -> Turn | None:
    try:
        user, assistant, *rest = json.loads(_text(raw))
    except (ValueError, TypeError):
        return None
    if not isinstance(user, str) or not isinstance(assistant, str):
        return None
    code = rest[0] if rest and isinstance(rest[0], str) else None
    ids = rest[1] if len(rest) > 1 and isinstance(rest[1], list) else []
    shown = tuple(i for i in ids if isinstance(i, str))
    extra = rest[2:5]  # an older release wrote none
    asked, reply, replayed = extra if len(extra) == 3 else ("", "", 0)
    if not (isinstance(asked, str) and isinstance(reply, str) and isinstance(replayed, int)):
        asked, reply, replayed = "", "", 0
    constraints, told = (_strings(rest[5]), _strings(rest[6])) if len(rest) > 6 else ((), ())
    return Turn(user, assistant, _category(code), shown, asked, reply, replayed, constraints, told)


def _strings(value: object) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def _turn_json(turn: Turn) -> str:
    code = turn.category.code if turn.category is not None else ""
    fields: list[object] = [turn.user, turn.assistant, code, list(turn.shown)]
    fields += [turn.asked, turn.reply, turn.replayed, list(turn.constraints), list(turn.told)]
    fields.append(turn.topic)
    return json.dumps(fields, ensure_ascii=False)


class RedisSessionStore(SessionStore):
    """A :class:`app.chat.sessions.SessionStore` in Redis; it owns (and closes) its client
    (app/redis_client.py opens it)."""

    def __init__(
        self,
        redis: Redis,
        *,
        max_turns: int,
        ttl_seconds: float,
        prefix: str = "eco:session:",
    ) -> None:
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be positive")
        self._redis = redis
        self._max_turns = max(0, max_turns)
        self._ttl_ms = max(1, math.ceil(ttl_seconds * 1000))
        self._prefix = prefix
        self._record_script = redis.register_script(_RECORD)
        self._load_script = redis.register_script(_LOAD)

    def _keys(self, session_id: str) -> list[str]:
        base = f"{self._prefix}{{{session_id}}}"
        return [f"{base}:meta", f"{base}:turns"]

    async def ping(self) -> bool:
        """True when Redis answers (for readiness checks)."""
        return bool(await self._redis.ping())

    async def close(self) -> None:
        await self._redis.aclose()

    async def load(self, session_id: str) -> SessionState:
        reply = await self._load_script(keys=self._keys(session_id))
        return self._state(session_id, reply)

    async def _apply(self, session_id: str, update: SessionUpdate) -> SessionState:
        args: list[str | int] = [
            self._ttl_ms,
            self._max_turns,
            _turn_json(update.turn) if update.turn else "",
        ]
        for name, value in update.fields().items():  # as in memory: only these replace
            args += [name, value.code if isinstance(value, Category) else value]
        reply = await self._record_script(keys=self._keys(session_id), args=args)
        return self._state(session_id, reply)

    @staticmethod
    def _state(session_id: str, reply: Any) -> SessionState:
        raw_meta, raw_turns, now_ms = reply
        meta = {_text(raw_meta[i]): _text(raw_meta[i + 1]) for i in range(0, len(raw_meta) - 1, 2)}
        now = time.monotonic()
        if not meta:
            return SessionState(session_id=session_id, updated_at=now)
        try:
            age = max(0.0, (int(now_ms) - int(meta.get("updated_ms", now_ms))) / 1000)
        except ValueError:
            age = 0.0
        turns = tuple(t for t in map(_turn, raw_turns) if t is not None)
        return SessionState(
            session_id=session_id,
            base_category=_category(meta.get("base_category")),
            category=_category(meta.get("category")),
            location=meta.get("location") or None,
            work_type=meta.get("work_type") or None,
            turns=turns,
            updated_at=now - age,  # on this process's monotonic clock, like the in-memory store
        )
