"""The image definitions checked without building anything: what tests/e2e/test_images_podman.py
checks inside the built images (only `make test-all` builds them), as far as the Dockerfile, its
locks, scripts/images/build.sh and deploy/k8s can say it. The services' image installs no Spark
and no Java; the GC image installs the Spark the dev venv pins, its S3A jars and Java 17; both
run as the manifests' user; the default command is a console script Silt declares; the first-party
modules the build imports exist; the images build.sh tags are the ones the manifests run. The
base's digest pin is tests/unit/test_dockerfile_base.py's."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

import pytest

from tests.support.k8s import OVERLAYS, pod_spec, render, workloads

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO_ROOT / "Dockerfile"
BUILD_SH = REPO_ROOT / "scripts" / "images" / "build.sh"
LOCKS = REPO_ROOT / "requirements"
UID = 10001  # the manifests' runAsUser, which the podman test runs the images as
SPARK_PACKAGES = {"pyspark", "py4j", "sagemaker-pyspark"}
JAVA = re.compile(r"\b(openjdk|default-jre|default-jdk|temurin)[\w.-]*")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", re.MULTILINE)


def instructions() -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def stages() -> dict[str, tuple[str, list[str]]]:
    """{stage: (what it starts FROM, its instructions after FROM)}."""
    found: dict[str, tuple[str, list[str]]] = {}
    current: list[str] | None = None
    for line in instructions():
        word, _, rest = line.partition(" ")
        if word.upper() == "FROM":
            parts = rest.split()
            assert len(parts) == 3 and parts[1].upper() == "AS", f"an unnamed stage: {line}"
            current = []
            found[parts[2]] = (parts[0], current)
        elif current is not None:
            current.append(line)
    return found


def reaching(stage: str) -> list[str]:
    """The stages whose files can reach `stage`: itself, its FROM chain, and every stage it copies
    from (transitively)."""
    all_stages = stages()
    seen: list[str] = []
    todo = [stage]
    while todo:
        name = todo.pop()
        if name in seen or name not in all_stages:
            continue
        seen.append(name)
        base, lines = all_stages[name]
        todo.append(base)
        todo += [m.group(1) for line in lines if (m := re.match(r"COPY\s+--from=(\S+)", line))]
    return seen


def copied_locks(stage: str) -> set[str]:
    """The requirements/*.txt files a stage copies from the build context."""
    _, lines = stages()[stage]
    return {
        Path(src).name
        for line in lines
        if line.startswith("COPY ") and "--from=" not in line
        for src in line.split()[1:-1]
        if src.startswith("requirements/")
    }


def pins(lock: str) -> dict[str, str]:
    return {name.lower(): version for name, version in _PIN.findall((LOCKS / lock).read_text())}


def apt_installs(stage: str) -> str:
    _, lines = stages()[stage]
    return " ".join(line for line in lines if "apt-get install" in line)


def test_build_sh_builds_the_two_images_from_stages_the_dockerfile_has() -> None:
    text = BUILD_SH.read_text()
    assert re.search(r"for target in runtime gc; do", text)
    assert 'name=silt\n\t[ "$target" = gc ] && name=silt-gc' in text
    assert {"runtime", "gc"} <= set(stages())


def test_the_services_image_installs_no_spark_and_no_java() -> None:
    chain = reaching("runtime")
    assert "gc" not in chain and {"deps", "build"} <= set(chain)
    for stage in chain:
        assert not JAVA.search(apt_installs(stage)), f"stage {stage} installs Java"
        for lock in copied_locks(stage):
            spark = SPARK_PACKAGES & set(pins(lock))
            assert not spark, f"stage {stage} installs {lock}, which pins {spark}"
    # Silt itself goes in without its dependencies: nothing beyond the locks above.
    (install,) = [line for line in stages()["build"][1] if "--root /opt/silt-root" in line]
    assert "pip install --no-deps" in install


def test_the_gc_image_installs_the_pinned_spark_its_s3a_jars_and_java_17() -> None:
    assert "openjdk-17-jre-headless" in apt_installs("gc")
    assert {"gc.txt", "s3a-jars.txt"} <= copied_locks("gc")
    # The podman test expects the Spark the dev venv runs the tests with.
    assert pins("gc.txt")["pyspark"] == pins("dev.txt")["pyspark"] == "4.1.1"
    assert "sagemaker-pyspark" in pins("s3a-jars.txt")
    (install,) = [line for line in stages()["gc"][1] if "s3a-jars.txt" in line and line.startswith("RUN ")]
    assert "--no-deps -r requirements/s3a-jars.txt" in install


@pytest.mark.parametrize("stage", ["runtime", "gc"])
def test_each_image_runs_as_the_manifests_user_with_silts_cli_by_default(stage: str) -> None:
    _, lines = stages()[stage]
    assert f"USER {UID}:{UID}" in lines
    assert f"--uid {UID}" in " ".join(lines)
    (cmd,) = [line for line in lines if line.startswith("CMD ")]
    command = re.findall(r'"([^"]+)"', cmd)
    assert command == ["silt", "--help"]
    scripts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, function = scripts[command[0]].partition(":")
    assert importlib.util.find_spec(module) is not None and function


def _installed_packages() -> set[str]:
    """The top-level packages the wheel carries (pyproject.toml's packages.find include)."""
    found = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    return {pattern.rstrip("*") for pattern in found["include"]}


def test_the_build_copies_every_package_the_wheel_carries() -> None:
    copied = {line.split()[1] for line in stages()["build"][1] if line.startswith("COPY ") and "--from=" not in line}
    missing = _installed_packages() - copied
    assert not missing, f"the image's build stage does not COPY {sorted(missing)}: pip would install without them"


def test_the_modules_the_build_imports_exist() -> None:
    (check,) = [line for line in stages()["build"][1] if "/opt/silt/bin/python -c" in line]
    program = re.search(r'python -c "([^"]+)"', check)
    assert program is not None
    imported = re.match(r"import ([^;]+);", program.group(1))
    assert imported is not None
    modules = [name.strip() for name in imported.group(1).split(",")]
    ours = [m for m in modules if m.split(".")[0] in _installed_packages()]
    assert ours, modules
    for module in ours:
        assert importlib.util.find_spec(module) is not None, f"the build imports {module}, which does not exist"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_manifests_run_the_images_build_sh_tags_as_its_user(overlay: str) -> None:
    tag = re.search(r"^IMAGE_TAG \?= (\S+)$", (REPO_ROOT / "Makefile").read_text(), re.MULTILINE)
    assert tag is not None
    ours = {f"silt:{tag.group(1)}", f"silt-gc:{tag.group(1)}"}
    seen: set[str] = set()
    for doc in workloads(render(overlay)):
        spec = pod_spec(doc)
        for container in spec.get("initContainers", []) + spec["containers"]:
            image = container["image"].rsplit("/", 1)[-1]
            if image.split(":")[0] not in {"silt", "silt-gc"}:
                continue
            seen.add(image)
            assert image in ours, f"{doc['metadata']['name']} runs {container['image']}, which make image never tags"
            assert spec["securityContext"]["runAsUser"] == UID, doc["metadata"]["name"]
            if image.startswith("silt-gc:"):
                continue  # the GC CronJob's container sets no securityContext of its own (Spark's scratch)
            security = container["securityContext"]
            assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
            assert security["capabilities"]["drop"] == ["ALL"]
    assert seen == ours
