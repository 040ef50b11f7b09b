"""How a service's process runs Python's cyclic garbage collector once it is serving.

The collector's default first generation holds 700 new container objects. A listing page is a
few thousand tuples alive at once (keys, values, items), so the collector ran several times
per page, each time promoting the page's live objects and traversing them again in the older
generations, and every full collection traversed everything built at startup (modules,
protobuf descriptors, channels), none of which ever becomes garbage. Both cost time on every
request; neither frees anything: reference counting frees a request's objects, and the
collector is only for cycles.

Only a service's entry point calls tune_for_serving (never shared code a test or a tool may
run in its own process). The price of freezing: a startup object that later ends up in a
garbage cycle is never collected, a one-time cost bounded by what startup built.
"""

from __future__ import annotations

import gc

# Young container objects before a first-generation collection. 10,000 makes it a handful
# per listing page instead of dozens; the cycles it may leave uncollected meanwhile are
# a few megabytes at most.
FIRST_GENERATION = 10_000


def tune_for_serving() -> None:
    """Called once a service has built what it keeps for its lifetime: set that aside from
    every later collection (gc.freeze) and collect less often."""
    gc.collect()
    gc.freeze()
    _, second, third = gc.get_threshold()
    gc.set_threshold(FIRST_GENERATION, second, third)
