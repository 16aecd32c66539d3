"""agenttrace: offline analysis of the OpenTelemetry traces that LLM agents leave behind.

The library's entry point is `analyzer.engine.analyze_paths` (what ``agenttrace report`` runs);
the modules are layered, each importing only those below it (see ``docs/design.md``).
"""

#: The package version (pyproject.toml reads it from here): a literal, so that no module
#: needs importlib.metadata for it.
__version__ = "0.3.0"

__all__ = ["__version__"]
