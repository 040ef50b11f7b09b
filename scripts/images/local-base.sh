#!/usr/bin/env bash
# Builds a local stand-in for the Dockerfile's base (python:3.11-slim-bookworm) from Debian's
# own packages, for machines that reach a Debian mirror but no container registry. Prints the
# image name to pass as the build argument PYTHON_IMAGE.
#
#   scripts/images/local-base.sh ENGINE
#
# debootstrap --variant=minbase bookworm (cached as a tarball under the cache dir, so later runs
# and `make image` on a fresh clone skip it), imported as localhost/silt-debian:bookworm, then
# Debian's python3 (3.11, as the locks expect) with venv and the CA certificates on top. The
# stand-in also trusts this machine's extra CAs (/usr/local/share/ca-certificates): networks
# that re-sign TLS with a local CA would fail every pip download otherwise. That makes these
# images local-only: never push them.
#
# Environment: SILT_IMAGE_CACHE (default ~/.cache/silt-images), SILT_DEBIAN_MIRROR (default the
# first deb.debian.org-style URI in /etc/apt, else http://deb.debian.org/debian).
set -euo pipefail

engine="${1:?usage: local-base.sh ENGINE}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${SILT_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/silt-images}"
suite=bookworm
# Bump with any change to the trimming below: a new name, so an older tarball or image is not reused.
trim=slim1
debian_image="localhost/silt-debian:$suite-$trim"
python_image="localhost/silt-python:3.11-$suite"
# The trimming and python.Containerfile, so that a stale stand-in is rebuilt.
python_recipe="$trim-$(sha256sum "$here/python.Containerfile" | cut -c1-12)"

log() { echo "local-base: $*" >&2; }

if [ "$($engine image inspect --format '{{index .Labels "silt.recipe"}}' "$python_image" 2>/dev/null)" = "$python_recipe" ]; then
	echo "$python_image"
	exit 0
fi

# One builder at a time per cache (test sessions side by side share it).
mkdir -p "$cache"
exec 9>"$cache/.local-base.lock"
flock 9
if [ "$($engine image inspect --format '{{index .Labels "silt.recipe"}}' "$python_image" 2>/dev/null)" = "$python_recipe" ]; then
	echo "$python_image"
	exit 0
fi

mirror="${SILT_DEBIAN_MIRROR:-}"
if [ -z "$mirror" ]; then
	mirror="$(grep -rhoE '^(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
		| head -1 | awk '{print $2}')" || true
	mirror="${mirror:-http://deb.debian.org/debian}"
fi

if ! $engine image inspect "$debian_image" >/dev/null 2>&1; then
	tarball="$cache/debian-$suite-minbase-$trim.tar"
	if [ ! -s "$tarball" ]; then
		command -v debootstrap >/dev/null || { log "debootstrap is not installed (apt-get install debootstrap)"; exit 1; }
		rootfs="$(mktemp -d "$cache/rootfs.XXXXXX")"
		trap 'rm -rf "$rootfs" "$tarball.tmp"' EXIT
		log "debootstrap --variant=minbase $suite from $mirror (once; cached in $tarball)"
		debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" >"$cache/debootstrap.log" 2>&1 \
			|| { log "debootstrap failed; see $cache/debootstrap.log"; exit 1; }
		# What the official slim images leave out too: apt's caches, documentation, man pages and
		# translations (dpkg is told to skip them in later installs by python.Containerfile).
		rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/lib/apt/lists/* \
			"$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/locale/* "$rootfs"/var/log/*.log
		tar -C "$rootfs" --numeric-owner -cf "$tarball.tmp" .
		mv "$tarball.tmp" "$tarball"
		rm -rf "$rootfs"
		trap - EXIT
	fi
	log "importing $tarball as $debian_image"
	$engine import --change 'CMD ["/bin/bash"]' "$tarball" "$debian_image" >/dev/null
fi

# The machine's extra CAs go into the build context; an empty folder when there are none.
context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT
mkdir -p "$context/extra-ca"
cp /usr/local/share/ca-certificates/*.crt "$context/extra-ca/" 2>/dev/null || true
log "building $python_image from $debian_image"
$engine build -q -f "$here/python.Containerfile" --build-arg "DEBIAN_IMAGE=$debian_image" \
	--build-arg "DEBIAN_MIRROR=$mirror" --label "silt.recipe=$python_recipe" -t "$python_image" "$context" >/dev/null
echo "$python_image"
