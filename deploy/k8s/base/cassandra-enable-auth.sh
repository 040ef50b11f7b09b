#!/usr/bin/env bash
# Turns on Cassandra's password authentication and role-based authorization in the
# cassandra.yaml given as $1, whichever layout its version writes, and fails if it could not.
# The StatefulSet runs it on the image's own file before the image's entrypoint starts
# Cassandra; the tests run it on their Cassandra's file (scripts/cassandra.sh's
# SILT_CASSANDRA_CONFIGURE), so both start with the same settings.
set -euo pipefail

yaml="$1"

# Cassandra up to 4.1 writes `authenticator: AllowAllAuthenticator`; 5.0 writes `authenticator:`
# followed by an indented `class_name: AllowAllAuthenticator`. Either form is rewritten in place.
set_class() {
	local key="$1" class="$2"
	sed -ri \
		-e "s/^(${key}:)[[:space:]]*[A-Za-z][A-Za-z0-9_.]*[[:space:]]*$/\\1 ${class}/" \
		-e "/^${key}:[[:space:]]*$/,/^[^[:space:]#]/ s/^([[:space:]]+class_name[[:space:]]*:).*/\\1 ${class}/" \
		"$yaml"
	if ! grep -Eq "^${key}:[[:space:]]*${class}[[:space:]]*$" "$yaml" \
		&& ! sed -n "/^${key}:[[:space:]]*$/,/^[^[:space:]#]/p" "$yaml" \
		| grep -Eq "^[[:space:]]+class_name[[:space:]]*:[[:space:]]*${class}[[:space:]]*$"; then
		echo "cassandra-enable-auth: could not set ${key} to ${class} in ${yaml}" >&2
		exit 1
	fi
}

set_class authenticator PasswordAuthenticator
set_class authorizer CassandraAuthorizer
echo "cassandra-enable-auth: ${yaml}: PasswordAuthenticator, CassandraAuthorizer" >&2
