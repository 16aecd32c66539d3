"""Figures in free text (amounts, numbers, percentages, dates, times, ids), read column-wise.

One regular expression (`FIGURE_PATTERN`, Rust syntax) finds the figures of a text column with
``str.extract_all``. Each distinct figure is then read once: plain numbers and ids directly,
the others by the alternative of the expression that matches them whole, whose parts
``str.extract_groups`` takes apart and polars expressions turn into comparison keys. Nothing
runs in Python per text or per figure, and a text repeated across runs (a system prompt) is
read once (`distinct_texts`), so the grounding rules can read every source of a batch.

A figure has keys, the readings it may stand for, and extra keys, coarser readings that a
source holding it also vouches for. A figure of an answer (or an argument) is grounded when
one of its keys is among the keys or extra keys of the figures of its sources. Keys:

- ``N:<decimal>`` a number, canonical (``N:1234.56``, ``N:249``, ``N:0.5``): French and English
  formats (``1 234,56``, ``1,234.56``, ``1.234,56``, ``1'234.56``, spaces including U+00A0,
  U+202F and U+2009 as thousands separators). A lone ``1,234`` or ``1.234`` (one separator, three
  digits after it) stands for both 1234 and 1.234. Signs are ignored (a range ``9-12`` is 9 and
  12). Currency (``€``, ``$``, ``£``, ``EUR``, ``USD``, ``GBP``, ``CHF``, ``euros``,
  ``dollars``, before or after) is not compared. A percentage stands for its number and its
  hundredth (``12,5 %`` is 12.5 or 0.125); a scale (``k``, ``M``, ``Md``, ``million(s)``,
  ``milliard(s)``, ``billion(s)``, ``thousand(s)``, ``mille``) gives both the number as
  written and its product (``1,2 M€`` is 1.2 or 1200000). A unit or ordinal glued to the
  number (``12kg``, ``3ème``, ``1er``, ``21st``) is dropped.
- ``D:<yyyy-mm-dd>`` a date: ISO ``2026-03-04`` (optionally with a time), ``2026/03/04``,
  ``04/03/2026`` (also with ``.`` or ``-``), ``4 mars 2026``, ``1er mars 2026``,
  ``March 4, 2026``, ``4 March 2026``, abbreviated months (``4 déc. 2026``, ``Mar 4``). An
  all-numeric date whose first two parts could each be the month (``03/04/2026``) stands for
  both readings, day first and month first; otherwise the only valid reading is kept
  (``25/12/2026``, ``12/25/2026``). Two-digit years are not read as dates. A date without year
  (``4 mars``) has the key ``MD:03-04``, a month and year (``mars 2026``) ``YM:2026-03``. A full
  date in a source also vouches for its ``MD``, ``YM`` and year (``N:2026``).
- ``T:<hh:mm>`` a time of day (``14:30``, ``14h30``, ``2:30 pm``, ``2 pm``, ``T14:30:00Z``);
  seconds are kept when not zero (``T:14:30:15``, and a source vouches for ``T:14:30`` too); time
  zones are not compared. ``14h`` alone is also read as the number 14 (a duration).
- ``I:<text>`` an identifier: a token that mixes letters and digits (``CMD-127745``,
  ``LST-21503``, ``KYC-2026-0008``, ``127745B``, ``3f2a-9c1e``), lower-cased.

Digits are ASCII (``²`` in ``m²`` is not a figure). JSON text is read as it comes: escaped
non-ASCII letters are decoded first by `unescape_json` where callers need it.
"""

from __future__ import annotations

import polars as pl

__all__ = [
    "FIGURE_KINDS",
    "FIGURE_PATTERN",
    "canon_number",
    "distinct_texts",
    "extract_figures",
    "fold_text",
    "read_figures",
    "source_keys",
    "unescape_json",
]

#: What a figure is, as `read_figures` names it.
FIGURE_KINDS = ("amount", "percentage", "number", "date", "time", "identifier")

_SP = r"[ \x{A0}\x{202F}\x{2009}]"  # space, no-break space, narrow no-break space, thin space
_B = r"(?-u:\b)"  # ASCII word boundary: the lazy DFA keeps it on non-ASCII text

_MONTHS = {
    "janvier": 1, "january": 1, "janv": 1, "jan": 1,
    "février": 2, "fevrier": 2, "february": 2, "févr": 2, "fevr": 2, "feb": 2,
    "mars": 3, "march": 3, "mar": 3,
    "avril": 4, "april": 4, "avr": 4, "apr": 4,
    "mai": 5, "may": 5,
    "juin": 6, "june": 6, "jun": 6,
    "juillet": 7, "july": 7, "juil": 7, "jul": 7,
    "août": 8, "aout": 8, "august": 8, "aug": 8,
    "septembre": 9, "september": 9, "sept": 9, "sep": 9,
    "octobre": 10, "october": 10, "oct": 10,
    "novembre": 11, "november": 11, "nov": 11,
    "décembre": 12, "decembre": 12, "december": 12, "déc": 12, "dec": 12,
}  # fmt: skip
# Longest first: with leftmost-first alternation "mar" must not be tried before "mars".
_MONTH = "(?i:" + "|".join(sorted(_MONTHS, key=lambda m: (-len(m), m))) + ")" + _B

_ORD = r"(?:er|st|nd|rd|th)"
_YEAR = r"[12][0-9]{3}"

_DATE_ISO = rf"{_B}(?P<d1y>{_YEAR})-(?P<d1m>[01][0-9])-(?P<d1d>[0-3][0-9])"
_DATE_YMD = rf"{_B}(?P<d2y>{_YEAR})[/.](?P<d2m>[01]?[0-9])[/.](?P<d2d>[0-3]?[0-9]){_B}"
_DATE_NUM = rf"{_B}(?P<d3a>[0-3]?[0-9])[/.-](?P<d3b>[0-3]?[0-9])[/.-](?P<d3y>{_YEAR}){_B}"
_DATE_DMY = (
    rf"{_B}(?P<d4d>[0-3]?[0-9]){_ORD}?(?:{_SP}+|{_SP}*-{_SP}*)(?:of{_SP}+)?"
    rf"{_B}(?P<d4m>{_MONTH})\.?(?:(?:,?{_SP}+|{_SP}*-{_SP}*)(?P<d4y>{_YEAR}){_B})?"
)
_DATE_MDY = (
    rf"{_B}(?P<d5m>{_MONTH})\.?{_SP}+(?P<d5d>[0-3]?[0-9]){_ORD}?"
    rf"(?:,?{_SP}+(?P<d5y>{_YEAR}))?{_B}"
)
_DATE_MY = rf"{_B}(?P<d6m>{_MONTH})\.?{_SP}+(?P<d6y>{_YEAR}){_B}"
_AMPM = r"[AaPp]\.?[Mm]\.?"
_TIME = (
    rf"(?:T|{_B})(?P<th>[01]?[0-9]|2[0-3])"
    rf"(?::(?P<tm>[0-5][0-9])(?::(?P<ts>[0-5][0-9])(?:[.,][0-9]+)?)?"
    rf"(?:Z|[+-][0-9]{{2}}:?[0-9]{{2}})?(?:{_SP}?(?P<tap>{_AMPM}))?"
    rf"|(?P<tfh>h)(?P<tfm>[0-5][0-9])?"
    rf"|{_SP}?(?P<tap2>{_AMPM})){_B}"
)
_INT = (
    rf"[1-9][0-9]{{0,2}}(?:{_SP}[0-9]{{3}})+"
    r"|[1-9][0-9]{0,2}(?:,[0-9]{3})+"
    r"|[1-9][0-9]{0,2}(?:\.[0-9]{3})+"
    r"|[1-9][0-9]{0,2}(?:['’][0-9]{3})+"
    r"|[0-9]+"
)
_CUR_WORDS = r"EUR|USD|GBP|CHF"
_NUMBER = (
    rf"(?:(?P<npre>[€$£]|(?:{_CUR_WORDS}){_B}){_SP}?|{_B})"
    rf"(?P<nint>{_INT})(?:(?P<ndsep>[.,])(?P<nfrac>[0-9]+))?"
    # A suffix glued to the digits (unit, ordinal, scale, or the rest of an id); without one,
    # the number must end at a non-digit, so `1,2345` is not read as `1,234` then `5`.
    rf"(?:(?P<nsuf>\p{{L}}[\p{{L}}0-9_]*(?:[-_/.#][\p{{L}}0-9_]+)*)|{_B})"
    rf"(?:{_SP}?(?P<nscale>millions?|milliards?|billions?|thousands?|mille|Mrds?|Mds?|bn|[kKM]){_B})?"
    rf"(?:{_SP}?(?P<npost>[€$£%]|(?:{_CUR_WORDS}|euros?|dollars?|pour(?:{_SP}|-)?cent|percent|pct){_B}))?"
)
_ID = (
    r"(?P<id>\p{L}[\p{L}_]*(?:[-_/.#][\p{L}_]+)*[-_/.#]?[0-9][\p{L}0-9_]*"
    r"(?:[-_/.#][\p{L}0-9_]+)*)"
)

# Glued suffixes that leave a number a number (anything else makes the token an identifier).
_ORDINALS = ("er", "re", "ère", "e", "è", "ème", "eme", "st", "nd", "rd", "th")
_SCALES = {
    "k": 3, "thousand": 3, "thousands": 3, "mille": 3,
    "m": 6, "million": 6, "millions": 6,
    "md": 9, "mds": 9, "mrd": 9, "mrds": 9, "bn": 9, "milliard": 9, "milliards": 9,
    "billion": 9, "billions": 9,
}  # fmt: skip
_UNITS = (
    "kg", "g", "mg", "t", "km", "m", "cm", "mm", "l", "ml", "cl", "h", "min", "mn", "s", "ms",
    "j", "x", "ans", "an", "ko", "mo", "go", "to", "kb", "mb", "gb", "tb", "kw", "kwh", "w", "v",
    "hz", "khz", "mhz", "ghz", "px", "pt", "pts",
)  # fmt: skip
_PERCENT = r"(?i)^(?:%|pour.?cent|percent|pct)$"

# JSON escapes worth decoding before text comparisons: Latin-1 letters and the punctuation and
# spaces French text uses (json.dumps escapes every non-ASCII character by default).
_ESCAPES: dict[str, str] = {"\\/": "/", '\\"': '"', "\\n": " ", "\\t": " ", "\\r": " "}
for _code in [*range(0xA0, 0x100), 0x152, 0x153, 0x2009, 0x2013, 0x2014, 0x2019, 0x2026,
              0x202F, 0x20AC]:  # fmt: skip
    for _hex in {f"{_code:04x}", f"{_code:04X}"}:
        _ESCAPES[f"\\u{_hex}"] = chr(_code)


def unescape_json(expr: pl.Expr) -> pl.Expr:
    """Decode the JSON escapes of common non-ASCII letters, quotes and slashes in a text
    (``Soci\\u00e9t\\u00e9`` reads ``Société``), so that JSON tool results compare as text."""
    return expr.str.replace_many(list(_ESCAPES), list(_ESCAPES.values()))


def fold_text(expr: pl.Expr) -> pl.Expr:
    """Case and whitespace folding: lower case, every run of (Unicode) whitespace one space,
    no space at either end."""
    return expr.str.to_lowercase().str.replace_all(r"\s+", " ").str.strip_chars(" ")


def extract_figures(
    frame: pl.DataFrame, text: str = "text", keep: tuple[str, ...] = ()
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The figures found in column ``text`` of ``frame``, and their keys.

    Returns ``(figures, keys)``: ``figures`` has one row per figure found, with the ``keep``
    columns, ``figure_no`` (0, 1, ... within its text), ``figure`` (as written) and the columns
    `read_figures` adds; ``keys`` is `read_figures`'s table for those figures. Texts with no
    figure give no row.
    """
    found = (
        frame.select(*keep, pl.col(text).str.extract_all(FIGURE_PATTERN).alias("figure"))
        .filter(pl.col("figure").list.len() > 0)
        .with_columns(figure_no=pl.int_ranges(0, pl.col("figure").list.len(), dtype=pl.UInt32))
        .explode("figure", "figure_no")
    )
    return read_figures(found, "figure")


def distinct_texts(frame: pl.DataFrame, text: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Number the distinct values of column ``text``: ``(frame + _tid, texts)``, ``texts``
    holding ``_tid`` and ``text`` once per distinct value (nulls have no id)."""
    rows = frame.with_columns(_tid=pl.int_range(pl.len(), dtype=pl.UInt32)).with_columns(
        _tid=pl.when(pl.col(text).is_not_null()).then(pl.col("_tid").min().over(text))
    )
    texts = rows.filter(pl.col("_tid").is_not_null()).unique("_tid", maintain_order=True)
    return rows, texts.select("_tid", text)


def source_keys(
    frame: pl.DataFrame,
    text: str = "text",
    keep: tuple[str, ...] = (),
    wanted: pl.Series | None = None,
) -> pl.DataFrame:
    """Every key the figures of each text vouch for as a source (extra keys included).

    Returns the ``keep`` columns and ``key``, one row per (row of ``frame``, distinct key of
    its text); with ``wanted``, only those keys. Each distinct text is read once, even when
    several rows share it (a system prompt repeated in every run), after `unescape_json`.
    """
    rows, texts = distinct_texts(frame.select(*keep, text), text)
    # The one pass over every source text: the streaming engine spreads it over the cores.
    found = (
        texts.lazy()
        .select("_tid", unescape_json(pl.col(text)).str.extract_all(FIGURE_PATTERN).alias("_v"))
        .explode("_v")
        .drop_nulls("_v")
        .collect(engine="streaming")
    )
    _, keys = _read(found.select("_v").unique())
    keys = keys.select("_v", "key")
    if wanted is not None:
        keys = keys.filter(pl.col("key").is_in(wanted.implode()))
    per_text = found.join(keys, on="_v").select("_tid", "key").unique()
    return rows.join(per_text, on="_tid").select(*keep, "key")


def read_figures(frame: pl.DataFrame, column: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Read each value of ``column`` as one whole figure.

    Returns ``(frame, keys)``. ``frame`` gains ``kind`` (one of `FIGURE_KINDS`; null when the
    whole value is not one figure), ``reading`` (its keys as a person reads them: ``365000``,
    ``2026-03-04``, ``1234 or 1.234``, ``12.5%``; null for identifiers) and ``is_int`` (a
    number written as an integer, without scale). ``keys`` has one row per (distinct value,
    key): ``column``, ``key`` and ``extra`` (true for the coarser keys a source vouches for,
    which the value itself does not claim).
    """
    info, keys = _read(frame.select(pl.col(column).alias("_v")).unique().drop_nulls())
    out = frame.join(info.rename({"_v": column}), on=column, how="left", maintain_order="left")
    return out, keys.rename({"_v": column})


def _read(values: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(info, keys) of distinct values ``_v``: see `read_figures`.

    Plain numbers (``356000``, ``64.5``: most figures of JSON tool results) are read
    directly; the others try the alternatives of `FIGURE_PATTERN` in the scanner's order,
    anchored, and only the values an alternative matches have its parts extracted.
    """
    plain = pl.col("_v").str.contains(_PLAIN) & ~pl.col("_v").str.contains(_LONE_DOT)
    # An id starting with a letter is read as one unless a month, a currency or T (ISO time)
    # starts it, which an earlier alternative might take.
    word = pl.col("_v").str.contains(f"^(?:{_ID})$") & ~pl.col("_v").str.contains(_NOT_AN_ID)
    values = values.with_columns(_plain=plain, _word=word)
    simple = values.filter("_plain")
    canon = canon_number(pl.col("_v"))
    ident_info, ident_keys = _identifier(values.filter("_word"))
    infos = [
        _info(simple, "number", canon, ~pl.col("_v").str.contains(".", literal=True)),
        ident_info,
    ]
    keys = [_keys(simple, pl.concat_str(pl.lit("N:"), canon)), ident_keys]
    values = values.filter(~pl.col("_plain") & ~pl.col("_word")).drop("_plain", "_word")
    for alternative, build in _BRANCHES:
        if not values.height:
            break
        anchored = f"^(?:{alternative})$"
        values = values.with_columns(_hit=pl.col("_v").str.contains(anchored))
        hit = values.filter("_hit").drop("_hit")
        values = values.filter(~pl.col("_hit")).drop("_hit")
        if hit.height:
            parts = hit.with_columns(pl.col("_v").str.extract_groups(anchored).alias("_g"))
            info, key = build(parts.unnest("_g"))
            infos.append(info)
            keys.append(key)
    info = pl.concat([pl.DataFrame(schema=_INFO), *infos], how="vertical_relaxed")
    key = pl.concat([pl.DataFrame(schema=_KEYS), *keys], how="vertical_relaxed")
    return info, key


_PLAIN = r"^[0-9]+(?:\.[0-9]+)?$"
_NOT_AN_ID = "^(?:" + _MONTH.removesuffix(_B) + "|T[0-9]|" + _CUR_WORDS + ")"
_LONE_DOT = r"^[1-9][0-9]{0,2}\.[0-9]{3}$"  # 1.234: also read as 1234, left to _number
_INFO = {"_v": pl.String, "kind": pl.String, "reading": pl.String, "is_int": pl.Boolean}
_KEYS = {"_v": pl.String, "key": pl.String, "extra": pl.Boolean}


# --- keys of each alternative -----------------------------------------------------------------

_Built = tuple[pl.DataFrame, pl.DataFrame]  # (info, keys) of the values of one alternative


def _keys(frame: pl.DataFrame, key: pl.Expr, extra: bool = False) -> pl.DataFrame:
    return frame.select("_v", key.alias("key"), pl.lit(extra).alias("extra")).drop_nulls("key")


def _info(
    frame: pl.DataFrame, kind: str | pl.Expr, reading: pl.Expr, is_int: bool | pl.Expr = False
) -> pl.DataFrame:
    kind = pl.lit(kind) if isinstance(kind, str) else kind
    is_int = pl.lit(is_int) if isinstance(is_int, bool) else is_int
    return frame.select(
        "_v", kind.alias("kind"), reading.cast(pl.String).alias("reading"), is_int.alias("is_int")
    )


def _identifier(frame: pl.DataFrame) -> _Built:
    key = pl.concat_str(pl.lit("I:"), pl.col("_v").str.to_lowercase())
    return _info(frame, "identifier", pl.lit(None, pl.String)), _keys(frame, key)


def _int(name: str) -> pl.Expr:
    return pl.col(name).cast(pl.Int32, strict=False)


def _month(name: str) -> pl.Expr:
    word = pl.col(name).str.to_lowercase().str.strip_chars_end(".")
    return word.replace_strict(_MONTHS, default=None, return_dtype=pl.Int32)


def _two(expr: pl.Expr) -> pl.Expr:
    return expr.cast(pl.String).str.zfill(2)


def _day_key(y: pl.Expr, m: pl.Expr, d: pl.Expr) -> pl.Expr:
    """D:yyyy-mm-dd, or MD:mm-dd without a year; null when the month or day is out of range."""
    ok = m.is_between(1, 12) & d.is_between(1, 31)
    full = pl.format("D:{}-{}-{}", y.cast(pl.String), _two(m), _two(d))
    return (
        pl.when(ok & y.is_not_null())
        .then(full)
        .when(ok)
        .then(pl.format("MD:{}-{}", _two(m), _two(d)))
    )


def _dates(*readings: tuple[pl.Expr, pl.Expr, pl.Expr]):
    """A builder for a date alternative read as one or more (year, month, day)."""

    def build(frame: pl.DataFrame) -> _Built:
        keys = pl.concat([_keys(frame, _day_key(*r)) for r in readings])
        keys = keys.unique(["_v", "key"], keep="first", maintain_order=True)
        # A full date also vouches for its day of the year, its month and its year.
        full = keys.filter(pl.col("key").str.starts_with("D:"))
        extras = [
            _keys(full, pl.concat_str(pl.lit(prefix), pl.col("key").str.slice(start, n)), True)
            for prefix, start, n in (("MD:", 7, 5), ("YM:", 2, 7), ("N:", 2, 4))
        ]
        shown = keys.group_by("_v", maintain_order=True).agg(
            pl.col("key").str.replace(r"^MD:", "--").str.replace(r"^D:", "").str.join(" or ")
        )
        info = _info(shown, "date", pl.col("key"))
        # No valid reading (31/31/2026): kept as an identifier, as written.
        ident = _identifier(frame.join(shown, on="_v", how="anti"))
        extra = pl.concat(extras).unique(["_v", "key"], keep="first", maintain_order=True)
        return pl.concat([info, ident[0]]), pl.concat([keys, extra, ident[1]])

    return build


def _month_year(frame: pl.DataFrame) -> _Built:
    m, y = _month("d6m"), pl.col("d6y")
    key = pl.when(m.is_not_null()).then(pl.format("YM:{}-{}", y, _two(m)))
    return (
        _info(frame, "date", key.str.slice(3)),
        pl.concat([_keys(frame, key), _keys(frame, pl.concat_str(pl.lit("N:"), y), True)]),
    )


def _time(frame: pl.DataFrame) -> _Built:
    g = pl.col
    hour = _int("th")
    ampm = pl.coalesce("tap", "tap2").str.to_lowercase().str.slice(0, 1)
    hour = (
        pl.when(ampm == "p").then(hour % 12 + 12).when(ampm == "a").then(hour % 12).otherwise(hour)
    )
    minute = pl.coalesce("tm", "tfm").fill_null("00")
    base = pl.format("T:{}:{}", _two(hour), minute)
    seconds = pl.when(g("ts").is_not_null() & (g("ts") != "00")).then(
        pl.format("T:{}:{}:{}", _two(hour), minute, g("ts"))
    )
    # 14h alone may be a duration: it also reads as the number 14.
    duration = pl.when(g("tfh").is_not_null() & g("tfm").is_null()).then(
        pl.concat_str(pl.lit("N:"), hour.cast(pl.String))
    )
    key = pl.coalesce(seconds, base)
    keys = pl.concat(
        [
            _keys(frame, key),
            _keys(frame, duration),
            _keys(frame, pl.when(seconds.is_not_null()).then(base), True),
        ]
    )
    return _info(frame, "time", key.str.slice(2)), keys


def canon_number(number: pl.Expr) -> pl.Expr:
    """The canonical text of a decimal written with digits and at most one ``.``: no leading
    zeros, no trailing zeros after the point, no trailing point (``007.50`` reads ``7.5``)."""
    point = number.str.contains(".", literal=True)
    trimmed = (
        pl.when(point)
        .then(number.str.strip_chars_end("0").str.strip_chars_end("."))
        .otherwise(number)
        .str.strip_chars_start("0")
    )
    return (
        pl.when(trimmed == "")
        .then(pl.lit("0"))
        .when(trimmed.str.starts_with("."))
        .then(pl.concat_str(pl.lit("0"), trimmed))
        .otherwise(trimmed)
    )


def _number(frame: pl.DataFrame) -> _Built:
    g = pl.col
    suffix = g("nsuf").str.to_lowercase()
    numeric = suffix.is_null() | suffix.is_in([*_ORDINALS, *_SCALES, *_UNITS])
    # Any other glued suffix makes the token an identifier (127745B, 3f2a-9c1e).
    ident = _identifier(frame.filter(~numeric))
    percent = g("npost").str.contains(_PERCENT).fill_null(False)
    number = frame.filter(numeric).with_columns(
        _digits=g("nint").str.replace_all("[^0-9]", ""),
        _frac=g("nfrac").fill_null(""),
        # One separator and three digits after it, no decimal part: 1,234 or 1.234, both kept.
        _lone=g("nint").str.contains(r"^[1-9][0-9]{0,2}[.,][0-9]{3}$") & g("nfrac").is_null(),
        _power=pl.coalesce(g("nscale").str.to_lowercase(), suffix).replace_strict(
            _SCALES, default=None, return_dtype=pl.Int64
        ),
        _percent=percent,
        _money=g("npre").is_not_null() | (g("npost").is_not_null() & ~percent),
    )
    padded = g("_digits").str.pad_start(3, "0")
    frac9 = pl.concat_str("_frac", pl.lit("0" * 9))
    number = number.with_columns(
        _main=canon_number(pl.concat_str("_digits", pl.lit("."), "_frac")),
        _alt=pl.when("_lone").then(canon_number(g("nint").str.replace(r"[.,]", "."))),
        # A scale moves the point right, a percentage two places left.
        _scaled=pl.when(g("_power").is_not_null()).then(
            canon_number(
                pl.concat_str(
                    "_digits",
                    frac9.str.slice(0, g("_power")),
                    pl.lit("."),
                    frac9.str.slice(g("_power")),
                )
            )
        ),
        _hundredth=pl.when("_percent").then(
            canon_number(
                pl.concat_str(
                    padded.str.slice(0, padded.str.len_chars() - 2),
                    pl.lit("."),
                    padded.str.slice(-2),
                    "_frac",
                )
            )
        ),
    )
    keys = pl.concat(
        [
            _keys(number, pl.concat_str(pl.lit("N:"), column))
            for column in ("_main", "_alt", "_scaled", "_hundredth")
        ]
    )
    both = pl.when(g("_alt").is_not_null()).then(pl.format("{} or {}", "_main", "_alt"))
    both = both.otherwise("_main")
    reading = (
        pl.when("_percent")
        .then(pl.concat_str(both, pl.lit("%")))
        .otherwise(pl.coalesce("_scaled", both))
    )
    kind = (
        pl.when("_percent")
        .then(pl.lit("percentage"))
        .when("_money")
        .then(pl.lit("amount"))
        .otherwise(pl.lit("number"))
    )
    is_int = (g("_frac") == "") & ~g("_lone") & g("_power").is_null()
    info = _info(number, kind, reading, is_int)
    return pl.concat([info, ident[0]]), pl.concat([keys, ident[1]])


# Each alternative of the scanner and the builder of its keys. Order matters: at a given
# position the first alternative that matches wins, so dates and times come before plain
# numbers, and numbers before ids.
_BRANCHES = (
    (_DATE_ISO, _dates((_int("d1y"), _int("d1m"), _int("d1d")))),
    (_DATE_YMD, _dates((_int("d2y"), _int("d2m"), _int("d2d")))),
    # 03/04/2026: day first, then month first; each reading kept when valid.
    (
        _DATE_NUM,
        _dates((_int("d3y"), _int("d3b"), _int("d3a")), (_int("d3y"), _int("d3a"), _int("d3b"))),
    ),
    (_DATE_DMY, _dates((_int("d4y"), _month("d4m"), _int("d4d")))),
    (_DATE_MDY, _dates((_int("d5y"), _month("d5m"), _int("d5d")))),
    (_DATE_MY, _month_year),
    (_TIME, _time),
    (_NUMBER, _number),
    (_ID, _identifier),
)

#: The figure scanner (Rust regex syntax): every match is one figure as written.
FIGURE_PATTERN = "|".join(f"(?:{alternative})" for alternative, _ in _BRANCHES)
