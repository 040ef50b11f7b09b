#!/usr/bin/env bash
# Builds the local stand-ins `make k8s-up` runs in place of the images the dev overlay pulls from
# registries this machine cannot reach, and tags them with the manifests' names:
#
#   scripts/images/standins.sh TAG CASSANDRA_IMAGE OBJECT_STORE_IMAGE
#
# CASSANDRA_IMAGE (the StatefulSet's cassandra:5.0): Apache Cassandra 2.1 from scripts/cassandra.sh
# on silt-gc:TAG's Java. OBJECT_STORE_IMAGE (the dev overlay's MinIO): moto's S3 server on
# silt:TAG. Both need `make image` first; each is rebuilt only when its recipe (the files in
# standins/, scripts/cassandra.sh, the pinned moto) changed, not with every rebuild of Silt's
# images: they take only Java, Python and boto3 from them (`podman rmi` one to force). Podman only, and
# never to be pushed: they carry this machine's CAs and are not what their names say.
set -euo pipefail

tag="${1:?usage: standins.sh TAG CASSANDRA_IMAGE OBJECT_STORE_IMAGE}"
cassandra_image="${2:?usage: standins.sh TAG CASSANDRA_IMAGE OBJECT_STORE_IMAGE}"
object_store_image="${3:?usage: standins.sh TAG CASSANDRA_IMAGE OBJECT_STORE_IMAGE}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
standins="$here/standins"
if [ -z "${CONTAINERS_CONF:-}" ]; then
	CONTAINERS_CONF="$("$here/podman-conf.sh")"
	export CONTAINERS_CONF
fi
# moto[server]'s packages beyond what the services' image has, taken with their hashes from the
# tests' lock: pip's --require-hashes refuses the build if one is missing from this list.
object_store_packages="moto flask flask-cors werkzeug jinja2 markupsafe itsdangerous blinker click responses xmltodict py-partiql-parser requests urllib3 charset-normalizer idna certifi python-dateutil six boto3 botocore s3transfer jmespath cryptography cffi pycparser pyyaml"

log() { echo "standins: $*" >&2; }

# recipe FILE...: a digest of the files an image is built from.
recipe() { cat "$@" | sha256sum | cut -c1-16; }

current() { podman image inspect --format '{{index .Labels "silt.recipe"}}' "$1" 2>/dev/null || true; }

locked_subset() {
	local name
	for name in $object_store_packages; do
		awk -v n="$name" 'BEGIN { IGNORECASE = 1 }
			$0 ~ "^" n "==" { on = 1; print; next }
			on && /^[[:space:]]/ { print; next }
			{ on = 0 }' "$repo/requirements/dev.txt"
	done
}

build_cassandra() {
	local java_image="localhost/silt-gc:$tag" context
	podman image inspect "$java_image" >/dev/null 2>&1 || { log "$java_image is missing: run make image first"; exit 1; }
	"$repo/scripts/cassandra.sh" fetch
	local cache="${SILT_CASSANDRA_CACHE:-$repo/.cache/cassandra}"
	local want
	want="$(recipe "$standins"/cassandra* "$standins/docker-entrypoint.sh" "$standins/nodetool" "$repo/scripts/cassandra.sh")"
	if [ "$(current "$cassandra_image")" = "$want" ]; then
		log "$cassandra_image is up to date"
		return
	fi
	context="$(mktemp -d)"
	trap 'rm -rf "$context"' RETURN
	cp -a "$cache/package" "$context/package"
	cp "$repo/scripts/cassandra.sh" "$standins"/cassandra-configure.sh "$standins/cassandra.yaml" \
		"$standins/docker-entrypoint.sh" "$standins/nodetool" "$context/"
	log "building $cassandra_image (Cassandra 2.1 on $java_image)"
	podman build -q -f "$standins/cassandra.Containerfile" --build-arg "JAVA_IMAGE=$java_image" \
		--label "silt.recipe=$want" --label "silt.local-only=a stand-in; never push" -t "$cassandra_image" "$context" >/dev/null
}

build_object_store() {
	local silt_image="localhost/silt:$tag" context
	podman image inspect "$silt_image" >/dev/null 2>&1 || { log "$silt_image is missing: run make image first"; exit 1; }
	context="$(mktemp -d)"
	trap 'rm -rf "$context"' RETURN
	locked_subset >"$context/object-store.txt"
	cp "$standins/object_store.py" "$context/"
	local want
	want="$(recipe "$standins/object-store.Containerfile" "$standins/object_store.py" "$context/object-store.txt")"
	if [ "$(current "$object_store_image")" = "$want" ]; then
		log "$object_store_image is up to date"
		return
	fi
	log "building $object_store_image (moto's S3 server on $silt_image)"
	podman build -q -f "$standins/object-store.Containerfile" --build-arg "SILT_IMAGE=$silt_image" \
		--label "silt.recipe=$want" --label "silt.local-only=a stand-in; never push" -t "$object_store_image" "$context" >/dev/null
}

build_cassandra
build_object_store
