"""examples/mcp_agent.py runs offline, as its docstring says, against its local MCP server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).parent.parent / "examples" / "mcp_agent.py"


@pytest.mark.parametrize(("argv", "deleted"), [(["--yes"], True), ([], False)])
def test_the_mcp_agent_example_runs(argv: list[str], deleted: bool) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), *argv],
        input="",  # no terminal: the question gets no answer, which is a no
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    out = done.stdout
    assert "tools: nb_notes_add (notes.add), nb_notes_search (notes.search)" in out
    assert "no note titled 'Trio'; there are:" in out  # the server's error, read by the model
    assert "The note 'trio' says: Structured concurrency for Python." in out
    if deleted:
        assert "Deleting 'mcp': deleted 'mcp'" in out
    else:
        assert "Deleting 'mcp': Error: the user rejected this call" in out
