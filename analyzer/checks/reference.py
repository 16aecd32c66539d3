"""The rule types' documentation, from their docstrings: `agenttrace rules explain TYPE` prints
one as text, `agenttrace rules reference` all of them as Markdown (``docs/rules.md``, kept
current by a test)."""

from __future__ import annotations

from analyzer.checks.base import COMMON_FIELDS, DOC_SECTIONS, doc_sections, rule_types
from analyzer.checks.plugin import PluginCheck

__all__ = ["COMMON_TEXT", "explain", "reference"]

#: What every rule takes besides the options of its type.
COMMON_TEXT = (
    f"Every rule also takes: {', '.join(COMMON_FIELDS)} (severity: critical, high, medium "
    "(default), low; when: {attributes: {NAME: [VALUES]}} and/or {agent: NAME})."
)
#: Sections shown as they are written (option lists, YAML), not as prose.
_VERBATIM = {"Options": "text", "Example": "yaml"}


def _types() -> list[tuple[str, type]]:
    return [*rule_types().items(), ("plugin", PluginCheck)]


def _kinds(cls: type) -> str:
    return ", ".join(cls.kinds) or "(any: the plugin decides)"


def explain(name: str) -> str:
    """The documentation of the rule type `name` (a key of `rule_types`, or ``plugin``)."""
    cls = rule_types().get(name, PluginCheck)
    parts = doc_sections(cls)
    lines = [f"{name}: {parts['']}", f"kinds: {_kinds(cls)}"]
    for title in DOC_SECTIONS:
        lines += ["", title, "-" * len(title), parts.get(title, "")]
    return "\n".join([*lines, "", COMMON_TEXT])


def reference() -> str:
    """Every rule type's documentation as one Markdown document."""
    out = [
        "# Rule types",
        "",
        "Generated from the rule types' docstrings by `agenttrace rules reference`; the same text",
        "as `agenttrace rules explain TYPE`. " + COMMON_TEXT,
        "",
        "| type | finding kinds | what it checks |",
        "|---|---|---|",
    ]
    for name, cls in _types():
        summary = doc_sections(cls)[""].splitlines()[0]
        out.append(f"| [`{name}`](#{name}) | {_kinds(cls)} | {summary} |")
    for name, cls in _types():
        parts = doc_sections(cls)
        out += ["", f"## {name}", "", _prose(parts[""]), "", f"Finding kinds: {_kinds(cls)}."]
        for title in DOC_SECTIONS:
            text = parts.get(title, "")
            out += ["", f"### {title}", ""]
            if title in _VERBATIM:
                out += [f"```{_VERBATIM[title]}", text, "```"]
            else:
                out.append(_prose(text))
    return "\n".join(out) + "\n"


def _prose(text: str) -> str:
    """reStructuredText's literals (````x````) as Markdown's (```x```)."""
    return text.replace("``", "`")
