#!/usr/bin/env bash
# Install (if needed) and start (if needed) the Docker engine that terminal-env runs sandboxes on.
#
# Why a script and not systemd: the machines this project runs on (Debian 12, root, containers
# inside a VM) have no init system, so `systemctl start docker` does nothing. We start dockerd
# ourselves, detached, and wait until it answers.
#
# Also installs gVisor's runsc where the machine's Debian mirror has it, and registers it in the
# engine (the hardened mode, SECURITY.md); TERMINAL_ENV_RUNSC=0 skips that.
#
# Idempotent and fast: when dockerd, debootstrap, a live engine and a registered runsc (or a
# record that none can be had here) are all present it only runs `docker info` twice (well under
# a second). Safe to call from CI and from `terminal-env doctor --fix`.
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
# Whether apt offers package $1. grep reads the whole listing: `grep -q` would stop at the first
# match and apt-cache, writing on, would die of SIGPIPE (exit 141), which pipefail turns into "no".
has_candidate() { apt-cache policy "$1" 2>/dev/null | grep 'Candidate: [0-9]' >/dev/null; }

# gVisor's runsc, for the hardened mode (SECURITY.md): installed from the machine's Debian mirror
# where it has the package, and registered in the engine with the arguments it needs here. They
# must equal RUNSC_ARGS in terminal_env/sandbox/runtimes.py (a test checks).
RUNSC_ARGS=(--network=none --file-access=shared)
DAEMON_JSON="${TERMINAL_ENV_DAEMON_JSON:-/etc/docker/daemon.json}"
# Set TERMINAL_ENV_RUNSC=0 to leave runsc alone. Where no source has it, a stamp file remembers that
# (for a day) so that later runs stay fast; delete it to try again.
RUNSC_STAMP=/var/lib/terminal-env/runsc-unavailable

runsc_registered() {
    docker info --format '{{json .Runtimes}}' 2>/dev/null | python3 -c '
import json, sys
want = sys.argv[1:]
runtimes = json.load(sys.stdin) or {}
sys.exit(0 if (runtimes.get("runsc") or {}).get("runtimeArgs") == want else 1)' "${RUNSC_ARGS[@]}"
}

runsc_wanted() {
    [ "${TERMINAL_ENV_RUNSC:-1}" != 0 ] || return 1
    [ "$(id -u)" -eq 0 ] || return 1
    # a remote engine's runtimes are configured on its own machine
    [ -z "${DOCKER_HOST:-}" ] || [ "${DOCKER_HOST}" = "unix:///var/run/docker.sock" ] || return 1
    if [ -f "$RUNSC_STAMP" ] && [ -n "$(find "$RUNSC_STAMP" -mmin -1440 2>/dev/null)" ]; then
        return 1
    fi
    return 0
}

setup_runsc() {
    runsc_wanted || return 0
    if runsc_registered && command -v cc >/dev/null; then
        return 0
    fi
    local need=()
    command -v runsc >/dev/null || need+=(runsc)
    command -v cc >/dev/null || need+=(gcc)  # builds the sandbox's statx fix (runtimes.py)
    if [ "${#need[@]}" -gt 0 ]; then
        if ! command -v apt-get >/dev/null; then
            say "no apt-get: gVisor's runsc is not installed; the hardened-mode tests will be skipped"
            return 0
        fi
        export DEBIAN_FRONTEND=noninteractive
        if ! has_candidate "${need[0]}"; then
            apt-get update -qq || true
        fi
        if ! has_candidate "${need[0]}"; then
            mkdir -p "$(dirname "$RUNSC_STAMP")" && touch "$RUNSC_STAMP"
            say "this machine's package sources have no ${need[0]} (needed for gVisor): the hardened" \
                "mode is unavailable and its tests will be skipped (SECURITY.md: installing it by hand)"
            return 0
        fi
        say "installing ${need[*]} (apt-get) for the gVisor hardened mode"
        apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    fi
    runsc_registered && return 0
    say "registering runsc in $DAEMON_JSON (${RUNSC_ARGS[*]})"
    mkdir -p "$(dirname "$DAEMON_JSON")"
    python3 - "$DAEMON_JSON" "$(command -v runsc)" "${RUNSC_ARGS[@]}" <<'PY'
import json, os, sys
path, runsc, args = sys.argv[1], sys.argv[2], sys.argv[3:]
config = {}
if os.path.exists(path) and os.path.getsize(path):
    with open(path) as fh:
        config = json.load(fh)
config.setdefault("runtimes", {})["runsc"] = {"path": runsc, "runtimeArgs": args}
tmp = path + ".terminal-env.tmp"
with open(tmp, "w") as fh:
    json.dump(config, fh, indent=2)
    fh.write("\n")
os.replace(tmp, path)
PY
    # dockerd reloads its runtimes on SIGHUP: no restart, running containers keep running.
    pkill -HUP -x dockerd || die "could not signal dockerd to reload $DAEMON_JSON"
    for _ in $(seq 1 20); do
        runsc_registered && { say "runsc registered"; return 0; }
        sleep 0.5
    done
    die "dockerd did not take runsc from $DAEMON_JSON after a reload; see $LOG"
}

# Multi-container tasks (terminal_env/sandbox/stack.py): the compose tool starts a task's services
# (Debian's docker-compose), and one firewall rule keeps containers on the stacks' internal bridges
# (all named te-*) off this host, which they would otherwise reach through the bridge's own
# address. The rule must equal FIREWALL_RULE in terminal_env/sandbox/stack.py (a test checks).
FIREWALL_RULE=(INPUT -i te-+ -j DROP)

setup_stacks() {
    [ "$(id -u)" -eq 0 ] || return 0
    [ -z "${DOCKER_HOST:-}" ] || [ "${DOCKER_HOST}" = "unix:///var/run/docker.sock" ] || return 0
    if ! command -v docker-compose >/dev/null && ! docker compose version >/dev/null 2>&1 \
            && command -v apt-get >/dev/null; then
        has_candidate docker-compose || apt-get update -qq || true
        if has_candidate docker-compose; then
            say "installing docker-compose (apt-get) for multi-container tasks"
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
                docker-compose >/dev/null || say "could not install docker-compose"
        else
            say "no docker-compose package here: multi-container tasks will not run"
        fi
    fi
    if command -v iptables >/dev/null && ! iptables -C "${FIREWALL_RULE[@]}" 2>/dev/null; then
        iptables -I "${FIREWALL_RULE[@]}" || say "could not add: iptables -I ${FIREWALL_RULE[*]}"
    fi
}

# Fast path: everything is already there.
if command -v dockerd >/dev/null && command -v debootstrap >/dev/null && engine_up; then
    setup_runsc
    setup_stacks
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
    setup_runsc
    setup_stacks
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
        setup_runsc
        setup_stacks
        exit 0
    fi
    sleep 1
done

die "dockerd did not answer within ${WAIT}s; see the last lines of $LOG:
$(tail -n 20 "$LOG" 2>/dev/null || true)"
