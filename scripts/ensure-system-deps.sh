#!/usr/bin/env bash
# Installs what the test suite needs outside Python when it is missing: Java 17 (to run the
# test Cassandra), npm (to fetch it and to build the web UI) and Chromium's headless shell (the
# UI's browser tests). With `podman` (`make test-all`), also podman and what it builds and runs
# images with (the podman-marked tests, which only `make test-all` runs: `make test` needs none);
# with `bench`, also nginx and curl (the gateway benchmark's reference server and client);
# with `ui`, only npm (`make ui`); with `iceberg-spark`, also Apache HttpClient 5's jars (`make
# iceberg-spark` relocates them into Iceberg's Spark runtime). Uses Debian's packages; does nothing
# when present.
#
#   scripts/ensure-system-deps.sh [ui | bench | podman | iceberg-spark]
set -euo pipefail

missing=()
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ "${1:-}" != ui ]; then
  command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
  # The web UI's browser tests drive Debian's Chromium headless shell (Playwright's own download
  # is not used).
  [ -x /usr/bin/chromium-headless-shell ] || missing+=(chromium-headless-shell)
fi
if [ "${1:-}" = podman ]; then
  # Container images and the podman-marked tests (scripts/images/): podman with runc, and
  # debootstrap for the local base image when no registry answers.
  command -v podman >/dev/null 2>&1 || missing+=(podman buildah runc debootstrap uidmap fuse-overlayfs slirp4netns)
fi
if [ "${1:-}" = iceberg-spark ]; then
  [ -f /usr/share/java/httpclient5.jar ] || missing+=(libhttpclient5-java)
  [ -f /usr/share/java/httpcore5-h2.jar ] || missing+=(libhttpcore5-java)
fi
if [ "${1:-}" = bench ]; then
  command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
  command -v curl >/dev/null 2>&1 || missing+=(curl)
fi
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-system-deps: missing ${missing[*]} and no apt-get to install them; install them and rerun" >&2
  exit 1
fi
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
# `make test` installs side by side (its test-deps), and two of them may land here at once: apt
# takes one at a time (its own lock fails the second at once rather than waiting). The one that
# waited finds the packages installed and installs only what is still missing.
if command -v flock >/dev/null 2>&1 && [ -z "${SILT_SYSTEM_DEPS_LOCKED:-}" ]; then
  SILT_SYSTEM_DEPS_LOCKED=1 exec flock "${TMPDIR:-/tmp}/silt-ensure-system-deps.lock" "$0" "$@"
fi
echo "ensure-system-deps: installing ${missing[*]}" >&2
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
