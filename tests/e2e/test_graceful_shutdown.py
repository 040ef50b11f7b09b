"""SIGTERM drains: the gateway stops accepting connections but finishes the upload in flight
(what a pod being replaced gets after its preStop, deploy/k8s), within its 5 s drain."""

from __future__ import annotations

import hashlib
import io
import signal
import socket
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from tests.support.gateway_stack import gateway_stack
from tests.support.wait import wait_until

CHUNK = 64 * 1024
CHUNKS = 24  # 1.5 MiB sent over about 1.2 s


def _on_the_wire() -> bool:
    """Whether the caller is the HTTP client sending the body (not botocore hashing it)."""
    return any(frame.name in ("send", "_send_output") for frame in traceback.extract_stack())


class SlowBody(io.BytesIO):
    """Read at full speed while boto3 hashes it, then slowly while it is sent."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.sending = threading.Event()

    def read(self, size: int | None = -1) -> bytes:
        if _on_the_wire():
            if self.tell() > 0:
                self.sending.set()
            time.sleep(0.05)  # the scenario: a slow client, so the upload is still in flight at SIGTERM
        return super().read(CHUNK if size is None or size < 0 or size > CHUNK else size)


def test_sigterm_finishes_the_upload_in_flight_and_refuses_new_connections(tmp_path: Path) -> None:
    with gateway_stack(tmp_path / "silt") as env:
        s3 = env.client()
        s3.create_bucket(Bucket="drain")
        data = bytes(range(256)) * (CHUNK * CHUNKS // 256)
        body = SlowBody(data)
        result: dict[str, Any] = {}

        def upload() -> None:
            try:
                result["put"] = s3.put_object(Bucket="drain", Key="main/big.bin", Body=body)
            except Exception as exc:
                result["error"] = exc

        uploader = threading.Thread(target=upload)
        uploader.start()
        assert body.sending.wait(10), "the upload never started"
        time.sleep(0.2)  # the scenario: some of the body has reached the gateway
        host, port = env.endpoint.removeprefix("http://").rsplit(":", 1)
        terminated = time.monotonic()
        env.stack._services["gateway"].proc.send_signal(signal.SIGTERM)  # type: ignore[union-attr]

        # Draining: the listener is closed, so a new client is refused while the upload goes on.
        def refused() -> bool:
            try:
                socket.create_connection((host, int(port)), timeout=1).close()
            except OSError:
                return True
            return False

        wait_until(refused, 5, "refusing new connections")
        assert uploader.is_alive(), "the upload ended before the gateway stopped accepting connections"
        uploader.join(30)
        assert "error" not in result, result.get("error")
        assert result["put"]["ETag"].strip('"') == hashlib.md5(data).hexdigest()
        env.stack._services["gateway"].proc.wait(10)  # type: ignore[union-attr]
        assert time.monotonic() - terminated < 10
