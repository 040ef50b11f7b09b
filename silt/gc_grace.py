"""Garbage collection's grace period, and why it must outlast a link address.

GC deletes an unreferenced object only if it was modified before the run's start minus the
grace period. An upload through the staging API (getPhysicalAddress, then linkPhysicalAddress)
is unreferenced until it is linked, and its address stays linkable for LINK_VALIDITY_SECONDS
after it was handed out; the bytes are written after that, so a link always comes less than
LINK_VALIDITY_SECONDS after the object's modification time. A grace at least that long means
no run can list such an upload as garbage before its link, as measured on one clock. Three
clocks take part (the API server's, which stamps and checks the address; the object store's,
which stamps the modification time; graveler's, which fixes the run's start), so the grace
must exceed the validity by GRACE_MARGIN_SECONDS, far more than the skew of clocks kept by NTP
and the one-second rounding of the address's stamp.

A shorter grace is refused where a run is requested (``silt gc run --grace``, the job's
``--grace``) and by the run itself (``GCOptions``, ``run_gc``), unless the caller says
``--unsafe-short-grace`` (``unsafe_short_grace=True``): for tests, and for a repository nobody
links uploads into. Open multipart uploads, which may last 7 days, are not the grace's to
protect: their parts are never listed as objects (docs/design/gc.md, rule 3).
"""

from __future__ import annotations

import re

from silt.errors import InvalidArgument

# How long after getPhysicalAddress its address may be linked (edge/api/objects/link_addresses.py).
LINK_VALIDITY_SECONDS = 6 * 3600
# What the grace must exceed the link validity by: clock skew between three machines, and the
# second the address's stamp is rounded to, with a wide margin.
GRACE_MARGIN_SECONDS = 3600
MIN_GRACE_SECONDS = LINK_VALIDITY_SECONDS + GRACE_MARGIN_SECONDS
DEFAULT_GRACE_SECONDS = MIN_GRACE_SECONDS
DEFAULT_GRACE = "7h"

_GRACE_RE = re.compile(r"^(\d+)([smhd]?)$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


class GraceTooShort(InvalidArgument):
    """A GC grace period that an upload linked through the staging API could outlive."""


def parse_grace(text: str) -> int:
    """'7h', '30m', '90s', '2d' or plain seconds."""
    found = _GRACE_RE.match(text.strip())
    if not found:
        raise InvalidArgument(f"invalid grace period {text!r}: use e.g. 7h, 30m, 90s or 0")
    return int(found.group(1)) * _UNITS[found.group(2)]


def check_grace(seconds: int, *, unsafe_short_grace: bool = False) -> int:
    """seconds, if a run may use it as its grace period; GraceTooShort otherwise."""
    if seconds < MIN_GRACE_SECONDS and not unsafe_short_grace:
        raise GraceTooShort(
            f"grace period of {seconds} s refused: it must be at least {MIN_GRACE_SECONDS // 3600} h "
            f"({LINK_VALIDITY_SECONDS // 3600} h during which a staging-API upload may still be linked, "
            f"plus {GRACE_MARGIN_SECONDS // 3600} h for clock skew), or a run could delete an upload "
            "linked after it; pass --unsafe-short-grace to run anyway"
        )
    return seconds
