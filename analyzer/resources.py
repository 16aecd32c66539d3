"""The files that ship with agenttrace: JSON Schemas (``schemas/``) and default tables (``rules/``).

Both folders sit at the top of the source tree and are installed inside the package as
``analyzer._schemas`` and ``analyzer._rules``, so the same call works from a checkout, an
editable install or a wheel.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

__all__ = ["bundled_pack_names", "bundled_rules_text", "code_digest", "schema"]


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


_PACKAGE = Path(__file__).resolve().parent


@cache
def code_digest(package: Path = _PACKAGE) -> str:
    """The version of agenttrace and a digest of its code (the ``.py`` and ``.c`` sources of
    `package`, by default its own): what a dataset's prebuilt runs and kept rule results record
    as made by, so that those another build made (another release, or another commit of this
    one) are rebuilt, never read as if this code had made them."""
    digest = hashlib.sha256()
    for path in sorted(p for p in package.rglob("*") if p.suffix in (".py", ".c")):
        digest.update(f"{path.relative_to(package).as_posix()}\0".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    from analyzer import __version__

    return f"{__version__}+{digest.hexdigest()[:16]}"
