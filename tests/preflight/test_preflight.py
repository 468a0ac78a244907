"""`python -m preflight`: model folders built by hand in tmp_path.

Safetensors files are written as the format defines them (8-byte little-endian header length,
JSON header, then the data); the data is a sparse run of zero bytes, so a 7B-sized checkpoint
costs no disk and no time.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from preflight import (
    ModelFacts,
    PlanOptions,
    Status,
    inspect_folder,
    machine,
    main,
    read_safetensors_header,
    run_checks,
)
from preflight.kv_cache import BLOCK_SIZE

_REAL_GPU_PROBE = machine.gpu_memory_gib
_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "I32": 4}

Tensors = dict[str, tuple[str, list[int]]]


def write_safetensors(path: Path, tensors: Tensors) -> None:
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = _BYTES[dtype]
        for dim in shape:
            size *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with path.open("wb") as f:
        f.write(len(raw).to_bytes(8, "little"))
        f.write(raw)
        f.truncate(8 + len(raw) + offset)  # sparse zero bytes


def llama_tensors(
    *, vocab: int, hidden: int, layers: int, inter: int, kv_dim: int, dtype: str = "BF16"
) -> Tensors:
    t: Tensors = {
        "model.embed_tokens.weight": (dtype, [vocab, hidden]),
        "model.norm.weight": (dtype, [hidden]),
        "lm_head.weight": (dtype, [vocab, hidden]),
    }
    for i in range(layers):
        p = f"model.layers.{i}."
        t |= {
            p + "input_layernorm.weight": (dtype, [hidden]),
            p + "post_attention_layernorm.weight": (dtype, [hidden]),
            p + "self_attn.q_proj.weight": (dtype, [hidden, hidden]),
            p + "self_attn.k_proj.weight": (dtype, [kv_dim, hidden]),
            p + "self_attn.v_proj.weight": (dtype, [kv_dim, hidden]),
            p + "self_attn.o_proj.weight": (dtype, [hidden, hidden]),
            p + "mlp.gate_proj.weight": (dtype, [inter, hidden]),
            p + "mlp.up_proj.weight": (dtype, [inter, hidden]),
            p + "mlp.down_proj.weight": (dtype, [hidden, inter]),
        }
    return t


TINY = {"vocab": 128, "hidden": 64, "layers": 2, "inter": 128, "heads": 4, "kv_heads": 2}
SEVEN_B = {
    "vocab": 32000,
    "hidden": 4096,
    "layers": 32,
    "inter": 11008,
    "heads": 32,
    "kv_heads": 32,
    "max_pos": 32768,
}


def config(shape: dict[str, int], **extra: Any) -> dict[str, Any]:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "torch_dtype": "bfloat16",
        "vocab_size": shape["vocab"],
        "hidden_size": shape["hidden"],
        "intermediate_size": shape["inter"],
        "num_hidden_layers": shape["layers"],
        "num_attention_heads": shape["heads"],
        "num_key_value_heads": shape["kv_heads"],
        "max_position_embeddings": shape.get("max_pos", 512),
        "bos_token_id": 1,
        "eos_token_id": 2,
        **extra,
    }


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data), encoding="utf-8")


def write_tokenizer(folder: Path, n_vocab: int = 120, added: tuple[int, ...] = (120, 121)) -> None:
    vocab = {f"t{i}": i for i in range(n_vocab)}
    added_tokens = [{"id": i, "content": f"<|s{i}|>", "special": True} for i in added]
    write_json(
        folder / "tokenizer.json",
        {"version": "1.0", "added_tokens": added_tokens, "model": {"type": "BPE", "vocab": vocab}},
    )
    write_json(
        folder / "tokenizer_config.json",
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "chat_template": "{{ messages }}",
            "added_tokens_decoder": {str(i): {"content": f"<|s{i}|>"} for i in added},
        },
    )


def make_model(
    folder: Path,
    shape: dict[str, int] | None = None,
    *,
    tensors: Tensors | None = None,
    shards: int = 1,
    tokenizer: bool = True,
    **config_extra: Any,
) -> Path:
    shape = shape or TINY
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / "config.json", config(shape, **config_extra))
    if tensors is None:
        kv_dim = shape["kv_heads"] * shape["hidden"] // shape["heads"]
        tensors = llama_tensors(
            vocab=shape["vocab"],
            hidden=shape["hidden"],
            layers=shape["layers"],
            inter=shape["inter"],
            kv_dim=kv_dim,
        )
    if shards == 1:
        write_safetensors(folder / "model.safetensors", tensors)
    else:
        names = list(tensors)
        weight_map: dict[str, str] = {}
        for s in range(shards):
            part = names[s::shards]
            fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            write_safetensors(folder / fname, {n: tensors[n] for n in part})
            weight_map |= dict.fromkeys(part, fname)
        write_json(
            folder / "model.safetensors.index.json", {"metadata": {}, "weight_map": weight_map}
        )
    if tokenizer:
        write_tokenizer(folder)
    return folder


@pytest.fixture(autouse=True)
def _no_device_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Results must not depend on this machine's GPU or vLLM environment variables."""
    monkeypatch.delenv("VLLM_ATTENTION_BACKEND", raising=False)
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    monkeypatch.setattr(machine, "gpu_memory_gib", lambda: (None, "no GPU (test)"))


def run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().out


def lines_of(out: str, status: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(status)]


def test_healthy_folder_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = make_model(tmp_path / "m")
    code, out = run(capsys, folder, "--gpu-memory", 16)
    assert code == 0, out
    assert not lines_of(out, "FAIL") and not lines_of(out, "WARN"), out
    for check in ("config", "weights", "lora", "vocab-size", "hidden-size", "layers"):
        assert f"OK    {check}:" in out
    assert "OK    memory:" in out
    assert "0 failed" in out


def test_unmerged_lora_keys_fail_with_merge_snippet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tensors = llama_tensors(vocab=128, hidden=64, layers=2, inter=128, kv_dim=32)
    for i in range(2):
        p = f"model.layers.{i}.self_attn.q_proj."
        del tensors[p + "weight"]
        tensors |= {
            p + "base_layer.weight": ("BF16", [64, 64]),
            p + "lora_A.default.weight": ("BF16", [8, 64]),
            p + "lora_B.default.weight": ("BF16", [64, 8]),
        }
    folder = make_model(tmp_path / "m", tensors=tensors)
    code, out = run(capsys, folder, "--gpu-memory", 16)
    assert code == 1
    [fail] = lines_of(out, "FAIL")
    assert fail.startswith("FAIL  lora: unmerged LoRA checkpoint: 6 LoRA tensors")
    assert "merge_and_unload()" in out
    assert "model = model.merge_and_unload()" in out  # the snippet itself


def test_adapter_without_base_weights_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "adapter"
    folder.mkdir()
    write_json(folder / "adapter_config.json", {"base_model_name_or_path": "Qwen/Qwen2-7B"})
    write_safetensors(
        folder / "adapter_model.safetensors",
        {"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": ("F32", [8, 64])},
    )
    write_tokenizer(folder)
    code, out = run(capsys, folder, "--gpu-memory", 16)
    assert code == 1
    assert "FAIL  lora: a LoRA adapter" in out
    assert "merge_and_unload" in out and "(base model: Qwen/Qwen2-7B)" in out


def test_vocab_size_against_embedding_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = make_model(tmp_path / "m", vocab_size=100)
    code, out = run(capsys, folder, "--gpu-memory", 16)
    assert code == 1
    assert (
        "FAIL  vocab-size: config.json vocab_size 100 but model.embed_tokens.weight has 128" in out
    )
    assert 'set "vocab_size": 128' in out


def test_hidden_size_against_embedding_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = make_model(tmp_path / "m", hidden_size=128)
    code, out = run(capsys, folder, "--gpu-memory", 16)
    assert code == 1
    assert (
        "FAIL  hidden-size: config.json hidden_size 128 but model.embed_tokens.weight has 64" in out
    )


def test_layer_count_against_weights(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, make_model(tmp_path / "few", num_hidden_layers=1), "--gpu-memory", 16)
    assert code == 1 and "weights go up to layer index 1" in out
    code, out = run(capsys, make_model(tmp_path / "many", num_hidden_layers=4), "--gpu-memory", 16)
    assert code == 1 and "layers [2, 3] are missing" in out


def test_tokenizer_ids_beyond_vocab_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = make_model(tmp_path / "m")
    write_tokenizer(folder, added=(120, 130, 131))
    code, out = run(capsys, folder, "--gpu-memory", 16)
    assert code == 1
    [fail] = lines_of(out, "FAIL")
    assert "tokenizer-ids: token ids beyond vocab_size 128: 131" in fail
    assert "resize_token_embeddings" in out
    # the base vocabulary alone can be too large, and so can config ids
    folder2 = make_model(tmp_path / "m2", eos_token_id=[2, 500])
    write_tokenizer(folder2, n_vocab=200, added=())
    code, out = run(capsys, folder2, "--gpu-memory", 16)
    assert code == 1
    assert "500 (config.json eos_token_id)" in out and "199 (tokenizer.json model.vocab)" in out


def test_tokenizer_config_names_missing_tokenizer_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = make_model(tmp_path / "m")
    (folder / "tokenizer.json").unlink()
    config = json.loads((folder / "tokenizer_config.json").read_text())
    write_json(
        folder / "tokenizer_config.json", config | {"tokenizer_file": "/train/tokenizer.json"}
    )
    code, out = run(capsys, folder, "--gpu-memory", 16)
    assert code == 1
    assert (
        "FAIL  tokenizer: tokenizer_config.json names tokenizer_file '/train/tokenizer.json'" in out
    )


def test_tokenizer_class_needs_files_that_are_absent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = make_model(tmp_path / "m")
    (folder / "tokenizer.json").unlink()
    write_json(folder / "tokenizer_config.json", {"tokenizer_class": "LlamaTokenizerFast"})
    code, out = run(capsys, folder, "--gpu-memory", 16)
    assert code == 1
    assert "LlamaTokenizerFast needs tokenizer.json or tokenizer.model" in out
    (folder / "tokenizer.model").write_bytes(b"spm")  # the slow file is enough (converted)
    code, out = run(capsys, folder, "--gpu-memory", 16)
    assert "OK    tokenizer: LlamaTokenizerFast from tokenizer.model" in out


def test_no_tokenizer_at_all(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = make_model(tmp_path / "m", tokenizer=False)
    code, out = run(capsys, folder, "--gpu-memory", 16)
    assert code == 1
    assert "FAIL  tokenizer: no tokenizer files in the folder" in out
    assert "--tokenizer BASE" in out


def test_gemma2_needs_flashinfer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = make_model(tmp_path / "g", model_type="gemma2", architectures=["Gemma2ForCausalLM"])
    code, out = run(capsys, folder, "--gpu-memory", 16)
    assert code == 1
    assert "FAIL  attention: the Gemma-2 family" in out
    assert "install flashinfer" in out and "VLLM_ATTENTION_BACKEND=FLASHINFER" in out
    assert run(capsys, folder, "--gpu-memory", 16, "--attention-backend", "FLASHINFER")[0] == 0
    monkeypatch.setenv("VLLM_ATTENTION_BACKEND", "FLASHINFER")
    assert run(capsys, folder, "--gpu-memory", 16)[0] == 0
    monkeypatch.delenv("VLLM_ATTENTION_BACKEND")
    # softcapping in the config marks the family too, whatever the model_type
    other = make_model(tmp_path / "s", final_logit_softcapping=30.0)
    assert run(capsys, other, "--gpu-memory", 16)[0] == 1


def test_kv_cache_that_does_not_fit_suggests_a_max_model_len(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = make_model(tmp_path / "7b", SEVEN_B, shards=3)
    code, out = run(capsys, folder, "--gpu-memory", 16, "--json")
    report = json.loads(out)
    assert code == 1 and report["exit_code"] == 1 and not report["ok"]
    [memory] = [f for f in report["findings"] if f["check"] == "memory"]
    assert memory["status"] == "FAIL"
    assert "To serve at least one request with the model's max seq len (32768)" in memory["message"]
    assert memory["data"]["kv_bytes_per_token"] == 32 * 32 * 128 * 2 * 2  # 512 KiB
    assert memory["data"]["kv_needed_bytes"] == 16 * 2**30
    suggested = memory["data"]["suggested_max_model_len"]
    assert 0 < suggested <= memory["data"]["max_fitting_max_model_len"] < 32768
    assert f"--max-model-len {suggested}" in memory["fix"]

    code, out = run(capsys, folder, "--gpu-memory", 16, "--max-model-len", suggested)
    assert code == 0, out
    assert "OK    memory:" in out
    assert "WARN  concurrency:" in out  # 256 full-length sequences do not fit: a warning only

    # the exact limit fits, one block more does not
    exact = memory["data"]["max_fitting_max_model_len"]
    assert run(capsys, folder, "--gpu-memory", 16, "--max-model-len", exact)[0] == 0
    assert run(capsys, folder, "--gpu-memory", 16, "--max-model-len", exact + BLOCK_SIZE)[0] == 1


def test_no_memory_left_for_the_cache_blocks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = make_model(tmp_path / "7b", SEVEN_B)
    code, out = run(capsys, folder, "--gpu-memory", 14, "--max-model-len", 4096)
    assert code == 1
    assert 'vLLM stops with "No available memory for the cache blocks"' in out
    assert "quantized checkpoint" in out
    # a larger share of a 16 GiB GPU is enough for 2k tokens
    code, out = run(capsys, folder, "--gpu-memory", 16, "--max-model-len", 2048)
    assert code == 1 and "--gpu-memory-utilization 0.94" in out
    raised = ("--gpu-memory-utilization", 0.94)
    assert run(capsys, folder, "--gpu-memory", 16, "--max-model-len", 2048, *raised)[0] == 0


def test_fp8_kv_cache_and_dtype_change_the_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = make_model(tmp_path / "7b", SEVEN_B)
    args = (folder, "--gpu-memory", 24, "--max-model-len", 16384, "--json")
    memory = _memory(run(capsys, *args))
    assert memory["status"] == "FAIL" and "--kv-cache-dtype fp8" in memory["fix"]
    memory = _memory(run(capsys, *args, "--kv-cache-dtype", "fp8"))
    assert memory["status"] == "OK" and memory["data"]["kv_bytes_per_token"] == 256 * 1024
    weights_bf16 = memory["data"]["weights_bytes"]
    memory = _memory(run(capsys, *args, "--dtype", "float32"))
    assert memory["data"]["weights_bytes"] == 2 * weights_bf16


def _memory(result: tuple[int, str]) -> dict[str, Any]:
    findings: list[dict[str, Any]] = json.loads(result[1])["findings"]
    [memory] = [f for f in findings if f["check"] == "memory"]
    return memory


def test_sliding_window_layers_hold_only_the_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = make_model(
        tmp_path / "m",
        max_position_embeddings=4096,
        sliding_window=64,
        layer_types=["sliding_attention", "full_attention"],
    )
    memory = _memory(
        run(capsys, folder, "--gpu-memory", 16, "--max-num-batched-tokens", 16, "--json")
    )
    per_layer_token = 2 * 2 * 16 * 2  # K and V, 2 KV heads, head_dim 64 / 4, bf16
    window_tokens = (-(-(64 - 1 + 16) // BLOCK_SIZE) + 1) * BLOCK_SIZE  # window + a chunk
    assert memory["data"]["kv_needed_bytes"] == per_layer_token * (4096 + window_tokens)


def test_cpu_mode_checks_against_vllm_cpu_kvcache_space(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = make_model(tmp_path / "7b", SEVEN_B)
    code, out = run(capsys, folder, "--cpu-kvcache-gib", 4)
    assert code == 1
    assert "VLLM_CPU_KVCACHE_SPACE=16" in out and "--max-model-len 8192" in out
    assert run(capsys, folder, "--cpu-kvcache-gib", 4, "--max-model-len", 8192)[0] == 0
    # with no GPU, VLLM_CPU_KVCACHE_SPACE from the environment selects the CPU plan
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "16")
    code, out = run(capsys, folder)
    assert code == 0 and "VLLM_CPU_KVCACHE_SPACE=16 GiB" in out


def test_memory_plan_is_skipped_without_a_memory_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run(capsys, make_model(tmp_path / "m"))
    assert code == 0
    assert "WARN  memory: plan skipped: no GPU (test)" in out
    assert "--gpu-memory GiB" in out


def test_gpu_memory_from_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 81559\necho 40960\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(fake.parent))
    assert _REAL_GPU_PROBE() == (40.0, "")  # MiB, the smallest GPU
    monkeypatch.setenv("PATH", str(tmp_path))
    assert _REAL_GPU_PROBE()[0] is None


def test_sharded_weights_via_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = make_model(tmp_path / "m", shards=2)
    code, out = run(capsys, folder, "--gpu-memory", 16)
    assert code == 0, out
    assert "OK    weights: 2 safetensors file(s), 21 tensors" in out
    (folder / "model-00002-of-00002.safetensors").unlink()
    code, out = run(capsys, folder, "--gpu-memory", 16)
    assert code == 1
    assert "FAIL  weights: model-00002-of-00002.safetensors is listed in" in out


def test_truncated_safetensors_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = make_model(tmp_path / "m")
    weights = folder / "model.safetensors"
    with weights.open("r+b") as f:
        f.truncate(weights.stat().st_size - 1)
    code, out = run(capsys, folder, "--gpu-memory", 16)
    assert code == 1 and "truncated" in out and "incomplete download" in out
    with pytest.raises(ValueError, match="truncated"):
        read_safetensors_header(weights)


def test_json_output_parses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, make_model(tmp_path / "m"), "--gpu-memory", 16, "--json")
    report = json.loads(out)
    assert code == 0 and report["ok"] and report["exit_code"] == 0
    assert {f["status"] for f in report["findings"]} == {"OK"}
    assert {"check", "status", "message", "fix", "data"} <= set(report["findings"][0])


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, tmp_path / "absent")[0] == 2
    assert run(capsys, tmp_path, "--max-model-len", 0)[0] == 2
    assert run(capsys, tmp_path, "--kv-cache-dtype", "int3")[0] == 2
    capsys.readouterr()


def test_run_checks_is_pure_over_facts() -> None:
    facts = ModelFacts(path=Path("/nowhere"))
    findings = run_checks(facts, PlanOptions(gpu_memory_gib=16))
    assert [(f.check, f.status) for f in findings] == [
        ("config", Status.FAIL),
        ("weights", Status.FAIL),
        ("lora", Status.OK),
        ("tokenizer", Status.FAIL),
    ]


def test_real_tiny_model(capsys: pytest.CaptureFixture[str], vllm_model_dir: Path) -> None:
    """The model the end-to-end tests serve (built by the shared fixture when absent)."""
    code, out = run(capsys, vllm_model_dir, "--cpu-kvcache-gib", 1, "--max-model-len", 4096)
    assert code == 0, out
    assert not lines_of(out, "FAIL")
    facts = inspect_folder(vllm_model_dir)
    assert facts.config is not None
    assert facts.tensors["model.embed_tokens.weight"].shape[0] == facts.config["vocab_size"]


@pytest.mark.parametrize("module", ["preflight", "app.llm.preflight"])
def test_both_spellings_of_the_command_judge_alike(tmp_path: Path, module: str) -> None:
    """SPEC's operator command (``python -m app.llm.preflight``) and the tool's own name give
    the same verdict: 0 on a loadable folder, 1 with the fix on a broken one."""
    good = make_model(tmp_path / "good")
    broken = make_model(tmp_path / "broken", tokenizer=False)
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(root)}
    ok = subprocess.run(
        [sys.executable, "-m", module, str(good), "--cpu-kvcache-gib", "1"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    bad = subprocess.run(
        [sys.executable, "-m", module, str(broken), "--cpu-kvcache-gib", "1"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "FAIL  tokenizer" in bad.stdout
