#!/usr/bin/env bash
# Runs the tests against the *other* kind of base image than the one this machine has.
#
# The base images are made one of two ways: by debootstrap from a Debian mirror, or from the
# host's installed Debian packages where no mirror answers. The two differ in what they contain
# (pygments, for one, is only in the host's), and CI only exercises the kind its machine makes.
# This command builds the other kind into scratch tags (terminal-env/base:bookworm-1-<kind>,
# terminal-env/dev:bookworm-1-<kind>), points the project's tags at them for the length of the
# run, runs pytest, and points the tags back, whatever the outcome.
#
# Usage: bash scripts/test-other-image.sh [pytest args...]
#   default pytest args: the whole suite (-q)
#   KIND=debootstrap|host picks the kind explicitly instead of "the other one".
# Not part of CI: it needs a second pair of base images (a minute or two to build, cached after)
# and rebuilds the task images on top of them.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
say() { echo "test-other-image: $*" >&2; }
[ -x "$PY" ] || { say "no .venv: run 'bash scripts/setup.sh' first"; exit 2; }

current=$("$PY" -c 'from terminal_env.sandbox import images, engine
print(images.image_source(engine.get_client(), images.BASE_IMAGE) or "none")')
case "${KIND:-}" in
    "") case "$current" in
            debootstrap) kind=host ;;
            host) kind=debootstrap ;;
            *) say "the base image is $current: run 'bash scripts/setup.sh' first"; exit 2 ;;
        esac ;;
    debootstrap|host) kind=$KIND ;;
    *) say "KIND must be debootstrap or host, not '$KIND'"; exit 2 ;;
esac
say "this machine's base images are made by $current; testing against images made by $kind"
.venv/bin/terminal-env images bootstrap --family all --source "$kind" --tag-suffix="-$kind" >&2

# Remember what the project's tags point at, and put them back on any exit (the scratch tags keep
# both kinds of image alive, so nothing is deleted by the swap).
declare -A saved
for tag in terminal-env/base:bookworm-1 terminal-env/dev:bookworm-1; do
    saved[$tag]=$(docker image inspect -f '{{.Id}}' "$tag")
done
restore() {
    for tag in "${!saved[@]}"; do docker tag "${saved[$tag]}" "$tag"; done
    say "restored the project's base image tags"
}
trap restore EXIT
for tag in terminal-env/base:bookworm-1 terminal-env/dev:bookworm-1; do
    docker tag "$tag-$kind" "$tag"
done

if [ "$#" -eq 0 ]; then set -- -q; fi
"$PY" -m pytest -p no:cacheprovider "$@"
