"""scripts/serve_vllm.sh refuses a broken model folder before vLLM loads it (preflight)."""

import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_serve_script_stops_at_preflight_with_the_fix(tmp_path: Path) -> None:
    model = tmp_path / "half-merged"
    model.mkdir()
    (model / "config.json").write_text(
        json.dumps({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2"})
    )
    env = {**os.environ, "MODEL": str(model), "PORT": "8899", "LOG_DIR": str(tmp_path)}
    done = subprocess.run(
        ["scripts/serve_vllm.sh", "--background"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "FAIL  tokenizer: no tokenizer files" in done.stderr
    assert "preflight found a problem" in done.stderr
    assert not (tmp_path / "vllm-8899.pid").exists(), "vLLM must not have been started"
