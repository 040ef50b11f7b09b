# syntax=docker/dockerfile:1
# Silt's one image: auth, graveler, gateway, compactor, the GC job and the `silt` CLI.
# Build: `make image` (docker or podman), which builds the web UI's bundle first (`make ui`, into
# services/ui/static/dist/, carried by the wheel as package data). Every process is chosen by the
# manifest's command, e.g. `python -m services.graveler.server`.

# The base image, pinned by digest: a tag moves (and could be repointed), a digest names exactly
# one multi-platform image index. This one is python:3.11-slim-bookworm (Python 3.11.16) as the
# Docker Official Images' repo-info records it. To move on, resolve the tag's new index digest
# (`docker buildx imagetools inspect python:3.11-slim-bookworm`) and replace it here. Offline, pass
# a local stand-in: `docker build --build-arg PYTHON_IMAGE=my-python:3.11 .`
ARG PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:0bee7276f83efd4a1ee05bbbf4281d95ed28e079220a9457f25a93e3f1e3c31b

# --- build: generate protobuf code, build the wheel, install it into a venv ----------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# Every package comes from the hash-pinned locks (`make lock`); pip refuses any other file.
# Sdists (pyspark) and Silt itself build against the locked setuptools: no unpinned build env.
COPY requirements ./requirements
RUN python -m venv /opt/silt \
    && /opt/silt/bin/pip install --require-hashes --no-build-isolation -r requirements/build.txt \
    && /opt/silt/bin/pip install --require-hashes --no-build-isolation -r requirements/runtime.txt
# The code generator lives only in this stage; the final image has no compiler or protoc.
RUN python -m venv /opt/protoc \
    && /opt/protoc/bin/pip install --require-hashes --no-build-isolation -r requirements/protoc.txt
COPY pyproject.toml README.md ./
COPY protos ./protos
COPY silt ./silt
COPY services ./services
COPY jobs ./jobs
RUN { test -f services/ui/static/dist/index.html \
      || { echo "the web UI bundle is missing: run make ui first (make image does)" >&2; exit 1; }; } \
    && /opt/protoc/bin/python -m grpc_tools.protoc -Iprotos --python_out=. --grpc_python_out=. \
        $(find protos -name '*.proto') \
    && for d in $(find protos -name '*.proto' -exec dirname {} \; | sort -u | sed 's|^protos/||'); do \
         p=$d; while [ "$p" != "silt" ] && [ "$p" != "." ]; do touch "$p/__init__.py"; p=$(dirname "$p"); done; \
       done \
    && /opt/silt/bin/pip install --no-deps --no-build-isolation . \
    && /opt/silt/bin/python -c "import silt.graveler.v1.graveler_pb2_grpc, services.gateway.server" \
    && test -f /opt/silt/lib/python3.11/site-packages/services/ui/static/dist/index.html

# --- runtime: the venv only, as a non-root user (image silt) --------------------------------
FROM ${PYTHON_IMAGE} AS runtime
ENV PATH=/opt/silt/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    SILT_CONFIG=/etc/silt/silt.yaml
RUN groupadd --system --gid 10001 silt \
    && useradd --system --uid 10001 --gid silt --home-dir /var/lib/silt --create-home silt
COPY --from=build /opt/silt /opt/silt
USER 10001:10001
WORKDIR /var/lib/silt
# The services are installed in the venv; the manifests pick one with `python -m ...`.
ENTRYPOINT []
CMD ["silt", "--help"]

# --- gc: runtime plus the Java runtime Spark needs, for the GC CronJob (image silt-gc) ------
FROM runtime AS gc
USER root
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*
USER 10001:10001
