"""lakeFS operations Silt answers with 501 Not Implemented, and why (the compatibility page lists them)."""

from __future__ import annotations

NOT_SERVED: dict[str, str] = {}
