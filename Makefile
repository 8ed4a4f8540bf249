# lodevem: the two commands a new user needs are `make demo` and `make test`; `make test-fast`
# is the seconds-to-minutes check while changing code (docs/development.md has each lane's times).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# The CPU build of torch. On a machine where pip would pick a CUDA build, set e.g.
# TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
TORCH_SPEC ?= torch==2.13.0
TIER ?= tier2

.PHONY: setup setup-demo docker image demo-image slurm lint test test-fast test-docker test-slurm lane-slurm demo docs clean

# Two stamps: the demo needs lodevem and torch only; the tests add the `test` extra (LiteRT, ncnn
# and pnnx for the Slurm nodes' python, ruff, mypy, ...). --no-compile: python compiles what it
# imports on first use instead of every file of every package now (torch alone is ~2,300).
PIP := $(BIN)/pip install --quiet --no-compile

setup: $(VENV)/.installed-test

setup-demo: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) $(TORCH_SPEC)
	$(PIP) -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(PIP) -e ".[test]"
	touch $@

docker:                ## install and start the Docker engine if needed (root, Debian/Ubuntu)
	bash scripts/setup-docker.sh

# Every runtime's image: the tests measure under all four (the converter image adds ~1.3 GB
# to the benchmark image it is layered on),
# plus armsim (the emulated-Arm-core profiler, docs/armsim.md).
RUNTIMES ?= torch,onnxruntime,tflite,ncnn,armsim
# The demo (scripts/demo.sh) measures under what phone apps ship, LiteRT: the benchmark image
# (exports, derivations), the LiteRT image and the converter image (layered on the benchmark
# image's torch); not ncnn's. docs/first-run.md has the fresh-machine timings.
DEMO_RUNTIMES ?= tflite

# Two builds at a time (the converter waits for the benchmark image it is layered on).
image: setup-demo docker    ## build the images of $(RUNTIMES) (offline base image when no registry)
	$(BIN)/lodevem build-image --jobs 2 --runtime $(RUNTIMES)

demo-image: setup-demo docker  ## build only the images the demo needs ($(DEMO_RUNTIMES))
	$(BIN)/lodevem build-image --jobs 2 --runtime $(DEMO_RUNTIMES)

slurm:                 ## a single-node Slurm cluster (root; installs Slurm when missing)
	bash scripts/slurm-cluster.sh up

# ruff (lint and import order) and mypy (types: strict on calibration, zoo, store, safe_io), as
# configured in pyproject.toml; docs/development.md. Seconds, no engine needed.
lint: setup            ## ruff and mypy over the package, tests, scripts and benchmarks
	$(BIN)/ruff check lodevem tests scripts benchmarks
	$(BIN)/mypy

# The test lanes: every test is in exactly one (tests/conftest.py holds the same expressions and
# says what the markers mean). fast: no Docker, no Slurm, no emulation, <= 3 min; Docker: the
# real engine and images, and the pure tests too slow for the fast lane (marked slow, with why);
# Slurm: tests/test_slurm.py brings the cluster up itself (scripts/slurm-cluster.sh) when root.
FAST_LANE   := not docker and not slurm and not slow
DOCKER_LANE := (docker or slow) and not slurm
SLURM_LANE  := slurm
PYTEST      := $(BIN)/python -m pytest -q -rs --durations=25
# The fast lane is CPU-bound: pytest-xdist runs it in FAST_JOBS processes, a test file per process
# at a time (module fixtures stay in one process).
FAST_JOBS   ?= 2
FAST        := $(PYTEST) -n $(FAST_JOBS) --dist loadfile -m "$(FAST_LANE)"

test-fast: setup       ## the fast lane: no Docker, no Slurm, no emulation (<= 3 min)
	$(FAST)

test-docker: setup image  ## the Docker lane: the real engine and every runtime's image
	$(PYTEST) -m "$(DOCKER_LANE)"

test-slurm: setup image   ## the Slurm lane: a single-node cluster (root)
	$(PYTEST) -m "$(SLURM_LANE)"

# The Slurm lane alone, once setup and the images are made: .ci/run runs it beside the Docker lane,
# whose own `image` step must not race a second build-image over the same build context.
lane-slurm:
	$(PYTEST) -m "$(SLURM_LANE)"

test: setup lint image ## lint, then the three lanes: fast, Docker, Slurm (what .ci/run runs, timed)
	$(FAST)
	$(PYTEST) -m "$(DOCKER_LANE)"
	$(PYTEST) -m "$(SLURM_LANE)"

# scripts/demo.sh sets up, builds and runs in phases, each with its time (docs/first-run.md).
demo:                  ## venv + deps, Docker engine, the demo's images, zoo models, the tier2 benchmark
	DEMO_RUNTIMES=$(DEMO_RUNTIMES) PYTHON=$(PYTHON) VENV=$(VENV) TORCH_SPEC="$(TORCH_SPEC)" bash scripts/demo.sh $(TIER)

# docs/cli.md (cog) and every pasted output in README.md and docs/ (scripts/docs.py, real engine;
# DOCS_ARGS=--cheap for the outputs that need no container, --with-benchmarks --with-slurm for all).
DOCS_ARGS ?=
docs: setup            ## regenerate docs/cli.md and the pasted command outputs
	$(BIN)/python scripts/docs.py $(DOCS_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
