"""Listing with prefix, delimiter and pagination, checked against a plain dictionary model."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from silt.graveler.v1 import graveler_pb2 as api
from tests.integration.graveler.conftest import GravelerEnv

SEGMENTS = st.sampled_from(["a", "b", "a.b", "z", "data", "é", "a-"])
KEYS = st.lists(SEGMENTS, min_size=1, max_size=3).map("/".join)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), KEYS),
        st.tuples(st.just("delete"), KEYS),
        st.tuples(st.just("commit"), st.just("")),
    ),
    min_size=1,
    max_size=25,
)


def model_list(keys: set[str], prefix: str, delimiter: str) -> list[str]:
    out = set()
    for key in keys:
        if not key.startswith(prefix):
            continue
        cut = key.find(delimiter, len(prefix)) if delimiter else -1
        out.add(key if cut < 0 else key[: cut + len(delimiter)])
    return sorted(out, key=lambda k: k.encode())


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ops=OPS,
    prefix=st.sampled_from(["", "a", "a/", "data/", "é/", "nope/"]),
    delimiter=st.sampled_from(["", "/", "-", "a", "a.", "/a", "é"]),
    amount=st.integers(min_value=1, max_value=4),
)
def test_listing_matches_model(
    env: GravelerEnv, ops: list[tuple[str, str]], prefix: str, delimiter: str, amount: int
) -> None:
    repo = env.new_repo("model")
    live: set[str] = set()
    committed: set[str] = set()
    for op, key in ops:
        if op == "put":
            env.put(repo, "main", key, f"{key}-v")
            live.add(key)
        elif op == "delete" and key in live:
            env.stub.DeleteEntry(api.DeleteEntryRequest(repository=repo, branch="main", key=key))
            live.discard(key)
        elif op == "commit" and live != committed:
            env.commit(repo, "main")
            committed = set(live)
    assert env.list_all(repo, "main", prefix, delimiter, amount) == model_list(live, prefix, delimiter)
    assert env.list_all(repo, "main@", prefix, delimiter, amount) == model_list(committed, prefix, delimiter)
