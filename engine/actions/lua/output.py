"""What a hook prints, kept within a byte budget: its beginning and its end.

A chatty script can print without bound; the run keeps the first half of the budget and the
last half, and says in between how many bytes it dropped. The end usually explains a failure
("found forbidden paths: ...") and the beginning what the script set out to do.
"""

from __future__ import annotations


class BoundedOutput:
    def __init__(self, limit: int) -> None:
        self._head_cap = max(limit, 0) // 2
        self._tail_cap = max(limit, 0) - self._head_cap
        self._head = bytearray()
        self._tail = bytearray()
        self._total = 0

    def write(self, data: bytes) -> None:
        self._total += len(data)
        room = self._head_cap - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if not data or not self._tail_cap:
            return
        if len(data) >= self._tail_cap:
            self._tail = bytearray(data[-self._tail_cap :])
        else:
            self._tail += data
            # Trimmed in batches, so that many small writes cost amortized constant time.
            if len(self._tail) > 2 * self._tail_cap:
                del self._tail[: -self._tail_cap]

    def text(self) -> str:
        tail = bytes(self._tail[-self._tail_cap :]) if self._tail_cap else b""
        dropped = self._total - len(self._head) - len(tail)
        middle = f"\n[... {dropped} bytes of output dropped ...]\n".encode() if dropped > 0 else b""
        return (bytes(self._head) + middle + tail).decode("utf-8", errors="replace")
