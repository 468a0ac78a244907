"""Weight file checks: ``weights`` (readable and complete) and ``lora`` (an unmerged LoRA)."""

from __future__ import annotations

from preflight.facts import INDEX_FILE, ModelFacts
from preflight.findings import Finding, Status, gib

__all__ = ["check_lora", "check_weights"]

_LORA_MARKERS = (
    ".lora_A.",
    ".lora_B.",
    "lora_embedding_A",
    "lora_embedding_B",
    "lora_magnitude_vector",
    ".base_layer.",
)

_MERGE_SNIPPET = """\
from peft import AutoPeftModelForCausalLM
model = AutoPeftModelForCausalLM.from_pretrained("ADAPTER_DIR", torch_dtype="auto")
model = model.merge_and_unload()
model.save_pretrained("MERGED_DIR", safe_serialization=True)"""


def check_weights(facts: ModelFacts) -> list[Finding]:
    bad = {
        name: why
        for name, why in facts.read_errors.items()
        if name.endswith(".safetensors") or name == INDEX_FILE
    }
    if bad:
        return [
            Finding(
                "weights",
                Status.FAIL,
                f"{name} {why}",
                "download or copy the weights again (compare file sizes with the source); "
                "the folder must hold every shard named in the index",
            )
            for name, why in sorted(bad.items())
        ]
    if facts.tensors:
        dtypes = sorted({t.dtype for t in facts.tensors.values()})
        total = sum(t.nbytes for t in facts.tensors.values())
        return [
            Finding(
                "weights",
                Status.OK,
                f"{len(facts.weight_files)} safetensors file(s), {len(facts.tensors)} tensors, "
                f"{gib(total)} ({', '.join(dtypes)})",
                data={"files": list(facts.weight_files), "bytes": total},
            )
        ]
    if facts.pickled_weight_files:
        return [
            Finding(
                "weights",
                Status.WARN,
                f"only pickled weights ({', '.join(facts.pickled_weight_files)}): shapes not "
                "checked, the memory plan uses the file sizes",
                "vLLM loads them, but slower and by unpickling; convert them to safetensors "
                "(save_pretrained(DIR, safe_serialization=True)) to get the full preflight",
            )
        ]
    if facts.gguf_files:
        return [
            Finding(
                "weights",
                Status.WARN,
                f"GGUF weights ({', '.join(facts.gguf_files)}) are not checked by this preflight",
                "run vLLM with --tokenizer pointing at the original model's tokenizer",
            )
        ]
    if facts.has_adapter:
        return []  # an adapter without base weights: the lora check says what to do
    return [
        Finding(
            "weights",
            Status.FAIL,
            "no weights in the folder (no *.safetensors, no pytorch_model*.bin)",
            "copy the model's weight files into the folder (save_pretrained(DIR, "
            "safe_serialization=True) writes model*.safetensors)",
        )
    ]


def check_lora(facts: ModelFacts) -> list[Finding]:
    lora_keys = [n for n in facts.tensors if any(m in n for m in _LORA_MARKERS)]
    if lora_keys:
        return [
            Finding(
                "lora",
                Status.FAIL,
                f"unmerged LoRA checkpoint: {len(lora_keys)} LoRA tensors in the weights "
                f"(e.g. {lora_keys[0]}); vLLM cannot load lora_A/lora_B/base_layer weights",
                _merge_fix(facts),
                data={"lora_tensors": len(lora_keys)},
            )
        ]
    if not facts.has_adapter:
        return [Finding("lora", Status.OK, "no LoRA layers in the weights")]
    if not (facts.tensors or facts.pickled_weight_files or facts.gguf_files):
        return [
            Finding(
                "lora",
                Status.FAIL,
                "a LoRA adapter (adapter_config.json / adapter_model.*) without base weights: "
                "this folder is not a model vLLM can load",
                _merge_fix(facts),
            )
        ]
    return [
        Finding(
            "lora",
            Status.WARN,
            "adapter files next to full weights: vLLM ignores the adapter",
            "make sure the weights are the merged ones (merge_and_unload) and remove "
            "adapter_config.json/adapter_model.* to avoid confusion",
        )
    ]


def _merge_fix(facts: ModelFacts) -> str:
    base = (facts.adapter_config or {}).get("base_model_name_or_path")
    base_note = f" (base model: {base})" if isinstance(base, str) and base else ""
    return (
        "merge the LoRA into its base model with PEFT's merge_and_unload() and save again"
        f"{base_note}:\n{_MERGE_SNIPPET}\n"
        "then copy the tokenizer files into MERGED_DIR and serve MERGED_DIR. (In a training "
        "script that holds the PeftModel: model.merge_and_unload().save_pretrained(DIR).) "
        "Or serve the adapter on the base model: --model BASE --enable-lora "
        "--lora-modules NAME=ADAPTER_DIR"
    )
