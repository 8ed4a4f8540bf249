#!/usr/bin/env bash
# The README's demo (`make demo`), from a clean clone, in phases: one line when a phase starts,
# one with its time when it ends, the total at the end (docs/first-run.md has the figures).
#
#   setup     the venv (torch + lodevem, no test extras) and the Docker engine, side by side;
#   images    the benchmark image first (every ONNX export and derivation runs in it), then the
#             rest of DEMO_RUNTIMES' images (tflite: LiteRT's and the converter, two at a time)
#             in the background while the zoo models are written and the pruned sibling derived;
#   runs      the benchmark of the four models on one tier, then every compression level of
#             mobilenet_v2 (your file is not touched), each measured under DEMO_RUNTIMES.
#
# The two runs share one store of exports and conversions ($LODEVEM_SHARED_STORE = results/.cache),
# so the second does not convert mobilenet_v2 again. Needs root on a fresh machine (apt-get,
# dockerd); `make demo` passes PYTHON, VENV, TORCH_SPEC and DEMO_RUNTIMES.
set -euo pipefail
cd "$(dirname "$0")/.."
TIER="${1:-tier2}"
RUNTIMES="${DEMO_RUNTIMES:-tflite}"
BIN="${VENV:-.venv}/bin"
LOGS=$(mktemp -d "${TMPDIR:-/tmp}/lodevem-demo-XXXXXX")
STARTED=$EPOCHREALTIME
IMAGES=""
trap '[ -z "$IMAGES" ] || kill "$IMAGES" 2>/dev/null || true' EXIT  # a failed demo stops its background build

seconds_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }'; }
say() { printf '[demo %4s s] %s\n' "$(seconds_since "$STARTED")" "$*"; }

# phase WHAT COMMAND...: the command's output as it comes, between a start line and a done line.
phase() {
    local what=$1 began=$EPOCHREALTIME
    shift
    say "$what ..."
    "$@"
    say "$what: done in $(seconds_since "$began") s"
}

# Both halves of setup at once: pip is mostly unpacking torch, apt and dockerd mostly waiting.
setup() {
    make --no-print-directory setup-demo PYTHON="${PYTHON:-python3}" VENV="${VENV:-.venv}" \
        TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}" >"$LOGS/venv.log" 2>&1 &
    local venv=$!
    bash scripts/setup-docker.sh
    wait "$venv" || { tail -n 20 "$LOGS/venv.log" >&2; return 1; }
}

# The images of DEMO_RUNTIMES other than the benchmark image, in the background; their log and
# exit status are read by wait_images.
start_images() {
    "$BIN/lodevem" build-image --jobs 2 --runtime "$RUNTIMES" >"$LOGS/images.log" 2>&1 &
    IMAGES=$!
}
wait_images() {
    local pid=$IMAGES
    IMAGES=""
    if ! wait "$pid"; then
        tail -n 20 "$LOGS/images.log" >&2
        return 1
    fi
    grep -E '(built|already built)' "$LOGS/images.log" || true
}

phase "setup: venv (torch, lodevem) and the Docker engine" setup
phase "image: lodevem-bench (exports, derivations)" "$BIN/lodevem" build-image --runtime torch
start_images
say "images: the rest of --runtime $RUNTIMES, building in the background (log: $LOGS/images.log)"
phase "zoo: mobilenet_v2, mobilenet_v3_small, resnet18 into models/" \
    "$BIN/lodevem" zoo mobilenet_v2 mobilenet_v3_small resnet18 --out models/
# A pruned sibling of mobilenet_v2, derived in the sandbox, written as a file you own.
phase "derive: a pruned mobilenet_v2 into models/" \
    "$BIN/lodevem" derive models/mobilenet_v2.pt --levels pruned --out models/
phase "images: waiting for the rest of --runtime $RUNTIMES" wait_images
"$BIN/lodevem" check || say "(some checks failed: see the hints above)"
export LODEVEM_SHARED_STORE="$PWD/results/.cache"
MODELS=(models/*.pt)
phase "start: ${#MODELS[@]} models x $TIER under $RUNTIMES" \
    "$BIN/lodevem" start "${MODELS[@]}" --tier "$TIER" --runtime "$RUNTIMES"
# Every compression level of one model, derived on request (your file is not touched).
phase "start: every level of mobilenet_v2 x $TIER under $RUNTIMES" \
    "$BIN/lodevem" start models/mobilenet_v2.pt --levels all --tier "$TIER" --runtime "$RUNTIMES" \
    --output results/levels
say "total: $(seconds_since "$STARTED") s (setup, images, zoo, derive and both runs)"
rm -rf "$LOGS"
