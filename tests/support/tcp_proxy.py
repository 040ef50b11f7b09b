"""A TCP proxy on 127.0.0.1 that tests stop, restart and freeze to simulate outages.

* ``stop()`` closes the listener and drops every proxied connection, like a node going
  away: clients see their connections reset and new connections refused.
* ``start()`` listens again on the same port, like the node coming back.
* ``freeze()`` keeps connections open but stops forwarding, like a node that hangs:
  requests get no answer until the client's timeout. ``thaw()`` resumes forwarding.

``ProxyListener`` and ``reset`` are what the jepsen fault proxy (tests/jepsen/fault_proxy.py)
builds on too.
"""

from __future__ import annotations

import abc
import contextlib
import socket
import struct
import threading

_CHUNK = 65536


class ProxyListener(abc.ABC):
    """What every test proxy here shares: a listener on 127.0.0.1 (`port`, 0 for any free one),
    an accept loop that pairs each client with the upstream connection `_dial` opens, the
    proxied sockets, and closing it all with resets. Subclasses say where a connection goes
    (`_dial`) and how its bytes flow (`_serve`)."""

    def __init__(self, port: int, backlog: int, name: str) -> None:
        self.port = port
        self._backlog = backlog
        self._name = name
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._sockets: set[socket.socket] = set()

    def _listen(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # Restarting on the port of a just-stopped proxy must not wait for TIME_WAIT.
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(self._backlog)
        self.port = listener.getsockname()[1]
        with self._lock:
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), name=f"{self._name}-accept", daemon=True).start()

    def _close(self) -> None:
        """Close the listener (new connections are refused) and reset every proxied connection."""
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._sockets = self._sockets, set()
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        _reset_all(sockets)

    def _reset_connections(self) -> None:
        """Reset every proxied connection, the listener left open."""
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        _reset_all(sockets)

    @abc.abstractmethod
    def _dial(self) -> socket.socket | None:
        """A connection upstream for a client just accepted; None when none can be opened."""

    @abc.abstractmethod
    def _serve(self, client: socket.socket, upstream: socket.socket) -> None:
        """Start forwarding between a client and its upstream connection."""

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # stopped
            upstream = self._dial()
            if upstream is None:
                reset(client)
                continue
            with self._lock:
                if self._listener is not listener:
                    reset(client)
                    reset(upstream)
                    return
                self._sockets.update((client, upstream))
            self._serve(client, upstream)

    def _forget(self, src: socket.socket, dst: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(src)
            self._sockets.discard(dst)


class TcpProxy(ProxyListener):
    def __init__(self, target_host: str, target_port: int, port: int = 0) -> None:
        super().__init__(port, backlog=64, name="tcp-proxy")
        self.target = (target_host, target_port)
        self._flowing = threading.Event()
        self._flowing.set()

    def __enter__(self) -> TcpProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self._listen()

    def stop(self) -> None:
        # Release pumps parked by freeze() so that they see their sockets closed and exit.
        self._flowing.set()
        self._close()

    def freeze(self) -> None:
        self._flowing.clear()

    def thaw(self) -> None:
        self._flowing.set()

    @property
    def connections(self) -> int:
        with self._lock:
            return len(self._sockets) // 2

    def _dial(self) -> socket.socket | None:
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            return None
        upstream.settimeout(None)
        return upstream

    def _serve(self, client: socket.socket, upstream: socket.socket) -> None:
        # Each direction closes its half on EOF; the pair is closed when both are done.
        # Resetting both sockets on the first EOF would discard a response the client
        # has not read yet (an RST flushes the peer's receive queue).
        pending = [2]
        for src, dst in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pump, args=(src, dst, pending), name="tcp-proxy-pump", daemon=True).start()

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
        self._forget(src, dst)
        if orderly:
            src.close()
            dst.close()
        else:
            reset(src)
            reset(dst)


def reset(sock: socket.socket) -> None:
    """Close with RST, as a vanished host's connections end, rather than an orderly FIN."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    # SHUT_RD wakes a thread blocked in recv on this socket without sending a FIN.
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RD)
    sock.close()


def _reset_all(sockets: set[socket.socket]) -> None:
    for sock in sockets:
        reset(sock)
