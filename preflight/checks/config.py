"""config.json checks: ``config``, then ``vocab-size``, ``hidden-size`` and ``layers``.

The last three hold the config against the weights: a config.json of another model size makes
vLLM fail while loading.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from preflight.facts import ModelFacts
from preflight.findings import Finding, Status
from preflight.safetensors_header import TensorInfo

__all__ = ["check_config", "check_shapes"]

_EMBED_NAMES = (
    "model.embed_tokens.weight",
    "model.language_model.embed_tokens.weight",
    "language_model.model.embed_tokens.weight",
    "transformer.wte.weight",
    "gpt_neox.embed_in.weight",
    "transformer.word_embeddings.weight",
    "transformer.embedding.word_embeddings.weight",
    "model.tok_embeddings.weight",
    "tok_embeddings.weight",
)
_LM_HEAD_NAMES = (
    "lm_head.weight",
    "language_model.lm_head.weight",
    "embed_out.weight",
    "transformer.output_layer.weight",
    "output.weight",
)
_LAYER_RE = re.compile(
    r"^(?:model\.(?:language_model\.|decoder\.)?|language_model\.model\.|"
    r"transformer\.(?:encoder\.)?|gpt_neox\.)?(?:layers|h|blocks)\.(\d+)\."
)


def check_config(facts: ModelFacts) -> list[Finding]:
    if "config.json" in facts.read_errors:
        return [
            Finding(
                "config",
                Status.FAIL,
                f"config.json {facts.read_errors['config.json']}",
                "fix the JSON (a stray comma or a cut-off file), or copy config.json again from "
                "where the model was saved",
            )
        ]
    if facts.config is None:
        fix = (
            "copy config.json from the training output (model.config.save_pretrained(MODEL_DIR)) "
            "or from the base model of the same size"
        )
        if "params.json" in facts.files:
            fix += (
                "; this looks like a Mistral-format folder (params.json): start vLLM with "
                "--tokenizer-mode mistral --config-format mistral --load-format mistral"
            )
        return [Finding("config", Status.FAIL, "no config.json in the folder", fix)]
    archs = facts.config.get("architectures")
    summary = (
        f"{','.join(archs) if isinstance(archs, list) else '?'} "
        f"(model_type {facts.config_value('model_type')}), "
        f"layers {facts.config_value('num_hidden_layers')}, "
        f"hidden {facts.config_value('hidden_size')}, vocab {facts.config_value('vocab_size')}"
    )
    if not isinstance(archs, list) or not archs:
        return [
            Finding(
                "config",
                Status.WARN,
                f"config.json has no architectures list: {summary}",
                'add "architectures": ["<ModelClass>ForCausalLM"] (vLLM picks the model class '
                "from it)",
            )
        ]
    return [Finding("config", Status.OK, f"config.json: {summary}")]


def check_shapes(facts: ModelFacts) -> list[Finding]:
    """config.json against the weights: vocab_size, hidden_size and num_hidden_layers."""
    if facts.config is None or not facts.tensors:
        return []
    return [_check_vocab(facts), _check_hidden(facts), _check_layers(facts)]


def _find_tensor(facts: ModelFacts, names: Sequence[str], suffix: str) -> TensorInfo | None:
    """The first of ``names`` in the weights, else a language-model tensor ending in ``suffix``."""
    for name in names:
        if name in facts.tensors:
            return facts.tensors[name]
    for name, info in facts.tensors.items():
        if name.endswith(suffix) and "vision" not in name and "visual" not in name:
            return info
    return None


def _embedding(facts: ModelFacts) -> TensorInfo | None:
    return _find_tensor(facts, _EMBED_NAMES, "embed_tokens.weight")


def _check_vocab(facts: ModelFacts) -> Finding:
    vocab = facts.vocab_size
    head = _find_tensor(facts, _LM_HEAD_NAMES, "lm_head.weight")
    matrices = [t for t in (_embedding(facts), head) if t is not None and len(t.shape) == 2]
    if vocab is None or not matrices:
        what = "vocab_size is not in config.json" if vocab is None else "no embedding tensor"
        return Finding("vocab-size", Status.WARN, f"not checked: {what}")
    wrong = [t for t in matrices if t.shape[0] != vocab]
    if wrong:
        rows = wrong[0].shape[0]
        return Finding(
            "vocab-size",
            Status.FAIL,
            f"config.json vocab_size {vocab} but {wrong[0].name} has {rows} rows "
            f"(shape {list(wrong[0].shape)}); vLLM fails loading it (size mismatch)",
            f'set "vocab_size": {rows} in config.json (the embeddings were resized, e.g. by '
            "resize_token_embeddings, after the config was written), or use the config.json "
            "saved together with these weights",
            data={"vocab_size": vocab, "rows": rows, "tensor": wrong[0].name},
        )
    names = " and ".join(t.name for t in matrices)
    return Finding("vocab-size", Status.OK, f"vocab_size {vocab} = rows of {names}")


def _check_hidden(facts: ModelFacts) -> Finding:
    hidden = facts.hidden_size
    embed = _embedding(facts)
    if hidden is None or embed is None or len(embed.shape) != 2:
        return Finding("hidden-size", Status.WARN, "not checked: no hidden_size or embedding")
    cols = embed.shape[1]
    allowed = {hidden, facts.config_int("word_embed_proj_dim")}  # OPT projects its embeddings
    if cols not in allowed:
        return Finding(
            "hidden-size",
            Status.FAIL,
            f"config.json hidden_size {hidden} but {embed.name} has {cols} columns: the "
            "config belongs to a different model size",
            "use the config.json saved together with these weights (or the base model's "
            f"config of that size: hidden_size {cols})",
            data={"hidden_size": hidden, "columns": cols},
        )
    return Finding("hidden-size", Status.OK, f"hidden_size {hidden} = columns of {embed.name}")


def _check_layers(facts: ModelFacts) -> Finding:
    layers = facts.num_layers
    found = {int(m.group(1)) for n in facts.tensors if (m := _LAYER_RE.match(n))}
    if layers is None or not found:
        return Finding("layers", Status.WARN, "not checked: no num_hidden_layers or layer keys")
    extra = facts.config_int("num_nextn_predict_layers") or 0  # MTP layers come after the rest
    top = max(found)
    missing = sorted(set(range(layers)) - found)
    if top + 1 > layers + extra or missing:
        detail = (
            f"layers {missing[:5]}{'...' if len(missing) > 5 else ''} are missing"
            if missing
            else f"the weights go up to layer index {top}"
        )
        return Finding(
            "layers",
            Status.FAIL,
            f"config.json num_hidden_layers {layers} but {detail}",
            f'set "num_hidden_layers": {top + 1} if the weights are complete (the config '
            "belongs to another size), otherwise copy the missing shards",
            data={"num_hidden_layers": layers, "highest_layer_index": top},
        )
    return Finding("layers", Status.OK, f"num_hidden_layers {layers} = layers in the weights")
