"""A one-run OTLP trace whose texts carry hostile payloads, for the report page's tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from factories import otlp_attr, otlp_span


def write_hostile_trace(
    path: Path,
    trace: str,
    *,
    session: str,
    case: str,
    agent: str,
    model: str,
    tool: str,
    arguments: dict[str, Any],
    result: str,
    answer: str,
    prompt: str | None = None,
) -> Path:
    """Write to `path` one run (its run key ``app.session`` = `session`): a model call that
    requests `tool` with `arguments` (its prompt one user message, `prompt`, when given), the
    tool call that returns `result`, and a model call that answers `answer`."""
    root = "1111111111111111"
    request: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,
        "gen_ai.usage.input_tokens": 100,
        "gen_ai.usage.output_tokens": 10,
    }
    if prompt is not None:
        request["gen_ai.input.messages"] = json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": prompt}]}]
        )
    call = {"type": "tool_call", "id": "c1", "name": tool, "arguments": arguments}
    request["gen_ai.output.messages"] = json.dumps(
        [{"role": "assistant", "parts": [call], "finish_reason": "tool_call"}]
    )
    spans = [
        otlp_span(
            trace,
            root,
            "",
            "invoke_agent x",
            0,
            100,
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": agent,
                "app.case_id": case,
                "app.session": session,
            },
        ),
        otlp_span(trace, "2222222222222222", root, "chat", 1, 10, request),
        otlp_span(
            trace,
            "3333333333333333",
            root,
            "execute_tool",
            11,
            20,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool,
                "gen_ai.tool.call.id": "c1",
                "gen_ai.tool.call.arguments": json.dumps(arguments),
                "gen_ai.tool.call.result": result,
            },
        ),
        otlp_span(
            trace,
            "4444444444444444",
            root,
            "chat",
            21,
            30,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": model,
                "gen_ai.usage.input_tokens": 200,
                "gen_ai.usage.output_tokens": 30,
                "gen_ai.output.messages": json.dumps(
                    [
                        {
                            "role": "assistant",
                            "parts": [{"type": "text", "content": answer}],
                            "finish_reason": "stop",
                        }
                    ]
                ),
            },
        ),
    ]
    body = {
        "resourceSpans": [
            {
                "resource": {"attributes": [otlp_attr("service.name", "svc")]},
                "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}],
            }
        ]
    }
    path.write_text(json.dumps(body) + "\n", encoding="utf-8")
    return path
