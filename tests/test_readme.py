"""The README's example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).parent.parent / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_the_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    example = next(b for b in python_blocks() if "trio.run(main)" in b)
    assert len(example.strip().splitlines()) <= 30
    exec(compile(example, "README.md", "exec"), {"__name__": "readme"})
    assert capsys.readouterr().out == "[get_weather -> Sunny in Paris]\nIt is sunny in Paris."


def test_every_python_block_compiles() -> None:
    for block in python_blocks():
        body = "".join(f"    {line}\n" for line in block.splitlines())
        compile(f"async def _block():\n{body}", "README.md", "exec")  # top-level await allowed


def test_the_testing_example_runs() -> None:
    example = next(b for b in python_blocks() if "from trio_invoke.testing import (" in b)
    namespace: dict[str, object] = {"__name__": "readme_testing"}
    exec(compile(example, "README.md", "exec"), namespace)
    tests = [f for name, f in namespace.items() if name.startswith("test_") and callable(f)]
    assert len(tests) == 1
    for test in tests:
        test()  # a @given test: runs its examples
