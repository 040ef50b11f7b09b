# syntax=docker/dockerfile:1
# Silt's images: silt (auth, graveler, gateway, compactor and the `silt` CLI) and silt-gc (the same
# plus Spark and Java, for the GC CronJob). Build: `make image` (docker or podman), which builds
# the web UI's bundle first (`make ui`, into edge/ui/static/dist/, carried by the wheel as
# package data). Every process is chosen by the manifest's command, e.g.
# `python -m services.graveler`.

# The base image, pinned by digest: a tag moves (and could be repointed), a digest names exactly
# one multi-platform image index. This one is python:3.11-slim-bookworm (Python 3.11.16) as the
# Docker Official Images' repo-info records it. To move on, resolve the tag's new index digest
# (`docker buildx imagetools inspect python:3.11-slim-bookworm`) and replace it here. Offline, pass
# a local stand-in: `docker build --build-arg PYTHON_IMAGE=my-python:3.11 .` (`make image` builds
# one from Debian's packages when no registry answers: scripts/images/local-base.sh).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:0bee7276f83efd4a1ee05bbbf4281d95ed28e079220a9457f25a93e3f1e3c31b

# --- deps: a venv with the locked dependencies; rebuilt only when requirements/ changes ------
FROM ${PYTHON_IMAGE} AS deps
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# Every package comes from the hash-pinned locks (`make lock`); pip refuses any other file.
# runtime.txt has no Spark: that is the gc stage's (requirements/gc.txt).
COPY requirements/build.txt requirements/runtime.txt ./requirements/
# binutils only for `strip` below: this stage's tools never reach the runtime image.
RUN apt-get update \
    && apt-get install -y --no-install-recommends binutils \
    && rm -rf /var/lib/apt/lists/*
RUN python -m venv /opt/silt \
    && /opt/silt/bin/pip install --require-hashes --no-build-isolation -r requirements/build.txt \
    && /opt/silt/bin/pip install --require-hashes --no-build-isolation -r requirements/runtime.txt \
    && cd /opt/silt/lib/python3.11/site-packages/pyarrow \
    && rm -rf tests include ./*flight* ./*s3* ./*.pyx ./*.pxd \
    && cd ../lupa && rm -f lua5[1-35]*.so luajit*.so \
    && cd ../botocore/data \
    && find . -mindepth 1 -maxdepth 1 -type d ! -name s3 ! -name sts ! -name sso ! -name sso-oidc -exec rm -rf {} + \
    && cd ../../azure && rm -rf storage/blob/aio storage/blob/_generated/aio identity/aio \
    && cd .. && rm -rf pygments pyasn1 pyasn1_modules \
    && find /opt/silt -type f -name '*.so*' -exec strip --strip-unneeded {} + \
    && /opt/silt/bin/pip uninstall -q -y pip setuptools wheel
# Above: pyarrow's parts Silt never loads and nothing else links (Arrow Flight, its S3
# filesystem, pyarrow's tests, C++ headers and Cython sources; about 60 MiB), lupa's Lua
# runtimes other than the Lua 5.4 that Actions' Lua hooks run on (about 4.5 MiB), botocore's
# models of AWS services other than S3 and the STS/SSO that credentials may come from (Silt's
# only boto3 client is S3's; about 25 MiB), the Azure SDK's asyncio clients (the azure adapter's
# client is synchronous; about 3 MiB), Pygments (rich's syntax highlighting, which no Silt output
# uses; about 10 MiB), pyasn1 and its modules (google-auth's pure-Python RSA, unused beside
# cryptography; about 3.5 MiB), and the
# symbol tables of the wheels' shared libraries (about 45 MiB; what a debugger reads, never the
# loader). Together they make room for DuckDB (66 MiB), which the web UI's diffs and queries run
# on. `import pyarrow.parquet, pyarrow.fs, lupa.lua54, duckdb, ...` is checked below. Nor does
# the services' image carry an installer: pip, setuptools and wheel are removed; the stages that
# install more bring them back with ensurepip and the build lock.

# --- build: generate protobuf code, install Silt itself beside the venv ---------------------
FROM deps AS build
# The code generator lives only in this stage; the final image has no compiler or protoc.
COPY requirements/protoc.txt ./requirements/
# pip and setuptools back in the venv (the deps stage removed them) to install Silt below.
RUN python -m venv /opt/protoc \
    && /opt/protoc/bin/pip install --require-hashes --no-build-isolation -r requirements/protoc.txt \
    && /opt/silt/bin/python -m ensurepip --default-pip >/dev/null \
    && /opt/silt/bin/pip install --require-hashes --no-build-isolation -r requirements/build.txt
COPY pyproject.toml README.md ./
COPY protos ./protos
COPY silt ./silt
COPY engine ./engine
COPY services ./services
COPY jobs ./jobs
COPY edge ./edge
COPY cli ./cli
# The dev stand-in for a cluster (make k8s-up) runs its Services' fronts on this image.
COPY devtools ./devtools
# Silt is installed under /opt/silt-root (--root): the runtime stage copies only those files
# over the unchanged dependency layer, so a code change rebuilds a few MiB, not the venv.
RUN { test -f edge/ui/static/dist/index.html \
      || { echo "the web UI bundle is missing: run make ui first (make image does)" >&2; exit 1; }; } \
    && /opt/protoc/bin/python -m grpc_tools.protoc -Iprotos --python_out=. --grpc_python_out=. \
        $(find protos -name '*.proto') \
    && for d in $(find protos -name '*.proto' -exec dirname {} \; | sort -u | sed 's|^protos/||'); do \
         p=$d; while [ "$p" != "silt" ] && [ "$p" != "." ]; do touch "$p/__init__.py"; p=$(dirname "$p"); done; \
       done \
    && /opt/silt/bin/pip install --no-deps --no-build-isolation --root /opt/silt-root . \
    && cp -a /opt/silt-root/opt/silt/. /opt/silt/ \
    && /opt/silt/bin/python -c "import silt.graveler.v1.graveler_pb2_grpc, edge.server, pyarrow.parquet, pyarrow.fs, lupa.lua54, duckdb, uvloop, grpc, cryptography.hazmat.bindings._rust, yaml._yaml, boto3, azure.storage.blob, azure.identity, google.cloud.storage, google.oauth2.service_account, google.auth.crypt._cryptography_rsa, silt.block.azure, silt.block.gcs, cli.main, devtools.kube_podman.service_front, rich.progress, rich.table, rich.live; duckdb.sql('select 42').fetchall(); boto3.client('s3', region_name='us-east-1')" \
    && test -f /opt/silt-root/opt/silt/lib/python3.11/site-packages/edge/ui/static/dist/index.html

# --- runtime: the venv only, as a non-root user (image silt) --------------------------------
FROM ${PYTHON_IMAGE} AS runtime
ENV PATH=/opt/silt/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    SILT_CONFIG=/etc/silt/silt.yaml
RUN groupadd --system --gid 10001 silt \
    && useradd --system --uid 10001 --gid silt --home-dir /var/lib/silt --create-home silt
COPY --from=deps /opt/silt /opt/silt
# Silt's own files last, over the dependency layer: a code change rebuilds only this layer.
COPY --from=build /opt/silt-root/ /
USER 10001:10001
WORKDIR /var/lib/silt
# The services are installed in the venv; the manifests pick one with `python -m ...`.
ENTRYPOINT []
CMD ["silt", "--help"]

# --- gc: runtime's venv plus Spark, its S3A jars and Java, for the GC CronJob (silt-gc) -----
# Not FROM runtime: Java and Spark come before Silt's own files, so that a code change rebuilds
# only the last layer here too, not the JRE and pyspark.
FROM ${PYTHON_IMAGE} AS gc
ENV PATH=/opt/silt/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    SILT_CONFIG=/etc/silt/silt.yaml
RUN groupadd --system --gid 10001 silt \
    && useradd --system --uid 10001 --gid silt --home-dir /var/lib/silt --create-home silt
# Slim images have no /usr/share/man; the JRE's postinst registers its man pages with
# update-alternatives, which fails without the folder.
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*
COPY --from=deps /opt/silt /opt/silt
# pyspark is an sdist: built against the locked setuptools. The S3A jars' package goes in
# --no-deps (its declared pyspark pin would downgrade ours), as in the Makefile.
WORKDIR /tmp/silt-gc
COPY requirements/build.txt requirements/gc.txt requirements/s3a-jars.txt ./requirements/
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN /opt/silt/bin/python -m ensurepip --default-pip >/dev/null \
    && /opt/silt/bin/pip install --require-hashes --no-build-isolation -r requirements/build.txt \
    && /opt/silt/bin/pip install --require-hashes --no-build-isolation -r requirements/gc.txt \
    && /opt/silt/bin/pip install --require-hashes --no-build-isolation --no-deps -r requirements/s3a-jars.txt \
    && /opt/silt/bin/pip uninstall -q -y pip setuptools wheel \
    && rm -rf /tmp/silt-gc
COPY --from=build /opt/silt-root/ /
USER 10001:10001
WORKDIR /var/lib/silt
ENTRYPOINT []
CMD ["silt", "--help"]
