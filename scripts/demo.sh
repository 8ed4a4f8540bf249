#!/usr/bin/env bash
# The README's demo: zoo models into models/, a pruned sibling, then the benchmark on one tier,
# then every compression level of mobilenet_v2. Run through `make demo` (which first sets up
# the venv, Docker and the images it needs: lodevem-bench, lodevem-litert and lodevem-convert;
# every run here measures under the default runtime, tflite, each level made by LiteRT's own
# converter from the fp32 file).
# the venv, Docker and the images of DEMO_RUNTIMES: tflite needs lodevem-bench, lodevem-litert
# and lodevem-convert); every start measures under DEMO_RUNTIMES (default tflite).
set -euo pipefail
cd "$(dirname "$0")/.."
TIER="${1:-tier2}"
RUNTIMES="${DEMO_RUNTIMES:-tflite}"
BIN=.venv/bin

$BIN/lodevem check || echo "(some checks failed: the runs below need the Docker daemon and image; see the hints above)"
$BIN/lodevem zoo mobilenet_v2 mobilenet_v3_small resnet18 --out models/
# A pruned sibling of mobilenet_v2, derived in the sandbox, written as a file you own.
$BIN/lodevem derive models/mobilenet_v2.pt --levels pruned --out models/
$BIN/lodevem start models/*.pt --tier "$TIER" --runtime "$RUNTIMES"
# Every compression level of one model, derived on request (your file is not touched).
$BIN/lodevem start models/mobilenet_v2.pt --levels all --tier "$TIER" --runtime "$RUNTIMES" --output results/levels
