"""The image's base is pinned by digest (a tag can be moved to other content; a digest cannot)
and can be replaced by a build argument, for a local stand-in when the registry is out of reach."""

from __future__ import annotations

import re
from pathlib import Path

DOCKERFILE = Path(__file__).resolve().parents[2] / "Dockerfile"
DIGEST_PINNED = re.compile(r"^[a-z0-9][a-z0-9._/-]*(:[A-Za-z0-9._-]+)?@sha256:[0-9a-f]{64}$")


def _instructions() -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_every_stage_starts_from_an_earlier_stage_or_a_digest_pinned_image() -> None:
    args: dict[str, str] = {}
    stages: set[str] = set()
    froms = 0
    for line in _instructions():
        word, _, rest = line.partition(" ")
        if word.upper() == "ARG" and "=" in rest and not stages:
            name, _, default = rest.partition("=")
            args[name.strip()] = default.strip()
        elif word.upper() == "FROM":
            froms += 1
            parts = rest.split()
            image = parts[0]
            reference = re.fullmatch(r"\$\{?(\w+)\}?", image)
            if reference:
                assert reference.group(1) in args, f"FROM {image}: a build argument with no default"
                image = args[reference.group(1)]
            assert image in stages or DIGEST_PINNED.fullmatch(image), f"FROM {image} is not pinned by digest"
            if len(parts) == 3 and parts[1].upper() == "AS":
                stages.add(parts[2])
    assert froms >= 2


def test_the_base_is_a_build_argument() -> None:
    (line,) = [line for line in _instructions() if line.startswith("ARG PYTHON_IMAGE=")]
    assert DIGEST_PINNED.fullmatch(line.partition("=")[2]), line
    stages: set[str] = set()
    for line in _instructions():
        if line.startswith("FROM "):
            parts = line.split()
            assert parts[1] == "${PYTHON_IMAGE}" or parts[1] in stages, line
            if len(parts) == 4:
                stages.add(parts[3])
