# lodevem's images: Debian bookworm's python3 (3.11) + the pinned wheels of one image + the worker.
# One file for all of them (lodevem/sandbox/image.py IMAGES): bench (torch CPU + onnxruntime),
# litert and ncnn (numpy + that runtime only) and convert (torch + litert-torch + pnnx); the
# context's wheels/ decides which, the build args IMAGE_TITLE/IMAGE_DESCRIPTION label it.
#
# Build it with `lodevem build-image`, which prepares the build context this file expects:
#   wheels/                 every wheel, resolved and downloaded ON THE HOST (pip inside build
#                           containers cannot reach the index here: TLS interception), plus
#   wheels/requirements.txt the pinned top-level requirements;
#   lodevem/                the files the worker runs: lodevem.wire.protocol.WORKER_SOURCES
#                           (__init__.py, version.py, errors.py, wire/, worker/, zoo/, and runtimes/: each runtime's
#                           container half lives in its folder), the same files its version digests.
# `FROM debian:bookworm` is pulled where a registry is reachable; an air-gapped machine gets the
# same name from debootstrap + `docker import` (lodevem/sandbox/image.py does both). Only features of the
# legacy builder are used (no BuildKit `RUN --mount`): the CLI here has no buildx.
#
# A layered image (ImageSpec.layered_on: convert on bench) is built FROM the other image with
# BASE_IMAGE=<its tag>, DEPS_DIR=/opt/pylayer and PIP_DEPS=--no-deps: wheels/ then holds only the
# wheels that image lacks (the host resolved the full set and dropped the shared ones), so torch
# is one layer on disk and a fresh machine downloads and installs it once.
ARG BASE_IMAGE=debian:bookworm

FROM ${BASE_IMAGE} AS base
USER root
ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8
# python3 only: torch's wheel bundles its own libgomp, and minbase already has libstdc++6.
# (A layered image's base already has it.)
RUN command -v python3 >/dev/null \
 || (apt-get update \
     && apt-get install -y --no-install-recommends python3 \
     && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb)

# A throw-away stage holds the ~270 MB of wheels, so they never become a layer of the final image.
FROM base AS deps
ARG DEPS_DIR=/opt/pydeps
ARG PIP_DEPS=
COPY wheels /wheels
# pip runs from its own wheel: no python3-pip (and its recommends) in the image. `--target`
# sidesteps Debian's PEP 668 guard without --break-system-packages and keeps the packages in one
# directory the final stage copies. Bytecode is compiled here because the root fs is read-only
# at run time.
RUN python3 "$(ls /wheels/pip-*.whl)/pip" install --no-index --find-links /wheels $PIP_DEPS \
        --no-cache-dir --disable-pip-version-check --root-user-action=ignore \
        --target "$DEPS_DIR" -r /wheels/requirements.txt \
 && rm -rf "$DEPS_DIR/bin"

FROM base
ARG DEPS_DIR=/opt/pydeps
COPY --from=deps ${DEPS_DIR} ${DEPS_DIR}
# The worker baked in, so the image works on its own; lodevem also bind-mounts the host's package
# read-only over /opt/lodevem/lodevem at run time, so a changed worker needs no rebuild (the
# measurement cache key carries the worker version next to the image id).
COPY lodevem /opt/lodevem/lodevem
RUN (id -u bench >/dev/null 2>&1 \
     || useradd --uid 1000 --user-group --no-create-home --home-dir /tmp --shell /usr/sbin/nologin bench) \
 && python3 -m compileall -q /opt/lodevem
# DEPS_DIR first: a layered image's own packages before those of the image it is built on.
ENV PYTHONPATH=/opt/lodevem:${DEPS_DIR}:/opt/pydeps \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    OMP_NUM_THREADS=1
ARG IMAGE_TITLE=lodevem-bench
ARG IMAGE_DESCRIPTION="python3 + torch CPU + onnxruntime"
LABEL org.opencontainers.image.title="${IMAGE_TITLE}" \
      org.opencontainers.image.description="lodevem worker: ${IMAGE_DESCRIPTION}"
USER 1000:1000
WORKDIR /tmp
ENTRYPOINT ["python3", "-m", "lodevem.worker"]
