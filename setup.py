"""The native parts (C, no dependency beyond CPython's headers): the reader of OTLP JSON lines
and the reader of flat tool-call arguments; the rest of the build is in pyproject.toml.
Optional: without a C compiler the install goes on, and the Python readers these extensions
stand in front of read everything, with the same results, more slowly: the robust path every
line (`analyzer.ingest.otlp_objects`) and `json` every arguments text
(`analyzer.checks.grounded_arguments`)."""

from setuptools import Extension, setup

NATIVE = {
    "analyzer.ingest._otlp_lines": "analyzer/ingest/_otlp_lines.c",
    "analyzer.checks._flat_leaves": "analyzer/checks/_flat_leaves.c",
}

setup(ext_modules=[Extension(name, [source], optional=True) for name, source in NATIVE.items()])
