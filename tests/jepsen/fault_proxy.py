"""A TCP proxy between an edge and the gravelers that injects network faults.

Each accepted connection goes to the next backend that accepts it (round robin over the
gravelers, as a Kubernetes Service spreads connections). Faults:

* refuse: the listener closes and every proxied connection is reset: new connections are
  refused (the caller certainly reached nobody);
* drop: a request is forwarded, and the connection is reset before the server's answer
  reaches the caller (the ambiguous case: it may well have been applied); each answer is
  dropped with probability DROP_PROBABILITY, decided by the run's seeded random;
* delay: every answer is held back DELAY_S before it is forwarded.

``heal()`` ends every fault, a refusal included. The answer of a connection's first moments (the HTTP/2 handshake)
always passes, so that a dropped answer is a request's, not the connection's setup.
"""

from __future__ import annotations

import random
import socket
import threading
import time

from tests.support.tcp_proxy import ProxyListener, reset

_CHUNK = 65536
DROP_PROBABILITY = 0.5
DELAY_S = 2.5
HANDSHAKE_S = 0.05


class FaultProxy(ProxyListener):
    def __init__(
        self,
        backends: list[int],
        rng: random.Random,
        port: int = 0,
        drop_probability: float = DROP_PROBABILITY,
        delay_s: float = DELAY_S,
        handshake_s: float = HANDSHAKE_S,
    ) -> None:
        super().__init__(port, backlog=128, name="fault-proxy")
        self.backends = backends
        self.drop_probability = drop_probability
        self.delay_s = delay_s
        self.handshake_s = handshake_s
        self.fault: str | None = None
        self._rng = rng
        self._next = 0
        self.dropped = 0

    def start(self) -> FaultProxy:
        self._listen()
        return self

    def stop(self) -> None:
        self._close()

    def inject(self, fault: str) -> None:
        assert fault in ("refuse", "drop", "delay"), fault
        self.fault = fault
        if fault == "refuse":
            self.stop()

    def heal(self) -> None:
        """End every fault: a refusal too when another fault was injected over it (a mixed
        window may put two on one proxy, and either heal may come first)."""
        self.fault = None
        with self._lock:
            closed = self._listener is None
        if closed:
            self.start()

    def prefer(self, backend: int) -> None:
        """Send the next connection to backends[backend] and end every current one: the edge
        reconnects there. A gRPC channel keeps one connection, so without this an edge stays on
        whichever graveler it reached last (after a restart, the one that was up meanwhile)."""
        with self._lock:
            self._next = backend
        self._reset_connections()

    def _dial(self) -> socket.socket | None:
        for _ in range(len(self.backends)):
            with self._lock:
                port = self.backends[self._next % len(self.backends)]
                self._next += 1
            try:
                upstream = socket.create_connection(("127.0.0.1", port), timeout=2)
            except OSError:
                continue
            upstream.settimeout(None)
            return upstream
        return None

    def _serve(self, client: socket.socket, upstream: socket.socket) -> None:
        opened = time.monotonic()
        for src, dst, answers in ((client, upstream, False), (upstream, client, True)):
            threading.Thread(
                target=self._pump, args=(src, dst, answers, opened), name="fault-proxy-pump", daemon=True
            ).start()

    def _pump(self, src: socket.socket, dst: socket.socket, answers: bool, opened: float) -> None:
        try:
            while True:
                data = src.recv(_CHUNK)
                if not data:
                    break
                if answers and time.monotonic() - opened >= self.handshake_s:
                    if self.fault == "delay":
                        time.sleep(self.delay_s)
                    elif self.fault == "drop" and self._rng.random() < self.drop_probability:
                        self.dropped += 1
                        break  # the request was served; its answer never arrives
                dst.sendall(data)
        except OSError:
            pass
        self._forget(src, dst)
        reset(src)
        reset(dst)
