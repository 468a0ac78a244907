"""Streams that outlive their connection: Last-Event-ID resume and the shutdown drain.

A GET stream's generation runs in a task of the :class:`StreamHub` (which the lifespan owns),
not in the response: it appends every event to the stream's log, and each response,
the first one or a reconnect, is only a reader of that log. So an EventSource that loses its
connection and reconnects with ``Last-Event-ID`` gets the events after that id, then the live
ones, then the terminal event, from the same single generation.

Ids: every event's id is ``<streamId>.<seq>``; ``streamId`` is a fresh random 128-bit hex (not
the request id: ``X-Request-Id`` may come from the caller, and the stream id is the only key to
a stream's text, so it must be unguessable). ``seq`` counts the stream's events from 1. A new
stream opens with ``id: <streamId>.0`` and ``retry:`` in a frame without data (no event is
dispatched, but the browser remembers the id), so a drop even before the first token resumes.

What a reconnect (``Last-Event-ID: <streamId>.<n>``) gets:
- the stream is live or kept, and has events after ``n``: HTTP 200, those events, then the
  live ones, then the terminal event, and nothing after it (as for any stream);
- the client already has the terminal event, or the id names no kept stream (unknown,
  malformed, expired): HTTP 204 with no body, which makes an EventSource stop for good;
- the generation was stopped because its client left: the missing events, then one ``error``
  (status 499, :class:`StreamAborted`): never a new generation.

Kept where: in this process's memory, and also in Redis when ``REDIS_URL`` is set (see
:mod:`app.streams.redis_log`), so a reconnect that lands on another gateway process replays
and follows it there. Kept how long: ``STREAM_RESUME_TTL_SECONDS`` after the stream's last event.

Client gone: with ``STREAM_RESUME_GRACE_SECONDS=0`` (the default) the generation is cancelled
the moment its last reader leaves, closing the upstream request at once, as before; with a
grace it keeps running that long waiting for a reconnect (a live resume), then is cancelled.

Shutdown: on SIGTERM (or SIGINT) uvicorn stops accepting and waits for open connections; the
hub lets open streams run for ``SHUTDOWN_GRACE_SECONDS``, then ends each remaining one with one
``error`` 503 carrying a retry hint (its upstream request is closed). A stream asked for while
draining gets that error at once.

Deliberate choices:
- The generation runs ahead of a slow reader (the log is not bounded by the reader): the
  reader's speed only matters to ``SSE_SEND_TIMEOUT``, and a generation is bounded anyway.
- A reconnect is not a new request: no rate-limit token, no admission check, no new turn.

The package, bottom up: ``log`` (an event as kept, its id, the stream's terminal errors, what a
reader reads through), ``hub`` (the generations of this process), ``redis_log`` (the copy in
Redis, for reconnects that land on another process), ``signals`` (SIGTERM starts the drain),
``open`` (the hub for the app's lifespan).
"""
