"""An ASGI app served by uvicorn in a thread of the test process, on a free 127.0.0.1 port:
for an edge configured otherwise than the stack's own, or one whose internals a test watches."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import uvicorn

from silt.free_ports import free_port
from tests.support.wait import wait_until

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0


@contextlib.contextmanager
def served_in_process(app: Any, what: str) -> Iterator[str]:
    """Serve `app` until the block ends; its endpoint (http://127.0.0.1:<port>) once it is
    started. `what` names it in the start's timeout."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, START_TIMEOUT_S, what)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(STOP_TIMEOUT_S)
