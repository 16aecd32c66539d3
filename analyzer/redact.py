"""Redaction: trace content replaced by salted hashes before anything is written or printed.

`redact_analysis` is applied to an `Analysis` once the checks have run, so every renderer
(summary.json, findings, runs/steps Parquet, the terminal, report.html) shows only tokens and
needs no change. What is kept in clear is an allow-list; everything else is hashed:

- kept: run, trace, span and tool call ids (made by the tracer and the model provider), names
  of agents, models, tools and arguments, counts, tokens, costs, times, statuses, rule ids and
  the rule pack's own values, the numbers and words of a finding's own wording (``line 1 col
  26``, ``is not of type 'integer'``, a missing argument's name), and the values of the
  attributes in `semconv.REDACT_KEPT_KEYS`: ``gen_ai.operation.name``, the kinds of span of
  each convention, model, provider, agent, tool and prompt names and versions, finish
  reasons, token counts and costs, tool call ids, ``service.name``/``.version``/
  ``.namespace``, ``telemetry.sdk.*`` and ``deployment.environment(.name)``;
- hashed: every other attribute value of runs, spans, resources and events (so identifiers
  such as ``enduser.id``, ``session.id``, ``gen_ai.conversation.id`` or the case key, names
  such as ``user.name``, and ``error.type``), the run's case and conversation ids and the
  steps' error types (ids that joins need: the same value gives the same token), tool call
  arguments (the values inside JSON arguments; the keys, i.e. the argument names, are kept and
  the text stays JSON), tool results, model output text, answers, message content, sources,
  span status messages, the recorded tool definitions' descriptions, titles, enums, examples
  and defaults (names, types and structure kept), the excerpts of quarantined records, and in
  finding details every quoted value found in the run's content, and for the kinds that show
  a value unquoted, each number the run's content holds (and how a figure was read).

A token is ``[redacted:` + 16 hex digits + ``]``: the HMAC-SHA256 of the value keyed by the
salt. The same value gives the same token everywhere within one salt (so findings stay joinable
across files and across reports made with the same salt); a different salt gives unrelated
tokens. Short or guessable values (an amount, an account number) can be found again by anyone
who has the salt and tries candidates, so the salt is never written to an output: a generated
one is printed on the terminal only, and ``manifest.json`` records where it came from and a
fingerprint (`redaction_record`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Callable
from typing import Any

import orjson
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from analyzer.conventions.semconv import REDACT_KEPT_KEYS
from analyzer.runs import RunSet

__all__ = [
    "TOKEN_RE",
    "Redactor",
    "new_salt",
    "redact_analysis",
    "redact_label_scores",
    "redaction_record",
]

#: What a token looks like (for tests and for readers of redacted outputs).
TOKEN_RE = re.compile(r"\[redacted:[0-9a-f]{16}\]")

# Keys inside a recorded tool definition whose values are names or the schema's own words
# ("string", "required" argument names): kept; every other text in it (descriptions, titles,
# enums, examples, defaults) is hashed.
_SCHEMA_WORDS = frozenset({"name", "type", "required", "format"})
# Keys whose values are example or allowed values: every leaf below is hashed.
_SCHEMA_VALUES = frozenset({"default", "examples", "example", "enum", "const"})
# A value quoted in a finding's detail: 'text' or "text" (Python's repr uses double quotes
# when the text holds a single quote), ended by the text's end or a separator: a quote inside
# the value (O'Brien) does not end it.
_QUOTED = re.compile(
    r"""'((?:[^\\\n]|\\.)*?)'(?=[\s,.;:)\]]|$)|"((?:[^\\\n]|\\.)*?)"(?=[\s,.;:)\]]|$)"""
)
_NUMBER = re.compile(r"(?<![\w.\-\[:])-?\d[\d.,]*(?![\w\]])")
# Numbers of the checkers' own wording (where a JSON error is, how many more errors, a
# schema's or the pack's limit): never trace content, kept even where the run holds them.
_WORDING = (
    r"\bline \d+,? col(?:umn)? \d+|\bchar \d+|\(\+\d+ more\)"
    r"|\b(?:minimum|maximum|multiple) of -?\d[\d.]*|\b[Ee]xpected -?\d[\d.,]*(?![\w\]])"
    r"|\b(?:longer|shorter|more|less|fewer) than \d+"
)
_NUMBER_OR_WORDING = re.compile(rf"(?P<wording>{_WORDING})|{_NUMBER.pattern}")
# Quoted words of a JSON Schema message that are no trace value: a type, a pattern (before
# the quote), an argument's name (after it).
_QUOTED_BEFORE = re.compile(r"(?:\bof type|\bdoes not match) $")
_QUOTED_AFTER = re.compile(r" is a required property|(?:, '[^'\n]*')* (?:was|were) unexpected\)")
# How a figure of the answer was read: derived from the trace, hashed whatever the run holds.
_READ_AS = re.compile(r"\(read as ([^)]*)\)")
_UNESCAPE = {"\\n": "\n", "\\r": "\r", "\\t": "\t"}
# Finding kinds whose details show a value of the trace unquoted (a number).
_NUMBERS_SHOWN = frozenset(
    {
        "hallucinated_argument",
        "argument_mismatch",
        "ungrounded_figure",
        "output_pattern",
        "output_schema",
        "malformed_arguments",
    }
)


def new_salt() -> str:
    """A random salt (32 hex digits)."""
    return secrets.token_hex(16)


def redaction_record(salt: str, *, given: bool) -> dict[str, str]:
    """The ``redaction`` entry of manifest.json: where the salt came from, the method, and a
    fingerprint telling whether two reports used the same salt (it does not reveal the salt)."""
    fingerprint = hashlib.sha256(b"agenttrace-salt-fingerprint:" + salt.encode()).hexdigest()
    return {
        "salt_source": "given" if given else "generated",
        "salt_fingerprint": fingerprint[:16],
        "method": "HMAC-SHA256(salt, value), first 16 hex digits",
    }


class Redactor:
    """Turns values into tokens for one salt; `token` is the one function behind every output."""

    def __init__(self, salt: str) -> None:
        self._key = salt.encode("utf-8")
        self._cache: dict[str, str] = {}
        self.quoted: dict[str, str] = {}  # a value as a detail quotes it -> its token

    def token(self, value: str) -> str:
        out = self._cache.get(value)
        if out is None:
            data = value.encode("utf-8", "surrogatepass")
            digest = hmac.new(self._key, data, hashlib.sha256).hexdigest()[:16]
            out = self._cache[value] = f"[redacted:{digest}]"
        return out

    def _leaf(self, value: Any) -> Any:
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, str | int | float):
            return self._quotable(value if isinstance(value, str) else json.dumps(value))
        return self.token(str(value))

    def _quotable(self, text: str) -> str:
        """The token of `text`, also found where a detail quotes `text`."""
        out = self.token(text)
        self.quoted.setdefault(_as_quoted(text), out)
        return out

    def _walk(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: self._walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._walk(v) for v in value]
        return self._leaf(value)

    def text(self, value: str | None) -> str | None:
        """A whole text as one token (null stays null, empty stays empty)."""
        return self._quotable(value) if value else value

    def json_text(self, value: str | None) -> str | None:
        """JSON text with each value replaced by its token, keys kept; other text as `text`."""
        parsed = _loads(value)
        if not isinstance(parsed, dict | list):
            return self.text(value)
        out = json.dumps(self._walk(parsed), ensure_ascii=False)
        self._quotable(value)  # the whole text is a token too, where a detail shows it whole
        return out

    def detail(self, detail: str | None, kind: str | None, content: str) -> str | None:
        """A finding's detail with each quoted value found in the run's `content` tokenized
        (numbers too, for the kinds that show values unquoted)."""
        if not detail:
            return detail

        def quoted(m: re.Match[str]) -> str:
            if _QUOTED_BEFORE.search(detail, 0, m.start()) or _QUOTED_AFTER.match(detail, m.end()):
                return m.group(0)  # a schema's word, a pattern, an argument's name
            inner = m.group(1) if m.group(1) is not None else m.group(2)
            q = m.group(0)[0]
            known = self.quoted.get(inner)
            if known is not None:
                return f"{q}{known}{q}"
            text = re.sub(r"\\[nrt]", lambda e: _UNESCAPE[e.group()], inner)
            probe = text[:-1] if text.endswith("…") else text
            # one punctuation mark (a JSON error's ',') is no value worth hiding
            if probe and (len(probe) > 1 or probe.isalnum()) and probe in content:
                return f"{q}{self.token(text)}{q}"
            return m.group(0)

        def number(m: re.Match[str]) -> str:
            if m.group("wording") is not None:
                return m.group()
            found = re.search(rf"(?<![\d.]){re.escape(m.group())}(?![\d])", content)
            return self.token(m.group()) if found else m.group()

        out = _QUOTED.sub(quoted, detail)
        if kind in _NUMBERS_SHOWN:
            out = _READ_AS.sub(lambda m: f"(read as {self.token(m.group(1))})", out)
            out = _NUMBER_OR_WORDING.sub(number, out)
        return out


#: What `_loads` gives for no text, or text that is not JSON.
_NOT_JSON = object()


def _loads(text: str | None) -> Any:
    """`text` parsed as JSON, else `_NOT_JSON`."""
    try:
        return orjson.loads(text) if text else _NOT_JSON
    except orjson.JSONDecodeError:
        return _NOT_JSON


def _as_quoted(text: str) -> str:
    """`text` as `analyzer.checks.base.quote` shows it, without the quotes."""
    s = text.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return s[:59] + "…" if len(s) > 60 else s


# --- frames -----------------------------------------------------------------------------------


def _map_str(frame: pl.DataFrame, column: str, fn: Callable[[Any], Any]) -> pl.DataFrame:
    """`fn` applied to each distinct value of a text column (in order: deterministic)."""
    if column not in frame.columns:
        return frame
    series = frame.get_column(column)
    mapping = {v: fn(v) for v in series.drop_nulls().unique(maintain_order=True).to_list()}
    return frame.with_columns(series.replace_strict(mapping, default=None, return_dtype=pl.String))


def _map_lists(
    frame: pl.DataFrame, column: str, fn: Callable[[Any], Any], field: str | None = None
) -> pl.DataFrame:
    """`fn` applied to each distinct text of a list column: of the texts themselves, or of
    one text `field` of its structs (columnar but for `fn` itself)."""
    if column not in frame.columns:
        return frame
    series = frame.get_column(column)
    lists = series.to_arrow()
    values = lists.flatten()
    if not len(values):
        return frame
    if field is None:
        mapped = _arrow_strings(values, fn)
    else:
        names = [f.name for f in values.type]
        fields = [pc.struct_field(values, name) for name in names]
        fields[names.index(field)] = _arrow_strings(fields[names.index(field)], fn)
        mapped = pa.StructArray.from_arrays(fields, fields=list(values.type))
    offsets = pc.subtract(lists.offsets, lists.offsets[0])
    rebuilt = type(lists).from_arrays(offsets, mapped, type=lists.type, mask=lists.is_null())
    return frame.with_columns(pl.Series(column, rebuilt).cast(series.dtype))


def _redact_steps(steps: pl.DataFrame, r: Redactor) -> pl.DataFrame:
    steps = _map_str(steps, "error_type", r.text)
    steps = _map_str(steps, "arguments", r.json_text)
    steps = _map_lists(steps, "requested_calls", r.json_text, "arguments")
    steps = _map_str(steps, "result", r.json_text)
    return _map_str(steps, "output_text", r.json_text)


def _attributes_json(text: str | None, r: Redactor) -> str | None:
    """A run's attributes (a JSON object) with the values of content keys tokenized."""
    attrs = _loads(text)
    if not isinstance(attrs, dict):  # JSON or not: as any other text
        return r.json_text(text)
    out = {k: v if k in REDACT_KEPT_KEYS else r._walk(v) for k, v in attrs.items()}
    return json.dumps(out, ensure_ascii=False, sort_keys=True)


def _tool_definitions(text: str | None, r: Redactor) -> str | None:
    """A recorded tool definition (JSON) with its descriptions, titles, enums, examples and
    defaults hashed; names (of tools and arguments), types and the structure kept."""
    parsed = _loads(text)
    if parsed is _NOT_JSON:
        return r.text(text)

    def walk(value: Any, key: str | None) -> Any:
        if key in _SCHEMA_VALUES:
            return r._walk(value)
        if isinstance(value, dict):
            if key == "properties":  # argument names -> their schemas
                return {k: walk(v, None) for k, v in value.items()}
            return {k: walk(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, key) for v in value]
        if isinstance(value, str) and key not in _SCHEMA_WORDS:
            return r._leaf(value)
        return value  # names, types, numbers (limits), booleans

    return json.dumps(walk(parsed, None), ensure_ascii=False)


def _arrow_strings(array: pa.Array, fn: Callable[[Any], Any]) -> pa.Array:
    """`fn` applied to each distinct value of a string array, nulls kept."""
    encoded = array.dictionary_encode()
    mapped = pa.array([fn(v) for v in encoded.dictionary.to_pylist()], pa.string())
    return pc.take(mapped, encoded.indices).cast(array.type)


# --- the analysis -----------------------------------------------------------------------------


def _run_content(runset) -> dict[str, str]:
    """run_id -> every content text of the run (before redaction), one string to search."""
    parts: dict[str, list[str]] = {}
    steps = runset.steps.select(
        "run_id", "arguments", "result", "output_text", "requested_calls"
    ).iter_rows()
    for run_id, arguments, result, output_text, calls in steps:
        bucket = parts.setdefault(run_id, [])
        bucket.extend(t for t in (arguments, result, output_text) if t)
        bucket.extend(c["arguments"] for c in calls or () if c["arguments"])
    for texts in (runset.runs.select("run_id", "answer"), runset.sources.select("run_id", "text")):
        for run_id, text in texts.iter_rows():
            if text:
                parts.setdefault(run_id, []).append(text)
    return {k: "\n".join(v) for k, v in parts.items()}


def _redact_log(log, r: Redactor) -> None:
    """Quarantine excerpts (raw record bytes) become tokens; positions and reasons stay."""
    for file_log in log.files:
        file_log.quarantine = [
            dataclasses.replace(q, excerpt=r.text(q.excerpt) or "") for q in file_log.quarantine
        ]


def redact_analysis(analysis, salt: str):
    """A copy of `analysis` whose content is replaced by salted tokens (see the module doc).

    Call it after the checks ran (findings are computed on the real content) and before any
    output is written or printed. The ingest log is redacted in place (its excerpts).
    """
    from analyzer.checks import Evaluation

    r = Redactor(salt)
    runset = analysis.runs
    content = _run_content(runset)
    steps = _redact_steps(runset.steps, r)
    runs = _map_str(runset.runs, "answer", r.json_text)
    runs = _map_str(runs, "attributes", lambda t: _attributes_json(t, r))
    runs = _map_lists(runs, "tool_definitions", lambda t: _tool_definitions(t, r))
    # identifiers of the trace's own (joins keep working: one value, one token)
    for column in ("case_id", "conversation_id"):
        runs = _map_str(runs, column, r.text)
    sources = _map_str(runset.sources, "text", r.json_text)
    # prompt messages: their content (roles, tool call ids and tool names are kept)
    messages = _map_str(runset.messages, "content", r.json_text)
    # a plain RunSet: a partitioned analysis's steps are read from its spill here, once
    runset = RunSet(
        runs=runs,
        steps=steps,
        sources=sources,
        span_runs=runset.span_runs,
        messages=messages,
    )
    evaluation = analysis.evaluation
    if evaluation is not None and evaluation.findings.height:
        findings = evaluation.findings
        details = [
            r.detail(detail, kind, content.get(run_id, ""))
            for run_id, kind, detail in findings.select("run_id", "kind", "detail").iter_rows()
        ]
        findings = findings.with_columns(pl.Series("detail", details, dtype=pl.String))
        findings = _map_str(findings, "case_id", r.text)
        errors = [
            dataclasses.replace(e, error=r.detail(e.error, None, content.get(e.run_id, "")))
            for e in evaluation.errors
        ]
        evaluation = Evaluation(findings=findings, errors=errors, coverage=evaluation.coverage)
    _redact_log(analysis.ingested.log, r)
    return dataclasses.replace(
        analysis,
        runs=runset,
        evaluation=evaluation,
        facts=None,  # they hold content (answers, attributes): summaries read the redacted runs
    )


def redact_label_scores(scores, salt: str):
    """`analyzer.metrics.labels.LabelScores` computed on the real content (labels are scored before
    `redact_analysis`: answers become tokens), with the case ids and the expected and answered
    values tokenized as the analysis's are (same salt, same tokens). Field, tool and argument
    names stay, as they do in the analysis."""
    r = Redactor(salt)
    fields = scores.fields
    for column in ("case_id", "expected", "actual"):
        fields = _map_str(fields, column, r.text)
    labels = dataclasses.replace(
        scores.labels, cases={r.text(case): label for case, label in scores.labels.cases.items()}
    )
    runs = _map_str(scores.runs, "case_id", r.text)
    return dataclasses.replace(scores, labels=labels, fields=fields, runs=runs)
