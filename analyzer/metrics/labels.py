"""Golden labels: expected answer fields and tools per case, scored against the runs.

A labels file (``report --labels FILE``) is JSON lines validated by
``schemas/labels.schema.json``, one case per line, joined to runs by case id (``--case-key``)::

    {"case_id": "KYC-2026-0001",
     "fields": {"decision": {"expected": "approve", "critical": true},
                "risk_level": {"expected": "low", "match": "normalized"},
                "amount": {"expected": 1234.5, "match": "numeric", "tolerance": 0.01},
                "dossier_id": {"expected": "KYC-2026-\\\\d{4}", "match": "regex"},
                "country": "FR"},
     "tools": ["fetch_documents", "screen_sanctions"],
     "arguments": {"lookup_account": {"account_id": "ACC-30417"}}}

Fields
------
A field is read from the run's answer parsed as JSON: its name, or ``path`` (dotted, into nested
objects; ``$`` is the whole answer text). A field is *missing* (and not correct) when the run has
no answer, the answer is not JSON, or the value is absent or null (unless ``null`` is expected).
Matches:

- ``exact`` (default; a bare value is an exact field): equal after case folding (strings), as
  numbers (numbers), or as JSON values (the rest).
- ``normalized``: equal after case folding, removing accents, writing dates as YYYY-MM-DD
  (``2026-10-01``, ``01/10/2026`` and ``01.10.2026`` day first, ``1 October 2026``,
  ``October 1, 2026``, ``1er octobre 2026``) and collapsing whitespace.
- ``numeric``: the value (a number, or a text holding exactly one number such as ``1 234,56 €``
  or ``$1,234.56``) within ``tolerance`` (absolute) or ``relative_tolerance`` (times the
  expected value) of ``expected``, bounds included; decimal arithmetic, so 0.1 + 0.2 is 0.3.
- ``regex``: ``expected`` is a regular expression that must match the whole value, in RE2
  syntax (Python's, without backreferences and lookaround), run in time linear in the value.

A run is *correct* when all its label fields are; ``critical: true`` fields are also reported
apart. Runs whose case has no label are in no label figure.

Tools
-----
``tools`` lists the tools a correct run calls. A tool counts as called when a call of it started
before the answer (any call, for a run with no answer). Tool recall = expected (run, tool) pairs
called / expected pairs; omission by tool = runs that did not call it / runs expected to; a wrong
tool is a call of a tool not in the list. ``arguments`` gives expected argument values per tool:
argument precision = (call, argument) pairs whose value matches / pairs checked, over every call
of those tools (a call whose arguments are not JSON, or lack the argument, counts as wrong);
values compare as in the ``trajectory`` rule (case and whitespace folding, numbers as numbers).
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import MAX_EMAX, MIN_EMIN, Decimal, InvalidOperation, Overflow, localcontext
from pathlib import Path
from typing import Any

import polars as pl

from analyzer import linear_regex
from analyzer.errors import InputError
from analyzer.exactjson import loads_exact
from analyzer.metrics.stats import distinct_runs, rate
from analyzer.resources import schema

__all__ = [
    "CaseLabel",
    "FieldLabel",
    "LabelScores",
    "LabelSet",
    "field_matches",
    "load_labels",
    "normalize_text",
    "parse_number",
    "score_labels",
    "scored",
]

_MISSING = object()


@dataclass(frozen=True)
class FieldLabel:
    """One expected answer field of a case."""

    name: str
    expected: Any
    match: str = "exact"
    path: str | None = None  # dotted path into the answer JSON; "$" = the whole answer
    tolerance: Decimal = Decimal(0)
    relative_tolerance: Decimal = Decimal(0)
    critical: bool = False


@dataclass(frozen=True)
class CaseLabel:
    """The labels of one case, from one line of the file."""

    case_id: str
    line: int
    fields: tuple[FieldLabel, ...] = ()
    tools: tuple[str, ...] | None = None
    arguments: Mapping[str, Mapping[str, Any]] | None = None


@dataclass(frozen=True)
class LabelSet:
    """A loaded labels file: its cases by case id."""

    path: str
    sha256: str
    cases: Mapping[str, CaseLabel]


# --- loading -------------------------------------------------------------------------------------


def load_labels(path: str | Path) -> LabelSet:
    """Read and validate a labels file; every problem at once in one `InputError`.

    Each problem names the file and line (``labels.jsonl:3: fields.amount: ...``).
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise InputError(f"cannot read labels file {path}: {err.strerror or err}") from err
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: labels file is not UTF-8 ({err.reason})") from err
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(schema("labels.schema.json"))
    problems: list[str] = []
    cases: dict[str, CaseLabel] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            data = loads_exact(line)
        except ValueError as err:
            problems.append(f"{where}: not a JSON object ({err})")
            continue
        errors = sorted(validator.iter_errors(_plain(data)), key=lambda e: list(e.path))
        if errors:
            problems += [f"{where}: {_where(e.absolute_path)}{e.message}" for e in errors]
            continue
        case, found = _case(data, number)
        problems += [f"{where}: {p}" for p in found]
        if case.case_id in cases:
            problems.append(
                f"{where}: case_id {case.case_id!r} already labelled on line "
                f"{cases[case.case_id].line}"
            )
        elif not found:
            cases[case.case_id] = case
    if not problems and not cases:
        problems.append(f"{path}: no labels (one JSON object per line expected)")
    if problems:
        shown = problems[:20]
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise InputError(
            f"invalid labels file {path} ({len(problems)} problems):\n  "
            + "\n  ".join(shown)
            + more
        )
    return LabelSet(path=str(path), sha256=hashlib.sha256(raw).hexdigest(), cases=cases)


def _plain(value: Any) -> Any:
    """Decimals as floats for the schema validator (it has no integer type to check, and
    ``float`` is bounded where ``int(Decimal("1e999999999"))`` is not)."""
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _where(path) -> str:
    parts = [str(p) for p in path]
    return f"{'.'.join(parts)}: " if parts else ""


def _case(data: dict[str, Any], line: int) -> tuple[CaseLabel, list[str]]:
    problems: list[str] = []
    fields = []
    for name, spec in sorted((data.get("fields") or {}).items()):
        if not isinstance(spec, dict):
            spec = {"expected": spec}
        label = FieldLabel(
            name=name,
            expected=spec["expected"],
            match=spec.get("match", "exact"),
            path=spec.get("path"),
            tolerance=Decimal(spec.get("tolerance", 0)),
            relative_tolerance=Decimal(spec.get("relative_tolerance", 0)),
            critical=bool(spec.get("critical", False)),
        )
        if label.match == "numeric" and parse_number(label.expected) is None:
            problems.append(f"fields.{name}.expected: {label.expected!r} is not a number")
        for key in ("tolerance", "relative_tolerance"):
            if not getattr(label, key).is_finite():  # the schema's minimum lets NaN through
                problems.append(f"fields.{name}.{key}: {spec[key]} is not a finite number")
        if label.match == "regex":
            try:
                linear_regex.compile_linear(str(label.expected))
            except linear_regex.UnsupportedPattern as err:
                problems.append(f"fields.{name}.expected: invalid regular expression ({err})")
        fields.append(label)
    tools = data.get("tools")
    return (
        CaseLabel(
            case_id=data["case_id"],
            line=line,
            fields=tuple(fields),
            tools=tuple(tools) if tools is not None else None,
            arguments=data.get("arguments"),
        ),
        problems,
    )


# --- comparing values ----------------------------------------------------------------------------

_MONTHS = {
    name: i
    for i, names in enumerate(
        [
            ("january", "jan", "janvier", "janv"),
            ("february", "feb", "fevrier", "fevr"),
            ("march", "mar", "mars"),
            ("april", "apr", "avril", "avr"),
            ("may", "mai"),
            ("june", "jun", "juin"),
            ("july", "jul", "juillet", "juil"),
            ("august", "aug", "aout"),
            ("september", "sep", "sept", "septembre"),
            ("october", "oct", "octobre"),
            ("november", "nov", "novembre"),
            ("december", "dec", "decembre"),
        ],
        start=1,
    )
    for name in names
}
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_ISO = re.compile(r"\b(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})\b")
_DAY_FIRST = re.compile(r"\b(\d{1,2})[/.-](\d{1,2})[/.-](\d{4})\b")
_DAY_MONTH = re.compile(rf"\b(\d{{1,2}})(?:er|st|nd|rd|th)?\.? ({_MONTH})\.?,? (\d{{4}})\b")
_MONTH_DAY = re.compile(rf"\b({_MONTH})\.? (\d{{1,2}})(?:st|nd|rd|th)?,? (\d{{4}})\b")


def _iso(year: str, month: str | int, day: str) -> str | None:
    y, mo, d = int(year), int(month), int(day)
    if 1 <= mo <= 12 and 1 <= d <= 31:
        return f"{y:04d}-{mo:02d}-{d:02d}"
    return None


def normalize_text(text: str) -> str:
    """Case-folded, accents removed, dates as YYYY-MM-DD, whitespace collapsed."""
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()
    plain = " ".join(plain.split())

    def sub(pattern: re.Pattern[str], build) -> None:
        nonlocal plain
        plain = pattern.sub(lambda mt: build(mt) or mt.group(0), plain)

    sub(_ISO, lambda mt: _iso(mt[1], mt[2], mt[3]))
    sub(_DAY_FIRST, lambda mt: _iso(mt[3], mt[2], mt[1]))
    sub(_DAY_MONTH, lambda mt: _iso(mt[3], _MONTHS[mt[2]], mt[1]))
    sub(_MONTH_DAY, lambda mt: _iso(mt[3], _MONTHS[mt[1]], mt[2]))
    return plain


_NUMBER_TEXT = re.compile(r"[-+−]?\d[\d\s\u00a0\u202f.,']*")


def parse_number(value: Any) -> Decimal | None:
    """A number from a JSON number or a text holding exactly one (``1 234,56 €``, ``$1,234.5``).

    Separators: with both ``,`` and ``.``, the last one is the decimal mark; a lone ``,`` or a
    repeated ``.`` followed by exactly three digits groups thousands; otherwise it is decimal.
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | Decimal):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value))
    if not isinstance(value, str):
        return None
    found = [mt.group(0) for mt in _NUMBER_TEXT.finditer(value)]
    if len(found) != 1:
        return None
    raw = found[0].rstrip(" \u00a0\u202f.,'")
    sign = "-" if raw[0] in "-−" else ""
    body = re.sub(r"[\s\u00a0\u202f']", "", raw.lstrip("+-−"))
    if "," in body and "." in body:
        mark = "," if body.rfind(",") > body.rfind(".") else "."
        group = "." if mark == "," else ","
        body = body.replace(group, "").replace(mark, ".")
    elif "," in body or body.count(".") > 1:
        sep = "," if "," in body else "."
        parts = body.split(sep)
        if len(parts) > 2 or len(parts[-1]) == 3:
            if not all(len(p) == 3 for p in parts[1:]):
                return None
            body = "".join(parts)
        else:
            body = ".".join(parts)
    try:
        return Decimal(sign + body)
    except InvalidOperation:
        return None


def _value_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal | int | float):
        return str(value)
    return json.dumps(_plain(value), ensure_ascii=False, sort_keys=True)


def _fold_json(value: Any) -> Any:
    if isinstance(value, str):
        return value.casefold()
    if isinstance(value, dict):
        return {k: _fold_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_fold_json(v) for v in value]
    if isinstance(value, float):
        return Decimal(repr(value))
    return value


def field_matches(label: FieldLabel, value: Any) -> bool:
    """Whether an answer value (not missing) satisfies the field's expectation."""
    expected = label.expected
    if label.match == "exact":
        if expected is None or value is None:
            return expected is None and value is None
        numeric = not isinstance(expected, bool) and isinstance(expected, int | Decimal)
        if numeric and not isinstance(value, bool) and isinstance(value, int | float | Decimal):
            return Decimal(expected) == parse_number(value)
        if isinstance(expected, str) or isinstance(value, str):
            return _value_text(expected).casefold() == _value_text(value).casefold()
        return _fold_json(expected) == _fold_json(value)
    if label.match == "normalized":
        return normalize_text(_value_text(expected)) == normalize_text(_value_text(value))
    if label.match == "numeric":
        want, got = parse_number(expected), parse_number(value)
        if want is None or got is None:
            return False
        if not (want.is_finite() and got.is_finite()):
            return want == got  # NaN matches nothing, an infinity only itself
        # In Decimal's widest exponent range an answer of 1e999999999999999999 is a number, and
        # a difference past even that range is infinite (out of any tolerance), not an error.
        with localcontext() as ctx:
            ctx.Emax, ctx.Emin = MAX_EMAX, MIN_EMIN
            ctx.traps[Overflow] = False
            return abs(got - want) <= max(label.tolerance, label.relative_tolerance * abs(want))
    if label.match == "regex":
        if isinstance(value, dict | list):
            return False
        return linear_regex.fullmatch(str(expected), _value_text(value))
    raise ValueError(f"unknown match {label.match!r}")


def _answer_value(answer: str | None, doc: Any, path: str) -> Any:
    if answer is None:
        return _MISSING
    if path == "$":
        return answer
    if not isinstance(doc, dict):
        return _MISSING
    value: Any = doc.get(path, _MISSING)
    if value is _MISSING and "." in path:
        value = doc
        for part in path.split("."):
            value = value.get(part, _MISSING) if isinstance(value, dict) else _MISSING
    return value


def _parse_json(text: str | None) -> Any:
    if text is None:
        return _MISSING
    try:
        return loads_exact(text)
    except ValueError:
        return _MISSING


# --- scoring -------------------------------------------------------------------------------------

_FIELD_SCHEMA = {
    "run_id": pl.String,
    "case_id": pl.String,
    "field": pl.String,
    "match": pl.String,
    "critical": pl.Boolean,
    "status": pl.String,
    "expected": pl.String,  # the label's value, as text
    "actual": pl.String,  # the answer's value, as text (null when missing)
}
_TOOL_SCHEMA = {"run_id": pl.String, "tool": pl.String, "called": pl.Boolean}
_ARG_SCHEMA = {
    "run_id": pl.String,
    "tool": pl.String,
    "argument": pl.String,
    "correct": pl.Boolean,
}
_WRONG_SCHEMA = {"run_id": pl.String, "tool": pl.String, "calls": pl.Int64}


@dataclass(frozen=True)
class LabelScores:
    """Labels scored against runs: one row per (run, field), per (run, expected tool), ..."""

    labels: LabelSet
    #: run_id, case_id, field, match, critical, status (correct|wrong|missing), expected, actual
    fields: pl.DataFrame
    tools: pl.DataFrame  # run_id, tool, called: the expected tools of each labelled run
    wrong_calls: pl.DataFrame  # run_id, tool, calls: calls of tools outside the expected list
    arguments: pl.DataFrame  # run_id, tool, argument, correct: one row per call and argument
    runs: pl.DataFrame  # run_id, case_id, tools_labelled: the runs matched to a label
    unlabelled_runs: int

    def passed(self) -> pl.DataFrame:
        """run_id, passed (every label field correct), for the labelled runs; sorted."""
        ok = self.fields.group_by("run_id").agg((pl.col("status") == "correct").all().alias("_ok"))
        return (
            self.runs.select("run_id")
            .join(ok, on="run_id", how="left")
            .select("run_id", pl.col("_ok").fill_null(True).alias("passed"))
            .sort("run_id")
        )

    def summary(self) -> dict[str, Any]:
        """The ``labels`` block of summary.json."""
        matched = set(self.runs.get_column("case_id").to_list())
        per_field = _field_rows(self.fields)
        passed = self.passed()
        critical = (
            self.fields.filter("critical")
            .group_by("run_id")
            .agg((pl.col("status") == "correct").all().alias("ok"))
        )
        return {
            "file": self.labels.path,
            "sha256": self.labels.sha256,
            "cases": len(self.labels.cases),
            "matched_cases": len(matched),
            "matched_runs": self.runs.height,
            "unmatched_cases": sorted(set(self.labels.cases) - matched),
            "unlabelled_runs": self.unlabelled_runs,
            "fields": per_field,
            "critical_fields": [row for row in per_field if row["critical"]],
            "all_fields_correct": rate(int(passed.get_column("passed").sum()), passed.height),
            "all_critical_correct": rate(int(critical.get_column("ok").sum()), critical.height),
            "tools": self._tools_summary(),
            "wrong_fields": self.wrong_fields().to_dicts(),
        }

    def wrong_fields(self) -> pl.DataFrame:
        """Every field a run got wrong or left out: case_id, run_id, field, status, expected,
        actual, critical; by case, run and field."""
        return (
            self.fields.filter(pl.col("status") != "correct")
            .select("case_id", "run_id", "field", "status", "expected", "actual", "critical")
            .sort("case_id", "run_id", "field")
        )

    def _tools_summary(self) -> dict[str, Any]:
        tools = self.tools
        by_tool = (
            tools.group_by("tool")
            .agg(distinct_runs("expected_runs"), distinct_runs("omitted_runs", ~pl.col("called")))
            .sort("tool")
        )
        labelled = self.runs.filter("tools_labelled").height
        wrong_runs = self.wrong_calls.get_column("run_id").n_unique()
        args = self.arguments
        return {
            "runs": labelled,
            "recall": rate(int(tools.get_column("called").sum()), tools.height),
            "omission_by_tool": [
                {**row, **_rate_cols(row["omitted_runs"], row["expected_runs"])}
                for row in by_tool.to_dicts()
            ],
            "wrong_tool": {
                "calls": int(self.wrong_calls.get_column("calls").sum()),
                "tools": sorted(set(self.wrong_calls.get_column("tool").to_list())),
                **rate(wrong_runs, labelled),
            },
            "argument_precision": rate(int(args.get_column("correct").sum()), args.height),
        }


def _rate_cols(k: int, n: int) -> dict[str, Any]:
    r = rate(k, n)
    return {"rate": r["rate"], "rate_lo": r["lo"], "rate_hi": r["hi"]}


def _field_rows(fields: pl.DataFrame) -> list[dict[str, Any]]:
    grouped = (
        fields.group_by("field")
        .agg(
            pl.col("critical").any().alias("critical"),
            pl.col("match").unique().sort().alias("matches"),
            pl.len().cast(pl.Int64).alias("runs"),
            (pl.col("status") == "correct").sum().cast(pl.Int64).alias("correct"),
            (pl.col("status") == "wrong").sum().cast(pl.Int64).alias("wrong"),
            (pl.col("status") == "missing").sum().cast(pl.Int64).alias("missing"),
        )
        .sort("field")
    )
    return [{**row, **_rate_cols(row["correct"], row["runs"])} for row in grouped.to_dicts()]


def scored(labels: LabelSet | LabelScores, tables: Any) -> LabelScores:
    """`labels` scored against the runs of `tables` (an `analyzer.runs.RunTables`: only the
    columns scoring reads, a partitioned result's from its spill), or as they are when they
    were scored already: a report scores its labels once, for every output."""
    if isinstance(labels, LabelScores):
        return labels
    runs = tables.select("runs", ["run_id", "case_id", "answer", "answer_ns"])
    steps = tables.select("steps", ["run_id", "index", "kind", "name", "start_ns", "arguments"])
    return score_labels(labels, runs, steps)


def score_labels(labels: LabelSet, runs: pl.DataFrame, steps: pl.DataFrame) -> LabelScores:
    """Score every run whose case id has a label (runs of one case are all scored)."""
    ids = pl.Series("case_id", sorted(labels.cases), dtype=pl.String)
    matched = runs.filter(pl.col("case_id").is_in(ids.implode())).sort("run_id")
    unlabelled = runs.height - matched.height
    calls = (
        steps.filter(pl.col("kind") == "tool_call")
        .join(matched.select("run_id", "answer_ns"), on="run_id", how="inner")
        .sort("run_id", "index")
    )
    calls_by_run: dict[str, list[dict[str, Any]]] = {}
    for call in calls.select("run_id", "name", "start_ns", "answer_ns", "arguments").iter_rows(
        named=True
    ):
        calls_by_run.setdefault(call["run_id"], []).append(call)
    field_rows, tool_rows, wrong_rows, arg_rows, run_rows = [], [], [], [], []
    for run in matched.select("run_id", "case_id", "answer").iter_rows(named=True):
        case = labels.cases[run["case_id"]]
        run_id, answer = run["run_id"], run["answer"]
        doc = _parse_json(answer)
        for label in case.fields:
            value = _answer_value(answer, doc, label.path or label.name)
            if value is _MISSING or (value is None and label.expected is not None):
                status = "missing"
            else:
                status = "correct" if field_matches(label, value) else "wrong"
            actual = None if value is _MISSING or value is None else _value_text(value)
            expected = None if label.expected is None else _value_text(label.expected)
            field_rows.append(
                (
                    run_id,
                    run["case_id"],
                    label.name,
                    label.match,
                    label.critical,
                    status,
                    expected,
                    actual,
                )
            )
        run_calls = calls_by_run.get(run_id, [])
        run_rows.append((run_id, run["case_id"], case.tools is not None))
        if case.tools is not None:
            before = {
                c["name"]
                for c in run_calls
                if c["answer_ns"] is None or (c["start_ns"] or 0) < c["answer_ns"]
            }
            tool_rows += [(run_id, tool, tool in before) for tool in sorted(set(case.tools))]
            wrong = Counter(c["name"] for c in run_calls if c["name"] not in case.tools)
            wrong_rows += [(run_id, tool, n) for tool, n in sorted(wrong.items(), key=str)]
        for tool, expected_args in sorted((case.arguments or {}).items()):
            for c in run_calls:
                if c["name"] != tool:
                    continue
                given = _parse_json(c["arguments"])
                for name, want in sorted(expected_args.items()):
                    ok = isinstance(given, dict) and name in given and _same(want, given[name])
                    arg_rows.append((run_id, tool, name, ok))
    return LabelScores(
        labels=labels,
        fields=pl.DataFrame(field_rows, schema=_FIELD_SCHEMA, orient="row"),
        tools=pl.DataFrame(tool_rows, schema=_TOOL_SCHEMA, orient="row"),
        wrong_calls=pl.DataFrame(wrong_rows, schema=_WRONG_SCHEMA, orient="row"),
        arguments=pl.DataFrame(arg_rows, schema=_ARG_SCHEMA, orient="row"),
        runs=pl.DataFrame(
            run_rows,
            schema={"run_id": pl.String, "case_id": pl.String, "tools_labelled": pl.Boolean},
            orient="row",
        ),
        unlabelled_runs=unlabelled,
    )


def _same(expected: Any, actual: Any) -> bool:
    from analyzer.checks.trajectory import same_value

    return same_value(expected, actual)
