#!/usr/bin/env bash
# `make image`: builds silt:TAG (the services) and silt-gc:TAG (plus Spark and Java) from the
# Dockerfile, with docker or else podman.
#
#   scripts/images/build.sh TAG
#
# The base is the Dockerfile's digest-pinned python:3.11-slim-bookworm when the engine has it or
# can pull it; on a machine that reaches no registry, a stand-in built from Debian's packages
# (scripts/images/local-base.sh, cached under SILT_IMAGE_CACHE). SILT_PYTHON_IMAGE names another
# base; SILT_IMAGE_ENGINE=podman (or docker) picks the engine instead of the first that answers.
# Layers are the engine's own cache: a code change rebuilds only the layers after `COPY silt`.
set -euo pipefail

tag="${1:?usage: build.sh TAG}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

engine=""
for candidate in ${SILT_IMAGE_ENGINE:-docker podman}; do
	if [ "$candidate" = podman ] && command -v podman >/dev/null 2>&1 && [ -z "${CONTAINERS_CONF:-}" ]; then
		CONTAINERS_CONF="$("$here/podman-conf.sh")"
		export CONTAINERS_CONF
	fi
	if command -v "$candidate" >/dev/null 2>&1 && "$candidate" info >/dev/null 2>&1; then
		engine="$candidate"
		break
	fi
done
if [ -z "$engine" ]; then
	echo "make image: no container engine available (docker or podman, with a running daemon); nothing built" >&2
	echo "make image: on Debian: apt-get install podman buildah runc debootstrap uidmap fuse-overlayfs slirp4netns" >&2
	exit 1
fi

base="${SILT_PYTHON_IMAGE:-}"
if [ -z "$base" ]; then
	pinned="$(sed -n 's/^ARG PYTHON_IMAGE=//p' "$repo/Dockerfile")"
	if "$engine" image inspect "$pinned" >/dev/null 2>&1 || timeout 300 "$engine" pull -q "$pinned" >/dev/null 2>&1; then
		base="$pinned"
	else
		echo "make image: $pinned cannot be pulled; building a local stand-in from Debian's packages" >&2
		base="$("$here/local-base.sh" "$engine")"
	fi
fi

cd "$repo"
for target in runtime gc; do
	name=silt
	[ "$target" = gc ] && name=silt-gc
	echo "make image: $engine build --target $target -t $name:$tag (base $base)" >&2
	"$engine" build --build-arg "PYTHON_IMAGE=$base" --target "$target" -t "$name:$tag" .
done
"$engine" images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E "/silt(-gc)?:$tag " >&2 || true
