"""The physical addresses getPhysicalAddress hands out, and the check linkPhysicalAddress makes
of them, as lakeFS does: an address inside the repository's storage namespace is linked only if
this server handed it out, for that repository, branch and path, within the last 6 hours.

The address carries its own proof, since a client writes the bytes at exactly that place and
sends it back unchanged: `data/<uuid hex>.<issued, Unix seconds>.<HMAC>`, under the namespace's
`data/` tree like every object Silt writes. Without the check, a writer could link any object
of the namespace (another path's bytes, an upload another client has not linked yet) under a
path of its choosing.
"""

from __future__ import annotations

import base64
import hmac
import json
import time
from collections.abc import Callable

from edge.api.errors import bad_request
from edge.api.objects.signing import mac
from silt.gc_grace import LINK_VALIDITY_SECONDS
from silt.objects import LINK_ADDRESS, new_physical_address

# How long after getPhysicalAddress the address may be linked (LINK_VALIDITY_SECONDS, 6 h):
# lakeFS allows 24 h, but Silt's garbage collection spares unreferenced objects only for its
# grace period, and an object linked after a run listed it as garbage would lose its bytes.
# silt/gc_grace.py refuses a grace that does not exceed this validity by a margin.
# The form is silt/objects.py's LINK_ADDRESS: reads of linked entries know them by it.
_ISSUED = LINK_ADDRESS


def _signed_text(repository: str, branch: str, path: str, base: str, issued: int) -> bytes:
    # JSON: no choice of separator can make two different tuples sign alike.
    return json.dumps([repository, branch, path, base, issued], ensure_ascii=False).encode("utf-8", "surrogatepass")


def _encoded(signature: bytes) -> str:
    return base64.urlsafe_b64encode(signature).decode("ascii").rstrip("=")


class LinkAddresses:
    def __init__(self, key: bytes, clock: Callable[[], float] = time.time) -> None:
        self._key = key
        self._clock = clock

    def issue(self, repository: str, branch: str, path: str) -> str:
        """A fresh address (relative to the namespace) that `check` accepts for these names."""
        base = new_physical_address()
        issued = int(self._clock())
        signature = mac(self._key, _signed_text(repository, branch, path, base, issued))
        return f"{base}.{issued}.{_encoded(signature)}"

    def check(self, repository: str, branch: str, path: str, address: str) -> None:
        """Refuse (400, lakeFS's words) an address inside the namespace that `issue` did not give
        for these names, or gave more than LINK_VALIDITY_SECONDS ago."""
        if not _ISSUED.fullmatch(address):
            raise bad_request("address is not signed: link address invalid")
        base, issued_text, signature_text = address.rsplit(".", 2)
        issued = int(issued_text)
        expected = _encoded(mac(self._key, _signed_text(repository, branch, path, base, issued)))
        # Compared as text: base64 leaves spare bits in its last character, so decoding first
        # would let other spellings of the signature (other addresses, other files) pass.
        if not hmac.compare_digest(signature_text.encode("ascii"), expected.encode("ascii")):
            raise bad_request(
                "invalid address signature: link address invalid (it was handed out for another "
                "repository, branch or path, or not by this server)"
            )
        if self._clock() - issued > LINK_VALIDITY_SECONDS:
            raise bad_request("link address expired: ask getPhysicalAddress for a new one and upload again")
