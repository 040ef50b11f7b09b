"""Constructing the engine: the one place its parts (KV store, object store, committed cache,
metarange builder, hooks' options) are put together, by the role of the process that runs it.

* "server": graveler, the whole engine, commits built in worker processes;
* "compactor": the whole engine, building in this process (it is a worker apart already);
* "reader": the reader flows alone (engine/reads.py), for an edge beside graveler.

The worker processes that build commits and ingest imports open their stores through
engine/core/stores.py as these do. Tests and benchmarks compose one over stores they made with
open_graveler.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Literal, overload

from engine.actions.lua.runtime import LuaLimits
from engine.actions.manager import ActionsOptions
from engine.actions.webhook import EnvPolicy, WebhookPolicy
from engine.core.builder import DROP_PACE_SECONDS, InProcessBuilder, MetaRangeBuilder, ProcessPoolBuilder
from engine.core.committed.cache import CommittedCache
from engine.core.committed.chunking import ChunkingPolicy
from engine.core.committed.manager import CommittedManager
from engine.core.stores import open_read_only_stores, open_stores
from engine.features.imports.runner import IngestRunner, ProcessRunner
from engine.graveler import Graveler, GravelerOptions
from engine.metered import MeteredBuilder
from engine.reads import ReadEngine, reads_database
from silt.block.adapter import BlockAdapter
from silt.block.external import check_external_prefixes, external_prefixes
from silt.config import Config
from silt.errors import ConfigError
from silt.journal.store import journaled
from silt.kv.store import Store
from silt.namespaces import parse_recorded, parse_roots
from silt.protected_state import check_external_prefixes_spare_state
from silt.same_named import built_from

Role = Literal["server", "compactor", "reader"]


@overload
def open_engine(
    config: Config, role: Literal["server", "compactor"], options: GravelerOptions | None = None
) -> Graveler: ...


@overload
def open_engine(config: Config, role: Literal["reader"], options: None = None) -> ReadEngine | None: ...


def open_engine(config: Config, role: Role, options: GravelerOptions | None = None) -> Graveler | ReadEngine | None:
    """The engine as a process of that role runs it. For "reader", None where direct reads are
    off (gateways.s3.direct_reads) or impossible (graveler's KV lives in graveler's memory)."""
    if role == "reader":
        return _open_reader(config)
    if role == "compactor":
        # Builds run in this process: it is the compactor's worker already, apart from graveler's.
        graveler = _open_service_engine(config, options, commit_workers=False)
        # A compacted token is dropped one KV delete at a time; on the embedded driver each takes
        # the database's write lock, so the drop rests between bursts as commit workers' drops do.
        graveler.builder = InProcessBuilder(graveler.staging, graveler.committed, drop_pace=DROP_PACE_SECONDS)
        return graveler
    return _open_service_engine(config, options, commit_workers=True)


def open_graveler(
    kv: Store,
    adapter: BlockAdapter,
    options: GravelerOptions | None = None,
    *,
    cache: CommittedCache | None = None,
    policy: ChunkingPolicy | None = None,
    builder: MetaRangeBuilder | None = None,
    journal: bool = True,
    import_runner: IngestRunner | None = None,
) -> Graveler:
    """A Graveler over kv and adapter; by default with a fresh memory cache, the standard
    range chunking and commits built in this process. Every graveler reads and writes its KV
    through a JournaledStore (docs/design/journal.md); journal=False writes as before the
    journal existed, for measuring its cost."""
    committed = CommittedManager(adapter, cache, policy)
    return Graveler(journaled(kv, journal), committed, options, builder, import_runner=import_runner)


def _open_service_engine(config: Config, options: GravelerOptions | None, *, commit_workers: bool) -> Graveler:
    """A Graveler as a service runs it: instrumented stores, the configured cache, import
    prefixes and namespace roots. With commit_workers, commits build in worker processes so
    that serving never waits on them for the GIL (not on the mem KV driver, which lives in
    this process)."""
    stores = open_stores(config)
    builder: MetaRangeBuilder | None = None
    if commit_workers and config.database.type != "mem":
        builder = MeteredBuilder(ProcessPoolBuilder(config, config.graveler.commit_workers))
    cache_config = config.graveler.cache
    cache = CommittedCache(cache_config.memory_bytes, cache_config.disk_dir, cache_config.disk_bytes)
    options = dataclasses.replace(
        options or GravelerOptions(),
        allowed_import_prefixes=import_prefixes(config),
        allowed_namespace_roots=namespace_roots(config),
        actions=actions_options(config),
    )
    # Imports ingest in a worker process of their own, as commits build, when another process can
    # reach the KV store.
    import_runner = None
    if commit_workers and config.database.type != "mem":
        import_runner = ProcessRunner(config, warm=bool(options.allowed_import_prefixes))
    return open_graveler(stores.kv, stores.adapter, options, cache=cache, builder=builder, import_runner=import_runner)


def _open_reader(config: Config) -> ReadEngine | None:
    if not config.gateways.s3.direct_reads:
        return None
    database = reads_database(config)
    if database is None:
        return None
    stores = open_read_only_stores(config, database)
    return ReadEngine(stores.kv, stores.committed(CommittedCache(config.gateways.s3.committed_cache_bytes)))


def actions_options(config: Config) -> ActionsOptions:
    """The `actions` section as the engine's options; a bad network or host pattern stops graveler."""
    actions = config.actions
    try:
        webhook = built_from(actions.webhook, WebhookPolicy)
    except ValueError as exc:
        raise ConfigError(f"actions.webhook: {exc}") from None
    # The options' fields are the section's, by name; the nested sections become the hooks' policies.
    return built_from(
        actions,
        ActionsOptions,
        webhook=webhook,
        env=built_from(
            actions.env,
            EnvPolicy,
            repositories={name: tuple(patterns) for name, patterns in actions.env.repositories.items()},
        ),
        lua=built_from(actions.lua, LuaLimits),
    )


def import_prefixes(config: Config, env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Where entries may name bytes besides their namespace: graveler.allowed_import_prefixes, and
    the local blockstore's blockstore.local.allowed_external_prefixes when its import is enabled
    (lakeFS's keys, as local:///dir; silt/block/external.py). ConfigError if one of those reaches
    the installation's own state (silt/protected_state.py; env: where SILT_CONFIG is read)."""
    check_external_prefixes(config.blockstore)
    check_external_prefixes_spare_state(config, os.environ if env is None else env)
    return (*config.graveler.allowed_import_prefixes, *external_prefixes(config.blockstore))


def namespace_roots(config: Config) -> tuple[str, ...]:
    """graveler.allowed_namespace_roots, or by default the local adapter's whole store (none for S3).

    An import prefix inside a root would let any writer name the bytes of repositories below it.
    """
    roots = config.graveler.allowed_namespace_roots
    if roots is None:
        roots = ["local://"] if config.blockstore.type == "local" else []
    parsed = parse_roots(roots)
    for prefix in config.graveler.allowed_import_prefixes:
        if any(parse_recorded(prefix).overlaps(root) for root in parsed):
            raise ConfigError(
                f"graveler.allowed_import_prefixes: {prefix!r} overlaps graveler.allowed_namespace_roots, "
                "so entries could name other repositories' bytes"
            )
    return tuple(roots)
