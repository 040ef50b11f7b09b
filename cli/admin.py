"""`silt admin`: operator commands that work on the KV store and the object store directly.

They read the same configuration file as the services (database and blockstore sections),
not the gRPC endpoints: rebuild runs exactly when graveler has no metadata to serve.
"""

from __future__ import annotations

import time

import click

from cli.common import done, json_option, output, state
from silt.block import open_adapter
from silt.config import Config
from silt.errors import ConfigError
from silt.journal.mac import journal_key
from silt.journal.rebuild import Rebuild, RebuildProgress, repository_of
from silt.journal.shipper import MAX_BATCH_RECORDS, Shipper
from silt.kv.store import open_store


@click.group()
def admin() -> None:
    """Operator commands on the KV store and the object store (configuration file, no services)."""


@admin.group()
def journal() -> None:
    """The metadata journal."""


@journal.command("ship")
@click.option("--repository", help="Ship this repository only (default: every repository).")
@click.option(
    "--batch-records",
    type=click.IntRange(1, MAX_BATCH_RECORDS),
    default=MAX_BATCH_RECORDS,
    show_default=True,
    help="Records per Parquet batch.",
)
@click.option(
    "--lease-seconds",
    type=click.FloatRange(1, 3600),
    default=300,
    show_default=True,
    help="How long another shipper waits before taking over a repository from this one if it dies.",
)
@json_option
def journal_ship(repository: str | None, batch_records: int, lease_seconds: float) -> None:
    """Move journal records from KV into their repositories' storage namespaces now.

    A repository another shipper is shipping is skipped (reported as such).
    """
    config = state().config()
    with open_store(config.database) as kv:
        shipper = Shipper(
            kv,
            open_adapter(config.blockstore),
            lease_seconds,
            batch_records=batch_records,
            hmac_key=_journal_key(config),
        )
        results = [shipper.ship(repository)] if repository else shipper.ship_all()
    rows = [
        {
            "repository": result.repository,
            "records": result.records,
            "batches_written": result.batches_written,
            "batches_existing": result.batches_existing,
            "skipped": result.skipped,
        }
        for result in results
    ]

    def human() -> None:
        for row in rows:
            why = f" (skipped: {row['skipped']})" if row["skipped"] else ""
            click.echo(f"{row['repository']}: {row['records']} records in {row['batches_written']} new batches{why}")

    output({"repositories": rows}, human)


@admin.command("rebuild")
@click.option("--namespace", required=True, help="The repository's storage namespace, e.g. s3://bucket/repo.")
@click.option("--repository", help="The repository to rebuild (default: the one the namespace's journal names).")
@click.option(
    "--accept-unsigned",
    is_flag=True,
    help="Also replay journal batches that have no MAC (shipped before batches were signed): a one-time "
    "migration, for a namespace no one but Silt could write to.",
)
@json_option
def rebuild(namespace: str, repository: str | None, accept_unsigned: bool) -> None:
    """Rebuild a repository's metadata into the configured KV from its storage namespace alone.

    Refuses a repository that exists in the KV; run again after an interruption to resume.
    Refuses, writing nothing, a journal with a batch whose MAC is missing or wrong, or with
    records that change anything but the repository's own partitions and keys.
    """
    config = state().config()
    key = _journal_key(config)
    adapter = open_adapter(config.blockstore)
    name = repository or repository_of(adapter, namespace)
    started = time.monotonic()
    quiet = state().json

    def report(progress: RebuildProgress) -> None:
        if not quiet:
            click.echo(
                f"hour {progress.hour}: {progress.batches_read}/{progress.batches_total} batches, "
                f"{progress.records_applied} records applied",
                err=True,
            )

    with open_store(config.database) as kv:
        progress = Rebuild(kv, adapter, namespace, name, report, hmac_key=key, accept_unsigned=accept_unsigned).run()
    seconds = time.monotonic() - started
    outcome = "deleted in its journal; nothing to expose" if progress.deleted else "rebuilt"
    done(
        f"{name}: {outcome} from {progress.batches_read} batches, {progress.records_applied} records "
        f"in {seconds:.1f}s{' (resumed)' if progress.resumed else ''}",
        repository=name,
        batches=progress.batches_read,
        batches_skipped=progress.batches_skipped,
        records=progress.records_applied,
        resumed=progress.resumed,
        deleted=progress.deleted,
        unsigned_batches=progress.unsigned_batches,
        seconds=round(seconds, 3),
    )


def _journal_key(config: Config) -> bytes:
    key = journal_key(config)
    if key is None:
        raise ConfigError("journal batches are signed: set graveler.journal.hmac_key or auth.encrypt_secret_key")
    return key
