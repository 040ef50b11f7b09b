"""Services never import each other, and the shared library imports none of them: what two
services share (action names, paging, names, the auth client) lives in silt/."""

from __future__ import annotations

import itertools

import grimp
import pytest

SERVICES = ("services.auth", "services.graveler", "services.gateway", "services.compactor", "services.api")
# The one import across services by design: the compactor runs graveler's engine (the "shared
# graveler core" of DESIGN.md) in its own process, with its own KV and object store
# connections. Graveler reaches the compactor only over gRPC.
ALLOWED = {("services.compactor", "services.graveler")}


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("services", "silt", cache_dir=None)


@pytest.mark.parametrize(
    ("importer", "imported"), [pair for pair in itertools.permutations(SERVICES, 2) if pair not in ALLOWED]
)
def test_services_do_not_import_each_other(graph: grimp.ImportGraph, importer: str, imported: str) -> None:
    chains = graph.find_shortest_chains(importer=importer, imported=imported, as_packages=True)
    assert not chains, f"{importer} imports {imported}: {sorted(chains)}"


def test_the_shared_library_imports_no_service(graph: grimp.ImportGraph) -> None:
    chains = graph.find_shortest_chains(importer="silt", imported="services", as_packages=True)
    assert not chains, sorted(chains)
