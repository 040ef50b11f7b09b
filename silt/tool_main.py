"""How Silt's one-shot administration commands (auth setup, its Kubernetes variant, rekey,
Cassandra's roles) end: a Silt error is one line on stderr and exit status 2, for the scripts
and init containers that run them."""

from __future__ import annotations

import sys
from collections.abc import Callable

from silt.errors import SiltError


def run_tool(prog: str, body: Callable[[], object]) -> int:
    """Run a command's `body`: 0 when it returns, 2 (and ``prog: message`` on stderr) when it
    raises a Silt error."""
    try:
        body()
    except SiltError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    return 0
