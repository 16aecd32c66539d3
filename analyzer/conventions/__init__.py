"""Conventions layer: span table -> normalized-span table, whatever the tracing convention."""

from analyzer.conventions.normalize import normalize
from analyzer.conventions.schema import NORMALIZED_COLUMNS, NORMALIZED_SCHEMA, ROLES

__all__ = ["NORMALIZED_COLUMNS", "NORMALIZED_SCHEMA", "ROLES", "normalize"]
