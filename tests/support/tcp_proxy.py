"""A TCP proxy on 127.0.0.1 that tests stop, restart and freeze to simulate outages.

* ``stop()`` closes the listener and drops every proxied connection, like a node going
  away: clients see their connections reset and new connections refused.
* ``start()`` listens again on the same port, like the node coming back.
* ``freeze()`` keeps connections open but stops forwarding, like a node that hangs:
  requests get no answer until the client's timeout. ``thaw()`` resumes forwarding.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading

_CHUNK = 65536


class TcpProxy:
    def __init__(self, target_host: str, target_port: int, port: int = 0) -> None:
        self.target = (target_host, target_port)
        self.port = port
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._sockets: set[socket.socket] = set()
        self._flowing = threading.Event()
        self._flowing.set()

    def __enter__(self) -> TcpProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # Restarting on the port of a just-stopped proxy must not wait for TIME_WAIT.
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        with self._lock:
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), name="tcp-proxy-accept", daemon=True).start()

    def stop(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._sockets = self._sockets, set()
        # Release pumps parked by freeze() so that they see their sockets closed and exit.
        self._flowing.set()
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for sock in sockets:
            _reset(sock)

    def freeze(self) -> None:
        self._flowing.clear()

    def thaw(self) -> None:
        self._flowing.set()

    @property
    def connections(self) -> int:
        with self._lock:
            return len(self._sockets) // 2

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # stopped
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                _reset(client)
                continue
            with self._lock:
                if self._listener is not listener:
                    _reset(client)
                    _reset(upstream)
                    return
                self._sockets.update((client, upstream))
            # Each direction closes its half on EOF; the pair is closed when both are done.
            # Resetting both sockets on the first EOF would discard a response the client
            # has not read yet (an RST flushes the peer's receive queue).
            pending = [2]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(
                    target=self._pump, args=(src, dst, pending), name="tcp-proxy-pump", daemon=True
                ).start()

    def _pump(self, src: socket.socket, dst: socket.socket, pending: list[int]) -> None:
        orderly = False
        try:
            while True:
                data = src.recv(_CHUNK)
                if not data:
                    orderly = True
                    break
                self._flowing.wait()
                dst.sendall(data)
        except OSError:
            pass
        if orderly:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)
            with self._lock:
                pending[0] -= 1
                if pending[0] > 0:
                    return  # the other direction is still flowing
        with self._lock:
            self._sockets.discard(src)
            self._sockets.discard(dst)
        if orderly:
            src.close()
            dst.close()
        else:
            _reset(src)
            _reset(dst)


def _reset(sock: socket.socket) -> None:
    """Close with RST, as a vanished host's connections end, rather than an orderly FIN."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    # SHUT_RD wakes a thread blocked in recv on this socket without sending a FIN.
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RD)
    sock.close()
