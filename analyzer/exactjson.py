"""JSON with its numbers as written, for the places that compare numbers exactly: model
answers, tool arguments and labels."""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation
from typing import Any

__all__ = ["loads_exact"]


def loads_exact(text: str | bytes) -> Any:
    """``json.loads`` with every number that has a fraction or an exponent as a `Decimal`.

    A number beyond the exponents a Decimal can hold (``1e9999999999999999999``) becomes what
    ``float`` makes of it, ``Infinity``, ``-Infinity`` or ``0``, as a Decimal: an answer
    holding one compares as a very large (or small) number instead of stopping the analysis.
    Raises ValueError when the text is not JSON.
    """
    return json.loads(text, parse_float=_decimal)


def _decimal(text: str) -> Decimal:
    try:
        return Decimal(text)
    except InvalidOperation:
        return Decimal(float(text))
