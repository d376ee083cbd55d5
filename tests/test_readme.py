"""Every ```python block of README.md runs as written, each as its own program.

The conventions (README.md, "Development", says the same):

* each block is a complete program, run in a fresh interpreter in a temporary directory;
* a ```text block right after it is exactly what it must print;
* an HTML comment on the line before a block, ``<!-- readme-test: NAME -->``, names what the
  block needs from its surroundings; NAME must be one of ``NEEDS`` below (add yours there), and
  an unknown one fails: no block is ever skipped.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import sys
import textwrap
import tomllib
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest
import trio
from loopback_model import loopback_anthropic_model, loopback_model

README = Path(__file__).resolve().parent.parent / "README.md"
_BLOCK = re.compile(
    r"(?:<!-- readme-test: (?P<needs>[\w-]+) -->\n)?```python\n(?P<code>.*?)```\n"
    r"(?:\n```text\n(?P<output>.*?)```\n)?",
    re.S,
)


@attrs.frozen
class Block:
    line: int
    code: str
    needs: str | None
    output: str | None


def blocks() -> list[Block]:
    text = README.read_text(encoding="utf-8")
    return [
        Block(text.count("\n", 0, m.start("code")) + 1, m["code"], m["needs"], m["output"])
        for m in _BLOCK.finditer(text)
    ]


async def run_program(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str, str]:
    with trio.fail_after(120):
        done = await trio.run_process(
            argv, cwd=cwd, env={**os.environ, **env}, capture_stdout=True, capture_stderr=True,
            check=False,
        )  # fmt: skip
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def plain(block: Block, cwd: Path) -> tuple[int, str, str]:
    script = cwd / "block.py"
    script.write_text(block.code, encoding="utf-8")
    return await run_program([sys.executable, str(script)], cwd, {})


async def openai_server(block: Block, cwd: Path) -> tuple[int, str, str]:
    """With ``OPENAI_BASE_URL`` pointing at a model server on loopback."""
    server = loopback_model()
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        script = cwd / "block.py"
        script.write_text(block.code, encoding="utf-8")
        env = {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "sk-loopback"}
        result = await run_program([sys.executable, str(script)], cwd, env)
        nursery.cancel_scope.cancel()
    assert server.requests, "the block never asked the model server"
    return result


async def anthropic_server(block: Block, cwd: Path) -> tuple[int, str, str]:
    """With ``ANTHROPIC_BASE_URL`` pointing at a Messages API server on loopback."""
    server = loopback_anthropic_model()
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        script = cwd / "block.py"
        script.write_text(block.code, encoding="utf-8")
        env = {"ANTHROPIC_BASE_URL": server.root, "ANTHROPIC_API_KEY": "sk-ant-loopback"}
        result = await run_program([sys.executable, str(script)], cwd, env)
        nursery.cancel_scope.cancel()
    assert server.requests, "the block never asked the model server"
    assert all(r.path == "/v1/messages" for r in server.requests)
    return result


TRACKER_SERVER = """
import sys

import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("tracker", log_level="WARNING")


@server.tool()
def search_issues(query: str) -> list[str]:
    \"\"\"Search the open issues.\"\"\"
    return [f"#1 {query}"]


@server.tool()
def close_issue(number: int) -> str:
    \"\"\"Close an issue (not allowed to the agent).\"\"\"
    return "closed"


port = int(sys.argv[1])
anyio.run(lambda: server.run_streamable_http_async(host="127.0.0.1", port=port))
"""


async def mcp_servers(block: Block, cwd: Path) -> tuple[int, str, str]:
    """With the notes server of ``examples/`` next to it (over stdio), an HTTP MCP server of its
    own on loopback at ``TRACKER_MCP_URL``, and ``OPENAI_BASE_URL`` pointing at a model server
    on loopback (which calls every tool it is offered)."""
    (cwd / "examples").mkdir()
    shutil.copy(README.parent / "examples" / "mcp_notes_server.py", cwd / "examples")
    tracker = cwd / "tracker_server.py"
    tracker.write_text(textwrap.dedent(TRACKER_SERVER), encoding="utf-8")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = loopback_model()
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        process = await nursery.start(trio.run_process, [sys.executable, str(tracker), str(port)])
        try:
            with trio.fail_after(30):
                while True:  # a real wait: the process must start listening
                    try:
                        probe = await trio.open_tcp_stream("127.0.0.1", port)
                    except OSError:
                        await trio.sleep(0.05)
                    else:
                        await probe.aclose()
                        break
            script = cwd / "block.py"
            script.write_text(block.code, encoding="utf-8")
            env = {
                "OPENAI_BASE_URL": server.url,
                "OPENAI_API_KEY": "sk-loopback",
                "TRACKER_MCP_URL": f"http://127.0.0.1:{port}/mcp",
            }
            result = await run_program([sys.executable, str(script)], cwd, env)
        finally:
            process.terminate()
            nursery.cancel_scope.cancel()
    assert server.requests, "the block never asked the model server"
    offered = {tool["function"]["name"] for tool in server.requests[0].json["tools"]}
    assert "search_issues" in offered, offered
    assert "close_issue" not in offered, offered  # allowed_tools
    assert any(name.startswith("nb_") for name in offered), offered
    return result


async def with_pytest(block: Block, cwd: Path) -> tuple[int, str, str]:
    """As a test module, under pytest (its tests must pass, and there must be some)."""
    script = cwd / "test_readme_block.py"
    script.write_text(block.code, encoding="utf-8")
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(script)]
    code, out, err = await run_program(argv, cwd, {})
    assert re.search(r"^\d+ passed", out.splitlines()[-1] if out else ""), out
    return code, "", err


NEEDS: dict[str | None, Callable[[Block, Path], object]] = {
    None: plain,
    "openai-server": openai_server,
    "anthropic-server": anthropic_server,
    "mcp-servers": mcp_servers,
    "pytest": with_pytest,
}

BLOCKS = blocks()


def test_the_readme_has_blocks() -> None:
    assert len(BLOCKS) >= 6
    assert all(block.needs in NEEDS for block in BLOCKS), [b.needs for b in BLOCKS]


@pytest.mark.parametrize("block", BLOCKS, ids=[f"line {b.line}" for b in BLOCKS])
async def test_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    run = NEEDS.get(block.needs)
    assert run is not None, f"README.md line {block.line}: unknown readme-test need {block.needs!r}"
    code, out, err = await run(block, tmp_path)  # type: ignore[misc]
    assert code == 0, f"README.md line {block.line} failed:\n{out}\n{err}"
    if block.output is not None:
        assert out == block.output, f"README.md line {block.line} printed something else"


def test_every_install_command_installs_trio_invoke_from_a_checkout_or_git() -> None:
    """trio_invoke is not on PyPI: a ```sh line that installs it by name alone cannot work."""
    text = README.read_text(encoding="utf-8")
    installs = [
        command.split("&&", 1)[0]
        for block in re.findall(r"```sh\n(.*?)```", text, re.S)
        for line in block.splitlines()
        for command in re.findall(r"pip install (.*)", line.split("#", 1)[0])
    ]
    assert len(installs) >= 5
    from_pypi = [c for c in installs if re.search(r"trio[-_]invoke", c) and "@ git+" not in c]
    assert from_pypi == [], "README.md installs trio_invoke from PyPI, where it is not"


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement.strip('"'), maxsplit=1)[0]


def test_the_editable_environment_has_what_the_whole_suite_needs() -> None:
    """The Development section's editable installs are environments the whole suite runs in:
    every extra (the tests of trio_invoke.mcp, .otel and process tools import what they bring),
    and the tests group's requirements."""
    pyproject = tomllib.loads((README.parent / "pyproject.toml").read_text(encoding="utf-8"))
    extras = set(pyproject["project"]["optional-dependencies"])
    development = README.read_text(encoding="utf-8").split("\n## Development\n", 1)[1]
    installs = re.findall(r'`\.venv/bin/pip install -e "\.\[([\w,]+)\]" ([^`]*)`', development)
    assert [set(named.split(",")) for named, _ in installs] == [extras, extras]
    (_, plain), (_, grouped) = installs
    assert grouped == "--group dev"
    brought = {"hypothesis", "trio-parallel"}  # by the testing and process extras
    needed = {_name(r) for r in pyproject["dependency-groups"]["tests"]} - brought
    assert needed <= {_name(r) for r in plain.split()}


def test_install_names_every_extra() -> None:
    """Install's table has a row for each extra, and its commands install each one."""
    pyproject = tomllib.loads((README.parent / "pyproject.toml").read_text(encoding="utf-8"))
    extras = set(pyproject["project"]["optional-dependencies"])
    install = README.read_text(encoding="utf-8").split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    assert set(re.findall(r"^\| `(\w+)` \|", install, re.M)) == extras
    commands = re.findall(r'^\.venv/bin/pip install "\.\[([\w,]+)\]"', install, re.M)
    assert {extra for named in commands for extra in named.split(",")} == extras
