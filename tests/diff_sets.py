"""Before/after trace sets for the diff tests, made by rewriting the KYC sample's OTLP JSON.

- `drop_screening`: a prompt change (agent version 2.3.0 -> 2.4.0 on every run) after which
  the agent skips the sanctions screening on some dossiers: their `execute_tool
  screen_sanctions` span is removed, and so are the tool call asking for it and its response in
  every chat span's messages. Tokens are left as they were.
- `cheaper_model`: the same runs, with the same answers and tokens, on gpt-4.1-mini instead
  of gpt-4.1 (request and response model names).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

KYC = Path(__file__).resolve().parent.parent / "sample_traces" / "kyc"

__all__ = ["KYC", "cheaper_model", "drop_screening", "rewrite"]


def rewrite(out: Path, edit_span: Callable[[dict], dict | None]) -> Path:
    """A copy of the KYC sample in ``out`` with every span passed through ``edit_span``
    (None drops the span)."""
    out.mkdir(parents=True, exist_ok=True)
    for src in sorted(KYC.glob("*.jsonl")):
        lines = []
        for line in src.read_text(encoding="utf-8").splitlines():
            doc = json.loads(line)
            for rs in doc["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    ss["spans"] = [e for e in (edit_span(s) for s in ss["spans"]) if e is not None]
            lines.append(json.dumps(doc, separators=(",", ":")))
        (out / src.name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def copy_baseline(out: Path) -> Path:
    """The KYC sample as it is."""
    out.mkdir(parents=True, exist_ok=True)
    for src in sorted(KYC.glob("*.jsonl")):
        shutil.copyfile(src, out / src.name)
    return out


def _attr(span: dict, key: str) -> dict | None:
    return next((a for a in span["attributes"] if a["key"] == key), None)


def _strip_parts(messages: list, call_ids: set[str], tool: str) -> list:
    """Messages without the tool's calls and responses (and without messages left empty)."""
    out = []
    for message in messages:
        parts = []
        for part in message.get("parts", []):
            if part.get("type") == "tool_call" and part.get("name") == tool:
                call_ids.add(part["id"])
                continue
            if part.get("type") == "tool_call_response" and part.get("id") in call_ids:
                continue
            parts.append(part)
        if parts:
            out.append({**message, "parts": parts})
    return out


def drop_screening(out: Path, trace_ids: set[str]) -> Path:
    """The KYC sample where the runs of ``trace_ids`` never screen for sanctions."""
    call_ids: set[str] = set()

    def edit(span: dict) -> dict | None:
        version = _attr(span, "gen_ai.agent.version")
        if version is not None:
            version["value"] = {"stringValue": "2.4.0"}
        if span["traceId"] not in trace_ids:
            return span
        if span["name"] == "execute_tool screen_sanctions":
            return None
        for key in ("gen_ai.output.messages", "gen_ai.input.messages"):
            attr = _attr(span, key)
            if attr is not None:
                messages = json.loads(attr["value"]["stringValue"])
                stripped = _strip_parts(messages, call_ids, "screen_sanctions")
                attr["value"] = {"stringValue": json.dumps(stripped)}
        return span

    # Output messages come before the next call's input messages in time but not always in
    # file order: two passes, the first to learn the call ids.
    rewrite(out, edit)
    return rewrite(out, edit) if call_ids else out


def cheaper_model(out: Path) -> Path:
    """The KYC sample on gpt-4.1-mini wherever it used gpt-4.1 (same tokens, same answers)."""
    names = {"gpt-4.1": "gpt-4.1-mini", "gpt-4.1-2025-04-14": "gpt-4.1-mini-2025-04-14"}

    def edit(span: dict) -> dict:
        for attr in span["attributes"]:
            if attr["key"] in ("gen_ai.request.model", "gen_ai.response.model"):
                value = attr["value"].get("stringValue")
                if value in names:
                    attr["value"] = {"stringValue": names[value]}
        if span["name"] == "chat gpt-4.1":
            span["name"] = "chat gpt-4.1-mini"
        return span

    return rewrite(out, edit)
