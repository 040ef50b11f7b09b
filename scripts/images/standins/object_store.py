"""moto's S3 server on port 9000, answering MinIO's health paths: the stand-in for MinIO in
`make k8s-up`. Started with MinIO's arguments (`server /data`), which it accepts and ignores:
objects live in memory, as an emptyDir-backed MinIO's die with its pod."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple

HEALTH_PATHS = ("/minio/health/live", "/minio/health/ready")
PORT = 9000

StartResponse = Callable[[str, list[tuple[str, str]]], Any]


def main(argv: list[str]) -> None:
    if argv[:1] != ["server"]:
        sys.exit(f"usage: object_store.py server DIR (as MinIO is started), got {argv}")
    s3 = DomainDispatcherApplication(create_backend_app)

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") in HEALTH_PATHS:
            start_response("200 OK", [("Content-Length", "0")])
            return [b""]
        return s3(environ, start_response)

    run_simple("0.0.0.0", PORT, app, threaded=True)


if __name__ == "__main__":
    main(sys.argv[1:])
