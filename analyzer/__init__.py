"""agenttrace: offline analysis of the OpenTelemetry traces that LLM agents leave behind."""

#: The package version (pyproject.toml reads it from here): a literal, so that a process
#: imports no importlib.metadata for it (25 ms for `agenttrace --help`; polars imports it too).
__version__ = "0.3.0"

__all__ = ["__version__", "analyze", "analyze_paths", "read_traces"]


def __getattr__(name: str):
    # Heavy modules load on first use so `agenttrace --help` stays fast.
    if name in ("analyze", "analyze_paths"):
        from analyzer import pipeline

        return getattr(pipeline, name)
    if name == "read_traces":
        from analyzer.ingest import read_traces

        return read_traces
    raise AttributeError(name)
