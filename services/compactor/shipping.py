"""The compactor's journal shipping loop (docs/design/journal.md, "Shipping").

Shipping runs here rather than in graveler: the compactor is already a background process
with graveler's KV and the namespaces' object store at hand, and nothing on the request
path waits for it. Several compactor replicas may run the loop; each repository's lease
(silt/journal/shipper.py) keeps two of them from shipping one repository at once.
"""

from __future__ import annotations

import logging
import threading

from silt.journal.shipper import Shipper

log = logging.getLogger(__name__)


class ShippingLoop:
    def __init__(self, shipper: Shipper, interval_seconds: float) -> None:
        self.shipper = shipper
        self._interval = interval_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="journal-shipper", daemon=True)

    def start(self) -> None:
        if self._interval > 0:
            self._thread.start()

    def close(self, timeout: float = 30.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                results = self.shipper.ship_all()
            except Exception:  # the store unreachable for a while: try again next round
                log.warning("journal shipping round failed", exc_info=True)
                continue
            shipped = sum(result.records for result in results)
            if shipped:
                log.info("shipped %d journal records of %d repositories", shipped, len(results))
