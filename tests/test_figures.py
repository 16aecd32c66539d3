"""Figures read from free text (analyzer/checks/figures.py): French and English, hand-listed."""

from __future__ import annotations

import polars as pl
import pytest

from analyzer.checks.figures import (
    canon_number,
    distinct_texts,
    extract_figures,
    fold_text,
    read_figures,
    source_keys,
    unescape_json,
)


def figures(text: str) -> list[tuple[str, str, str | None, list[str]]]:
    """(figure as written, kind, reading, keys) of each figure of ``text``, in order."""
    found, keys = extract_figures(pl.DataFrame({"text": [text]}))
    claimed = keys.filter(~pl.col("extra"))
    return [
        (
            row["figure"],
            row["kind"],
            row["reading"],
            sorted(claimed.filter(pl.col("figure") == row["figure"]).get_column("key")),
        )
        for row in found.sort("figure_no").iter_rows(named=True)
    ]


FRENCH = [
    (
        "L'appartement LST-21503 est proposé à 365 000 € pour 64,5 m².",
        [
            ("LST-21503", "identifier", None, ["I:lst-21503"]),
            ("365 000 €", "amount", "365000", ["N:365000"]),
            ("64,5", "number", "64.5", ["N:64.5"]),
        ],
    ),
    ("Charges : 1 234,56 €.", [("1 234,56 €", "amount", "1234.56", ["N:1234.56"])]),
    ("1.234.567,89 EUR", [("1.234.567,89 EUR", "amount", "1234567.89", ["N:1234567.89"])]),
    # narrow no-break space (U+202F) and no-break space (U+00A0) as thousands separators
    ("385\u202f000 €", [("385\u202f000 €", "amount", "385000", ["N:385000"])]),
    ("385\u00a0000\u00a0€", [("385\u00a0000\u00a0€", "amount", "385000", ["N:385000"])]),
    ("+3,2 % sur un an", [("3,2 %", "percentage", "3.2%", ["N:0.032", "N:3.2"])]),
    ("50 pour cent", [("50 pour cent", "percentage", "50%", ["N:0.5", "N:50"])]),
    ("12 mois", [("12", "number", "12", ["N:12"])]),
    ("le 4 mars 2026", [("4 mars 2026", "date", "2026-03-04", ["D:2026-03-04"])]),
    ("le 1er mars 2026", [("1er mars 2026", "date", "2026-03-01", ["D:2026-03-01"])]),
    ("avant le 4 déc. 2026", [("4 déc. 2026", "date", "2026-12-04", ["D:2026-12-04"])]),
    ("le 15 août", [("15 août", "date", "--08-15", ["MD:08-15"])]),
    ("en mars 2026", [("mars 2026", "date", "2026-03", ["YM:2026-03"])]),
    # day first or month first: both readings when both are valid
    (
        "04/03/2026",
        [("04/03/2026", "date", "2026-03-04 or 2026-04-03", ["D:2026-03-04", "D:2026-04-03"])],
    ),
    ("25/12/2026", [("25/12/2026", "date", "2026-12-25", ["D:2026-12-25"])]),
    (
        "04.03.2026",
        [("04.03.2026", "date", "2026-03-04 or 2026-04-03", ["D:2026-03-04", "D:2026-04-03"])],
    ),
    ("31/31/2026", [("31/31/2026", "identifier", None, ["I:31/31/2026"])]),
    ("à 14h30", [("14h30", "time", "14:30", ["T:14:30"])]),
    (
        "ouvert 9h–18h",
        [
            ("9h", "time", "09:00", ["N:9", "T:09:00"]),
            ("18h", "time", "18:00", ["N:18", "T:18:00"]),
        ],
    ),
    ("sous 48h", [("48h", "number", "48", ["N:48"])]),
    ("1,2 M€", [("1,2 M€", "amount", "1200000", ["N:1.2", "N:1200000"])]),
    ("3 milliards", [("3 milliards", "number", "3000000000", ["N:3", "N:3000000000"])]),
    ("la 3ème étape", [("3ème", "number", "3", ["N:3"])]),
    ("5 310 €/m²", [("5 310 €", "amount", "5310", ["N:5310"])]),
    ("commande CMD-127745.", [("CMD-127745", "identifier", None, ["I:cmd-127745"])]),
    ("dossier KYC-2026-0008", [("KYC-2026-0008", "identifier", None, ["I:kyc-2026-0008"])]),
    ("n°12", [("12", "number", "12", ["N:12"])]),
    ("-12,5", [("12,5", "number", "12.5", ["N:12.5"])]),
]

ENGLISH = [
    ("$1,234.56", [("$1,234.56", "amount", "1234.56", ["N:1234.56"])]),
    # one comma and three digits: 512000 or 512
    ("€512,000", [("€512,000", "amount", "512000 or 512", ["N:512", "N:512000"])]),
    ("1,234,567 users", [("1,234,567", "number", "1234567", ["N:1234567"])]),
    ("1'234.50 CHF", [("1'234.50 CHF", "amount", "1234.5", ["N:1234.5"])]),
    ("up 12.5%", [("12.5%", "percentage", "12.5%", ["N:0.125", "N:12.5"])]),
    ("1.5 million", [("1.5 million", "number", "1500000", ["N:1.5", "N:1500000"])]),
    ("5 k€", [("5 k€", "amount", "5000", ["N:5", "N:5000"])]),
    ("March 4, 2026", [("March 4, 2026", "date", "2026-03-04", ["D:2026-03-04"])]),
    ("4th of March 2026", [("4th of March 2026", "date", "2026-03-04", ["D:2026-03-04"])]),
    ("on Mar 4", [("Mar 4", "date", "--03-04", ["MD:03-04"])]),
    ("in March 2026", [("March 2026", "date", "2026-03", ["YM:2026-03"])]),
    ("12/25/2026", [("12/25/2026", "date", "2026-12-25", ["D:2026-12-25"])]),
    ("2026/03/04", [("2026/03/04", "date", "2026-03-04", ["D:2026-03-04"])]),
    ("at 2:30 pm", [("2:30 pm", "time", "14:30", ["T:14:30"])]),
    ("at 2 PM", [("2 PM", "time", "14:00", ["T:14:00"])]),
    ("12:00 AM", [("12:00 AM", "time", "00:00", ["T:00:00"])]),
    ("14:30:15", [("14:30:15", "time", "14:30:15", ["T:14:30:15"])]),
    (
        "2026-03-04T14:30:00Z",
        [
            ("2026-03-04", "date", "2026-03-04", ["D:2026-03-04"]),
            ("T14:30:00Z", "time", "14:30", ["T:14:30"]),
        ],
    ),
    ("the 21st", [("21st", "number", "21", ["N:21"])]),
    ("Q3 2025", [("Q3", "identifier", None, ["I:q3"]), ("2025", "number", "2025", ["N:2025"])]),
    ("gpt-4.1", [("gpt-4.1", "identifier", None, ["I:gpt-4.1"])]),
    ("order 127745B", [("127745B", "identifier", None, ["I:127745b"])]),
]

EDGES = [
    ("Bonjour, aucun chiffre ici.", []),
    ("m² et km²", []),  # a superscript two is not a digit
    ("1,2345", [("1,2345", "number", "1.2345", ["N:1.2345"])]),  # not 1,234 then 5
    ("10.000", [("10.000", "number", "10000 or 10", ["N:10", "N:10000"])]),
    ("0.250", [("0.250", "number", "0.25", ["N:0.25"])]),
    ("007", [("007", "number", "7", ["N:7"])]),
    ("2024-2025", [("2024", "number", "2024", ["N:2024"]), ("2025", "number", "2025", ["N:2025"])]),
    ("15°C", [("15", "number", "15", ["N:15"])]),
]


@pytest.mark.parametrize(("text", "expected"), FRENCH, ids=[t for t, _ in FRENCH])
def test_french_figures(text, expected):
    assert figures(text) == expected


@pytest.mark.parametrize(("text", "expected"), ENGLISH, ids=[t for t, _ in ENGLISH])
def test_english_figures(text, expected):
    assert figures(text) == expected


@pytest.mark.parametrize(("text", "expected"), EDGES, ids=[t for t, _ in EDGES])
def test_figure_boundaries(text, expected):
    assert figures(text) == expected


def test_the_same_value_in_every_format_has_one_key():
    texts = ["1 234,56 €", "1,234.56", "1234.56", "1234,56", "EUR 1.234,56", "1\u202f234,56 €"]
    keys = [key for text in texts for *_, key in figures(text)]
    assert keys == [["N:1234.56"]] * len(texts)


def test_sources_vouch_for_a_full_date_s_day_month_and_year():
    frame = pl.DataFrame({"run": ["r1", "r2"], "text": ["livré le 2026-03-04", "à 14:30:15"]})
    got = source_keys(frame, "text", keep=("run",)).sort("run", "key")
    assert got.rows() == [
        ("r1", "D:2026-03-04"),
        ("r1", "MD:03-04"),
        ("r1", "N:2026"),
        ("r1", "YM:2026-03"),
        ("r2", "T:14:30"),
        ("r2", "T:14:30:15"),
    ]


def test_source_keys_decode_json_escapes_and_keep_only_wanted_keys():
    frame = pl.DataFrame({"run": ["r1"], "text": ['{"prix": "385\\u202f000 \\u20ac", "n": 12}']})
    assert source_keys(frame, "text", keep=("run",), wanted=pl.Series(["N:385000"])).rows() == [
        ("r1", "N:385000")
    ]


def test_read_figures_reads_whole_values_only():
    frame = pl.DataFrame({"v": ["1 234,56", "ACC-1 ACC-2", "2026-03-04", "texte", None]})
    out, keys = read_figures(frame, "v")
    assert out.get_column("kind").to_list() == ["number", None, "date", None, None]
    assert sorted(keys.filter(~pl.col("extra")).rows()) == [
        ("1 234,56", "N:1234.56", False),
        ("2026-03-04", "D:2026-03-04", False),
    ]


def test_canon_number():
    raw = ["1234.", "1200", "1200.000", "0.5", "007.50", "0.0", ".5", "000", "12.500", "0.000125"]
    got = pl.select(canon_number(pl.Series(raw))).to_series().to_list()
    assert got == ["1234", "1200", "1200", "0.5", "7.5", "0", "0.5", "0", "12.5", "0.000125"]


def test_unescape_and_fold():
    texts = pl.Series(
        ["Soci\\u00e9t\\u00e9  G\\u00C9N\\u00c9RALE\\n  ACC-1 \\/ x", "  A\u202fB\tc "]
    )
    got = pl.select(fold_text(unescape_json(pl.lit(texts)))).to_series().to_list()
    assert got == ["société générale acc-1 / x", "a b c"]


def test_distinct_texts_numbers_equal_texts_once():
    frame = pl.DataFrame({"t": ["a", "b", "a", None, "b", "c"]})
    rows, texts = distinct_texts(frame, "t")
    ids = rows.get_column("_tid").to_list()
    assert ids[0] == ids[2] and ids[1] == ids[4] and ids[3] is None
    assert len({ids[0], ids[1], ids[5]}) == 3
    assert sorted(texts.get_column("t").to_list()) == ["a", "b", "c"]
