"""The GC and expiry jobs ask graveler first and start Spark only for a run graveler prepared: a refusal
(no GC rules, no permission, a foreign namespace) is heard in a second, not after a JVM start."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

import jobs.gc.job as job
import jobs.retention.last_access as last_access
import silt.cli.common
from silt.config import BlockstoreConfig
from silt.errors import FailedPrecondition, PermissionDenied, SiltError


class Graveler:
    def __init__(self, refusal: SiltError | None, calls: list[str]) -> None:
        self.refusal = refusal
        self.calls = calls

    def PrepareGC(self, request: Any, timeout: float) -> Any:
        self.calls.append(f"PrepareGC {request.repository}")
        if self.refusal is not None:
            raise self.refusal
        return SimpleNamespace(run_id="run-1")


def run_main(monkeypatch: pytest.MonkeyPatch, refusal: SiltError | None, argv: list[str]) -> tuple[int, list[str]]:
    calls: list[str] = []
    graveler = Graveler(refusal, calls)

    class State:
        def __init__(self, **_: Any) -> None:
            pass

        def config(self) -> Any:
            return SimpleNamespace(blockstore=BlockstoreConfig())

        def client(self) -> Any:
            return SimpleNamespace(graveler=graveler)

    def job_session(master: str | None, app_name: str) -> str:
        calls.append(f"spark {app_name}")
        return "session"

    def finish_gc(spark: Any, graveler: Any, prepared: job.Prepared, **_: Any) -> Any:
        calls.append(f"finish {prepared.export.run_id} in {spark}")
        return SimpleNamespace(as_json=lambda: "{}")

    monkeypatch.setattr(silt.cli.common, "State", State)
    monkeypatch.setattr(job, "job_session", job_session)
    monkeypatch.setattr(job, "finish_gc", finish_gc)
    return job.exit_code_of_main("silt-gc", lambda: job.main(argv)), calls


@pytest.mark.parametrize(
    "refusal", [FailedPrecondition("repository 'r' has no GC rules"), PermissionDenied("not allowed: PrepareGC")]
)
def test_a_refused_run_starts_no_spark(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], refusal: SiltError
) -> None:
    code, calls = run_main(monkeypatch, refusal, ["silt://r", "--grace", "3d"])
    assert code != 0 and str(refusal) in capsys.readouterr().err
    assert calls == ["PrepareGC r"]


def test_spark_starts_after_graveler_prepared_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    code, calls = run_main(monkeypatch, None, ["r", "--grace", "3d", "--dry-run"])
    assert code == 0
    assert calls == ["PrepareGC r", "spark silt-gc", "finish run-1 in session"]


def test_a_malformed_sweep_only_run_id_asks_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    code, calls = run_main(monkeypatch, None, ["r", "--grace", "3d", "--sweep-only", "../other"])
    assert code != 0 and calls == []


def test_a_refused_expiry_run_starts_no_spark(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[str] = []
    refusal = FailedPrecondition("branch 'main' of repository 'r' has no last-access rule")

    class Graveler:
        def PrepareLastAccess(self, request: Any, timeout: float) -> Any:
            calls.append(f"PrepareLastAccess {request.repository}/{request.branch}")
            raise refusal

    class State:
        def __init__(self, **_: Any) -> None:
            pass

        def config(self) -> Any:
            return SimpleNamespace(
                blockstore=BlockstoreConfig(), graveler=SimpleNamespace(history=SimpleNamespace(retention_days=None))
            )

        def client(self) -> Any:
            return SimpleNamespace(graveler=Graveler())

    monkeypatch.setattr(silt.cli.common, "State", State)
    monkeypatch.setattr(last_access, "job_session", lambda *_: calls.append("spark"))
    code = last_access.exit_code_of_main("silt-last-access", lambda: last_access.main(["silt://r", "main"]))
    assert code != 0 and str(refusal) in capsys.readouterr().err
    assert calls == ["PrepareLastAccess r/main"]
