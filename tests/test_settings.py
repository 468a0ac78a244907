"""Settings: the app starts with none set, every knob is documented, nonsense is refused."""

from pathlib import Path

import pytest
from pydantic import ValidationError

from app.config import Settings

ROOT = Path(__file__).resolve().parents[1]


def test_defaults_need_no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert settings.llm_base_url == "http://127.0.0.1:8800/v1"
    assert settings.llm_model is None and settings.qdrant_url is None
    assert settings.llm_read_timeout == 30
    assert settings.qdrant_collection == "challenges"


def test_every_setting_is_in_env_example() -> None:
    documented = (ROOT / ".env.example").read_text(encoding="utf-8")
    missing = [
        name.upper() for name in Settings.model_fields if f"{name.upper()}=" not in documented
    ]
    assert missing == []


@pytest.mark.parametrize(
    ("name", "value"),
    [("LLM_BASE_URL", "localhost:8800"), ("LLM_READ_TIMEOUT", "0"), ("LLM_TOP_P", "3")],
)
def test_nonsense_is_refused(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError):
        Settings(_env_file=None)  # type: ignore[call-arg]


def test_cors_origins_from_a_comma_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORS_ALLOW_ORIGINS", "http://a.example, http://b.example")
    assert Settings(_env_file=None).cors_allow_origins == [  # type: ignore[call-arg]
        "http://a.example",
        "http://b.example",
    ]


def test_the_model_picks_by_number_by_default_and_titles_is_its_former_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert Settings(_env_file=None).answer_composition == "picks"  # type: ignore[call-arg]
    monkeypatch.setenv("ANSWER_COMPOSITION", "titles")
    assert Settings(_env_file=None).answer_composition == "picks"  # type: ignore[call-arg]
    monkeypatch.setenv("ANSWER_COMPOSITION", "captions")
    with pytest.raises(ValidationError):
        Settings(_env_file=None)  # type: ignore[call-arg]
