"""edge/core/request_body.py: what the edge's HTTP protocol records of a body reaches both apps' readers."""

from __future__ import annotations

from typing import Any

from edge.core.request_body import BodyEnd, body_end, track_body


def test_a_tracked_body_is_the_one_the_app_reads() -> None:
    scope: dict[str, Any] = {"type": "http"}
    end = track_body(scope, declared=True)
    end.cut = True
    assert body_end(scope) is end
    assert body_end(scope) == BodyEnd(declared=True, overrun=False, cut=True)


def test_other_extensions_are_kept() -> None:
    scope: dict[str, Any] = {"type": "http", "extensions": {"http.response.trailers": {}}}
    track_body(scope, declared=False)
    assert "http.response.trailers" in scope["extensions"]


def test_an_untracked_body_reports_nothing() -> None:
    # Another server, or a test calling the app directly: the body is taken as it ends.
    assert body_end({"type": "http"}) == BodyEnd()
    assert body_end({"type": "http", "extensions": {"silt.body_end": {"cut": True}}}) == BodyEnd()
