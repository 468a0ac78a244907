# Shared by the installers of a cached virtual environment (install_vllm.sh, install_litellm.sh):
# sourced, not run. Each installer sets NAME (its log tag) before sourcing, then calls
#   parse_args "$@"                        --force sets force=1, -h/--help prints the header
#   lock_venv VENV                         one installer at a time per venv (waits its turn)
#   venv_ready VENV MARKER WANTED LABEL    exits 0, printing VENV, when the marker says WANTED
# The marker file, holding what was installed, is written by the installer as its last step.

log() { printf '[%s] %s\n' "$NAME" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

parse_args() {
    force=0
    for arg in "$@"; do
        case "$arg" in
            --force) force=1 ;;
            -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
            *) die "unknown argument: $arg (try --help)" ;;
        esac
    done
}

lock_venv() {
    mkdir -p "$(dirname "$1")"
    exec 9>"$1.lock"
    if ! flock -n 9; then
        log "another install into $1 is running; waiting for it..."
        flock 9
    fi
}

venv_ready() {
    if [[ $force -eq 0 && -f "$2" && "$(cat "$2")" == "$3" ]]; then
        log "$4 venv is ready: $1 ($3)"
        echo "$1"
        exit 0
    fi
}
