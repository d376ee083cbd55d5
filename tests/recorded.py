"""The recorded provider streams the tests replay: ``tests/data/streams/<provider>/...``.

Every file there is a response body (or a request) a real provider sent or accepted, taken from a
public repository's recorded test data; ``SOURCES.json`` names, per file, the repository, the
path, the commit, the license, the interaction and every transformation made (a YAML string
written out as UTF-8, JSON lines framed as events), with the file's sha256.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

STREAMS = Path(__file__).parent / "data" / "streams"
SOURCES: dict[str, dict[str, Any]] = json.loads((STREAMS / "SOURCES.json").read_text())


def recorded(name: str) -> bytes:
    """The bytes of a recorded file, by its name in ``SOURCES.json``."""
    if name not in SOURCES:
        raise KeyError(f"{name} is not listed in tests/data/streams/SOURCES.json")
    return (STREAMS / name).read_bytes()


def recorded_json(name: str) -> Any:
    return json.loads(recorded(name))


def streams(provider: str) -> list[str]:
    """The recorded ``.sse`` bodies of one provider directory, sorted."""
    return sorted(n for n in SOURCES if n.startswith(f"{provider}/") and n.endswith(".sse"))


def cuts(raw: bytes, points: Iterable[int]) -> list[bytes]:
    """``raw`` cut at ``points``."""
    bounds = [0, *sorted(set(points)), len(raw)]
    return [raw[a:b] for a, b in itertools.pairwise(bounds)]
