#!/usr/bin/env bash
# Make a Docker engine usable for lodevem on a fresh Debian/Ubuntu machine or in CI. Idempotent.
#
#   1. apt-get install docker.io and debootstrap, only when missing (the base image is built
#      offline with debootstrap where no registry is reachable);
#   2. start dockerd in the background when its socket does not answer (no systemd in CI
#      containers), logging to /tmp/dockerd.log;
#   3. wait up to 60 s for `docker info`, or fail with the log's last lines.
#
# Needs root (apt, dockerd). Building the image is a separate step: `lodevem build-image`.
set -euo pipefail

log() { printf 'setup-docker: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root (apt-get install, dockerd): run it with sudo"

missing=()
{ command -v dockerd && command -v docker; } >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if [ "${#missing[@]}" -gt 0 ]; then
    command -v apt-get >/dev/null 2>&1 || die "apt-get not found: install ${missing[*]} by hand"
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

answers() { timeout 10 docker info >/dev/null 2>&1; }

if answers; then
    log "docker daemon already answering"
    exit 0
fi

if ! { command -v pgrep >/dev/null 2>&1 && pgrep -x dockerd >/dev/null 2>&1; }; then
    log "starting dockerd (log: /tmp/dockerd.log)"
    # setsid + nohup: the daemon outlives this script and the CI step that ran it.
    setsid nohup dockerd >/tmp/dockerd.log 2>&1 < /dev/null &
fi

for _ in $(seq 1 120); do
    if answers; then
        log "docker daemon ready ($(docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?'))"
        exit 0
    fi
    sleep 0.5
done
log "last lines of /tmp/dockerd.log:"
tail -n 15 /tmp/dockerd.log >&2 || true
die "docker daemon did not answer within 60 s"
