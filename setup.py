"""The native reader of OTLP JSON lines (C, no dependency beyond CPython's headers); the rest
of the build is in pyproject.toml. Optional: without a C compiler the install goes on and the
msgspec path reads every line, more slowly (`analyzer.ingest.otlp_json`)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("analyzer.ingest._otlp_lines", ["analyzer/ingest/_otlp_lines.c"], optional=True)
    ]
)
