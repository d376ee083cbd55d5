"""Sphinx configuration: the API reference of trio_invoke, from its docstrings.

Built by ``nox -s docs`` (HTML, then the doctests), warnings as errors, every reference resolved.
"""

from __future__ import annotations

import zlib
from importlib import metadata
from pathlib import Path

project = "trio_invoke"
author = "the trio_invoke authors"
copyright = "2026, the trio_invoke authors"
release = metadata.version("trio-invoke")
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.doctest",
    "sphinx.ext.intersphinx",
    "sphinx.ext.napoleon",
]

root_doc = "index"
exclude_patterns = ["_build", "inventories"]
html_theme = "alabaster"
html_static_path: list[str] = []

# Google-style docstrings (Args:, Returns:, Raises:).
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"members": True, "show-inheritance": True}

# The docstrings' examples run as doctests, with the public names at hand.
doctest_global_setup = "from trio_invoke import *\nimport trio"
doctest_test_doctest_blocks = "default"

# -- links to Python's and Trio's documentation -------------------------------------------------
# Each project's inventory comes from its site; offline, from the fallback listed in
# docs/inventories/NAME.txt (the names this reference links to, with their addresses on that
# site), so that the reference builds without a network and its links still go to the same pages.
_HERE = Path(__file__).parent


def _offline_inventory(name: str, title: str) -> str:
    lines = [
        line.split(None, 2)
        for line in (_HERE / "inventories" / f"{name}.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    body = "".join(f"{target} {role} 1 {uri} -\n" for role, target, uri in lines)
    header = (
        "# Sphinx inventory version 2\n"
        f"# Project: {title}\n# Version: \n"
        "# The remainder of this file is compressed using zlib.\n"
    )
    out = _HERE / "_build" / "inventories" / f"{name}.inv"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(header.encode() + zlib.compress(body.encode()))
    return str(out)


intersphinx_mapping = {
    "python": ("https://docs.python.org/3", (None, _offline_inventory("python", "Python"))),
    "trio": ("https://trio.readthedocs.io/en/stable", (None, _offline_inventory("trio", "Trio"))),
}
intersphinx_timeout = 10

# Third-party types without an inventory here (httpx, Hypothesis), the type variables of @tool,
# private classes that annotations mention, and private helpers the docstrings name.
nitpick_ignore_regex = [
    ("py:class", r"httpx\..*"),
    ("py:class", r"httpx2\..*"),
    ("py:class", r"opentelemetry\..*"),
    ("py:class", r"mcp_types\..*"),
    ("py:class", r"os\.PathLike"),
    ("py:class", r"ProviderFamily"),
    ("py:attr", r"protocol"),
    ("py:class", r"hypothesis\..*"),
    ("py:class", r"[PR]"),
    ("py:obj", r"trio_invoke\._function_tool\.[PR]"),
    ("py:class", r"trio_invoke\.(.*\.)?_.*"),
    ("py:func", r"compile_validator|parse_arguments"),
]


def _public_path(app, env, node, contnode):  # type: ignore[no-untyped-def]
    """Resolve a short Python reference (``ChatClient``, ``calls``) to its public path: the
    docstrings name objects as a reader of the module would, the reference under
    ``trio_invoke`` (or the class the reference is made in)."""
    if node.get("refdomain") != "py" or node.get("reftarget", "").startswith("trio_invoke."):
        return None
    domain = env.get_domain("py")
    target = node["reftarget"]
    candidates = [f"trio_invoke.{target}", f"trio_invoke.testing.{target}"]
    if node.get("py:class"):
        candidates.insert(0, f"trio_invoke.{node['py:class']}.{target}")
    for candidate in candidates:
        if candidate in domain.objects:
            node["reftarget"] = candidate
            return domain.resolve_xref(
                env, node["refdoc"], app.builder, node["reftype"], candidate, node, contnode
            )
    return None


def _with_private_modules_attribute_docs() -> None:
    """Public objects report their public module (``trio_invoke``), so autodoc looks for the
    docstrings of their fields in ``trio_invoke/__init__.py``; they are written where the class
    is, in a private module. Give the public modules' analyzers those docstrings too."""
    import pkgutil

    from sphinx.pycode import ModuleAnalyzer

    import trio_invoke

    original = ModuleAnalyzer.analyze
    private = [
        m.name
        for m in pkgutil.walk_packages(trio_invoke.__path__, "trio_invoke.")
        if any(part.startswith("_") for part in m.name.split(".")) and "__main__" not in m.name
    ]

    def analyze(self: ModuleAnalyzer) -> None:
        done = self._analyzed
        original(self)
        if done or self.modname not in ("trio_invoke", "trio_invoke.testing"):
            return
        for name in private:
            try:
                other = ModuleAnalyzer.for_module(name)
                other.analyze()
            except Exception:  # a module without source: nothing to add
                continue
            for key, value in other.attr_docs.items():
                self.attr_docs.setdefault(key, value)
            for key, order in other.tagorder.items():
                self.tagorder.setdefault(key, order)

    ModuleAnalyzer.analyze = analyze  # type: ignore[method-assign]


def _napoleon_but_not_on_fields(app):  # type: ignore[no-untyped-def]
    """napoleon reads a field's docstring that starts "Some words: more" as a type and a text;
    fields here are documented in prose, so napoleon handles only functions and classes."""
    from sphinx.ext.napoleon import _process_docstring

    for listener in list(app.events.listeners["autodoc-process-docstring"]):
        if listener.handler is _process_docstring:
            app.disconnect(listener.id)

    def process(app, what, name, obj, options, lines):  # type: ignore[no-untyped-def]
        if what not in ("attribute", "property", "data"):
            _process_docstring(app, what, name, obj, options, lines)

    app.connect("autodoc-process-docstring", process)


def setup(app):  # type: ignore[no-untyped-def]
    _with_private_modules_attribute_docs()
    _napoleon_but_not_on_fields(app)
    app.connect("missing-reference", _public_path)
