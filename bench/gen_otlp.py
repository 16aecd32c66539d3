"""Generate a realistic OTLP JSON lines dump (collector `file` exporter format) of agent runs.

Fast and deterministic: plain string templates, no SDK. Each agent run is one trace: an
``invoke_agent`` root, 2-6 ``chat`` model calls with GenAI attributes and ``execute_tool`` calls
between them (some failing). Spans of concurrent runs are exported in end order and batched
50-200 a line, grouped by resource and scope as the collector does.

    python bench/gen_otlp.py --spans 1000000 --seed 1 [--out bench/data/otlp-1m.jsonl]
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import sys
from pathlib import Path

__all__ = ["generate", "main"]

_DEFAULT_DIR = Path(__file__).resolve().parent / "data"

_MODELS = [
    ("openai", "gpt-4o-2024-08-06"),
    ("openai", "gpt-4o-mini"),
    ("anthropic", "claude-sonnet-4-20250514"),
    ("openai", "o3-mini"),
]
_TOOLS = {
    "search_kb": lambda r: {"query": _words(r, 4, 12), "top_k": r.randint(3, 10)},
    "get_customer": lambda r: {
        "customer_id": f"C{r.randint(100000, 999999)}",
        "fields": ["name", "tier", "country"],
    },
    "create_ticket": lambda r: {
        "title": _words(r, 3, 8),
        "body": _words(r, 4, 14),
        "priority": r.choice(["low", "normal", "high"]),
    },
    "http_get": lambda r: {
        "url": f"https://api.example.com/v2/items/{r.randint(1, 99999)}?expand=owner",
        "timeout_s": 10,
    },
    "run_sql": lambda r: {
        "sql": f"SELECT id, status FROM orders WHERE customer_id = {r.randint(1, 99999)} LIMIT 20"
    },
}
_WORDS = (
    "account",
    "balance",
    "refund",
    "order",
    "shipping",
    "delay",
    "invoice",
    "payment",
    "card",
    "address",
    "update",
    "customer",
    "premium",
    "upgrade",
    "cancel",
    "subscription",
    "tracking",
    "warehouse",
    "policy",
    "escalate",
    "agent",
)
_STACK = 'Traceback (most recent call last):\\n  File \\"tools.py\\", line 42, in run\\n'
_FINISH = ['"stop"', '"tool_calls"', '"length"']
_ERRORS = [
    ("TimeoutError", "tool call timed out after 10s"),
    ("HTTPError", "503 Service Unavailable"),
    ("ValueError", 'invalid customer_id \\"C0\\"'),
]


def _words(r: random.Random, lo: int, hi: int) -> str:
    return " ".join(r.choice(_WORDS) for _ in range(r.randint(lo, hi)))


def _kv_s(key: str, value: str) -> str:
    return f'{{"key":"{key}","value":{{"stringValue":"{value}"}}}}'


def _kv_i(key: str, value: int) -> str:
    return f'{{"key":"{key}","value":{{"intValue":"{value}"}}}}'


def _kv_d(key: str, value: float) -> str:
    return f'{{"key":"{key}","value":{{"doubleValue":{value}}}}}'


def _kv_raw(key: str, value: str) -> str:
    # value already JSON-escaped
    return f'{{"key":"{key}","value":{{"stringValue":{value}}}}}'


def _span(
    trace: str,
    span: str,
    parent: str,
    name: str,
    kind: int,
    start: int,
    end: int,
    attrs: list[str],
    status: str,
    events: str = "",
) -> str:
    ev = f',"events":[{events}]' if events else ""
    return (
        f'{{"traceId":"{trace}","spanId":"{span}","parentSpanId":"{parent}","flags":257,'
        f'"name":"{name}","kind":{kind},"startTimeUnixNano":"{start}","endTimeUnixNano":"{end}",'
        f'"attributes":[{",".join(attrs)}]{ev},"status":{status}}}'
    )


def _run(r: random.Random, t0: int, agent: str) -> list[tuple[int, int, str]]:
    """One agent run: (end_ns, scope index, span JSON) for each span."""
    trace = f"{r.getrandbits(128):032x}"
    root = f"{r.getrandbits(64):016x}"
    conv = f"{r.getrandbits(128):032x}"
    out: list[tuple[int, int, str]] = []
    t = t0 + r.randint(50_000, 500_000)
    provider, model = r.choice(_MODELS)
    turns = r.randint(2, 6)
    failed = False
    for turn in range(turns):
        sid = f"{r.getrandbits(64):016x}"
        start = t
        t += r.randint(300_000_000, 4_000_000_000)
        inp, outp = r.randint(200, 8000), r.randint(5, 900)
        last = turn == turns - 1
        attrs = [
            _kv_s("gen_ai.operation.name", "chat"),
            _kv_s("gen_ai.system", provider),
            _kv_s("gen_ai.request.model", model),
            _kv_d("gen_ai.request.temperature", r.choice([0, 0.2, 0.7, 1])),
            _kv_i("gen_ai.request.max_tokens", 4096),
            _kv_s("gen_ai.response.model", model),
            _kv_s("gen_ai.response.id", f"chatcmpl-{r.getrandbits(96):024x}"),
            _kv_i("gen_ai.usage.input_tokens", inp),
            _kv_i("gen_ai.usage.output_tokens", outp),
            '{"key":"gen_ai.response.finish_reasons","value":{"arrayValue":{"values":[{"stringValue":'
            + (_FINISH[0] if last else r.choice(_FINISH[1:]) if r.random() < 0.1 else _FINISH[1])
            + "}]}}}",
            _kv_s(
                "server.address", "api.openai.com" if provider == "openai" else "api.anthropic.com"
            ),
            _kv_i("server.port", 443),
        ]
        out.append((t, 1, _span(trace, sid, root, f"chat {model}", 3, start, t, attrs, "{}")))
        if last:
            break
        for _ in range(r.randint(1, 3)):
            tool = r.choice(list(_TOOLS))
            sid = f"{r.getrandbits(64):016x}"
            start = t + r.randint(10_000, 900_000)
            t = start + r.randint(1_000_000, 900_000_000)
            call = _TOOLS[tool](r)
            call["reason"] = _words(r, 4, 16)  # models explain themselves: 100-300 bytes in all
            args = json.dumps(json.dumps(call, separators=(",", ":")))
            attrs = [
                _kv_s("gen_ai.operation.name", "execute_tool"),
                _kv_s("gen_ai.tool.name", tool),
                _kv_s("gen_ai.tool.type", "function"),
                _kv_s("gen_ai.tool.call.id", f"call_{r.getrandbits(88):022x}"),
                _kv_raw("gen_ai.tool.call.arguments", args),
            ]
            events = ""
            status = "{}"
            if r.random() < 0.04:
                etype, emsg = r.choice(_ERRORS)
                attrs.append(_kv_s("error.type", etype))
                status = f'{{"code":2,"message":"{emsg}"}}'
                stack = _STACK + etype + ": " + emsg
                ev_attrs = [
                    _kv_s("exception.type", etype),
                    _kv_s("exception.message", emsg),
                    _kv_s("exception.stacktrace", stack),
                ]
                events = (
                    f'{{"timeUnixNano":"{t}","name":"exception",'
                    f'"attributes":[{",".join(ev_attrs)}]}}'
                )
                failed = True
            out.append(
                (
                    t,
                    0,
                    _span(
                        trace, sid, root, f"execute_tool {tool}", 1, start, t, attrs, status, events
                    ),
                )
            )
    t += r.randint(100_000, 5_000_000)
    attrs = [
        _kv_s("gen_ai.operation.name", "invoke_agent"),
        _kv_s("gen_ai.agent.name", agent),
        _kv_s("gen_ai.agent.id", f"asst_{r.getrandbits(48):012x}"),
        _kv_s("gen_ai.conversation.id", conv),
        _kv_s("gen_ai.system", provider),
    ]
    status = (
        '{"code":2,"message":"agent run failed"}' if failed and r.random() < 0.5 else '{"code":1}'
    )
    out.append((t, 0, _span(trace, root, "", f"invoke_agent {agent}", 1, t0, t, attrs, status)))
    return out


_RESOURCES = [
    '{"attributes":['
    + ",".join(
        [
            _kv_s("service.name", name),
            _kv_s("service.version", f"1.{i}.0"),
            _kv_s("deployment.environment", "prod"),
            _kv_s("telemetry.sdk.language", "python"),
            _kv_s("telemetry.sdk.name", "opentelemetry"),
            _kv_s("telemetry.sdk.version", "1.45.2"),
        ]
    )
    + "]}"
    for i, name in enumerate(["support-agent", "billing-agent", "research-agent"])
]
_AGENTS = ["support-agent", "billing-agent", "research-agent"]
_SCOPES = [
    '{"name":"openai.agents","version":"0.4.2"}',
    '{"name":"opentelemetry.instrumentation.openai_v2","version":"2.1b0"}',
]


def _line(spans: list[tuple[int, int, str]]) -> str:
    """One collector batch: spans grouped by resource, then scope, order kept within a group."""
    groups: dict[int, dict[int, list[str]]] = {}
    for res, scope, text in spans:
        groups.setdefault(res, {}).setdefault(scope, []).append(text)
    rs = []
    for res, scopes in groups.items():
        ss = ",".join(
            f'{{"scope":{_SCOPES[sc]},"spans":[{",".join(texts)}]}}' for sc, texts in scopes.items()
        )
        rs.append(f'{{"resource":{_RESOURCES[res]},"scopeSpans":[{ss}],"schemaUrl":""}}')
    return '{"resourceSpans":[' + ",".join(rs) + "]}\n"


_KYC_TOOLS = ("fetch_documents", "screen_sanctions", "lookup_beneficial_owners", "lookup_account")
_KYC_RESOURCE = len(_RESOURCES)
_RESOURCES.append(
    '{"attributes":['
    + ",".join(
        [
            _kv_s("service.name", "kyc-reviewer"),
            _kv_s("service.version", "2.3.0"),
            _kv_s("deployment.environment", "prod"),
            _kv_s("telemetry.sdk.language", "python"),
        ]
    )
    + "]}"
)


def _kyc_run(r: random.Random, t0: int) -> list[tuple[int, int, str]]:
    """A KYC file review as `rules/kyc.yaml` expects it: documents, sanctions screening,
    beneficial owners, account lookup, then the verdict. About one run in eight skips the
    screening or the owners (an `omission` and a `premature_answer` for the pack)."""
    trace = f"{r.getrandbits(128):032x}"
    root = f"{r.getrandbits(64):016x}"
    case = f"KYC-2026-{r.randint(1, 99999):05d}"
    out: list[tuple[int, int, str]] = []
    t = t0 + r.randint(50_000, 500_000)
    provider, model = r.choice(_MODELS)
    skip = r.choice(_KYC_TOOLS[1:3]) if r.random() < 0.125 else None
    turns = [["fetch_documents"], ["screen_sanctions", "lookup_beneficial_owners"]]
    plan = [[tool for tool in turn if tool != skip] for turn in [*turns, ["lookup_account"]]]
    for turn, tools in enumerate([*plan, []]):
        sid = f"{r.getrandbits(64):016x}"
        start = t
        t += r.randint(300_000_000, 4_000_000_000)
        attrs = [
            _kv_s("gen_ai.operation.name", "chat"),
            _kv_s("gen_ai.system", provider),
            _kv_s("gen_ai.request.model", model),
            _kv_d("gen_ai.request.temperature", 0),
            _kv_i("gen_ai.usage.input_tokens", r.randint(800, 9000) + 600 * turn),
            _kv_i("gen_ai.usage.output_tokens", r.randint(20, 600)),
            '{"key":"gen_ai.response.finish_reasons","value":{"arrayValue":{"values":[{"stringValue":'
            + (_FINISH[1] if tools else _FINISH[0])
            + "}]}}}",
        ]
        out.append((t, 1, _span(trace, sid, root, f"chat {model}", 3, start, t, attrs, "{}")))
        for tool in tools:
            sid = f"{r.getrandbits(64):016x}"
            start = t + r.randint(10_000, 900_000)
            t = start + r.randint(1_000_000, 900_000_000)
            call = {
                "fetch_documents": {"case_id": case},
                "screen_sanctions": {"full_name": _words(r, 2, 3).title()},
                "lookup_beneficial_owners": {"company_id": f"FR{r.randint(10**8, 10**9 - 1)}"},
                "lookup_account": {"account_id": f"ACC-{r.randint(10000, 99999)}"},
            }[tool]
            tool_attrs = [
                _kv_s("gen_ai.operation.name", "execute_tool"),
                _kv_s("gen_ai.tool.name", tool),
                _kv_s("gen_ai.tool.call.id", f"call_{r.getrandbits(88):022x}"),
                _kv_raw("gen_ai.tool.call.arguments", json.dumps(json.dumps(call))),
            ]
            span = _span(trace, sid, root, f"execute_tool {tool}", 1, start, t, tool_attrs, "{}")
            out.append((t, 0, span))
    t += r.randint(100_000, 5_000_000)
    attrs = [
        _kv_s("gen_ai.operation.name", "invoke_agent"),
        _kv_s("gen_ai.agent.name", "kyc-reviewer"),
        _kv_s("app.case_type", r.choice(["kyc", "kyc_renewal"])),
        _kv_s("app.case_id", case),
    ]
    agent = "invoke_agent kyc-reviewer"
    out.append((t, 0, _span(trace, root, "", agent, 1, t0, t, attrs, '{"code":1}')))
    return out


def generate(
    path: Path, spans: int, seed: int, concurrency: int = 64, kyc_share: float = 0.0
) -> tuple[int, int, int]:
    """Write about `spans` spans to `path`; return (spans, traces, lines).

    `kyc_share` of the runs are KYC file reviews (`_kyc_run`), for `rules/kyc.yaml`; with 0
    (the default) the output is byte for byte what it was before that option existed.
    """
    r = random.Random(seed)
    now = 1_767_225_600_000_000_000  # 2026-01-01
    pending: list[tuple[int, int, int, int, str]] = []  # heap of (end, seq, resource, scope, json)
    seq = n_spans = n_traces = n_lines = in_flight = 0
    batch: list[tuple[int, int, str]] = []
    batch_size = r.randint(50, 200)
    with path.open("w", encoding="utf-8", newline="\n") as out:
        while n_spans < spans or pending:
            # keep `concurrency` runs in flight, each starting "now", so spans end interleaved
            while n_spans < spans and in_flight < concurrency:
                res = r.randrange(len(_AGENTS))
                start = now + r.randint(1_000, 200_000_000)
                if kyc_share and r.random() < kyc_share:
                    res, run = _KYC_RESOURCE, _kyc_run(r, start)
                else:
                    run = _run(r, start, _AGENTS[res])
                for end, scope, text in run:
                    heapq.heappush(pending, (end, seq, res, scope, text))
                    seq += 1
                    n_spans += 1
                n_traces += 1
                in_flight += 1
            now, _, res, scope, text = heapq.heappop(pending)
            if '"parentSpanId":""' in text:
                in_flight -= 1  # the root ends last: the run is over
            batch.append((res, scope, text))
            if len(batch) >= batch_size or not pending:
                out.write(_line(batch))
                n_lines += 1
                batch = []
                batch_size = r.randint(50, 200)
    return n_spans, n_traces, n_lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spans", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument(
        "--kyc-share",
        type=float,
        default=0.0,
        help="share of runs that are KYC file reviews (for rules/kyc.yaml); default 0",
    )
    args = ap.parse_args(argv)
    out = args.out or _DEFAULT_DIR / f"otlp-{args.spans}-s{args.seed}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    n, traces, lines = generate(out, args.spans, args.seed, kyc_share=args.kyc_share)
    size = out.stat().st_size
    print(f"{out}: {n} spans, {traces} traces, {lines} lines, {size / 1e6:.1f} MB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
