"""gRPC wiring of the compactor service: its own process, with its own KV and object-store
connections, running graveler's engine (docs/design/compaction.md).

Compaction is batch work: the process lowers its own scheduling priority and keeps to the
commit workers' CPUs (priority.py), and drops compacted tokens at a pace, so on a machine it
shares with graveler the staging writes graveler answers keep their latency.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import grpc
from grpc_health.v1.health import HealthServicer

from engine.core.deadline import Deadline
from engine.open import open_engine
from services.compactor.compactor import Compactor
from services.compactor.permissions import RULES
from services.compactor.priority import yield_cpu, yield_disk
from services.compactor.shipping import ShippingLoop
from silt.compactor.v1 import compactor_pb2 as api
from silt.compactor.v1 import compactor_pb2_grpc as api_grpc
from silt.config import Config
from silt.journal.mac import journal_key
from silt.journal.shipper import Shipper
from silt.journal.store import JournaledStore
from silt.rpc.channels import server_credentials
from silt.rpc.interceptor import remote_interceptor
from silt.rpc.limits import COMPACTOR_LIMITS
from silt.rpc.serve import serve
from silt.rpc.server import bind, build_server
from silt.rpc.signing import COMPACTOR_AUDIENCE
from silt.service import service_config, startup_errors
from silt.telemetry.health import block_probe, kv_probe

log = logging.getLogger(__name__)


class CompactorServicer(api_grpc.CompactorServiceServicer):
    def __init__(self, compactor: Compactor) -> None:
        self._compactor = compactor

    def Compact(self, request: api.CompactRequest, context: grpc.ServicerContext) -> api.CompactResponse:
        started = time.perf_counter()
        deadline = Deadline.after(context.time_remaining(), is_active=context.is_active)
        result = self._compactor.compact(request.repository, request.branch, deadline)
        return api.CompactResponse(
            compacted_metarange_id=result.compacted_metarange_id,
            tokens_compacted=result.tokens_compacted,
            records_changed=result.records_changed,
            seconds=time.perf_counter() - started,
        )

    def GetStatus(self, request: api.GetStatusRequest, context: grpc.ServicerContext) -> api.GetStatusResponse:
        branch, running = self._compactor.status(request.repository, request.branch)
        response = api.GetStatusResponse(
            commit_id=branch.commit_id,
            compacted_metarange_id=branch.compacted_metarange_id,
            sealed_tokens=len(branch.sealed_tokens),
            running=running,
        )
        if branch.HasField("compaction_start_time"):
            response.compaction_start_time.CopyFrom(branch.compaction_start_time)
        return response

    def Trigger(self, request: api.TriggerRequest, context: grpc.ServicerContext) -> api.TriggerResponse:
        return api.TriggerResponse(accepted=self._compactor.trigger(request.repository, request.branch))


def build_compactor(config: Config) -> Compactor:
    return Compactor(open_engine(config, "compactor"), config.compactor.compaction_timeout_seconds)


def build_shipping(compactor: Compactor, config: Config) -> ShippingLoop:
    kv = compactor.graveler.refs.kv
    # The shipper sees and deletes journal rows, which the journaled view hides.
    raw = kv.raw if isinstance(kv, JournaledStore) else kv
    key = journal_key(config)
    interval = config.compactor.journal_ship_interval_seconds
    if key is None:
        # Unsigned batches would be refused by rebuild; the rows wait in KV for a configured key.
        log.error("journal shipping is off: set graveler.journal.hmac_key (or auth.encrypt_secret_key)")
        key, interval = b"", 0.0
    shipper = Shipper(raw, compactor.graveler.committed.adapter, hmac_key=key)
    return ShippingLoop(shipper, interval)


def start(
    compactor: Compactor,
    address: str,
    interceptors: Sequence[grpc.ServerInterceptor] = (),
    health: HealthServicer | None = None,
    tls: grpc.ServerCredentials | None = None,
) -> tuple[grpc.Server, int]:
    server = build_server(interceptors, health=health, limits=COMPACTOR_LIMITS)
    api_grpc.add_CompactorServiceServicer_to_server(CompactorServicer(compactor), server)
    port = bind(server, address, tls)
    server.start()
    return server, port


def main(argv: list[str] | None = None) -> None:
    config = service_config("Run the compactor gRPC service.", argv, "compactor")
    yield_cpu(config.graveler.commit_worker_cpus)
    yield_disk()  # before the server's threads start: they inherit the class
    with startup_errors("compactor"):
        compactor = build_compactor(config)
        shipping = build_shipping(compactor, config)
        tls = server_credentials(config.tls)
    # Every call is authenticated and authorized by auth; nothing is served without it.
    interceptor = remote_interceptor(config, RULES, COMPACTOR_AUDIENCE)
    graveler = compactor.graveler
    shipping.start()
    serve(
        "compactor",
        lambda health: start(compactor, config.compactor.listen_address, [interceptor], health=health, tls=tls),
        config=config,
        grpc_service=api.DESCRIPTOR.services_by_name["CompactorService"],
        probes={"kv": kv_probe(graveler.refs.kv), "blockstore": block_probe(graveler.committed.adapter)},
        health_address=config.compactor.health_listen_address,
        tls=tls is not None,
        close=[interceptor.close, shipping.close, compactor.close],
    )


if __name__ == "__main__":
    main()
