"""One request's token usage, as vLLM reports it or as the stream showed it.

vLLM sends the usage in every event of a stream when asked (``stream_options.include_usage``
with ``continuous_usage_stats``, which every chat stream sends: the prompt and the tokens so
far) and in every non-streamed answer, so a stream the gateway closes early (the client left,
a loop, a timeout) is counted exactly up to where it stopped. An upstream that reports nothing
(another server, or a stream closed before its first event) is counted from the stream: its
output is the content events seen (one token per event, or more under load: a lower bound),
its input unknown (0), and ``reported`` stays False.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["TokenUsage"]


@dataclass(slots=True)
class TokenUsage:
    """Filled by :class:`app.llm.client.LLMClient`, which counts it in ``gateway_llm_tokens``
    under ``endpoint`` and ``client`` (bounded labels: never a session or a key)."""

    endpoint: str = "other"
    client: str = "anonymous"
    model: str | None = None  # the model asked, once a request was sent
    input_tokens: int = 0
    output_tokens: int = 0
    reported: bool = False  # vLLM's own figures; False: counted from the stream
    chunks: int = 0  # content events seen (the output when vLLM reports nothing)

    def read(self, usage: Any) -> None:
        """Take vLLM's ``usage`` object (``prompt_tokens``, ``completion_tokens``)."""
        if not isinstance(usage, dict):
            return
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if isinstance(prompt, int) and isinstance(completion, int):
            self.input_tokens, self.output_tokens, self.reported = prompt, completion, True

    def saw_chunk(self) -> None:
        self.chunks += 1
        if not self.reported:
            self.output_tokens = self.chunks
