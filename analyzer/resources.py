"""The files that ship with agenttrace: JSON Schemas (``schemas/``) and default tables (``rules/``).

Both folders sit at the top of the source tree and are installed inside the package as
``analyzer._schemas`` and ``analyzer._rules``, so the same call works from a checkout, an
editable install or a wheel.
"""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

__all__ = ["bundled_pack_names", "bundled_rules_text", "schema"]


def _folder(package: str, source_dir: str) -> Traversable:
    try:
        return files(package)
    except ModuleNotFoundError:  # imported straight from a source tree (cwd on sys.path)
        return Path(__file__).resolve().parent.parent / source_dir


@cache
def schema(name: str) -> dict[str, Any]:
    """The bundled JSON Schema ``name`` (e.g. ``"rulepack.schema.json"``), parsed."""
    return json.loads(
        _folder("analyzer._schemas", "schemas").joinpath(name).read_text(encoding="utf-8")
    )


def bundled_rules_text(name: str) -> str:
    """The text of a bundled file of ``rules/`` (e.g. ``"prices.yaml"``)."""
    return _folder("analyzer._rules", "rules").joinpath(name).read_text(encoding="utf-8")


#: Files of ``rules/`` that are not rule packs.
_NOT_PACKS = ("prices.yaml",)


def bundled_pack_names() -> list[str]:
    """The rule packs that ship with agenttrace, by name (``default``, ``kyc``, ...), sorted."""
    folder = _folder("analyzer._rules", "rules")
    return sorted(
        f.name.removesuffix(".yaml")
        for f in folder.iterdir()
        if f.name.endswith(".yaml") and f.name not in _NOT_PACKS
    )
