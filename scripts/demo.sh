#!/usr/bin/env bash
# The README's demo: zoo models into models/, their compressed siblings, then the benchmark on
# one tier. Run through `make demo` (which first sets up the venv, Docker and the image).
set -euo pipefail
cd "$(dirname "$0")/.."
TIER="${1:-tier2}"
BIN=.venv/bin

$BIN/lodevem check || echo "(some checks failed: lodevem falls back to the process backend where it can)"
$BIN/lodevem zoo mobilenet_v2 mobilenet_v3_small resnet18 --out models/
# Compressed siblings of mobilenet_v2, derived in the sandbox, written as files you own.
$BIN/lodevem derive models/mobilenet_v2.pt --levels int8-static,pruned --out models/
$BIN/lodevem start models/*.pt --tier "$TIER"
