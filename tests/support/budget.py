"""A keyed turn cancelled mid-answer, for the token budget's settling tests (memory and Redis
stores alike)."""

from __future__ import annotations

import anyio

from app.llm.usage import TokenUsage
from app.web.access import Caller
from app.web.admission import Admission
from app.web.limits import Limits

#: What the cancelled turn reserves, and what it has spent when it is cancelled.
RESERVED = 2_000
SPENT = 300


async def cancel_mid_turn(admission: Admission, limits: Limits, key: Caller) -> None:
    """Admit a turn of ``key`` reserving :data:`RESERVED` tokens, let it spend :data:`SPENT`,
    and cancel it (as the stream hub does when the client leaves) once its reservation is
    counted."""
    usage = TokenUsage()

    async def turn() -> None:
        async with admission.gate(key, "s").hold(usage, RESERVED):
            usage.read({"prompt_tokens": 250, "completion_tokens": SPENT - 250})
            await anyio.sleep_forever()

    async with anyio.create_task_group() as group:
        group.start_soon(turn)
        with anyio.fail_after(5):
            while await limits.counted(key) != RESERVED:
                await anyio.sleep(0.01)
        group.cancel_scope.cancel()
