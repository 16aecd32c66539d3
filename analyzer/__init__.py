"""agenttrace: offline analysis of the OpenTelemetry traces that LLM agents leave behind."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("agenttrace")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+local"

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
