#!/usr/bin/env bash
# Install (if needed) and start (if needed) the Docker engine that terminal-env runs sandboxes on.
#
# Why a script and not systemd: the machines this project runs on (Debian 12, root, containers
# inside a VM) have no init system, so `systemctl start docker` does nothing. We start dockerd
# ourselves, detached, and wait until it answers.
#
# Idempotent and fast: when dockerd, debootstrap and a live engine are all present it only runs
# `docker info` once (well under a second). Safe to call from CI and from `terminal-env doctor --fix`.
#
# Environment:
#   TERMINAL_ENV_DOCKERD_LOG      where dockerd's output goes (default /var/log/terminal-env-dockerd.log)
#   TERMINAL_ENV_ENGINE_WAIT      seconds to wait for the engine to answer (default 60)
set -euo pipefail

LOG="${TERMINAL_ENV_DOCKERD_LOG:-/var/log/terminal-env-dockerd.log}"
WAIT="${TERMINAL_ENV_ENGINE_WAIT:-60}"

say() { echo "install-engine: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

engine_up() { docker info >/dev/null 2>&1; }

# Fast path: everything is already there.
if command -v dockerd >/dev/null && command -v debootstrap >/dev/null && engine_up; then
    exit 0
fi

# ---- packages -------------------------------------------------------------------------------
# docker.io ships dockerd + a docker CLI; debootstrap builds the base image with no registry;
# tini provides docker-init, which `docker run --init` needs (PID 1 that reaps zombies).
missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if ! command -v docker-init >/dev/null && ! [ -x /usr/libexec/docker/docker-init ]; then
    missing+=(tini)
fi

if [ "${#missing[@]}" -gt 0 ]; then
    [ "$(id -u)" -eq 0 ] || die "need root to install ${missing[*]}; rerun with sudo"
    command -v apt-get >/dev/null || die "no apt-get: install ${missing[*]} with your OS's package manager"
    say "installing ${missing[*]} (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# ---- the daemon -----------------------------------------------------------------------------
if engine_up; then
    exit 0
fi

# A DOCKER_HOST pointing elsewhere means the user wants a remote engine: starting a local dockerd
# would not make that one answer.
if [ -n "${DOCKER_HOST:-}" ] && [ "${DOCKER_HOST}" != "unix:///var/run/docker.sock" ]; then
    die "DOCKER_HOST=${DOCKER_HOST} does not answer; start that engine, or unset DOCKER_HOST"
fi

[ "$(id -u)" -eq 0 ] || die "the Docker engine is not running and only root can start dockerd"

if pgrep -x dockerd >/dev/null; then
    # A dockerd that is still starting up (or wedged): wait for it rather than start a second one,
    # which would fail on the pid file and confuse the log.
    say "dockerd is running but not answering yet; waiting"
else
    say "starting dockerd (log: $LOG)"
    # setsid + nohup: the daemon must outlive this shell and the terminal that ran it.
    setsid nohup dockerd >>"$LOG" 2>&1 </dev/null &
fi

for _ in $(seq 1 "$WAIT"); do
    if engine_up; then
        say "engine is up"
        exit 0
    fi
    sleep 1
done

die "dockerd did not answer within ${WAIT}s; see the last lines of $LOG:
$(tail -n 20 "$LOG" 2>/dev/null || true)"
