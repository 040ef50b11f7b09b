"""`silt check`: is the configuration valid, and do its KV store and object store answer?

It reads the same configuration as every other command (`--config`, `SILT_CONFIG`, else the
`config.yaml` of the stack whose credentials the CLI uses) and changes nothing: no directory,
database file, keyspace or object is created, and the KV probe only reads.
"""

from __future__ import annotations

import contextlib
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cli.common import output
from silt.client_base import EXIT_UNAVAILABLE, ClientError
from silt.config import Config
from silt.errors import InvalidArgument, NotFound, SiltError
from silt.namespaces import parse_namespace

if TYPE_CHECKING:
    from silt.block import BlockAdapter


def _must_exist(path: str, what: str) -> None:
    if not Path(path).expanduser().exists():
        raise ClientError(f"{what}: {Path(path).expanduser()} does not exist (`silt run` creates it)", EXIT_UNAVAILABLE)


def probe_blockstore(adapter: BlockAdapter, config: Config) -> str:
    """Reach the object store with the configured credentials: read (stat) a name that does not
    exist under each allowed namespace root. NotFound is the answer of a store that let us look;
    refused credentials and an unreachable store fail the check."""
    if config.blockstore.type == "local":
        return "ok"
    roots = [root for root in config.graveler.allowed_namespace_roots or [] if _names_a_bucket(root)]
    if not roots:
        return "ok (not probed: graveler.allowed_namespace_roots names no bucket or container to look in)"
    for root in roots:
        try:
            adapter.stat(root, f"_silt/check-{uuid.uuid4().hex}")
        except NotFound:
            pass  # the store let us look (a HEAD cannot tell a missing bucket from a missing object)
        except SiltError as exc:
            raise ClientError(f"blockstore: {root}: {exc}", EXIT_UNAVAILABLE) from None
    return f"ok (reached {', '.join(roots)})"


def _names_a_bucket(root: str) -> bool:
    try:
        parse_namespace(root)
    except InvalidArgument:
        return False
    return True


def run_check(config: Config, source: str | None) -> None:
    from silt.block import open_adapter
    from silt.kv import open_store

    lines = [f"config: {source or 'built-in defaults (no config file found)'}"]
    database = config.database
    if database.type == "local":
        _must_exist(database.local.path, "kv: local")
    elif database.type == "cassandra":
        database = database.model_copy(
            update={"cassandra": database.cassandra.model_copy(update={"create_schema": False})}
        )
    store = open_store(database)
    try:
        with contextlib.suppress(NotFound):
            store.get(b"silt-health", uuid.uuid4().hex.encode())  # a read: nothing is written
        warnings_of = getattr(store, "durability_warnings", None)
        warnings: list[str] = warnings_of() if warnings_of is not None else []
    finally:
        store.close()
    lines.append(f"kv: {database.type} ok")
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    if config.blockstore.type == "local":
        _must_exist(config.blockstore.local.path, "blockstore: local")
    adapter = open_adapter(config.blockstore)
    lines.append(f"blockstore: {config.blockstore.type} {probe_blockstore(adapter, config)}")
    data = {"config": source, "kv": database.type, "blockstore": config.blockstore.type, "warnings": warnings}
    output(data, lambda: click.echo("\n".join(lines)))
