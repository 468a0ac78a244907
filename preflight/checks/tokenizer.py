"""Tokenizer checks: ``tokenizer``, ``tokenizer-ids`` and ``chat-template``.

``tokenizer`` looks for the files the tokenizer class needs, ``tokenizer-ids`` holds every
token id of the tokenizer and the configs against vocab_size.

Deliberate choice: token ids beyond ``vocab_size`` fail even though vLLM starts: the first
prompt or answer that uses one fails ("Token id ... is out of vocabulary").
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from preflight.facts import ModelFacts
from preflight.findings import Finding, Status

__all__ = ["check_chat_template", "check_tokenizer", "check_tokenizer_ids"]

# Files a tokenizer class can be built from when tokenizer.json is absent (transformers converts
# the slow files). Classes not listed here, or listed with (), need tokenizer.json.
_SPM = (("tokenizer.model",),)
_BPE = (("vocab.json", "merges.txt"),)
_SLOW_TOKENIZER_FILES: dict[str, tuple[tuple[str, ...], ...]] = {
    "LlamaTokenizer": _SPM,
    "CodeLlamaTokenizer": _SPM,
    "GemmaTokenizer": _SPM,
    "BaichuanTokenizer": _SPM,
    "InternLMTokenizer": _SPM,
    "InternLM2Tokenizer": _SPM,
    "ChatGLMTokenizer": _SPM,
    "ChatGLM4Tokenizer": _SPM,
    "T5Tokenizer": (("spiece.model",),),
    "AlbertTokenizer": (("spiece.model",),),
    "XLMRobertaTokenizer": (("sentencepiece.bpe.model",),),
    "GPT2Tokenizer": _BPE,
    "Qwen2Tokenizer": _BPE,
    "RobertaTokenizer": _BPE,
    "BartTokenizer": _BPE,
    "CodeGenTokenizer": _BPE,
    "BertTokenizer": (("vocab.txt",),),
    "QWenTokenizer": (("qwen.tiktoken",),),
    "PreTrainedTokenizer": (),
    "TokenizersBackend": (),
    "GPTNeoXTokenizer": (),
    "BloomTokenizer": (),
    "CohereTokenizer": (),
}
_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
    "qwen.tiktoken",
    "tekken.json",
)
_COPY_FIX = (
    "copy the tokenizer files of the model it was trained from into the folder "
    "(AutoTokenizer.from_pretrained(BASE).save_pretrained(MODEL_DIR)), or start vLLM with "
    "--tokenizer BASE (serve_vllm.sh: VLLM_EXTRA_ARGS='--tokenizer BASE')"
)


def check_tokenizer(facts: ModelFacts) -> list[Finding]:
    for name in ("tokenizer.json", "tokenizer_config.json"):
        if name in facts.read_errors:
            return [
                Finding(
                    "tokenizer",
                    Status.FAIL,
                    f"{name} {facts.read_errors[name]}",
                    "copy the tokenizer files again: AutoTokenizer.from_pretrained(BASE)"
                    ".save_pretrained(MODEL_DIR)",
                )
            ]
    present = [n for n in _TOKENIZER_FILES if n in facts.files]
    if not present and facts.tokenizer_config is None:
        return [Finding("tokenizer", Status.FAIL, "no tokenizer files in the folder", _COPY_FIX)]
    cls = (facts.tokenizer_config or {}).get("tokenizer_class")
    cls = cls if isinstance(cls, str) else None
    missing_named = _missing_named_files(facts)
    alternatives = _SLOW_TOKENIZER_FILES.get(cls.removesuffix("Fast")) if cls else None
    has_json = "tokenizer.json" in facts.files
    if has_json:
        usable = True
    elif alternatives is not None:
        usable = any(all(f in facts.files for f in alt) for alt in alternatives)
    else:
        usable = bool(present)
    if not usable:
        if missing_named:
            key, value = missing_named[0]
            what = f"tokenizer_config.json names {key} {value!r}, which is not in the folder"
        else:
            needs = " or ".join(
                " + ".join(alt) for alt in (("tokenizer.json",), *(alternatives or ()))
            )
            what = f"tokenizer_class {cls or '(none)'} needs {needs}, not in the folder"
        return [Finding("tokenizer", Status.FAIL, what, _COPY_FIX)]
    if missing_named:
        key, value = missing_named[0]
        return [
            Finding(
                "tokenizer",
                Status.WARN,
                f"tokenizer_config.json names {key} {value!r}, which is not in the folder; "
                f"transformers falls back to {', '.join(present)}",
                f"remove the {key} entry from tokenizer_config.json, or save the tokenizer "
                "again (save_pretrained) so that the file is there",
            )
        ]
    if not has_json and alternatives is None:
        return [
            Finding(
                "tokenizer",
                Status.WARN,
                f"tokenizer_class {cls or '(none)'} is unknown to this preflight; files: "
                f"{', '.join(present)}",
                "check that AutoTokenizer.from_pretrained(MODEL_DIR) works in the vLLM venv",
            )
        ]
    return [Finding("tokenizer", Status.OK, f"{cls or 'tokenizer'} from {', '.join(present)}")]


def _missing_named_files(facts: ModelFacts) -> list[tuple[str, str]]:
    """(key, path) of the files tokenizer_config.json names that the folder lacks."""
    config = facts.tokenizer_config or {}
    return [
        (key, value)
        for key in ("tokenizer_file", "vocab_file", "merges_file")
        if isinstance(value := config.get(key), str)
        and value
        and Path(value).name not in facts.files
    ]


def check_tokenizer_ids(facts: ModelFacts) -> list[Finding]:
    vocab = facts.vocab_size
    if vocab is None:
        return []
    ids = _token_ids(facts)
    if not ids:
        return []
    beyond = sorted((i for i in ids if i[0] >= vocab), reverse=True)
    if beyond:
        shown = "; ".join(f"{i} ({where})" for i, where in beyond[:4])
        more = f" and {len(beyond) - 4} more" if len(beyond) > 4 else ""
        return [
            Finding(
                "tokenizer-ids",
                Status.FAIL,
                f"token ids beyond vocab_size {vocab}: {shown}{more}; the model has no "
                "embedding row for them, and any prompt or answer using them fails in vLLM "
                "(out-of-vocabulary token id)",
                "the tokenizer got tokens that the model was never resized for: call "
                "model.resize_token_embeddings(len(tokenizer)) and train/merge again, or use "
                "the tokenizer saved with these weights (if the embeddings were resized, set "
                "vocab_size in config.json to their rows)",
                data={"vocab_size": vocab, "max_id": beyond[0][0], "count": len(beyond)},
            )
        ]
    top = max(i for i, _ in ids)
    return [Finding("tokenizer-ids", Status.OK, f"all token ids < vocab_size {vocab} (max {top})")]


def _token_ids(facts: ModelFacts) -> list[tuple[int, str]]:
    """Every token id the tokenizer and the configs use, with where it comes from."""
    ids: list[tuple[int, str]] = []
    if facts.tokenizer_vocab_max_id is not None:
        ids.append((facts.tokenizer_vocab_max_id, "tokenizer.json model.vocab"))
    ids += [(i, f"tokenizer.json added token {c!r}") for i, c in facts.tokenizer_added_tokens]
    decoder = (facts.tokenizer_config or {}).get("added_tokens_decoder")
    if isinstance(decoder, dict):
        for key, token in decoder.items():
            content = token.get("content", "") if isinstance(token, dict) else ""
            if str(key).lstrip("-").isdigit():
                ids.append((int(key), f"tokenizer_config.json added token {content!r}"))
    ids += _config_token_ids(facts.config, "config.json")
    ids += _config_token_ids(facts.generation_config, "generation_config.json")
    return ids


def _config_token_ids(source: Mapping[str, Any] | None, name: str) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for key in ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id"):
        value = (source or {}).get(key)
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, int) and not isinstance(v, bool):
                out.append((v, f"{name} {key}"))
    return out


def check_chat_template(facts: ModelFacts) -> list[Finding]:
    if facts.tokenizer_config is None and "tokenizer.json" not in facts.files:
        return []
    if (facts.tokenizer_config or {}).get("chat_template") or facts.files & {
        "chat_template.jinja",
        "chat_template.json",
    }:
        return [Finding("chat-template", Status.OK, "chat template present")]
    return [
        Finding(
            "chat-template",
            Status.WARN,
            "no chat template: vLLM starts, but /v1/chat/completions (what the gateway calls) "
            "answers 400",
            "save the base model's tokenizer again (it carries the template), add "
            "chat_template.jinja, or start vLLM with --chat-template FILE",
        )
    ]
