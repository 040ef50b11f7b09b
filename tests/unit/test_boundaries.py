"""The import rules live in pyproject.toml's [tool.importlinter] contracts, run by `make lint`
(lint-imports): the gRPC services never import each other; the edge's front ends (S3, the REST
API, the web UI) never import each other and reach the rest through the edge's core; the engine
imports no service, the edge or a job; the shared library imports none of them; and sibling
packages form no circle.

What those contracts cannot say about themselves is checked here: that they name every
service, every top-level package and every module of the engine and the edge, so a new one is
not left outside the rules."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# Packages the rules do not govern: the tests may import anything.
UNGOVERNED = {"tests"}


def _config() -> dict[str, Any]:
    config: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return config


def _contract(contract_type: str) -> dict[str, Any]:
    """The contract of that type over the top-level packages (a layers contract may also order the
    packages inside one of them: those name their containers)."""
    (found,) = [c for c in _config()["contracts"] if c["type"] == contract_type and "containers" not in c]
    return found


def _packages(directory: Path) -> set[str]:
    return {p.parent.name for p in directory.glob("*/__init__.py")}


def test_every_top_level_package_is_governed() -> None:
    assert set(_config()["root_packages"]) == _packages(ROOT) - UNGOVERNED


def test_every_top_level_package_has_its_layer() -> None:
    layered = {name.strip() for layer in _contract("layers")["layers"] for name in layer.split("|")}
    assert layered == set(_config()["root_packages"])


def test_every_service_is_in_the_independence_contract() -> None:
    services = {f"services.{name}" for name in _packages(ROOT / "services")}
    assert set(_contract("independence")["modules"]) == services


def test_every_top_level_package_is_checked_for_circles() -> None:
    assert set(_contract("acyclic_siblings")["ancestors"]) == set(_config()["root_packages"])


def test_every_module_of_the_engine_and_the_edge_has_its_layer() -> None:
    """A module added to the engine or the edge is placed in their layers, not left outside them."""
    for container in ("engine", "edge"):
        (contract,) = [c for c in _config()["contracts"] if c.get("containers") == [container]]
        layered = {name.strip() for layer in contract["layers"] for name in layer.split("|")}
        modules = {p.stem for p in (ROOT / container).glob("*.py") if p.stem != "__init__"}
        assert layered == modules | _packages(ROOT / container), container
