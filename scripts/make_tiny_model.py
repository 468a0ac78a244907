#!/usr/bin/env python3
"""Build a tiny, random Qwen2ForCausalLM with a real (locally trained) tokenizer.

Usage (with the vLLM venv's python, which has torch, transformers and tokenizers):

    python scripts/make_tiny_model.py OUT_DIR [--force] [--quote-extra 1.5 | --plain] [--hidden 1024 ...]

Nothing is downloaded: the byte-level BPE tokenizer is trained on the small text embedded
below (Korean, English, digits, JSON punctuation), so every string is encodable (byte
fallback via the 256-symbol byte alphabet). The model is random (fixed seed) and meant only
to exercise the serving path: streaming, usage, structured output, aborts.

Shaped output (so answers end): a random model samples almost uniformly from the vocabulary,
so under structured output (``response_format`` json_schema) a string would only close when
the sampler happens to hit a ``"`` token (1 in ~1,500): answers of thousands of tokens. So
residual dimension 0 is a constant that no layer reads or writes, and lm_head column 0 turns
it into a fixed logit bias: +6 for 64 "word" tokens (Korean, English, numbers), +6 +
``--quote-extra`` (1.5) for the bare ``"`` token, +6 for ``<|im_end|>``; the random part of
lm_head is scaled down so it only adds noise. Because the competitors of ``"`` are a fixed
small group, the chance that a string closes barely depends on temperature or top_k: strings
hold about 5-15 tokens of random words, JSON answers are 50-150 tokens, free text ends after
~60 tokens. ``--plain`` builds the unshaped random model instead.

Idempotent: when OUT_DIR already holds a complete model (marker file written last, with the
same build parameters) it prints the path and exits without rebuilding. Takes seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

MARKER = ".eco-tiny-model.json"
BUILD_VERSION = 7

# Model shape. head_dim must be 64: vLLM's CPU attention kernel crashes with head_dim 16.
HEAD_DIM = 64
# ~47M parameters (94 MB bf16). Smaller is possible (--hidden 128 --layers 2
# --intermediate 256 --kv-heads 1 serves at 200-700 tok/s), but then vLLM's engine outruns
# its own API server on a small, busy CPU box: the API event loop stops flushing and whole
# answers arrive in one burst at the end, with client disconnects noticed only then. At this
# size (~100 tok/s on 2 busy cores) tokens stream one by one and aborts land within ~50 ms.
HIDDEN = 1024  # 16 heads
KV_HEADS = 2
LAYERS = 4
INTERMEDIATE = 2816
MAX_POSITIONS = 4096
VOCAB_TARGET = 4096
SEED = 1234

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
EOS_TOKEN = "<|im_end|>"
N_WORDS = 64
WORD_BIAS = 6.0
QUOTE_EXTRA = 1.5
NOISE_SCALE = 0.3
WORD_RE = re.compile(r" ?[0-9A-Za-z\uac00-\ud7a3]+")
PAD_TOKEN = "<|endoftext|>"

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string %}"
    "{{- message['content'] }}"
    "{%- else %}"
    "{%- for part in message['content'] %}"
    "{%- if part['type'] == 'text' %}{{- part['text'] }}{%- endif %}"
    "{%- endfor %}"
    "{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- endif %}"
)

CORPUS = """
당신은 친환경 챌린지를 추천하는 도우미입니다. 사용자의 위치와 직업에 맞는 챌린지를 세 개 추천하세요.
제로웨이스트 챌린지: 일회용 컵 대신 텀블러를 사용하고, 장바구니를 챙기며, 포장 없는 가게를 이용해 보세요.
플로깅 챌린지: 바닷가나 산에서 조깅하면서 쓰레기를 주워 보세요. 집게와 봉투만 있으면 누구나 할 수 있습니다.
탄소발자국 챌린지: 오늘 하루 이동 거리를 기록하고 대중교통이나 자전거를 이용해 탄소 배출을 줄여 보세요.
에너지 절약 챌린지: 사용하지 않는 전자기기의 플러그를 뽑고, 엘리베이터 대신 계단을 이용하세요.
업사이클 챌린지: 버려지는 유리병과 헌 옷으로 화분, 가방, 소품을 만들어 보세요.
문화 공유 챌린지: 환경 다큐멘터리를 보고 느낀 점을 친구와 나누어 보세요.
디지털 탄소 챌린지: 오래된 메일과 사진을 정리하고, 스트리밍 화질을 낮추어 데이터 사용을 줄여 보세요.
비건 챌린지: 일주일에 하루는 고기 없는 식단을 실천하고, 제철 채소로 요리해 보세요.
도시에서 일하는 사무직이라면 점심시간에 개인 수저와 다회용기를 사용해 보는 것은 어떨까요?
농촌에서 일하는 현장직이라면 영농 폐비닐을 분리해서 배출하는 것부터 시작해 보세요.
재택근무를 한다면 냉난방 온도를 적정하게 유지하고 모니터 밝기를 조절해 보세요.
영업직이라면 이동할 때 경로를 묶어서 운전 거리를 줄이고, 종이 대신 전자 문서를 사용하세요.
안녕하세요! 무엇을 도와드릴까요? 저는 환경 챌린지를 추천해 드릴 수 있어요. 다른 거, 아무거나, 처음 카테고리로.
오늘 주식 어때? 그 질문에는 답하기 어려워요. 대신 지구를 위한 작은 실천을 함께 찾아볼까요?
{"recommend": "오늘은 텀블러로 시작해 보세요.", "challenges": [{"title": "텀블러 사용하기", "description": "일회용 컵 대신 텀블러를 하루 동안 사용해 보세요."}, {"title": "장바구니 챙기기", "description": "장을 볼 때 비닐봉지 대신 장바구니를 사용하세요."}, {"title": "분리배출 실천", "description": "플라스틱과 종이를 깨끗이 분리해서 배출하세요."}]}
{"recommend":"Try plogging this weekend.","challenges":[{"title":"Beach plogging","description":"Pick up 20 pieces of litter while jogging."},{"title":"Trail cleanup","description":"Bring a bag on your next hike."}]}
```json
{"recommend": "\\"작은 실천\\"이 모여 큰 변화를 만듭니다.\\n함께해요!", "challenges": []}
```
The quick brown fox jumps over the lazy dog. Reduce, reuse, recycle. Save energy, save money.
Zero waste, plogging, carbon footprint, energy saving, upcycling, media sharing, digital carbon, vegan.
Location: city, seaside, mountain, farm. Work type: office, field, sales, remote work.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 12 15 20 25 30 50 100 250 1000 2024 2025 3.14 -1 1e-3 0.5 99%
Punctuation: . , ! ? ; : ' " ( ) [ ] { } < > / \\ | - _ + = * & ^ % $ # @ ~ ` \t tabs and
new lines, "quoted text", key: value, [1, 2, 3], {"a": 1, "b": [true, false, null]}
한국어 문장과 English sentences, 숫자 123과 기호 #@!가 섞인 텍스트도 토큰화할 수 있어야 합니다.
가나다라마바사아자차카타파하 ㄱㄴㄷㄹㅁㅂㅅㅇㅈㅊㅋㅌㅍㅎ ㅏㅑㅓㅕㅗㅛㅜㅠㅡㅣ ㅁㄴㅇㄹ 😀🌍♻️🌱
"""


def _params(args: argparse.Namespace) -> dict[str, object]:
    return {
        "build_version": BUILD_VERSION,
        "hidden": args.hidden,
        "heads": args.hidden // HEAD_DIM,
        "kv_heads": args.kv_heads,
        "layers": args.layers,
        "intermediate": args.intermediate,
        "vocab_target": VOCAB_TARGET,
        "seed": SEED,
        "shaped": not args.plain,
        "quote_extra": args.quote_extra,
    }


def is_complete(out_dir: Path, params: dict[str, object]) -> bool:
    marker = out_dir / MARKER
    if not marker.is_file():
        return False
    try:
        return json.loads(marker.read_text(encoding="utf-8")).get("params") == params
    except (OSError, ValueError):
        return False


def build_tokenizer():  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_TARGET,
        min_frequency=1,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # Repeat the corpus line by line so that merges have counts > 1 and are stable.
    lines = [line for line in CORPUS.splitlines() if line.strip()]
    tok.train_from_iterator(lines * 3, trainer=trainer)

    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=None,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        unk_token=None,
        additional_special_tokens=["<|im_start|>"],
        clean_up_tokenization_spaces=False,
        model_max_length=MAX_POSITIONS,
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build(out_dir: Path, args: argparse.Namespace) -> None:
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    torch.manual_seed(SEED)
    tokenizer = build_tokenizer()
    n_tokens = len(tokenizer)
    vocab_size = (n_tokens + 63) // 64 * 64

    eos_id = tokenizer.convert_tokens_to_ids(EOS_TOKEN)
    pad_id = tokenizer.convert_tokens_to_ids(PAD_TOKEN)
    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=args.hidden,
        intermediate_size=args.intermediate,
        num_hidden_layers=args.layers,
        num_attention_heads=args.hidden // HEAD_DIM,
        num_key_value_heads=args.kv_heads,
        head_dim=HEAD_DIM,
        max_position_embeddings=MAX_POSITIONS,
        max_window_layers=args.layers,
        use_sliding_window=False,
        rope_theta=10000.0,
        tie_word_embeddings=False,
        bos_token_id=pad_id,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        torch_dtype="bfloat16",
    )
    config.architectures = ["Qwen2ForCausalLM"]
    model = Qwen2ForCausalLM(config)
    model.eval()

    with torch.no_grad():
        # Padding rows beyond the tokenizer must never be sampled.
        model.lm_head.weight[n_tokens:, :] = 0.0
        if not args.plain:
            model.lm_head.weight.mul_(NOISE_SCALE)
            bias = _install_bias(model, tokenizer, n_tokens, args.quote_extra, eos_id, pad_id)
            bias = torch.cat([bias, torch.full((vocab_size - n_tokens,), -50.0)])
            sample = tokenizer(CORPUS[:2000], return_tensors="pt").input_ids[:, :512]
            h0 = model.model(sample).last_hidden_state[..., 0].mean().item()
            model.lm_head.weight[:, 0] = bias / h0

    model = model.to(torch.bfloat16)
    # Write into a sibling folder, then swap it in: a reader never sees half a model.
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    tmp.chmod(0o755)
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        GenerationConfig(
            bos_token_id=pad_id,
            eos_token_id=[eos_id, pad_id],
            pad_token_id=pad_id,
        ).save_pretrained(tmp)
        (tmp / MARKER).write_text(
            json.dumps(
                {"params": _params(args), "n_tokens": n_tokens, "vocab_size": vocab_size},
                indent=2,
            ),
            encoding="utf-8",
        )
        if is_complete(out_dir, _params(args)):
            return  # built concurrently by someone else meanwhile
        if out_dir.exists():
            old = out_dir.with_name(f".{out_dir.name}.old-{os.getpid()}")
            out_dir.rename(old)
            shutil.rmtree(old, ignore_errors=True)
        tmp.rename(out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _word_tokens(tokenizer, n_tokens: int) -> list[int]:  # type: ignore[no-untyped-def]
    """N_WORDS tokens that decode to a whole word or number, spread over the vocabulary."""
    ids = []
    for tid in range(n_tokens):
        tok = tokenizer.convert_ids_to_tokens(tid)
        if tok in SPECIAL_TOKENS:
            continue
        text = tokenizer.convert_tokens_to_string([tok])
        if WORD_RE.fullmatch(text) and len(text.strip()) >= 2:
            ids.append(tid)
    step = max(1, len(ids) // N_WORDS)
    return ids[::step][:N_WORDS]


def _install_bias(model, tokenizer, n_tokens, quote_extra, eos_id, pad_id):  # type: ignore[no-untyped-def]
    """Make residual dim 0 a constant nobody touches; return the wanted logit bias per token.

    After the final RMSNorm that dimension is a near-constant h0 (measured by the caller),
    so lm_head column 0 = bias / h0 adds ``bias`` to the logits.
    """
    import torch

    m = model.model
    m.embed_tokens.weight[:, 0] = 1.0
    for layer in m.layers:
        # Layers neither read dim 0 (their norms see it, but projections ignore it)...
        for proj in (
            layer.self_attn.q_proj,
            layer.self_attn.k_proj,
            layer.self_attn.v_proj,
            layer.mlp.gate_proj,
            layer.mlp.up_proj,
        ):
            proj.weight[:, 0] = 0.0
        # ...nor write it.
        layer.self_attn.o_proj.weight[0, :] = 0.0
        layer.mlp.down_proj.weight[0, :] = 0.0
    bias = torch.zeros(n_tokens)
    for tid in range(n_tokens):
        text = tokenizer.convert_tokens_to_string([tokenizer.convert_ids_to_tokens(tid)])
        if text.strip() == "":
            bias[tid] = -2.0  # whitespace-only tokens: keep the JSON compact
    bias[_word_tokens(tokenizer, n_tokens)] = WORD_BIAS
    # Only the bare quote: tokens like '":"' or '","' would, at the start of a value,
    # open and close a one-character string of punctuation.
    bias[tokenizer.convert_tokens_to_ids(tokenizer.tokenize('"'))[0]] = WORD_BIAS + quote_extra
    bias[eos_id] = WORD_BIAS
    bias[pad_id] = WORD_BIAS - 2.0
    bias[tokenizer.convert_tokens_to_ids("<|im_start|>")] = -20.0
    return bias


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--force", action="store_true", help="rebuild even if complete")
    parser.add_argument(
        "--quote-extra",
        type=float,
        default=QUOTE_EXTRA,
        help="logit of '\"' above the word tokens: higher = shorter strings",
    )
    parser.add_argument("--plain", action="store_true", help="no output shaping at all")
    parser.add_argument(
        "--hidden",
        type=int,
        default=HIDDEN,
        help=f"hidden size, a multiple of {HEAD_DIM} (heads = hidden / {HEAD_DIM})",
    )
    parser.add_argument("--layers", type=int, default=LAYERS)
    parser.add_argument("--intermediate", type=int, default=INTERMEDIATE)
    parser.add_argument("--kv-heads", type=int, default=KV_HEADS)
    args = parser.parse_args(argv)
    if args.hidden % HEAD_DIM or (args.hidden // HEAD_DIM) % args.kv_heads:
        parser.error(f"--hidden must be a multiple of {HEAD_DIM} and heads of --kv-heads")
    out_dir: Path = args.out_dir.expanduser().resolve()
    params = _params(args)
    if not args.force and is_complete(out_dir, params):
        print(f"tiny model already built: {out_dir}", file=sys.stderr)
        print(out_dir)
        return 0
    build(out_dir, args)
    print(f"tiny model built: {out_dir}", file=sys.stderr)
    print(out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
