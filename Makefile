# lodevem: the two commands a new user needs are `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# The CPU build of torch. On a machine where pip would pick a CUDA build, set e.g.
# TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
TORCH_SPEC ?= torch==2.13.0
TIER ?= tier2

.PHONY: setup docker image demo-image slurm lint test demo docs clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet $(TORCH_SPEC)
	$(BIN)/pip install --quiet -e ".[test]"
	touch $@

docker:                ## install and start the Docker engine if needed (root, Debian/Ubuntu)
	bash scripts/setup-docker.sh

# Every runtime's image: the tests measure under all four (the converter image adds ~1.3 GB
# to the benchmark image it is layered on),
# plus armsim (the emulated-Arm-core profiler, docs/armsim.md).
RUNTIMES ?= torch,onnxruntime,tflite,ncnn,armsim
# The demo (scripts/demo.sh) measures under the default runtime, tflite (what an Android app
# ships): the benchmark image (exports, derivations), LiteRT's and the converter's
# (docs/first-run.md has the fresh-machine timings).
# The demo (scripts/demo.sh) measures under what phone apps ship, LiteRT: the benchmark image
# (exports, derivations), the LiteRT image and the converter image (layered on the benchmark
# image's torch); not ncnn's. docs/first-run.md has the fresh-machine timings.
DEMO_RUNTIMES ?= tflite

image: setup docker    ## build the images of $(RUNTIMES) (offline base image when no registry)
	$(BIN)/lodevem build-image --runtime $(RUNTIMES)

demo-image: setup docker  ## build only the images the demo needs ($(DEMO_RUNTIMES))
	$(BIN)/lodevem build-image --runtime $(DEMO_RUNTIMES)

slurm:                 ## a single-node Slurm cluster (root; installs Slurm when missing)
	bash scripts/slurm-cluster.sh up

# ruff (lint and import order) and mypy (types: strict on calibration, zoo, store, safe_io), as
# configured in pyproject.toml; docs/development.md. Seconds, no engine needed.
lint: setup            ## ruff and mypy over the package, tests, scripts and benchmarks
	$(BIN)/ruff check lodevem tests scripts benchmarks
	$(BIN)/mypy

# tests/test_slurm.py brings the Slurm cluster up itself (scripts/slurm-cluster.sh) when run as root.
test: setup lint image ## lint, then the full test suite, against the real Docker engine and a real Slurm cluster
	$(BIN)/python -m pytest -q -rs

demo: setup demo-image ## zoo models into models/, then the tier2 benchmark
	DEMO_RUNTIMES=$(DEMO_RUNTIMES) bash scripts/demo.sh $(TIER)

# docs/cli.md (cog) and every pasted output in README.md and docs/ (scripts/docs.py, real engine;
# DOCS_ARGS=--cheap for the outputs that need no container, --with-benchmarks --with-slurm for all).
DOCS_ARGS ?=
docs: setup            ## regenerate docs/cli.md and the pasted command outputs
	$(BIN)/python scripts/docs.py $(DOCS_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
