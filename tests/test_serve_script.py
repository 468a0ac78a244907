"""scripts/serve_vllm.sh refuses a broken model folder before vLLM loads it (preflight), serves
in float32 on a CPU whose bf16 is emulated, and computes on both cores of a two-core CPU."""

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.support.fake_vllm import fake_vllm_venv
from tests.support.gateway import free_port

ROOT = Path(__file__).resolve().parents[1]


def _serve_in_background(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["scripts/serve_vllm.sh", "--background"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_serve_script_stops_at_preflight_with_the_fix(tmp_path: Path) -> None:
    model = tmp_path / "half-merged"
    model.mkdir()
    (model / "config.json").write_text(
        json.dumps({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2"})
    )
    env = {**os.environ, "MODEL": str(model), "PORT": "8899", "LOG_DIR": str(tmp_path)}
    done = _serve_in_background(env)
    assert done.returncode != 0
    assert "FAIL  tokenizer: no tokenizer files" in done.stderr
    assert "preflight found a problem" in done.stderr
    assert not (tmp_path / "vllm-8899.pid").exists(), "vLLM must not have been started"


@pytest.mark.parametrize(
    ("flags", "dtype", "passed"),
    [
        ("fpu sse2 avx2 fma", None, "float32"),  # AVX2 only: bf16 would be emulated
        ("fpu avx2 avx512f avx512_bf16", None, None),  # native bf16: vLLM's own choice
        ("fpu avx2 amx_bf16 amx_tile", None, None),
        ("fpu sse2 avx2 fma", "bfloat16", "bfloat16"),  # DTYPE said wins
    ],
    ids=["avx2", "avx512_bf16", "amx", "dtype-set"],
)
def test_serve_script_serves_float32_where_bf16_is_emulated(
    tmp_path: Path, flags: str, dtype: str | None, passed: str | None
) -> None:
    args, _ = _served_on_cpu(tmp_path, flags=flags, env={"DTYPE": dtype} if dtype else {})
    if passed is None:
        assert "--dtype" not in args, args
    else:
        assert args[args.index("--dtype") + 1] == passed, args


@pytest.mark.parametrize(
    ("env", "reserved"),
    [
        ({"CPUS": "2"}, "0"),  # vLLM's default would keep one of the two out of its compute
        ({"CPUS": "8"}, None),  # vLLM's default
        ({"CPUS": "2", "VLLM_CPU_OMP_THREADS_BIND": "0"}, None),  # vLLM's own settings win
        ({"CPUS": "2", "VLLM_CPU_NUM_OF_RESERVED_CPU": "1"}, "1"),
    ],
    ids=["two-cores", "eight-cores", "bind-set", "reserved-set"],
)
def test_serve_script_computes_on_both_cores_of_a_two_core_cpu(
    tmp_path: Path, env: dict[str, str], reserved: str | None
) -> None:
    _, settings = _served_on_cpu(tmp_path, flags="fpu avx2", env=env)
    assert settings.get("VLLM_CPU_NUM_OF_RESERVED_CPU") == reserved, settings


def _served_on_cpu(
    tmp_path: Path, *, flags: str, env: dict[str, str]
) -> tuple[list[str], dict[str, str]]:
    """Start the script on a CPU with these ``flags`` (and ``env``) with a fake vLLM: the
    command line vLLM got, and its ``VLLM_*`` environment."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
    argfile, envfile, pidfile = tmp_path / "args", tmp_path / "env", tmp_path / "vllm.pid"
    mine = ("DTYPE", "MODEL", "CPUS", "VLLM_CPU_OMP_THREADS_BIND", "VLLM_CPU_NUM_OF_RESERVED_CPU")
    environment = {key: value for key, value in os.environ.items() if key not in mine}
    environment.update(
        {
            "VLLM_VENV": str(fake_vllm_venv(tmp_path / "venv")),
            "MODEL": "org/fake-model",  # a hub name: no preflight, no fetch
            "VLLM_DEVICE": "cpu",
            "CPUINFO": str(cpuinfo),
            "PORT": str(free_port()),
            "LOG_DIR": str(tmp_path),
            "PID_FILE": str(pidfile),
            "FAKE_VLLM_ARGS": str(argfile),
            "FAKE_VLLM_ENV": str(envfile),
            **env,
        }
    )
    done = _serve_in_background(environment)
    try:
        assert done.returncode == 0, done.stderr
        args = argfile.read_text().split("\n")
        settings = dict(line.split("=", 1) for line in envfile.read_text().splitlines())
    finally:
        if pidfile.exists():
            os.killpg(int(pidfile.read_text()), signal.SIGKILL)
    return args, settings
