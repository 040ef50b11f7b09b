"""No entry may name Silt's own metadata: StageEntry over graveler's real gRPC API refuses every
spelling of an address in the namespace's ``_silt/`` tree, and stages nothing.

An entry's bytes are served by the gateway with Silt's credentials, so an entry pointing at a
metarange would hand a writer the repository's metadata to read (and, through a later write to
the same address, to overwrite).
"""

from __future__ import annotations

import uuid

import grpc
import pytest

from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from tests.integration.graveler.conftest import GravelerEnv

# The addresses do not depend on the KV driver: one leg is enough.
pytestmark = pytest.mark.parametrize("store", ["mem"], indirect=True)


def _spellings(repo: str, metarange: str) -> list[str]:
    target = f"_silt/metaranges/{metarange}"
    return [
        target,
        f"local://{repo}/{target}",
        f"LOCAL://{repo}/{target}",
        f"./{target}",
        f"data/../{target}",
        f"local://{repo}/data/../{target}",
        f"%5Fsilt/metaranges/{metarange}",  # percent-encoded "_"
        f"_silt%2Fmetaranges%2F{metarange}",  # one segment until a store decodes it
        f"%255Fsilt/metaranges/{metarange}",  # encoded twice
        f"local://{repo}/%5fsilt/metaranges/{metarange}",
        f"_SILT/metaranges/{metarange}",  # case-insensitive file systems
        f"\uff3fsilt/metaranges/{metarange}",  # fullwidth low line, NFKC-folds to "_"
        f"_silt./metaranges/{metarange}",  # Windows drops trailing dots
        "_silt/",
        "_silt",
        f"local://{repo}/_silt/",
        "_silt/ranges/anything",
        "_silt/journal/v1/hour=2026-01-01T00/batch.parquet",
        "data/_silt/x",  # a _silt tree anywhere: an import prefix may hold another namespace
    ]


def test_stage_entry_refuses_every_spelling_of_the_metadata_tree(env: GravelerEnv) -> None:
    repo = env.new_repo()
    env.put(repo, "main", "seed", "x")
    metarange = env.commit(repo, "main").metarange_id
    assert (env.data_root / repo / "_silt" / "metaranges" / metarange).exists()
    for address in _spellings(repo, metarange):
        key = f"stolen-{uuid.uuid4().hex[:8]}"
        entry = pb.Entry(physical_address=address, size=1786, etag="e")
        with pytest.raises(grpc.RpcError) as refused:
            env.stub.StageEntry(api.StageEntryRequest(repository=repo, branch="main", key=key, entry=entry))
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, address
    # Nothing was staged by any refused call.
    assert env.list_all(repo, "main") == ["seed"]


def test_ordinary_addresses_stay_accepted(env: GravelerEnv) -> None:
    repo = env.new_repo()
    for i, address in enumerate(
        ["data/0123", f"local://{repo}/data/4567", "data/silt/x", "data/_silted/x", "data/x_silt", "data/100%25"]
    ):
        entry = pb.Entry(physical_address=address, size=1, etag="e")
        env.stub.StageEntry(api.StageEntryRequest(repository=repo, branch="main", key=f"k{i}", entry=entry))
    assert len(env.list_all(repo, "main")) == 6


def test_stage_entries_refuses_every_spelling_each_entry_alone(env: GravelerEnv) -> None:
    """Many entries in one call: each refused address is that entry's outcome, never staged,
    and the valid entries beside it are."""
    repo = env.new_repo()
    env.put(repo, "main", "seed", "x")
    metarange = env.commit(repo, "main").metarange_id
    spellings = _spellings(repo, metarange)
    staged = [api.StagedEntry(key="fine", entry=pb.Entry(physical_address="data/fine", size=1, etag="e"))]
    staged += [
        api.StagedEntry(key=f"stolen-{i}", entry=pb.Entry(physical_address=address, size=1786, etag="e"))
        for i, address in enumerate(spellings)
    ]
    reply = env.stub.StageEntries(api.StageEntriesRequest(repository=repo, branch="main", entries=staged))
    results = [outcome.result for outcome in reply.outcomes]
    assert results == [api.StageEntryOutcome.RESULT_STAGED] + [api.StageEntryOutcome.RESULT_INVALID] * len(spellings)
    assert all(outcome.message for outcome in reply.outcomes[1:])
    assert env.list_all(repo, "main") == ["fine", "seed"]
