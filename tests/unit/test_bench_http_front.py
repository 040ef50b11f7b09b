"""`make bench-http-front`'s own logic: how rounds become figures, how each server is asked to
keep the gateway's limits, how a probe's answer is read. No server is started here."""

from __future__ import annotations

import itertools

import pytest

from bench import http_front
from bench.http_front_limits import refusal_format, status_line


def test_figures_give_each_server_its_spread_and_its_ratio_to_uvicorn_round_by_round() -> None:
    samples = {
        "uvicorn": {"get_4kib.req_per_s": [1000.0, 500.0, 800.0], "get_4kib.cpu_ms_per_request.backend": [0.1] * 3},
        "granian": {"get_4kib.req_per_s": [1500.0, 900.0, 800.0], "get_4kib.cpu_ms_per_request.backend": [0.2] * 3},
    }
    out = {line["name"]: line for line in http_front.figures("silt", samples)}
    rate = out["http_front.silt.granian.get_4kib.req_per_s"]
    assert (rate["min"], rate["value"], rate["max"], rate["rounds"]) == (800.0, 900.0, 1500.0, 3)
    assert rate["unit"] == "req/s"
    # Ratios pair the rounds: 1.5, 1.8, 1.0 — not the ratio of the medians (900 / 800).
    ratio = out["http_front.silt.granian.get_4kib.req_per_s.vs_uvicorn"]
    assert (ratio["min"], ratio["value"], ratio["max"]) == (1.0, 1.5, 1.8)
    # The backend does the same work whatever the front: no ratio, and none of uvicorn to itself.
    assert "http_front.silt.granian.get_4kib.cpu_ms_per_request.backend.vs_uvicorn" not in out
    assert not any(name.startswith("http_front.silt.uvicorn.") and ".vs_" in name for name in out)


def test_ratios_refuse_rounds_that_do_not_pair() -> None:
    with pytest.raises(ValueError):
        http_front.per_round_ratios([1.0, 2.0], [1.0])


def test_granian_is_given_the_gateway_head_limits_within_its_ranges() -> None:
    command = http_front.server_command(
        "granian", http_front.SILT_APP, 8000, 2, http_front.Limits(head_bytes=4096, head_timeout_s=600)
    )
    option = dict(itertools.pairwise(command))
    assert option["--http1-header-read-timeout"] == "60000"  # granian's maximum
    assert option["--http1-buffer-size"] == "8192"  # granian's minimum
    assert option["--interface"] == "asgi" and option["--workers"] == "2"
    assert command[-2:] == ["--factory", http_front.SILT_APP]


def test_uvicorn_is_the_production_entry_point_for_the_gateway() -> None:
    assert http_front.server_command("uvicorn", http_front.SILT_APP, 8000, 2, http_front.Limits())[1:] == [
        "-m",
        "edge.server",
    ]
    plain = http_front.server_command("uvicorn_plain", http_front.FLOOR_APP, 8000, 2, http_front.Limits())
    assert plain[-5:] == [http_front.FLOOR_APP, "8000", "2", "plain", "app"]


def test_a_server_that_is_not_installed_is_named_with_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(http_front.MODULES, "granian", "no_such_module_for_this_test")
    why = http_front.missing("granian")
    assert why is not None and "pip install granian==" in why
    assert http_front.missing("uvicorn") is None


def test_a_probe_reads_the_status_and_the_kind_of_refusal() -> None:
    xml = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 9\r\n\r\n<Error><Code>RequestTimeout</Code></Error>"
    assert status_line(xml) == "HTTP/1.1 400 Bad Request"
    assert refusal_format(xml) == "S3 XML RequestTimeout"
    assert refusal_format(b"HTTP/1.1 431 Request Header Fields Too Large\r\n\r\n") == "empty"
    assert status_line(b"") == "(closed without an answer)"
