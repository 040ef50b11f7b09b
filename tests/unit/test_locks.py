"""The hash-pinned locks (requirements/*.txt, `make lock`) agree with what the project declares,
and every install (Makefile, Dockerfile) goes through them."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LOCKS = ROOT / "requirements"
LOCK_NAMES = ("build", "installer", "dev", "runtime", "gc", "protoc", "s3a-jars", "clients", "iceberg-spark")
_PIN_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")
_HASH_RE = re.compile(r"--hash=sha256:[0-9a-f]{64}\b")


def read_lock(name: str) -> dict[str, tuple[str, int]]:
    """{canonical name: (version, number of sha256 hashes)}; fails on any line pip would not
    take in hash-checking mode (a range, a URL, an option, a package without a hash)."""
    text = (LOCKS / f"{name}.txt").read_text()
    pins: dict[str, tuple[str, int]] = {}
    # One requirement per logical line: continuation lines carry its hashes.
    for logical in text.replace("\\\n", " ").splitlines():
        line = logical.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        match = _PIN_RE.match(line)
        assert match, f"requirements/{name}.txt: not an exact pin: {line[:80]!r}"
        hashes = len(_HASH_RE.findall(line))
        assert hashes, f"requirements/{name}.txt: {match.group(1)} has no --hash"
        assert not _HASH_RE.sub("", line[match.end() :]).strip(), f"requirements/{name}.txt: {line[:80]!r}"
        pins[canonicalize_name(match.group(1))] = (match.group(2), hashes)
    assert pins, f"requirements/{name}.txt pins nothing"
    return pins


def read_inputs(path: Path) -> list[Requirement]:
    return [Requirement(line) for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def _pyproject() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _declared(group: str) -> list[Requirement]:
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    declared = project["dependencies"] if group == "runtime" else project["optional-dependencies"][group]
    return [Requirement(spec) for spec in declared]


def _exact(requirement: Requirement) -> str:
    (spec,) = requirement.specifier
    assert spec.operator == "==", f"{requirement} is not pinned exactly"
    return spec.version


@pytest.mark.parametrize("name", LOCK_NAMES)
def test_every_lock_pins_every_package_with_hashes(name: str) -> None:
    read_lock(name)


@pytest.mark.parametrize(
    ("group", "locks"), [("runtime", ("runtime", "gc", "dev")), ("spark", ("gc", "dev")), ("dev", ("dev",))]
)
def test_every_declared_dependency_is_locked_at_its_version(group: str, locks: tuple[str, ...]) -> None:
    for lock in locks:
        pins = read_lock(lock)
        for requirement in _declared(group):
            name = canonicalize_name(requirement.name)
            assert name in pins, f"{requirement} (pyproject.toml, {group}) is missing from requirements/{lock}.txt"
            assert pins[name][0] == _exact(requirement), (
                f"{requirement} (pyproject.toml) but requirements/{lock}.txt pins {pins[name][0]}: run `make lock`"
            )


@pytest.mark.parametrize(
    ("source", "locks"),
    [
        ("build.in", ("build", "dev", "runtime", "gc")),
        ("protoc.in", ("protoc",)),
        ("s3a-jars.in", ("s3a-jars",)),
        ("clients.in", ("clients",)),
        ("iceberg-spark.in", ("iceberg-spark",)),
        ("installer.in", ("installer",)),
    ],
)
def test_every_lock_input_is_locked_at_its_version(source: str, locks: tuple[str, ...]) -> None:
    for lock in locks:
        pins = read_lock(lock)
        for requirement in read_inputs(LOCKS / source):
            name = canonicalize_name(requirement.name)
            assert pins.get(name, ("",))[0] == _exact(requirement), (
                f"{requirement} (requirements/{source}) is not what requirements/{lock}.txt pins: run `make lock`"
            )
    if source == "s3a-jars.in":  # installed with --no-deps: the jar package alone
        assert len(read_lock("s3a-jars")) == 1
    if source == "iceberg-spark.in":  # installed with --no-deps: exactly what the input names
        assert len(read_lock("iceberg-spark")) == len(read_inputs(LOCKS / source))


def test_locks_that_share_packages_agree_with_the_dev_lock() -> None:
    dev = read_lock("dev")
    for lock in ("build", "installer", "runtime", "gc", "protoc"):
        for name, (version, _) in read_lock(lock).items():
            assert dev.get(name, ("",))[0] == version, f"requirements/{lock}.txt pins {name}=={version}, dev another"
    # The image's code generator is the one `make proto` uses.
    (grpc_tools,) = [r for r in _declared("dev") if canonicalize_name(r.name) == "grpcio-tools"]
    assert read_lock("protoc")["grpcio-tools"][0] == _exact(grpc_tools)


def test_the_runtime_lock_leaves_spark_to_the_gc_lock() -> None:
    # The services' image installs requirements/runtime.txt; Spark (and so Java) is the GC image's.
    spark = {canonicalize_name(r.name) for r in _declared("spark")}
    assert spark, "pyproject.toml declares no spark extra"
    assert not spark & set(read_lock("runtime")), (
        "requirements/runtime.txt pins Spark: the runtime image would carry it"
    )
    assert spark <= set(read_lock("gc"))


def test_the_build_backend_is_locked() -> None:
    # The project is installed with --no-build-isolation: its build requirements come from the lock.
    build_system = _pyproject()["build-system"]
    assert isinstance(build_system, dict)
    pins = read_lock("build")
    for spec in build_system["requires"]:
        requirement = Requirement(spec)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"build-system requirement {spec} is not in requirements/build.in"
        assert SpecifierSet(str(requirement.specifier)).contains(pins[name][0]), spec


def _pip_installs(path: Path) -> list[str]:
    """Every `pip install` command in a Makefile or Dockerfile, its make variables expanded."""
    text = path.read_text().replace("\\\n", " ")
    variables = dict(re.findall(r"^([A-Z_]+)\s*:?=\s*(.*)$", (ROOT / "Makefile").read_text(), re.M))
    commands = re.sub(r"^[A-Z_]+\s*:?=.*$", "", text, flags=re.M)  # definitions are not commands
    text = re.sub(r"\$\(([A-Z_]+)\)", lambda m: variables.get(m.group(1), m.group(0)), commands)
    return re.findall(r"\bpip install\b[^\n&;]*", text)


@pytest.mark.parametrize("file", ["Makefile", "Dockerfile"])
def test_every_install_goes_through_a_lock(file: str) -> None:
    installs = _pip_installs(ROOT / file)
    assert installs, f"no pip install found in {file}"
    for install in installs:
        words = install.split()
        hashed = "--require-hashes" in words and re.search(r"-r requirements/[\w-]+\.txt\b", install)
        # The project itself: its dependencies came from a lock, and it builds without isolation.
        project = {"--no-deps", "--no-build-isolation"} <= set(words) and words[-1] == "."
        assert hashed or project, f"{file}: an install outside the hash-pinned locks: {install.strip()}"
