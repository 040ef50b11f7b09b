#!/usr/bin/env bash
# `.ci/run` on a fresh clone of HEAD in a cold machine: a podman container from
# scripts/images/cold-machine.Containerfile (this machine's base tools, nothing of the project's,
# no pip, npm or apt caches), sharing the host's network (PyPI, npm, Debian; the tests' loopback
# addresses). Prints the install time (`make test-deps`), then `.ci/run`'s own time, and leaves
# the log, every test's time, the legs' logs and a CPU trace (/proc/stat every 10 s) in OUT.
#
#   scripts/ci-cold.sh [OUT]        (default build/ci-cold; needs podman, as `make test-all`)
#
# Measures what the budget is about (docs/testing.md): the suite on a machine that has nothing.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
out="$(mkdir -p "${1:-$repo/build/ci-cold}" && cd "${1:-$repo/build/ci-cold}" && pwd)"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$("$here/images/podman-conf.sh")}"
image=localhost/silt-cold-machine:1

context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT
cp "$(command -v node)" "$context/node"
tar -C "$(dirname "$(readlink -f "$(command -v npm)")")/../.." -cf "$context/npm.tar" npm
base="$("$here/images/local-base.sh" podman)"
podman build -q --build-arg "PYTHON_IMAGE=$base" -f "$here/images/cold-machine.Containerfile" -t "$image" "$context" >/dev/null

# The machine's TLS, pip and Python settings (PYTHONDONTWRITEBYTECODE: no .pyc is written), as
# the CI machine has them; Debian's sources too.
envs=()
for name in SSL_CERT_FILE SSL_CERT_DIR PIP_CERT REQUESTS_CA_BUNDLE CURL_CA_BUNDLE NODE_EXTRA_CA_CERTS \
	GIT_SSL_CAINFO AWS_CA_BUNDLE GRPC_DEFAULT_SSL_ROOTS_FILE_PATH PIP_DEFAULT_TIMEOUT PIP_DISABLE_PIP_VERSION_CHECK \
	PYTHONDONTWRITEBYTECODE PYTHONUNBUFFERED; do
	[ -n "${!name:-}" ] && envs+=(-e "$name=${!name}")
done
mounts=(-v "$repo:/src:ro" -v "$out:/out")
for file in /root/.npmrc /etc/pip.conf /etc/apt/sources.list.d/debian.sources; do
	[ -f "$file" ] && mounts+=(-v "$file:$file:ro")
done
# The base machine's kubectl (it renders deploy/k8s with its built-in kustomize).
if command -v kubectl >/dev/null 2>&1; then
	mounts+=(-v "$(readlink -f "$(command -v kubectl)"):/usr/local/bin/kubectl:ro")
fi
# The base machine's Python (the CI machine's python3 is its own build, not Debian's 3.11.2),
# first on PATH, at the same path (its venvs record it).
python_home="$(python3 -c 'import sys; print(sys.base_prefix)')"
path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
if [ "$python_home" != /usr ]; then
	mounts+=(-v "$python_home:$python_home:ro")
	path="$python_home/bin:$path"
fi

podman run --rm --init --privileged --network=host --shm-size=2g -e "PATH=$path" "${envs[@]}" "${mounts[@]}" "$image" bash -c '
	set -u
	git clone -q /src /work/repo && cd /work/repo && git log --oneline -1 && python3 --version
	(while sleep 10; do echo "$(date +%s) $(head -1 /proc/stat)"; done) >/out/cpu.log &
	t0=$(date +%s)
	make --no-print-directory -j5 -Otarget test-deps >/out/install.log 2>&1; rc=$?
	t1=$(date +%s)
	echo "install (make test-deps): $((t1 - t0)) s, rc=$rc"
	CI=true bash .ci/run >/out/ci.log 2>&1; rc=$?
	t2=$(date +%s)
	echo ".ci/run: $((t2 - t1)) s, rc=$rc; in all $((t2 - t0)) s"
	tail -n 4 /out/ci.log
	cp -r build/test-times.tsv build/test-legs /out/ 2>/dev/null
	exit $rc
'
