"""Regenerate the bundled sample traces by driving the real OpenTelemetry SDK, deterministically.

Usage: ``python sample_traces/generate.py [OUTDIR]`` (default: this folder). Three agents, three
conventions, three file formats; see README.md for what each run contains and which problems
were planted on purpose. Same code, same SDK and zstd versions: same bytes (ids come from a
seeded IdGenerator, times from a fake clock, gzip and zstd headers carry no timestamp).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zstandard
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

try:
    from analyzer.otel_export import OtlpJsonLinesExporter
except ImportError:  # run as a script from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from analyzer.otel_export import OtlpJsonLinesExporter

__all__ = [
    "KYC_MAX_BYTES",
    "SeededIdGenerator",
    "generate",
    "main",
    "trace_id_for",
]

HERE = Path(__file__).resolve().parent

#: Rotation size of the KYC JSONL files: small enough that the 16 runs span several files.
KYC_MAX_BYTES = 96 * 1024
#: BatchSpanProcessor batch sizes. With a schedule delay of an hour the processor only exports
#: full batches (and the rest on flush), so batch boundaries do not depend on thread timing.
KYC_BATCH = 16
REALESTATE_BATCH = 10
#: Which KYC export call (1-based) is sent twice, like an exporter retry after a lost ack.
KYC_DUPLICATED_BATCH = 5
#: How many leading support runs are also copied, gzip-compressed, into the `_part` file.
SUPPORT_PART_RUNS = 3
ZSTD_LEVEL = 3
MS = 1_000_000  # nanoseconds per millisecond


def _digest(*parts: object) -> bytes:
    return hashlib.sha256("/".join(str(p) for p in parts).encode()).digest()


class SeededIdGenerator(IdGenerator):
    """Trace and span ids drawn from SHA-256 of (seed, kind, counter); reseed per agent run.

    Reseeding with the run's case id makes each run's ids depend on that run alone, so adding
    a run never changes the ids of the others.
    """

    def __init__(self, seed: str = "agenttrace") -> None:
        self.reseed(seed)

    def reseed(self, seed: str) -> None:
        self._seed = seed
        self._count = 0

    def _draw(self, kind: str, nbytes: int) -> int:
        self._count += 1
        value = int.from_bytes(_digest(self._seed, kind, self._count)[:nbytes], "big")
        return value or 1  # all-zero ids are invalid

    def generate_span_id(self) -> int:
        return self._draw("span", 8)

    def generate_trace_id(self) -> int:
        return self._draw("trace", 16)


def trace_id_for(seed: str) -> str:
    """The trace id (32 hex) a run reseeded with `seed` gets: its root span draws first."""
    return SeededIdGenerator(seed)._draw("trace", 16).to_bytes(16, "big").hex()


def _provider(resource: dict[str, str], ids: SeededIdGenerator) -> TracerProvider:
    # Everything explicit, so no OTEL_* environment variable can change the output.
    limits = SpanLimits(
        max_span_attributes=256,
        max_events=64,
        max_links=16,
        max_event_attributes=32,
        max_link_attributes=32,
        max_span_attribute_length=SpanLimits.UNSET,
        max_attribute_length=SpanLimits.UNSET,
    )
    return TracerProvider(
        sampler=ALWAYS_ON,
        resource=Resource(resource),
        shutdown_on_exit=False,
        id_generator=ids,
        span_limits=limits,
    )


def _batch_processor(exporter: SpanExporter, size: int) -> BatchSpanProcessor:
    return BatchSpanProcessor(
        exporter,
        max_queue_size=4096,
        schedule_delay_millis=3_600_000,
        max_export_batch_size=size,
        export_timeout_millis=30_000,
    )


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


# ---------------------------------------------------------------------------------------------
# Convention-neutral run scripts


@dataclass
class Call:
    """A tool call as the model wrote it; `arguments` may be text that is not JSON at all."""

    id: str | None
    name: str
    arguments: str

    @property
    def parsed(self) -> Any:
        try:
            return json.loads(self.arguments)
        except ValueError:
            return None


@dataclass
class ModelStep:
    calls: list[Call] = field(default_factory=list)
    answer: str | None = None
    error: tuple[str, str] | None = None  # (error.type, message)
    model: str | None = None  # overrides the run's model
    http: list[tuple[int, int]] = field(default_factory=list)  # (status, resend count)


@dataclass
class ToolStep:
    call: Call
    result: str | None
    error: tuple[str, str] | None = None
    requested: bool = True  # False: run by the agent's own code, no model asked for it
    orphan: bool = False  # wrapped in a span that is never ended, hence never exported


@dataclass
class Run:
    case_id: str
    system: str
    user: str
    model: str
    temperature: float
    attributes: dict[str, Any]
    steps: list[ModelStep | ToolStep] = field(default_factory=list)
    error: tuple[str, str] | None = None  # the agent itself failed
    previous_review: bool = False  # KYC renewals link to the earlier review's trace

    @property
    def answer(self) -> str | None:
        last = [s for s in self.steps if isinstance(s, ModelStep) and s.error is None]
        return last[-1].answer if last and not last[-1].calls else None


class Script:
    """Builds a Run step by step; tool steps consume the model's pending calls by name."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self._pending: list[Call] = []
        self._count = 0

    def _call_id(self) -> str:
        self._count += 1
        return "call_" + _digest(self.run.case_id, "call", self._count).hex()[:24]

    def ask(self, *calls: tuple[str, Any], **model: Any) -> ModelStep:
        made = [
            Call(self._call_id(), name, args if isinstance(args, str) else _dumps(args))
            for name, args in calls
        ]
        self._pending.extend(made)
        step = ModelStep(calls=made, **model)
        self.run.steps.append(step)
        return step

    def answer(self, text: str, **model: Any) -> None:
        self.run.steps.append(ModelStep(answer=text, **model))

    def fail(self, error_type: str, message: str, **model: Any) -> None:
        self.run.steps.append(ModelStep(error=(error_type, message), **model))

    def tool(
        self,
        name: str,
        result: Any = None,
        *,
        error: tuple[str, str] | None = None,
        orphan: bool = False,
    ) -> None:
        call = next(c for c in self._pending if c.name == name)
        self._pending.remove(call)
        text = None if result is None else (result if isinstance(result, str) else _dumps(result))
        self.run.steps.append(ToolStep(call, text, error=error, orphan=orphan))

    def hook(self, name: str, args: Any, result: Any) -> None:
        self.run.steps.append(
            ToolStep(Call(None, name, _dumps(args)), _dumps(result), requested=False)
        )


@dataclass
class Timed:
    step: ModelStep | ToolStep
    start: int
    end: int
    inputs: list[dict[str, Any]]  # messages the model saw (model steps only)
    input_tokens: int = 0
    output_tokens: int = 0


def _tool_ms(name: str, case_id: str, index: int) -> int:
    base = {
        "fetch_documents": 420,
        "screen_sanctions": 610,
        "lookup_beneficial_owners": 380,
        "lookup_account": 150,
        "chercher_commande": 95,
        "creer_remboursement": 240,
        "escalader_humain": 130,
        "search_listings": 310,
        "get_listing": 85,
        "get_market_stats": 260,
    }[name]
    return base + _digest(case_id, name, index)[0] % 90


def walk(run: Run, start: int, tool_tokens: int) -> Iterator[Timed]:
    """Give each step its time on the fake clock and the messages the model had seen."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": run.system},
        {"role": "user", "content": run.user},
    ]
    clock = start + 3 * MS
    for index, step in enumerate(run.steps):
        clock += 4 * MS
        if isinstance(step, ModelStep):
            inputs = list(messages)
            in_tokens = tool_tokens + sum(_tokens(_dumps(m)) for m in _plain(inputs))
            if step.error is not None:
                yield Timed(step, clock, clock + 120 * MS, inputs, in_tokens, 0)
                clock += 120 * MS
                continue
            out = step.answer or _dumps([[c.name, c.arguments] for c in step.calls])
            out_tokens = _tokens(out) + 4 * len(step.calls)
            duration = (380 + 14 * out_tokens + in_tokens // 16) * MS
            yield Timed(step, clock, clock + duration, inputs, in_tokens, out_tokens)
            clock += duration
            messages.append({"role": "assistant", "content": step.answer, "calls": step.calls})
        else:
            duration = _tool_ms(step.call.name, run.case_id, index) * MS
            yield Timed(step, clock, clock + duration, [])
            clock += duration
            content = step.result if step.error is None else _dumps({"error": step.error[1]})
            messages.append({"role": "tool", "call": step.call, "content": content})


def _plain(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as JSON-ready dicts, for token estimates only."""
    out = []
    for m in messages:
        d = {k: v for k, v in m.items() if k not in ("calls", "call")}
        if m.get("calls"):
            d["calls"] = [[c.name, c.arguments] for c in m["calls"]]
        out.append(d)
    return out


def run_end(timed: list[Timed]) -> int:
    return max(t.end for t in timed) + 2 * MS


# ---------------------------------------------------------------------------------------------
# KYC: OpenTelemetry GenAI semantic conventions (current), OTLP JSON lines


KYC_SYSTEM = (
    "You are kyc-reviewer, the KYC file review agent of the retail bank. For every dossier: "
    "fetch its documents, screen the legal representative against the sanctions lists, look up "
    "the beneficial owners of the company, check its operating account, and only then answer "
    'with one JSON object {"dossier_id", "decision": "approve"|"reject"|"escalate", '
    '"risk_level": "low"|"medium"|"high", "reasons": [...]}. Never invent an identifier.'
)

KYC_TOOLS = [
    {
        "type": "function",
        "name": "fetch_documents",
        "description": "Documents and declared data of a KYC dossier.",
        "parameters": {
            "type": "object",
            "properties": {"dossier_id": {"type": "string"}},
            "required": ["dossier_id"],
        },
    },
    {
        "type": "function",
        "name": "screen_sanctions",
        "description": "Screen a natural person against the EU, UN and OFAC sanctions lists.",
        "parameters": {
            "type": "object",
            "properties": {"full_name": {"type": "string"}, "birth_date": {"type": "string"}},
            "required": ["full_name"],
        },
    },
    {
        "type": "function",
        "name": "lookup_beneficial_owners",
        "description": "Beneficial owners of a company from the national register.",
        "parameters": {
            "type": "object",
            "properties": {"company_id": {"type": "string"}},
            "required": ["company_id"],
        },
    },
    {
        "type": "function",
        "name": "lookup_account",
        "description": "Status and activity of a bank account.",
        "parameters": {
            "type": "object",
            "properties": {"account_id": {"type": "string"}},
            "required": ["account_id"],
        },
    },
]


@dataclass(frozen=True)
class Dossier:
    num: str
    case_type: str
    temperature: float
    company: str
    siren: str
    person: str
    born: str
    account: str
    owners: tuple[tuple[str, float], ...]

    @property
    def id(self) -> str:
        return f"KYC-2026-{self.num}"


DOSSIERS = [
    Dossier("0001", "kyc", 0.0, "Atelier Verdier SARL", "812345678", "Claire Verdier",
            "1979-05-14", "ACC-30417", (("Claire Verdier", 62.0), ("Paul Verdier", 38.0))),
    Dossier("0002", "kyc_renewal", 0.7, "Boulangerie Roussel SAS", "834112907", "Hugo Roussel",
            "1985-11-02", "ACC-41925", (("Hugo Roussel", 100.0),)),
    Dossier("0003", "kyc", 0.0, "Transports Keller SARL", "790556213", "Anton Keller",
            "1968-02-27", "ACC-27731", (("Anton Keller", 51.0), ("Keller Holding AG", 49.0))),
    Dossier("0004", "kyc", 0.0, "Cabinet Morel Conseil", "851903344", "Sophie Morel",
            "1990-07-08", "ACC-38802", (("Sophie Morel", 100.0),)),
    Dossier("0005", "kyc_renewal", 0.0, "Librairie Benali SARL", "823670015", "Karim Benali",
            "1982-03-19", "ACC-19054", (("Karim Benali", 70.0), ("Nadia Benali", 30.0))),
    Dossier("0006", "kyc", 0.0, "Garage Lefort et Fils", "798220461", "Julien Lefort",
            "1975-09-30", "ACC-52286", (("Julien Lefort", 55.0), ("Bernard Lefort", 45.0))),
    Dossier("0007", "kyc", 0.0, "Studio Nakamura SAS", "880145672", "Emi Nakamura",
            "1993-12-05", "ACC-60139", (("Emi Nakamura", 80.0), ("Kenji Mori", 20.0))),
    Dossier("0008", "kyc", 0.7, "Domaine Castel SCEA", "803771590", "Louis Castel",
            "1971-06-21", "ACC-55210", (("Louis Castel", 50.0), ("Marie Castel", 50.0))),
    Dossier("0009", "kyc_renewal", 0.0, "Pharmacie Girard", "815009338", "Anne Girard",
            "1980-01-11", "ACC-24470", (("Anne Girard", 100.0),)),
    Dossier("0010", "kyc", 0.0, "Menuiserie Aubert", "842667120", "Marc Aubert",
            "1987-04-03", "ACC-30418", (("Marc Aubert", 100.0),)),
    Dossier("0011", "kyc", 0.0, "Duval Import Export SAS", "867330249", "Marc Duval",
            "1977-08-16", "ACC-71302", (("Marc Duval", 65.0), ("Sandrine Duval", 35.0))),
    Dossier("0012", "kyc", 0.0, "Fromagerie Perrin", "809441876", "Lucie Perrin",
            "1984-10-25", "ACC-36650", (("Lucie Perrin", 100.0),)),
    Dossier("0013", "kyc", 0.0, "Société Nouvelle Brasco", "871205533", "Victor Brasco",
            "1966-12-09", "ACC-48817", (("Victor Brasco", 90.0), ("Ilse Brasco", 10.0))),
    Dossier("0014", "kyc_renewal", 0.7, "Clinique Vétérinaire Roche", "826774019",
            "Élise Roche", "1983-02-17", "ACC-29163",
            (("Élise Roche", 60.0), ("Yann Roche", 40.0))),
    Dossier("0015", "kyc", 0.0, "Imprimerie Lambert", "857330128", "Noé Lambert",
            "1972-07-29", "ACC-33391", (("Noé Lambert", 100.0),)),
    Dossier("0016", "kyc", 0.7, "Opticiens Faure SAS", "838552704", "Inès Faure",
            "1991-09-12", "ACC-40276", (("Inès Faure", 75.0), ("Paul Faure", 25.0))),
]  # fmt: skip


def _verdict(d: Dossier, decision: str, risk: str, *reasons: str) -> str:
    return _dumps(
        {"dossier_id": d.id, "decision": decision, "risk_level": risk, "reasons": list(reasons)}
    )


def _documents(d: Dossier, id_valid_until: str = "2031-04-12") -> dict[str, Any]:
    return {
        "dossier_id": d.id,
        "client": {
            "type": "company",
            "name": d.company,
            "company_id": d.siren,
            "legal_representative": {"full_name": d.person, "birth_date": d.born},
        },
        "documents": [
            {"type": "kbis", "issued": "2026-08-30", "status": "valid"},
            {"type": "id_card", "holder": d.person, "valid_until": id_valid_until},
        ],
        "accounts": [d.account],
    }


def _no_hit() -> dict[str, Any]:
    return {"matches": [], "lists_checked": ["EU", "UN", "OFAC"]}


def _owners(d: Dossier) -> dict[str, Any]:
    return {
        "company_id": d.siren,
        "owners": [{"name": n, "share_pct": s} for n, s in d.owners],
    }


def _account(d: Dossier) -> dict[str, Any]:
    return {"account_id": d.account, "status": "active", "opened": "2019-03-02",
            "monthly_volume_eur": 18400}  # fmt: skip


def kyc_runs() -> list[Run]:
    """The 16 KYC dossiers; every deviation from the standard sequence is deliberate."""
    runs = []
    for d in DOSSIERS:
        run = Run(
            case_id=d.id,
            system=KYC_SYSTEM,
            user=f"Review dossier {d.id} ({d.case_type.replace('_', ' ')}) and give your verdict.",
            model="gpt-4.1",
            temperature=d.temperature,
            attributes={"app.case_id": d.id, "app.case_type": d.case_type},
            previous_review=d.case_type == "kyc_renewal",
        )
        s = Script(run)
        fetch = ("fetch_documents", {"dossier_id": d.id})
        screen = ("screen_sanctions", {"full_name": d.person, "birth_date": d.born})
        owners = ("lookup_beneficial_owners", {"company_id": d.siren})
        account = ("lookup_account", {"account_id": d.account})
        ok = _verdict(d, "approve", "low", "documents valid", "no sanctions match",
                      "beneficial owners identified", "account active")  # fmt: skip

        if d.num == "0004":  # sanctions screening never called (owners looked up)
            s.ask(fetch)
            s.tool("fetch_documents", _documents(d))
            s.ask(owners)
            s.tool("lookup_beneficial_owners", _owners(d))
            s.ask(account)
            s.tool("lookup_account", _account(d))
            s.answer(ok)
        elif d.num == "0005":  # a cheaper model for the first call
            s.ask(fetch, model="gpt-4.1-mini")
            s.tool("fetch_documents", _documents(d))
            s.ask(screen, owners)
            s.tool("screen_sanctions", _no_hit())
            s.tool("lookup_beneficial_owners", _owners(d))
            s.ask(account)
            s.tool("lookup_account", _account(d))
            s.answer(ok)
        elif d.num == "0006":  # screening runs only after the answer (a post-answer hook)
            s.ask(fetch)
            s.tool("fetch_documents", _documents(d))
            s.ask(owners)
            s.tool("lookup_beneficial_owners", _owners(d))
            s.ask(account)
            s.tool("lookup_account", _account(d))
            s.answer(ok)
            s.hook("screen_sanctions", screen[1], _no_hit())
        elif d.num == "0007":  # premature: screened, but answered before the owners lookup
            s.ask(fetch)
            s.tool("fetch_documents", _documents(d))
            s.ask(screen)
            s.tool("screen_sanctions", _no_hit())
            s.ask(account)
            s.tool("lookup_account", _account(d))
            s.answer(ok)
        elif d.num == "0008":  # invented account id: the documents say ACC-55210
            s.ask(fetch)
            s.tool("fetch_documents", _documents(d))
            s.ask(screen, owners)
            s.tool("screen_sanctions", _no_hit())
            s.tool("lookup_beneficial_owners", _owners(d))
            s.ask(("lookup_account", {"account_id": "ACC-55120"}))
            s.tool("lookup_account", {"found": False})
            s.answer(_verdict(d, "escalate", "medium", "operating account could not be found"))
        elif d.num == "0009":  # renewal answered from the documents alone
            s.ask(fetch)
            s.tool("fetch_documents", _documents(d))
            s.ask(account)
            s.tool("lookup_account", _account(d))
            s.answer(_verdict(d, "approve", "low", "renewal: no change declared"))
        elif d.num == "0010":  # near miss: id in lower case, the documents have ACC-30418
            s.ask(fetch)
            s.tool("fetch_documents", _documents(d))
            s.ask(screen, owners)
            s.tool("screen_sanctions", _no_hit())
            s.tool("lookup_beneficial_owners", _owners(d))
            s.ask(("lookup_account", {"account_id": d.account.lower()}))
            s.tool("lookup_account", _account(d))
            s.answer(ok)
        elif d.num == "0011":  # malformed arguments, then a corrected call
            s.ask(fetch)
            s.tool("fetch_documents", _documents(d))
            s.ask(("screen_sanctions", '{"full_name": "Marc Duval", "birth_date": "1977-08-16"'),
                  owners)  # fmt: skip
            s.tool("screen_sanctions", error=("JSONDecodeError", "arguments are not valid JSON"))
            s.tool("lookup_beneficial_owners", _owners(d))
            s.ask(screen)
            s.tool("screen_sanctions", _no_hit())
            s.ask(account)
            s.tool("lookup_account", _account(d))
            s.answer(ok)
        elif d.num == "0012":  # the second model call fails (429) and is retried
            s.ask(fetch)
            s.tool("fetch_documents", _documents(d))
            s.fail("RateLimitError", "Error code: 429 - rate limit reached for gpt-4.1")
            s.ask(screen, owners)
            s.tool("screen_sanctions", _no_hit())
            s.tool("lookup_beneficial_owners", _owners(d))
            s.ask(account)
            s.tool("lookup_account", _account(d))
            s.answer(ok)
        elif d.num == "0013":  # no answer: the last model call asked for a tool that timed out
            s.ask(fetch)
            s.tool("fetch_documents", _documents(d))
            s.ask(screen, owners)
            s.tool("screen_sanctions", _no_hit())
            s.tool("lookup_beneficial_owners", _owners(d))
            s.ask(account)
            s.tool("lookup_account", error=("TimeoutError", "core banking did not answer"))
            run.error = ("ToolTimeout", "lookup_account timed out; run aborted")
        elif d.num == "0014":  # the HTTP request of the second model call is resent once
            http = [(200, 0)]
            s.ask(fetch, http=http)
            s.tool("fetch_documents", _documents(d))
            s.ask(screen, owners, http=[(503, 0), (200, 1)])
            s.tool("screen_sanctions", _no_hit())
            s.tool("lookup_beneficial_owners", _owners(d))
            s.ask(account, http=http)
            s.tool("lookup_account", _account(d))
            s.answer(ok, http=http)
        else:  # the standard sequence
            hit = d.num == "0003"
            s.ask(fetch)
            expired = d.num == "0015"
            s.tool("fetch_documents", _documents(d, "2026-06-30" if expired else "2031-04-12"))
            s.ask(screen, owners)
            if hit:
                s.tool("screen_sanctions", {"matches": [{"name": d.person, "list": "EU",
                                                         "score": 0.87}],
                                            "lists_checked": ["EU", "UN", "OFAC"]})  # fmt: skip
            else:
                s.tool("screen_sanctions", _no_hit())
            s.tool("lookup_beneficial_owners", _owners(d))
            s.ask(account)
            s.tool("lookup_account", _account(d))
            if hit:
                s.answer(_verdict(d, "escalate", "high", "possible sanctions match on EU list"))
            elif expired:
                s.answer(_verdict(d, "reject", "medium", "identity document expired"))
            else:
                s.answer(ok)
        runs.append(run)
    return runs


def _genai_parts(message: dict[str, Any]) -> dict[str, Any]:
    role = message["role"]
    if role == "tool":
        call = message["call"]
        part = {"type": "tool_call_response", "id": call.id, "response": message["content"]}
        return {"role": "tool", "parts": [part]}
    parts: list[dict[str, Any]] = []
    if message.get("content"):
        parts.append({"type": "text", "content": message["content"]})
    for call in message.get("calls") or ():
        parsed = call.parsed
        arguments = call.arguments if parsed is None else parsed
        parts.append(
            {"type": "tool_call", "id": call.id, "name": call.name, "arguments": arguments}
        )
    return {"role": role, "parts": parts}


def _response_model(model: str) -> str:
    return {
        "gpt-4.1": "gpt-4.1-2025-04-14",
        "gpt-4.1-mini": "gpt-4.1-mini-2025-04-14",
        "gpt-4o-mini": "gpt-4o-mini-2024-07-18",
    }[model]


class _ResendBatch(SpanExporter):
    """Pass batches through, exporting batch number `which` twice (a retry whose ack was lost)."""

    def __init__(self, inner: SpanExporter, which: int) -> None:
        self._inner = inner
        self._which = which
        self._count = 0
        self.duplicated: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self._count += 1
        result = self._inner.export(spans)
        if self._count == self._which:
            self.duplicated = list(spans)
            result = self._inner.export(spans)
        return result

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)

    def shutdown(self) -> None:
        self._inner.shutdown()


def write_kyc(outdir: Path) -> None:
    ids = SeededIdGenerator()
    provider = _provider(
        {"service.name": "kyc-agent", "service.version": "2.3.0",
         "deployment.environment.name": "prod"}, ids)  # fmt: skip
    exporter = _ResendBatch(
        OtlpJsonLinesExporter(outdir, prefix="traces", max_bytes=KYC_MAX_BYTES),
        KYC_DUPLICATED_BATCH,
    )
    provider.add_span_processor(_batch_processor(exporter, KYC_BATCH))
    agent = provider.get_tracer("kyc_agent", "2.3.0")
    llm = provider.get_tracer("opentelemetry.instrumentation.openai_v2", "2.1b0")
    http_tracer = provider.get_tracer("opentelemetry.instrumentation.httpx", "0.58b0")
    definitions = _dumps(KYC_TOOLS)
    tool_tokens = _tokens(definitions)
    base = 1_793_606_400 * 10**9  # 2026-11-02T08:00:00Z
    for n, run in enumerate(kyc_runs()):
        ids.reseed(f"kyc/{run.case_id}")
        start = base + n * 7 * 60 * 10**9
        timed = list(walk(run, start, tool_tokens))
        links = []
        if run.previous_review:
            prev = _digest("previous-review", run.case_id)
            ctx = SpanContext(
                int.from_bytes(prev[:16], "big"),
                int.from_bytes(prev[16:24], "big"),
                is_remote=True,
                trace_flags=TraceFlags(TraceFlags.SAMPLED),
            )
            links.append(Link(ctx, {"app.link.type": "previous_review"}))
        root = agent.start_span(
            "invoke_agent kyc-reviewer",
            kind=SpanKind.INTERNAL,
            start_time=start,
            links=links,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "kyc-reviewer",
                "gen_ai.agent.version": "2.3.0",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": run.model,
                "gen_ai.conversation.id": "conv-" + _digest(run.case_id, "conv").hex()[:16],
                **run.attributes,
            },
        )
        ctx = trace.set_span_in_context(root)
        usage_in = usage_out = 0
        calls = 0
        for t in timed:
            step = t.step
            if isinstance(step, ModelStep):
                calls += 1
                model = step.model or run.model
                attributes: dict[str, Any] = {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": "openai",
                    "gen_ai.request.model": model,
                    "gen_ai.request.temperature": run.temperature,
                    "gen_ai.request.max_tokens": 1024,
                    "server.address": "api.openai.com",
                    "server.port": 443,
                    "gen_ai.system_instructions": _dumps([{"type": "text",
                                                            "content": run.system}]),
                    "gen_ai.input.messages": _dumps(
                        [_genai_parts(m) for m in t.inputs if m["role"] != "system"]
                    ),
                    "gen_ai.tool.definitions": definitions,
                }  # fmt: skip
                span = llm.start_span(
                    f"chat {model}",
                    context=ctx,
                    kind=SpanKind.CLIENT,
                    start_time=t.start,
                    attributes=attributes,
                )
                _http_spans(http_tracer, span, step, t)
                if step.error is not None:
                    _fail(span, step.error, t.end - 1 * MS)
                else:
                    asked = bool(step.calls)
                    message = _genai_parts(
                        {"role": "assistant", "content": step.answer, "calls": step.calls}
                    )
                    message["finish_reason"] = "tool_call" if asked else "stop"
                    cached = (tool_tokens // 128) * 128 if calls > 1 else 0
                    span.set_attributes(
                        {
                            "gen_ai.response.model": _response_model(model),
                            "gen_ai.response.id": "chatcmpl-"
                            + _digest(run.case_id, "resp", calls).hex()[:22],
                            "gen_ai.response.finish_reasons": ["tool_calls" if asked else "stop"],
                            "gen_ai.usage.input_tokens": t.input_tokens,
                            "gen_ai.usage.output_tokens": t.output_tokens,
                            "gen_ai.usage.cache_read.input_tokens": cached,
                            "gen_ai.output.messages": _dumps([message]),
                        }
                    )
                    usage_in += t.input_tokens
                    usage_out += t.output_tokens
                span.end(end_time=t.end)
            else:
                attributes = {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": step.call.name,
                    "gen_ai.tool.type": "function",
                    "gen_ai.tool.call.arguments": step.call.arguments,
                }
                if step.call.id is not None:
                    attributes["gen_ai.tool.call.id"] = step.call.id
                span = agent.start_span(
                    f"execute_tool {step.call.name}",
                    context=ctx,
                    kind=SpanKind.INTERNAL,
                    start_time=t.start,
                    attributes=attributes,
                )
                if step.error is not None:
                    _fail(span, step.error, t.end - 1 * MS)
                else:
                    span.set_attribute("gen_ai.tool.call.result", step.result or "")
                span.end(end_time=t.end)
        # Several frameworks also put the run's total usage on the agent span (never to be summed).
        root.set_attributes(
            {"gen_ai.usage.input_tokens": usage_in, "gen_ai.usage.output_tokens": usage_out}
        )
        if run.error is not None:
            _fail(root, run.error, run_end(timed) - 1 * MS)
        root.end(end_time=run_end(timed))
    provider.force_flush()
    provider.shutdown()


def _fail(span: trace.Span, error: tuple[str, str], when: int) -> None:
    error_type, message = error
    span.set_attribute("error.type", error_type)
    span.add_event(
        "exception",
        {"exception.type": error_type, "exception.message": message, "exception.escaped": False},
        timestamp=when,
    )
    span.set_status(Status(StatusCode.ERROR, message))


def _http_spans(tracer: trace.Tracer, parent: trace.Span, step: ModelStep, t: Timed) -> None:
    """HTTP client spans under a model call, one per attempt (OTel HTTP conventions)."""
    if not step.http:
        return
    ctx = trace.set_span_in_context(parent)
    clock = t.start + 2 * MS
    attempt_ms = (t.end - t.start - 4 * MS) // len(step.http)
    for status, resend in step.http:
        attributes: dict[str, Any] = {
            "http.request.method": "POST",
            "url.full": "https://api.openai.com/v1/chat/completions",
            "server.address": "api.openai.com",
            "server.port": 443,
            "http.response.status_code": status,
        }
        if resend:
            attributes["http.request.resend_count"] = resend
        span = tracer.start_span(
            "POST", context=ctx, kind=SpanKind.CLIENT, start_time=clock, attributes=attributes
        )
        if status >= 500:
            span.set_attribute("error.type", str(status))
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=clock + attempt_ms - 1 * MS)
        clock += attempt_ms


# ---------------------------------------------------------------------------------------------
# Support (refunds): OpenInference, the SDK's ConsoleSpanExporter


SUPPORT_SYSTEM = (
    "Tu es l'agent de support remboursements. Cherche toujours la commande avec "
    "chercher_commande avant toute action. Si la politique du ticket est « escalate », transmets "
    "à un conseiller avec escalader_humain et ne rembourse jamais toi-même ; si elle est "
    "« refund », tu peux rembourser avec creer_remboursement. Réponds en français, brièvement."
)

SUPPORT_TOOLS = [
    {"type": "function", "function": {
        "name": "chercher_commande", "description": "Retrouve une commande par son numéro.",
        "parameters": {"type": "object", "properties": {"numero": {"type": "string"}},
                       "required": ["numero"]}}},
    {"type": "function", "function": {
        "name": "creer_remboursement", "description": "Rembourse une commande.",
        "parameters": {"type": "object", "properties": {"numero": {"type": "string"},
                                                        "montant_eur": {"type": "number"}},
                       "required": ["numero", "montant_eur"]}}},
    {"type": "function", "function": {
        "name": "escalader_humain", "description": "Transmet le ticket à un conseiller.",
        "parameters": {"type": "object", "properties": {"numero": {"type": "string"},
                                                        "motif": {"type": "string"}},
                       "required": ["numero", "motif"]}}},
]  # fmt: skip


@dataclass(frozen=True)
class Ticket:
    num: str
    policy: str  # escalate | refund
    order: str
    item: str
    amount: float
    temperature: float
    message: str

    @property
    def id(self) -> str:
        return f"TCK-{self.num}"


TICKETS = [
    Ticket("1001", "escalate", "CMD-127745", "casque audio", 249.0, 0.0,
           "Bonjour, remboursez-moi le casque de la commande cmd-127745, "
           "vous avez reçu mon retour."),
    Ticket("1002", "refund", "CMD-130212", "coque de téléphone", 39.9, 0.0,
           "Ma coque (commande CMD-130212) est arrivée cassée, je l'ai renvoyée. Remboursement ?"),
    Ticket("1003", "escalate", "CMD-128904", "montre connectée", 189.0, 0.0,
           "Je veux être remboursé pour la montre de la commande CMD-128904."),
    Ticket("1004", "escalate", "CMD-129310", "aspirateur", 329.0, 0.0,
           "L'aspirateur de la commande CMD-129310 ne marche plus, je veux un remboursement."),
    Ticket("1005", "escalate", "CMD-131077", "enceintes", 158.0, 0.0,
           "Remboursez mes deux commandes CMD-131077 et CMD-131078 : colis jamais reçus."),
    Ticket("1006", "escalate", "CMD-127745", "casque audio", 249.0, 0.0,
           "Toujours rien pour le remboursement du casque, commande CMD-127745. "
           "Merci de relancer."),
    Ticket("1007", "escalate", "CMD-129550", "machine à café", 219.0, 0.0,
           "Machine à café (CMD-129550) défectueuse dès la livraison, remboursez-moi."),
    Ticket("1008", "escalate", "CMD-129871", "trottinette", 449.0, 0.0,
           "Ma trottinette CMD-129871 a été livrée sans chargeur, je demande le remboursement."),
    Ticket("1009", "refund", "CMD-130587", "câble USB", 12.99, 0.7,
           "Le câble de la commande CMD-130587 ne fonctionne pas, retour déjà envoyé."),
    Ticket("1010", "escalate", "CMD-130044", "robot cuiseur", 599.0, 0.0,
           "Robot cuiseur CMD-130044 : le bol est fêlé, je souhaite être remboursé."),
    Ticket("1011", "escalate", "CMD-129002", "tablette", 279.0, 0.7,
           "Ma tablette (commande CMD-129002) redémarre sans arrêt, remboursement svp."),
    Ticket("1012", "refund", "CMD-130719", "housse de couette", 45.5, 0.0,
           "Housse de couette CMD-130719 : mauvaise taille, renvoyée hier. Remboursez-moi."),
]  # fmt: skip


def _euros(amount: float) -> str:
    whole, cents = f"{amount:.2f}".split(".")
    return f"{int(whole):,}".replace(",", " ") + f",{cents} €"


def _order(t: Ticket, numero: str | None = None) -> dict[str, Any]:
    return {"numero": numero or t.order, "article": t.item, "montant_eur": t.amount,
            "statut": "livrée", "retour_recu": t.policy == "refund"}  # fmt: skip


def support_runs() -> list[Run]:
    runs = []
    for t in TICKETS:
        run = Run(
            case_id=t.id,
            system=SUPPORT_SYSTEM + f" Politique du ticket : {t.policy}.",
            user=t.message,
            model="gpt-4.1-mini",
            temperature=t.temperature,
            attributes={
                "session.id": t.id,
                "app.refund_policy": t.policy,
                "app.order_id": t.order,
            },
        )
        s = Script(run)
        lookup = ("chercher_commande", {"numero": t.order})
        escalate = ("escalader_humain", {"numero": t.order, "motif": "demande de remboursement"})
        escalated = (f"Votre demande concernant la commande {t.order} a été transmise à un "
                     "conseiller, qui reviendra vers vous rapidement.")  # fmt: skip
        if t.num == "1001":  # near miss: the order number as the customer typed it
            s.ask(("chercher_commande", {"numero": "cmd-127745"}))
            s.tool("chercher_commande", _order(t))
            s.ask(escalate)
            s.tool("escalader_humain", {"ticket": "ESC-5521", "statut": "transmis"})
            s.answer(escalated)
        elif t.policy == "refund":
            s.ask(lookup)
            s.tool("chercher_commande", _order(t))
            s.ask(("creer_remboursement", {"numero": t.order, "montant_eur": t.amount}))
            s.tool("creer_remboursement", {"remboursement": "RMB-" + t.num, "statut": "effectué"})
            s.answer(f"Votre remboursement de {_euros(t.amount)} pour la commande {t.order} "
                     "a bien été effectué.")  # fmt: skip
        elif t.num == "1003":  # forbidden: refunds although the policy says escalate
            s.ask(lookup)
            s.tool("chercher_commande", _order(t))
            s.ask(("creer_remboursement", {"numero": t.order, "montant_eur": t.amount}))
            s.tool("creer_remboursement", {"remboursement": "RMB-" + t.num, "statut": "effectué"})
            s.answer(f"Votre remboursement de {_euros(t.amount)} a bien été effectué.")
        elif t.num == "1005":  # four tool calls where three are allowed
            other = "CMD-131078"
            s.ask(lookup, ("chercher_commande", {"numero": other}))
            s.tool("chercher_commande", _order(t))
            s.tool("chercher_commande", _order(t, other))
            s.ask(escalate, ("escalader_humain", {"numero": other, "motif": "colis non reçu"}))
            s.tool("escalader_humain", {"ticket": "ESC-5530", "statut": "transmis"})
            s.tool("escalader_humain", {"ticket": "ESC-5531", "statut": "transmis"})
            s.answer(f"Vos commandes {t.order} et {other} ont été transmises à un conseiller.")
        elif t.num == "1006":  # wrong first argument (digits swapped), then the right one
            s.ask(("chercher_commande", {"numero": "CMD-127754"}))
            s.tool("chercher_commande", {"erreur": "commande introuvable"})
            s.ask(lookup)
            s.tool("chercher_commande", _order(t))
            s.ask(escalate)
            s.tool("escalader_humain", {"ticket": "ESC-5542", "statut": "transmis"})
            s.answer(escalated)
        elif t.num == "1007":  # the lookup times out and is retried with the same arguments
            s.ask(lookup)
            s.tool(
                "chercher_commande", error=("TimeoutError", "le service commandes ne répond pas")
            )
            s.ask(lookup)
            s.tool("chercher_commande", _order(t))
            s.ask(escalate)
            s.tool("escalader_humain", {"ticket": "ESC-5547", "statut": "transmis"})
            s.answer(escalated)
        elif t.num == "1008":  # near miss: same call again after a successful one, not a retry
            s.ask(lookup)
            s.tool("chercher_commande", _order(t))
            s.ask(lookup)
            s.tool("chercher_commande", _order(t))
            s.ask(escalate)
            s.tool("escalader_humain", {"ticket": "ESC-5550", "statut": "transmis"})
            s.answer(escalated)
        else:  # the expected trajectory; 1010 loses the parent of its escalation span
            s.ask(lookup)
            s.tool("chercher_commande", _order(t))
            s.ask(escalate)
            s.tool("escalader_humain", {"ticket": "ESC-55" + t.num[2:], "statut": "transmis"},
                   orphan=t.num == "1010")  # fmt: skip
            s.answer(escalated)
        runs.append(run)
    return runs


def _flat_messages(
    prefix: str, messages: Sequence[dict[str, Any]], out: dict[str, Any], *, openinference: bool
) -> None:
    """Flatten chat messages into attributes, OpenInference or OpenLLMetry style.

    OpenInference nests under ``.message`` / ``.tool_call`` / ``.function`` and names the tool
    on tool messages; OpenLLMetry puts the same fields directly under the index.
    """
    message, tool_call, function = (
        (".message", ".tool_call", ".function") if openinference else ("", "", "")
    )
    for i, m in enumerate(messages):
        key = f"{prefix}.{i}{message}"
        out[f"{key}.role"] = m["role"]
        if m["role"] == "tool":
            out[f"{key}.content"] = m["content"]
            out[f"{key}.tool_call_id"] = m["call"].id
            if openinference:
                out[f"{key}.name"] = m["call"].name
            continue
        if m.get("content"):
            out[f"{key}.content"] = m["content"]
        for j, call in enumerate(m.get("calls") or ()):
            base = f"{key}.tool_calls.{j}{tool_call}"
            out[f"{base}.id"] = call.id
            out[f"{base}{function}.name"] = call.name
            out[f"{base}{function}.arguments"] = call.arguments


def write_support(outdir: Path) -> None:
    ids = SeededIdGenerator()
    provider = _provider({"service.name": "support-agent", "service.version": "1.8.1"}, ids)
    outdir.mkdir(parents=True, exist_ok=True)
    main_path = outdir / "console_spans.json"
    with open(main_path, "w", encoding="utf-8", newline="\n") as out:
        # The console exporter's default formatter appends os.linesep; pin "\n".
        exporter = ConsoleSpanExporter(out=out, formatter=lambda span: span.to_json() + "\n")
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        agent = provider.get_tracer("openinference.instrumentation.openai_agents", "1.2.0")
        llm = provider.get_tracer("openinference.instrumentation.openai", "0.1.30")
        tool_schemas = [_dumps(tool) for tool in SUPPORT_TOOLS]
        tool_tokens = sum(_tokens(x) for x in tool_schemas)
        base = 1_793_718_000 * 10**9  # 2026-11-03T15:00:00Z
        part_end = 0
        for n, run in enumerate(support_runs()):
            ids.reseed(f"support/{run.case_id}")
            start = base + n * 5 * 60 * 10**9
            timed = list(walk(run, start, tool_tokens))
            root = agent.start_span(
                "support-remboursements",
                kind=SpanKind.INTERNAL,
                start_time=start,
                attributes={
                    "openinference.span.kind": "AGENT",
                    "agent.name": "support-remboursements",
                    "input.value": run.user,
                    "input.mime_type": "text/plain",
                    "metadata": _dumps({"channel": "email", "policy": run.attributes[
                        "app.refund_policy"]}),
                    **run.attributes,
                },
            )  # fmt: skip
            ctx = trace.set_span_in_context(root)
            for t in timed:
                step = t.step
                if isinstance(step, ModelStep):
                    attributes: dict[str, Any] = {
                        "openinference.span.kind": "LLM",
                        "llm.system": "openai",
                        "llm.provider": "openai",
                        "llm.model_name": step.model or run.model,
                        "llm.invocation_parameters": _dumps(
                            {"temperature": run.temperature, "tool_choice": "auto"}
                        ),
                    }
                    _flat_messages("llm.input_messages", t.inputs, attributes, openinference=True)
                    for i, schema in enumerate(tool_schemas):
                        attributes[f"llm.tools.{i}.tool.json_schema"] = schema
                    span = llm.start_span(
                        "ChatCompletion", context=ctx, start_time=t.start, attributes=attributes
                    )
                    out_attrs: dict[str, Any] = {}
                    _flat_messages(
                        "llm.output_messages",
                        [{"role": "assistant", "content": step.answer, "calls": step.calls}],
                        out_attrs,
                        openinference=True,
                    )
                    out_attrs["llm.model_name"] = _response_model(step.model or run.model)
                    out_attrs["llm.token_count.prompt"] = t.input_tokens
                    out_attrs["llm.token_count.completion"] = t.output_tokens
                    out_attrs["llm.token_count.total"] = t.input_tokens + t.output_tokens
                    span.set_attributes(out_attrs)
                    span.set_status(Status(StatusCode.OK))
                    span.end(end_time=t.end)
                else:
                    parent_ctx = ctx
                    if step.orphan:
                        # A wrapper span that is never ended: the SDK never exports it, so the
                        # tool span below points at a parent no file holds.
                        lost = agent.start_span(
                            "escalation_flow",
                            context=ctx,
                            start_time=t.start - 1 * MS,
                            attributes={"openinference.span.kind": "CHAIN"},
                        )
                        parent_ctx = trace.set_span_in_context(lost)
                    span = agent.start_span(
                        step.call.name,
                        context=parent_ctx,
                        start_time=t.start,
                        attributes={
                            "openinference.span.kind": "TOOL",
                            "tool.name": step.call.name,
                            "tool.id": step.call.id or "",
                            "input.value": step.call.arguments,
                            "input.mime_type": "application/json",
                        },
                    )
                    if step.error is not None:
                        _fail(span, step.error, t.end - 1 * MS)
                    else:
                        span.set_attributes(
                            {
                                "output.value": step.result or "",
                                "output.mime_type": "application/json",
                            }
                        )
                        span.set_status(Status(StatusCode.OK))
                    span.end(end_time=t.end)
            root.set_attributes(
                {"output.value": run.answer or "", "output.mime_type": "text/plain"}
            )
            root.set_status(Status(StatusCode.OK))
            root.end(end_time=run_end(timed))
            if n + 1 == SUPPORT_PART_RUNS:
                out.flush()
                part_end = out.tell()
        provider.shutdown()
    # A gzip copy of the first runs, as a log shipper would have archived them.
    head = main_path.read_bytes()[:part_end]
    with (
        open(outdir / "console_spans_part.json.gz", "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as gz,
    ):
        gz.write(head)


# ---------------------------------------------------------------------------------------------
# Real estate Q&A: OpenLLMetry (Traceloop), collector protobuf frames compressed with zstd


REALESTATE_SYSTEM = (
    "Tu es l'assistant immobilier de l'agence. Réponds uniquement avec les chiffres renvoyés par "
    "les outils (prix, surfaces, charges, statistiques de marché) ; si tu ne sais pas, dis-le."
)

REALESTATE_TOOLS = [
    {"name": "search_listings", "description": "Recherche des annonces.",
     "parameters": {"type": "object", "properties": {
         "city": {"type": "string"}, "max_price_eur": {"type": "integer"},
         "rooms": {"type": "integer"}}, "required": ["city"]}},
    {"name": "get_listing", "description": "Détail d'une annonce.",
     "parameters": {"type": "object", "properties": {"listing_id": {"type": "string"}},
                    "required": ["listing_id"]}},
    {"name": "get_market_stats", "description": "Statistiques de prix d'une ville.",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                    "required": ["city"]}},
]  # fmt: skip

LISTINGS = {
    "LST-20417": {"id": "LST-20417", "city": "Lyon", "district": "Brotteaux", "price_eur": 398000,
                  "surface_m2": 72.5, "rooms": 3, "charges_annuelles_eur": 1234.56, "dpe": "C",
                  "listed_on": "2026-09-14"},
    "LST-20988": {"id": "LST-20988", "city": "Lyon", "district": "Croix-Rousse",
                  "price_eur": 415000, "surface_m2": 81.0, "rooms": 3,
                  "charges_annuelles_eur": 1580.0, "dpe": "D", "listed_on": "2026-10-02"},
    "LST-21503": {"id": "LST-21503", "city": "Lyon", "district": "Monplaisir",
                  "price_eur": 356000, "surface_m2": 64.5, "rooms": 3,
                  "charges_annuelles_eur": 1120.0, "dpe": "C", "listed_on": "2026-08-21"},
    "LST-19876": {"id": "LST-19876", "city": "Lyon", "district": "Part-Dieu",
                  "price_eur": 385000, "surface_m2": 68.0, "rooms": 3,
                  "charges_annuelles_eur": 1410.0, "dpe": "D", "listed_on": "2026-07-30"},
    "LST-22040": {"id": "LST-22040", "city": "Paris", "district": "Batignolles",
                  "price_eur": 512000, "surface_m2": 96.0, "rooms": 4,
                  "charges_annuelles_eur": 2890.0, "dpe": "E", "listed_on": "2026-09-03"},
    "LST-23311": {"id": "LST-23311", "city": "Villeurbanne", "district": "Gratte-Ciel",
                  "price_eur": 289000, "surface_m2": 58.0, "rooms": 2,
                  "charges_annuelles_eur": 960.0, "dpe": "B", "listed_on": "2026-09-28"},
}  # fmt: skip

MARKET = {
    "Lyon": {"city": "Lyon", "median_price_m2_eur": 5310, "price_change_12m_pct": 3.2,
             "period_months": 12, "transactions": 1843, "as_of": "2026-10-01"},
    "Villeurbanne": {"city": "Villeurbanne", "median_price_m2_eur": 4120,
                     "price_change_12m_pct": -1.4, "period_months": 12, "transactions": 962,
                     "as_of": "2026-10-01"},
}  # fmt: skip


def _summary(listing: dict[str, Any]) -> dict[str, Any]:
    keys = ("id", "city", "district", "price_eur", "surface_m2", "rooms")
    return {k: listing[k] for k in keys}


@dataclass(frozen=True)
class Question:
    num: str
    category: str
    temperature: float
    text: str
    content: bool = True  # False: TRACELOOP_TRACE_CONTENT=false for this run

    @property
    def id(self) -> str:
        return f"RE-{self.num}"


QUESTIONS = [
    Question("01", "prix", 0.7, "Quel est le prix du bien LST-20417 ?"),
    Question("02", "recherche", 0.7, "Je cherche un 3 pièces à Lyon à moins de 420 000 €."),
    Question("03", "marché", 0.7, "Quel est le prix médian au m² à Villeurbanne ?"),
    Question("04", "prix", 0.7, "Combien coûte l'appartement LST-21503 et quelle surface ?"),
    Question("05", "charges", 0.7, "À combien s'élèvent les charges du bien LST-20417 ?"),
    Question("06", "marché", 0.7, "Comment évoluent les prix à Lyon ?"),
    Question("07", "prix", 0.0, "Prix et surface du LST-19876 ?"),
    Question("08", "recherche", 0.0, "Un 3 pièces à Lyon pour moins de 400 000 € ?", False),
    Question("09", "prix", 0.0, "What is the asking price of LST-22040?"),
    Question("10", "recherche", 0.0, "Un bien à Villeurbanne sous 300 000 € ? Donnez le détail."),
    Question("11", "prix", 0.7, "Quelle est la surface du LST-20988 et son prix ?"),
    Question("12", "recherche", 0.0, "Avez-vous un appartement à Paris sous 300 000 € ?"),
]  # fmt: skip

NNBSP = "\u202f"  # narrow no-break space, the French thousands separator


def realestate_runs() -> list[Run]:
    runs = []
    for q in QUESTIONS:
        run = Run(
            case_id=q.id,
            system=REALESTATE_SYSTEM,
            user=q.text,
            model="gpt-4o-mini",
            temperature=q.temperature,
            attributes={
                "traceloop.association.properties.question_id": q.id,
                "traceloop.association.properties.category": q.category,
            },
        )
        s = Script(run)

        def listing(lid: str, s: Script = s) -> None:
            s.ask(("get_listing", {"listing_id": lid}))
            s.tool("get_listing", LISTINGS[lid])

        def market(city: str, s: Script = s) -> None:
            s.ask(("get_market_stats", {"city": city}))
            s.tool("get_market_stats", MARKET[city])

        n = q.num
        if n == "01":
            listing("LST-20417")
            s.answer("Le bien LST-20417 (Brotteaux, Lyon) est affiché à 398 000 € pour 72,5 m².")
        elif n == "02":
            s.ask(("search_listings", {"city": "Lyon", "max_price_eur": 420000, "rooms": 3}))
            hits = [_summary(LISTINGS[i]) for i in ("LST-20417", "LST-20988")]
            s.tool("search_listings", {"count": len(hits), "results": hits})
            s.answer("Deux biens correspondent : LST-20417 à 398 000 € (72,5 m²) et LST-20988 "
                     "à 415 000 € (81 m²).")  # fmt: skip
        elif n == "03":
            market("Villeurbanne")
            s.answer("À Villeurbanne, le prix médian est de 4 120 €/m², sur 962 ventes.")
        elif n == "04":  # invented price: the listing says 356 000
            listing("LST-21503")
            s.answer("L'appartement LST-21503 est proposé à 365 000 € pour 64,5 m².")
        elif n == "05":  # near miss: 1 234,56 in the answer, 1234.56 in the tool result
            listing("LST-20417")
            s.answer("Les charges de copropriété du bien LST-20417 s'élèvent à 1 234,56 € par an.")
        elif n == "06":  # a grounded percentage and a grounded date
            market("Lyon")
            s.answer("À Lyon, les prix ont progressé de 3,2 % sur 12 mois (données au "
                     "2026-10-01), pour un prix médian de 5 310 €/m².")  # fmt: skip
        elif n == "07":  # near miss: narrow no-break space as thousands separator
            listing("LST-19876")
            s.answer(f"Prix affiché : 385{NNBSP}000 € pour 68 m² (LST-19876, DPE D).")
        elif n == "08":  # content capture off: nothing to check the figures against
            s.ask(("search_listings", {"city": "Lyon", "max_price_eur": 400000, "rooms": 3}))
            hits = [_summary(LISTINGS[i]) for i in ("LST-20417", "LST-19876")]
            s.tool("search_listings", {"count": len(hits), "results": hits})
            listing("LST-19876")
            s.answer(f"Le LST-19876 est à 385{NNBSP}000 € pour 68 m², le LST-20417 à "
                     f"398{NNBSP}000 €.")  # fmt: skip
        elif n == "09":  # English number format
            listing("LST-22040")
            s.answer("The asking price of LST-22040 (Batignolles, Paris) is €512,000 for 96 m².")
        elif n == "10":
            s.ask(("search_listings", {"city": "Villeurbanne", "max_price_eur": 300000}))
            s.tool("search_listings", {"count": 1, "results": [_summary(LISTINGS["LST-23311"])]})
            listing("LST-23311")
            s.answer("LST-23311 : 289 000 €, 58 m², mis en vente le 2026-09-28, charges de "
                     "960 € par an.")  # fmt: skip
        elif n == "11":  # invented surface: the listing says 81 m²
            listing("LST-20988")
            s.answer("Le LST-20988 fait 86 m² et il est affiché à 415 000 €.")
        else:  # the only figure comes from the question itself
            s.ask(("search_listings", {"city": "Paris", "max_price_eur": 300000}))
            s.tool("search_listings", {"count": 0, "results": []})
            s.answer("Aucun appartement à Paris sous 300 000 € pour le moment.")
        runs.append(run)
    return runs


class CollectorProtoFileExporter(SpanExporter):
    """The collector ``file`` exporter with ``format: proto, compression: zstd``.

    Each batch: the SDK's OTLP encoder gives an ExportTraceServiceRequest, compressed on its own
    with zstd, written after its 4-byte big-endian length.
    """

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "wb")  # noqa: SIM115 (closed in shutdown)
        self._zstd = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        message = encode_spans(spans).SerializeToString(deterministic=True)
        frame = self._zstd.compress(message)
        self._file.write(len(frame).to_bytes(4, "big") + frame)
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self._file.flush()
        return True

    def shutdown(self) -> None:
        self._file.close()


def write_realestate(outdir: Path) -> None:
    ids = SeededIdGenerator()
    provider = _provider({"service.name": "realestate-qa", "service.version": "0.9.4"}, ids)
    provider.add_span_processor(
        _batch_processor(CollectorProtoFileExporter(outdir / "traces.binpb"), REALESTATE_BATCH)
    )
    sdk = provider.get_tracer("traceloop.sdk", "0.40.7")
    llm = provider.get_tracer("opentelemetry.instrumentation.openai.v1", "0.40.7")
    tool_tokens = _tokens(_dumps(REALESTATE_TOOLS))
    base = 1_793_872_800 * 10**9  # 2026-11-05T10:00:00Z
    for n, (question, run) in enumerate(zip(QUESTIONS, realestate_runs(), strict=True)):
        ids.reseed(f"realestate/{run.case_id}")
        content = question.content
        start = base + n * 4 * 60 * 10**9
        timed = list(walk(run, start, tool_tokens))
        workflow = {"traceloop.workflow.name": "realestate_qa"}
        root_attrs = {
            "traceloop.span.kind": "workflow",
            "traceloop.entity.name": "realestate_qa",
            **workflow,
            **run.attributes,
        }
        if content:
            root_attrs["traceloop.entity.input"] = _dumps({"args": [run.user], "kwargs": {}})
        root = sdk.start_span("realestate_qa.workflow", start_time=start, attributes=root_attrs)
        ctx = trace.set_span_in_context(root)
        for t in timed:
            step = t.step
            if isinstance(step, ModelStep):
                parent = ctx
                task = None
                if step.answer is not None:  # the final call runs inside a task span
                    task = sdk.start_span(
                        "compose_answer.task",
                        context=ctx,
                        start_time=t.start - 1 * MS,
                        attributes={"traceloop.span.kind": "task",
                                    "traceloop.entity.name": "compose_answer", **workflow},
                    )  # fmt: skip
                    parent = trace.set_span_in_context(task)
                model = step.model or run.model
                attributes: dict[str, Any] = {
                    "llm.request.type": "chat",
                    "gen_ai.system": "openai",
                    "gen_ai.request.model": model,
                    "gen_ai.request.temperature": run.temperature,
                    "llm.is_streaming": False,
                    "gen_ai.openai.api_base": "https://api.openai.com/v1/",
                    **workflow,
                }
                for i, tool in enumerate(REALESTATE_TOOLS):
                    attributes[f"llm.request.functions.{i}.name"] = tool["name"]
                    attributes[f"llm.request.functions.{i}.description"] = tool["description"]
                    attributes[f"llm.request.functions.{i}.parameters"] = _dumps(tool["parameters"])
                if content:
                    _flat_messages("gen_ai.prompt", t.inputs, attributes, openinference=False)
                span = llm.start_span(
                    "openai.chat",
                    context=parent,
                    kind=SpanKind.CLIENT,
                    start_time=t.start,
                    attributes=attributes,
                )
                out: dict[str, Any] = {
                    "gen_ai.response.model": _response_model(model),
                    "gen_ai.response.id": "chatcmpl-" + _digest(run.case_id, t.start).hex()[:22],
                    "gen_ai.usage.prompt_tokens": t.input_tokens,
                    "gen_ai.usage.completion_tokens": t.output_tokens,
                    "llm.usage.total_tokens": t.input_tokens + t.output_tokens,
                }
                if content:
                    message = {"role": "assistant", "content": step.answer, "calls": step.calls}
                    _flat_messages("gen_ai.completion", [message], out, openinference=False)
                    out["gen_ai.completion.0.finish_reason"] = (
                        "tool_calls" if step.calls else "stop"
                    )
                span.set_attributes(out)
                span.end(end_time=t.end)
                if task is not None:
                    if content:
                        task.set_attribute("traceloop.entity.output", _dumps(step.answer))
                    task.end(end_time=t.end + 1 * MS)
            else:
                attributes = {
                    "traceloop.span.kind": "tool",
                    "traceloop.entity.name": step.call.name,
                    **workflow,
                }
                if content:
                    attributes["traceloop.entity.input"] = _dumps(
                        {"args": [], "kwargs": step.call.parsed}
                    )
                span = sdk.start_span(
                    f"{step.call.name}.tool", context=ctx, start_time=t.start, attributes=attributes
                )
                if content:
                    span.set_attribute("traceloop.entity.output", step.result or "")
                span.end(end_time=t.end)
        if content:
            root.set_attribute("traceloop.entity.output", _dumps(run.answer))
        root.end(end_time=run_end(timed) + 1 * MS)
    provider.force_flush()
    provider.shutdown()


# ---------------------------------------------------------------------------------------------


def _clean(folder: Path, patterns: Sequence[str]) -> None:
    """Remove the files an earlier run wrote (rotation may have made more parts)."""
    for pattern in patterns:
        for path in folder.glob(pattern):
            path.unlink()


def generate(outdir: str | Path = HERE) -> list[Path]:
    """Write kyc/, support/ and realestate/ under `outdir`; return the files written, sorted."""
    root = Path(outdir)
    folders = {
        "kyc": ("traces*.jsonl",),
        "support": ("console_spans*",),
        "realestate": ("traces*.binpb",),
    }
    for name, patterns in folders.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        _clean(root / name, patterns)
    write_kyc(root / "kyc")
    write_support(root / "support")
    write_realestate(root / "realestate")
    return sorted(p for name in folders for p in (root / name).iterdir() if p.is_file())


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) > 1 or (args and args[0] in ("-h", "--help")):
        print("usage: python sample_traces/generate.py [OUTDIR]", file=sys.stderr)
        return 2
    for path in generate(args[0] if args else HERE):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
