#!/usr/bin/env bash
# Writes the containers.conf podman needs in a sandbox like this machine's and prints its path;
# callers export it as CONTAINERS_CONF, so nothing under /etc changes.
#
# - default ulimits explicit and within the hard limits: without CAP_SYS_RESOURCE podman cannot
#   raise a container's limits past the caller's, and its defaults (nofile 1048576) are above them.
# - runc with cgroupfs: crun refuses hybrid cgroup hierarchies, and there is no systemd to manage
#   cgroups through.
set -euo pipefail

cache="${SILT_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/silt-images}"
mkdir -p "$cache"
conf="$cache/containers.conf"
nofile="$(ulimit -Hn)"
[ "$nofile" != unlimited ] || nofile=1048576
nproc=32768
nproc_hard="$(ulimit -Hu)"
if [ "$nproc_hard" != unlimited ] && [ "$nproc_hard" -lt "$nproc" ]; then
	nproc="$nproc_hard"
fi
cat >"$conf.tmp.$$" <<CONF
# Written by scripts/images/podman-conf.sh; rewritten on every run.
[containers]
default_ulimits = ["nofile=${nofile}:${nofile}", "nproc=${nproc}:${nproc}"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
mv "$conf.tmp.$$" "$conf"
echo "$conf"
