"""Tool names as the model sees them (trio_invoke/mcp/_names.py): properties and examples."""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from trio_invoke import ConfigurationError
from trio_invoke.mcp._names import MAX_LENGTH, model_name, model_names

VALID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MCP_CHARACTERS = st.sampled_from(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"
)
mcp_names = st.text(MCP_CHARACTERS, min_size=1, max_size=128)
any_names = st.text(min_size=1, max_size=200)  # servers send what they like
prefixes = st.none() | st.text(min_size=1, max_size=40)


@given(any_names, prefixes)
def test_every_name_becomes_valid_for_the_providers(name: str, prefix: str | None) -> None:
    assert VALID.match(model_name(name, prefix))


@given(any_names, prefixes)
def test_the_mapping_is_deterministic(name: str, prefix: str | None) -> None:
    assert model_name(name, prefix) == model_name(name, prefix)


@given(st.from_regex(VALID, fullmatch=True))
def test_a_valid_name_without_prefix_is_unchanged(name: str) -> None:
    assert model_name(name) == name


@given(st.from_regex(r"[a-zA-Z0-9_-]{1,20}", fullmatch=True), mcp_names)
def test_the_prefix_comes_first(prefix: str, name: str) -> None:
    mapped = model_name(name, prefix)
    assert mapped.startswith(f"{prefix}_"[:MAX_LENGTH])


@given(mcp_names, mcp_names)
def test_long_names_that_share_a_beginning_stay_apart(head: str, tail: str) -> None:
    first, second = "a" * 60 + head, "a" * 60 + head + tail
    assert model_name(first) != model_name(second)


@given(st.lists(mcp_names, unique=True, max_size=20), prefixes)
def test_model_names_is_a_reverse_map_or_an_error_naming_both(
    names: list[str], prefix: str | None
) -> None:
    mapped = [model_name(n, prefix) for n in names]
    if len(set(mapped)) == len(mapped):
        reverse = model_names(names, prefix)
        assert list(reverse.values()) == names
        assert list(reverse) == mapped
    else:
        with pytest.raises(ConfigurationError) as caught:
            model_names(names, prefix)
        clash = next(m for m in mapped if mapped.count(m) > 1)
        both = [n for n, m in zip(names, mapped, strict=True) if m == clash][:2]
        for name in both:
            assert repr(name) in str(caught.value)


@given(mcp_names)
def test_a_name_listed_twice_is_an_error(name: str) -> None:
    with pytest.raises(ConfigurationError, match="twice"):
        model_names([name, "other-tool-name", name])


@given(st.text(min_size=65, max_size=128))
def test_long_names_are_cut_to_64_with_a_digest(name: str) -> None:
    assume(len(re.sub(r"[^a-zA-Z0-9_-]", "_", name)) > MAX_LENGTH)
    mapped = model_name(name)
    assert len(mapped) == MAX_LENGTH
    assert re.fullmatch(r".{55}_[0-9a-f]{8}", mapped)


@pytest.mark.parametrize(
    ("name", "prefix", "expected"),
    [
        ("read_file", None, "read_file"),
        ("files.read", None, "files_read"),
        ("read", "fs", "fs_read"),
        ("read", "my.fs", "my_fs_read"),
        ("ünïcode tool", None, "_n_code_tool"),
        ("a" * 64, None, "a" * 64),
        ("", "p", "p_"),
    ],
)
def test_examples(name: str, prefix: str | None, expected: str) -> None:
    assert model_name(name, prefix) == expected


def test_collision_message() -> None:
    with pytest.raises(ConfigurationError) as caught:
        model_names(["ns.tool", "add", "ns_tool"])
    assert str(caught.value) == (
        "the server tools 'ns.tool' and 'ns_tool' both become the tool name 'ns_tool'; "
        "leave one out with allowed_tools"
    )
