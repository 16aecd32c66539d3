"""output_schema: the answer is JSON that a JSON Schema (Draft 2020-12) accepts."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlparse
from urllib.request import url2pathname

import orjson

try:  # a fast validity check; jsonschema alone works, slower (see AnswerSchema)
    import jsonschema_rs
except ImportError:  # pragma: no cover - exercised by monkeypatching in the tests
    jsonschema_rs = None
import polars as pl

from analyzer.checks.base import (
    INTERNAL,
    Check,
    CheckContext,
    LoadEnv,
    RunFinding,
    json_path,
    quote,
    schema_message,
)
from analyzer.yamlplace import read_document

if TYPE_CHECKING:
    from referencing import Resource

__all__ = ["AnswerSchema", "OutputSchema", "load_json_schema"]


@dataclass(frozen=True, kw_only=True)
class OutputSchema(Check):
    """The answer is JSON and valid against a JSON Schema.

    Flags
    -----
    ``output_schema``: the answer is not JSON, or the JSON fails the schema; the detail gives
    the first error (in the schema's order) with its location (``argument`` holds that
    location, e.g. ``$.decision``) and how many more there are. A fenced block
    (```json ... ```) is not JSON: a consumer parsing the answer would fail too.

    The schema is a JSON (or YAML) file, its path relative to the pack file, validated as JSON
    Schema Draft 2020-12; ``$ref`` to other local files resolves relative to the schema file,
    and nothing is ever fetched from the network. As the 2020-12 default says, ``format`` is
    an annotation and is not checked: use ``pattern`` for formats that matter. Runs with no
    answer are not judged; a run whose answer content was not recorded is counted as
    unverifiable.

    Why it matters
    --------------
    As soon as the answer crosses a service boundary (a verdict read by a workflow, a form
    filled by the agent), a schema is the contract: a missing field or a value outside the
    enum breaks the process silently.

    Options
    -------
    schema : path, required
        The JSON Schema file the answer must satisfy, relative to the pack file.

    Example
    -------
    - id: verdict-contract
      type: output_schema
      schema: kyc_verdict.schema.json
      severity: high
    """

    type = "output_schema"
    kinds = ("output_schema",)

    schema: str
    validator: Any = field(default=None, repr=False, compare=False, metadata=INTERNAL)

    @classmethod
    def from_options(cls, options: dict[str, Any], env: LoadEnv) -> Check | None:
        path = env.base_dir / options["schema"]
        try:
            validator = load_json_schema(path)
        except ValueError as err:
            env.report(("schema",), str(err))
            return None
        rule = super().from_options(options, env)
        assert isinstance(rule, OutputSchema)
        object.__setattr__(rule, "validator", validator)
        return rule

    def identity(self) -> str | None:
        sha = self.validator.sha256 if self.validator is not None else None
        return f"{super().identity()} schema-documents={sha}" if sha else None

    def check(self, ctx: CheckContext) -> pl.DataFrame:
        validator = self.validator
        if validator is None:  # built in code without the loader
            validator = load_json_schema(Path(self.schema))

        def judge(text: str) -> list[RunFinding]:
            verdict = validator.verdict(text)
            if verdict is None:
                return []
            return [RunFinding("output_schema", verdict[0], argument=verdict[1])]

        # Agents often give the same answer many times: each distinct text is judged once.
        answers = ctx.mark_answers().select("run_id", "answer_span_id", "text")
        return ctx.each_distinct(answers, "text", judge, evidence="answer_span_id")


class AnswerSchema:
    """A JSON Schema (Draft 2020-12) ready to judge answers.

    Answers are judged by jsonschema-rs when installed (a Rust validator, far faster), else by
    the `jsonschema` package. Formats are not asserted by either. The two word their errors
    differently.
    """

    def __init__(self, document: Any, path: Path, sha256: str | None = None):
        self.document = document
        self.path = path
        #: of the schema's documents (the file's and those it refers to), as loaded
        self.sha256 = sha256
        from jsonschema import Draft202012Validator  # where a pack is read, not in every process
        from referencing import Registry

        self.python = Draft202012Validator(document, registry=Registry(retrieve=_retrieve))  # type: ignore[call-arg]
        self.fast: Any = None
        if jsonschema_rs is not None:
            try:
                self.fast = jsonschema_rs.Draft202012Validator(
                    document, validate_formats=False, retriever=_retrieve_document
                )
            except Exception as err:  # the Rust side words its own refusals
                first = str(err).splitlines()[0]
                raise ValueError(f"schema file {path} cannot be compiled: {first}") from err

    def __reduce__(self) -> tuple[Any, ...]:
        # compiled validators do not pickle: a worker process (--partitions, Spark) compiles
        # its own from the document
        return (AnswerSchema, (self.document, self.path, self.sha256))

    def verdict(self, text: str) -> tuple[str, str | None] | None:
        """None for a valid answer, else (detail, location of the error)."""
        fast = self.fast
        try:
            doc = orjson.loads(text)
        except orjson.JSONDecodeError:
            try:  # the standard library's message says what is wrong in plain words
                doc = json.loads(text)
            except json.JSONDecodeError as err:
                return f"answer is not JSON ({err.msg} at char {err.pos}): {quote(text, 40)}", None
            # What orjson refuses and the standard library reads (NaN, a number past the float
            # range) holds infinities that jsonschema-rs would see as null.
            fast = None
        if fast is not None:
            if fast.is_valid(doc):
                return None
            fast_errors = list(fast.iter_errors(doc))
            first = fast_errors[0]  # in schema order
            where, message, count = json_path(first.instance_path), first.message, len(fast_errors)
        else:
            errors = list(self.python.iter_errors(doc))
            if not errors:
                return None
            from jsonschema.exceptions import best_match

            top = best_match(errors)
            where, message, count = json_path(top.absolute_path), top.message, len(errors)
        return f"answer fails the schema at {where}: {schema_message(message, count)}", where


def _retrieve_document(uri: str) -> Any:
    # Only local files: agenttrace never reaches the network.
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        from referencing.exceptions import NoSuchResource

        raise NoSuchResource(ref=uri)
    return read_document(Path(url2pathname(parsed.path)), "schema file")


def _retrieve(uri: str) -> Resource:
    from referencing import Resource
    from referencing.jsonschema import DRAFT202012

    return Resource.from_contents(_retrieve_document(uri), default_specification=DRAFT202012)


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield ref
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def load_json_schema(path: Path) -> AnswerSchema:
    """The schema file at ``path`` (its local ``$ref`` files read) ready to judge answers.

    Raises ValueError naming the file when it, or a file it refers to, cannot be read, is not
    JSON/YAML, is not a valid schema, or refers to a remote schema.
    """
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    path = path.resolve()
    seen: set[str] = set()
    todo = [(path.as_uri(), path)]
    root: Any = None
    digest = hashlib.sha256()
    while todo:
        uri, file = todo.pop()
        if uri in seen:
            continue
        seen.add(uri)
        doc = read_document(file, "schema file")
        digest.update(json.dumps(doc, sort_keys=True, default=str).encode())
        if root is None:
            root = doc
        if not isinstance(doc, dict | bool):
            raise ValueError(f"schema file {file} does not hold a JSON Schema (an object)")
        try:
            Draft202012Validator.check_schema(doc)
        except SchemaError as err:
            where = json_path(err.absolute_path)
            raise ValueError(
                f"schema file {file} is not a valid JSON Schema at {where}: {err.message}"
            ) from err
        base = doc.get("$id", uri) if isinstance(doc, dict) else uri
        for ref in _refs(doc):
            target = urljoin(base, ref).split("#", 1)[0]
            if not target or target == base.split("#", 1)[0]:
                continue
            scheme = urlparse(target).scheme
            if scheme == "file":
                todo.append((target, Path(url2pathname(urlparse(target).path))))
            elif scheme in ("http", "https"):
                raise ValueError(
                    f"schema file {file} refers to {ref}: agenttrace never fetches schemas "
                    "from the network; copy it next to the schema and refer to the local file"
                )
    if isinstance(root, dict) and "$id" not in root:
        root = {**root, "$id": path.as_uri()}  # so relative $ref resolve next to the file
    return AnswerSchema(root, path, digest.hexdigest())
