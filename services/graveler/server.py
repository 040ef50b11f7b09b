"""The graveler process (run as `python -m services.graveler [--config FILE]`: see __main__.py); its handlers are
services/graveler/servicer.py, its engine wired by engine/open.py."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Sequence

import grpc
from grpc_health.v1.health import HealthServicer

from engine.features.history_events.manager import HistoryEvents
from engine.features.history_events.retention import RetentionPolicy
from engine.features.history_events.streams import StreamLimits, stream_authority
from engine.graveler import Graveler
from engine.open import open_engine
from services.graveler.journaling import JournalContextInterceptor
from services.graveler.key_checks import hook_authority, key_scopes
from services.graveler.permissions import RULES
from services.graveler.registration import add_graveler_service
from services.graveler.sensor import Sensor, Thresholds, Trigger
from services.graveler.servicer import GravelerServicer, caller_may, user_may
from silt.compactor.v1 import compactor_pb2 as compactor_api
from silt.compactor.v1 import compactor_pb2_grpc as compactor_grpc
from silt.config import Config
from silt.errors import ConfigError
from silt.graveler.v1 import graveler_pb2 as api
from silt.rpc.channels import client_tls, server_credentials
from silt.rpc.interceptor import remote_interceptor
from silt.rpc.limits import GRAVELER_LIMITS
from silt.rpc.serve import serve
from silt.rpc.server import bind, build_server
from silt.rpc.signing import COMPACTOR_AUDIENCE, GRAVELER_AUDIENCE, Credentials, signed_channel
from silt.service import service_config, startup_errors
from silt.telemetry.health import block_probe, kv_probe

log = logging.getLogger(__name__)
# How often the background cleaner looks for repository deletions a failure interrupted.
CLEANER_INTERVAL_SECONDS = 60.0


def compactor_trigger(config: Config) -> tuple[Trigger, Callable[[], None]] | None:
    """The sensor's call to the compactor (signed with this service's key), and how to close it."""
    try:
        credentials = Credentials.from_config(config)
    except ConfigError:
        log.warning("no service credentials configured: the compaction sensor cannot call the compactor; off")
        return None
    channel = signed_channel(
        config.compactor.dial_address, credentials, tls=client_tls(config.tls), audience=COMPACTOR_AUDIENCE
    )
    stub = compactor_grpc.CompactorServiceStub(channel)
    timeout = config.compactor.trigger_timeout_seconds

    def trigger(repository: str, branch: str) -> None:
        stub.Trigger(compactor_api.TriggerRequest(repository=repository, branch=branch), timeout=timeout)

    return trigger, channel.close


def start_sensor(graveler: Graveler, config: Config, trigger: Trigger) -> Sensor:
    """Attach a compaction sensor to graveler's write path; its counts are rebuilt from KV in the background."""
    section = config.compactor
    thresholds = Thresholds(section.tombstone_threshold, section.sealed_tokens_threshold, section.claim_minutes * 60)
    sensor = Sensor(graveler.refs, graveler.staging, thresholds, trigger)
    graveler.observer = sensor

    def rebuild() -> None:
        try:
            log.info("compaction sensor: counted the staging areas of %d branches", sensor.rebuild())
        except Exception:  # counts start from zero instead: compactions come later, nothing breaks
            log.warning("compaction sensor: could not count staged deletes at start-up", exc_info=True)

    threading.Thread(target=rebuild, name="compaction-sensor-rebuild", daemon=True).start()
    return sensor


def start(
    graveler: Graveler,
    address: str,
    interceptors: Sequence[grpc.ServerInterceptor] = (),
    health: HealthServicer | None = None,
    tls: grpc.ServerCredentials | None = None,
    history: HistoryEvents | None = None,
) -> tuple[grpc.Server, int]:
    # After authentication, so the journal names the authenticated caller.
    server = build_server([*interceptors, JournalContextInterceptor()], health=health, limits=GRAVELER_LIMITS)
    servicer = GravelerServicer(
        graveler,
        caller_may(interceptors),
        history,
        stream_authority(interceptors),
        user_may(interceptors),
        key_scopes(interceptors),
        hook_authority(interceptors),
    )
    add_graveler_service(servicer, server, {"ListEntries": servicer.serialized_list_entries})
    port = bind(server, address, tls)
    server.start()
    return server, port


def main(argv: list[str] | None = None) -> None:
    config = service_config("Run the graveler gRPC service.", argv, "graveler")
    # Commits are CPU-bound Python; a short GIL switch interval keeps staging writes served
    # in between (the long-commit-with-staging benchmark, bench/graveler.py).
    sys.setswitchinterval(0.0005)
    with startup_errors("graveler"):
        graveler = open_engine(config, "server")
        tls = server_credentials(config.tls)
    # Every call is authenticated and authorized by auth; nothing is served without it.
    interceptor = remote_interceptor(config, RULES, GRAVELER_AUDIENCE)
    closing: list[Callable[[], None]] = []
    wired = compactor_trigger(config) if config.compactor.sensor_enabled else None
    if wired is not None:
        trigger, close_trigger = wired
        closing += [start_sensor(graveler, config, trigger).close, close_trigger]

    section = config.graveler.history
    history = HistoryEvents(
        graveler.refs,
        RetentionPolicy(section.retention_days, section.retention_interval_seconds),
        enabled=section.enabled,
        streams=StreamLimits(
            section.max_streams,
            section.max_streams_per_caller,
            section.stream_admin_reserve,
            section.stream_reauthorize_seconds,
            section.stream_write_timeout_seconds,
        ),
    ).start()
    closing.append(history.close)

    # Meanwhile, the background cleaner finishes repository deletions that a failure interrupted
    # and the drops of staging tokens another graveler left,
    # and history hours past their retention are deleted (each repository once per interval).
    def clean() -> None:
        # Drops recorded by a graveler that died before it was done with them (the first at start).
        graveler.cleaner.resume_if_due()
        finished = graveler.lifecycle.clean_deleted_repositories()
        if finished:
            log.info("finished deleting %d repositories", finished)
        pruned = history.retention.prune_all()
        if pruned.hours:
            log.info("history retention: deleted %d hours (%d events)", pruned.hours, pruned.events)

    serve(
        "graveler",
        lambda health: start(
            graveler, config.graveler.listen_address, [interceptor], health=health, tls=tls, history=history
        ),
        config=config,
        grpc_service=api.DESCRIPTOR.services_by_name["GravelerService"],
        probes={"kv": kv_probe(graveler.refs.kv), "blockstore": block_probe(graveler.committed.adapter)},
        health_address=config.graveler.health_listen_address,
        tls=tls is not None,
        every=CLEANER_INTERVAL_SECONDS,
        tick=clean,
        close=[*closing, interceptor.close, graveler.close],
    )


if __name__ == "__main__":
    main()
