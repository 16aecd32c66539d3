"""Conventions layer: span table -> normalized-span table, one family at a time, by hand."""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzer.conventions import NORMALIZED_COLUMNS, ROLES, normalize
from analyzer.conventions import content as ct
from analyzer.spans import SPAN_SCHEMA, SpanBatchBuilder, attrs_from_mapping, empty_table

# the package exports the function `normalize`, which hides the submodule of the same name
normalize_module = importlib.import_module("analyzer.conventions.normalize")

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def span(
    name: str,
    attrs: dict[str, Any] | None = None,
    *,
    events: list[tuple[str, dict[str, Any]]] = (),  # type: ignore[assignment]
    status: str = "unset",
    raw_attrs: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "name": name,
        "attrs": attrs or {},
        "events": events,
        "status": status,
        "raw": raw_attrs,
    }


def table(*spans: dict[str, Any]) -> pa.Table:
    builder = SpanBatchBuilder()
    for i, s in enumerate(spans):
        builder.add(
            trace_id=TRACE,
            span_id=f"{i + 1:016x}",
            parent_span_id=None if i == 0 else f"{1:016x}",
            name=s["name"],
            kind="internal",
            start_ns=1_000 * (i + 1),
            end_ns=1_000 * (i + 1) + 500,
            status_code=s["status"],
            attributes=s["raw"] if s["raw"] is not None else attrs_from_mapping(s["attrs"]),
            events=[
                {"time_ns": 1_200, "name": n, "attributes": attrs_from_mapping(a)}
                for n, a in s["events"]
            ],
            source_file="mem",
            source_pos=i,
        )
    batch = builder.flush()
    assert batch is not None
    return pa.Table.from_batches([batch])


def rows(*spans: dict[str, Any]) -> list[dict[str, Any]]:
    out = normalize(table(*spans))
    assert out.schema == NORMALIZED_COLUMNS
    return out.to_dicts()


def one(name: str, attrs: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
    return rows(span(name, attrs, **kw))[0]


def msg(role: str, content: str | None, tool_call_id: str | None = None, name: str | None = None):
    return {"role": role, "content": content, "tool_call_id": tool_call_id, "name": name}


def call(id: str | None, name: str | None, arguments: str | None):
    return {"id": id, "name": name, "arguments": arguments}


def js(value: Any) -> str:
    return json.dumps(value)


# -------------------------------------------------------------------------------------------------
# OpenTelemetry GenAI, current names
# -------------------------------------------------------------------------------------------------


def test_genai_chat_span_reads_every_canonical_field():
    r = one(
        "chat gpt-4o",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "OpenAI",
            "gen_ai.system": "az.ai.openai",  # deprecated name, lower precedence
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.response.model": "gpt-4o-2024-08-06",
            "gen_ai.request.temperature": 0.2,
            "gen_ai.usage.input_tokens": 120,
            "gen_ai.usage.output_tokens": 30,
            "gen_ai.usage.cache_read.input_tokens": 100,
            "gen_ai.response.finish_reasons": ["tool_calls"],
            "gen_ai.conversation.id": "conv-1",
            "gen_ai.agent.name": "support",
            "gen_ai.prompt.name": "support-v2",  # not an OpenLLMetry gen_ai.prompt.N key
            "http.request.resend_count": 2,
            "gen_ai.system_instructions": js([{"type": "text", "content": "Be brief."}]),
            "gen_ai.input.messages": js(
                [
                    {"role": "user", "parts": [{"type": "text", "content": "Refund order CMD-1?"}]},
                    {
                        "role": "assistant",
                        "parts": [
                            {
                                "type": "tool_call",
                                "id": "call_1",
                                "name": "lookup",
                                "arguments": {"order": "CMD-1"},
                            }
                        ],
                    },
                    # the registry example says "result" where the schema says "response"
                    {
                        "role": "tool",
                        "parts": [
                            {"type": "tool_call_response", "id": "call_1", "result": "shipped"}
                        ],
                    },
                ]
            ),
            "gen_ai.output.messages": js(
                [
                    {
                        "role": "assistant",
                        "parts": [
                            {"type": "reasoning", "content": "think"},
                            {"type": "text", "content": "Let me check."},
                            {
                                "type": "tool_call",
                                "id": "call_2",
                                "name": "refund",
                                "arguments": '{"order":"CMD-1"}',
                            },
                        ],
                        "finish_reason": "tool_call",
                    }
                ]
            ),
            "gen_ai.tool.definitions": js(
                [
                    {
                        "type": "function",
                        "function": {
                            "name": "refund",
                            "description": "Refund an order",
                            "parameters": {"type": "object"},
                        },
                    },
                    {
                        "type": "function",
                        "name": "lookup",
                        "parameters": {
                            "type": "object",
                            "properties": {"order": {"type": "string"}},
                        },
                    },
                ]
            ),
        },
    )
    assert r == {
        "trace_id": TRACE,
        "span_id": "0000000000000001",
        "parent_span_id": None,
        "span_name": "chat gpt-4o",
        "role": "model_call",
        "convention": "genai",
        "start_ns": 1000,
        "end_ns": 1500,
        "status": "unset",
        "error_type": None,
        "model": "gpt-4o-2024-08-06",
        "provider": "openai",
        "temperature": 0.2,
        "input_tokens": 120,
        "output_tokens": 30,
        "cached_input_tokens": 100,
        "recorded_cost_usd": None,
        "tool_name": None,
        "tool_call_id": None,
        "arguments": None,
        "result": None,
        "input_messages": [
            msg("system", "Be brief."),
            msg("user", "Refund order CMD-1?"),
            msg(
                "assistant",
                '[{"id":"call_1","name":"lookup","arguments":"{\\"order\\":\\"CMD-1\\"}"}]',
            ),
            msg("tool", "shipped", "call_1"),
        ],
        "output_text": "Let me check.",
        "output_reasoning_apart": True,  # its reasoning part, left out of the text
        "requested_calls": [call("call_2", "refund", '{"order":"CMD-1"}')],
        "finish_reasons": ["tool_calls"],  # the attribute wins over the message's "tool_call"
        "agent_name": "support",
        "agent_version": None,
        "prompt_id": "support-v2",
        "tool_definitions": (
            '[{"description":null,"name":"lookup","parameters":{"properties":{"order":'
            '{"type":"string"}},"type":"object"}},{"description":"Refund an order","name":"refund",'
            '"parameters":{"type":"object"}}]'
        ),
        "http_resend_count": 2,
        "conversation_id": "conv-1",
        "has_content": True,
        "named_tool": None,
        "event_call": None,
        "backend_usage": False,
    }


def test_genai_tool_span_unwraps_double_encoded_arguments_and_reports_error_type():
    r = one(
        "execute_tool lookup",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "lookup",
            "gen_ai.tool.call.id": "call_1",
            "gen_ai.tool.call.arguments": js(js({"order": "CMD-1"})),  # a JSON string holding JSON
            "gen_ai.tool.call.result": js("status: shipped"),
            "error.type": "TimeoutError",
        },
        status="error",
    )
    assert (r["role"], r["convention"], r["tool_name"], r["tool_call_id"]) == (
        "tool_call",
        "genai",
        "lookup",
        "call_1",
    )
    assert r["arguments"] == '{"order": "CMD-1"}'
    assert r["result"] == "status: shipped"
    assert (r["status"], r["error_type"]) == ("error", "TimeoutError")
    assert r["input_messages"] == [] and r["requested_calls"] == [] and r["output_text"] is None
    assert r["has_content"] is True


def test_exception_event_or_error_type_marks_the_span_failed():
    exc = [
        ("exception", {"exception.type": "ValueError"}),
        ("exception", {"exception.type": "KeyError"}),
    ]
    only_event, both, status_only, ok = rows(
        span(
            "execute_tool a",
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "a"},
            events=exc,
        ),
        span(
            "execute_tool b",
            {"gen_ai.operation.name": "execute_tool", "error.type": "_OTHER"},
            events=exc,
        ),
        span("execute_tool c", {"gen_ai.operation.name": "execute_tool"}, status="error"),
        span("execute_tool d", {"gen_ai.operation.name": "execute_tool"}, status="ok"),
    )
    assert (only_event["status"], only_event["error_type"]) == (
        "error",
        "ValueError",
    )  # the first one
    assert (both["status"], both["error_type"]) == ("error", "_OTHER")  # error.type wins
    assert (status_only["status"], status_only["error_type"]) == ("error", None)
    assert (ok["status"], ok["error_type"]) == ("ok", None)


def test_a_tool_that_returned_an_error_result_failed():
    # Strands: the tool result's status in gen_ai.tool.status, the span itself ending OK
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "code_interpreter"}
    failed, succeeded, chat = rows(
        span("execute_tool a", tool | {"gen_ai.tool.status": "error"}, status="ok"),
        span("execute_tool b", tool | {"gen_ai.tool.status": "success"}, status="ok"),
        # near miss: the attribute names a tool's status, not a model call's
        span("chat m", {"gen_ai.operation.name": "chat", "gen_ai.tool.status": "error"}),
    )
    assert (failed["role"], failed["status"], failed["error_type"]) == ("tool_call", "error", None)
    assert (succeeded["status"], chat["status"]) == ("ok", "unset")


def test_an_mcp_tool_whose_result_says_it_failed_failed():
    # MCP reports a tool's failure in its CallToolResult (isError), not as a protocol error:
    # the span ends ok, and a timed-out lookup read as a call that succeeded
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather"}
    timed_out = {
        "content": [{"type": "text", "text": "weather service timed out"}],
        "isError": True,
    }
    ok = {"content": [{"type": "text", "text": "21 C"}], "isError": False}
    failed, succeeded, nested, chat = rows(
        span("execute_tool a", tool | {"gen_ai.tool.call.result": js(timed_out)}, status="ok"),
        span("execute_tool b", tool | {"gen_ai.tool.call.result": js(ok)}, status="ok"),
        # near misses: the key deeper in a result that is data; a model call's output
        span("execute_tool c", tool | {"gen_ai.tool.call.result": js({"row": {"isError": True}})}),
        span("chat m", {"gen_ai.operation.name": "chat", "output.value": js(timed_out)}),
    )
    assert (failed["role"], failed["status"], failed["error_type"]) == ("tool_call", "error", None)
    assert (succeeded["status"], nested["status"], chat["status"]) == ("ok", "unset", "unset")


def test_an_adk_tool_whose_exception_its_retry_plugin_turned_into_a_result_failed():
    # Google ADK's ReflectAndRetryToolPlugin hands the model a result saying the call failed
    # (so that it calls again); the span ends unset, with no error.type
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "screen_sanctions"}
    envelope = {
        "response_type": "ERROR_HANDLED_BY_REFLECT_AND_RETRY_PLUGIN",
        "error_type": "ConnectionError",
        "error_details": "sanctions list service unavailable",
        "retry_count": 1,
    }
    failed, other, mentioned = rows(
        span("execute_tool a", tool | {"gen_ai.tool.call.result": js(envelope)}),
        # near misses: another response type; the marker as text inside a result that is data
        span(
            "execute_tool b",
            tool | {"gen_ai.tool.call.result": js(envelope | {"response_type": "SUCCESS"})},
        ),
        span(
            "execute_tool c",
            tool | {"gen_ai.tool.call.result": js({"log": envelope["response_type"]})},
        ),
    )
    assert (failed["status"], failed["error_type"]) == ("error", "ConnectionError")
    assert (other["status"], other["error_type"], mentioned["status"]) == ("unset", None, "unset")


# -------------------------------------------------------------------------------------------------
# OpenTelemetry GenAI, deprecated names and events
# -------------------------------------------------------------------------------------------------


def test_genai_deprecated_names_and_content_span_events():
    json_events, text_events = rows(
        span(
            "chat claude",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.system": "Anthropic",
                "gen_ai.request.model": "claude-3-5-sonnet",
                "gen_ai.usage.prompt_tokens": 50,
                "gen_ai.usage.completion_tokens": 7,
            },
            events=[
                (
                    "gen_ai.content.prompt",
                    {
                        "gen_ai.prompt": js(
                            [
                                {"role": "system", "content": "Answer in French."},
                                {"role": "user", "content": "Hello"},
                            ]
                        )
                    },
                ),
                (
                    "gen_ai.content.completion",
                    {"gen_ai.completion": js([{"role": "assistant", "content": "Bonjour"}])},
                ),
            ],
        ),
        span(
            "chat gpt",
            {"gen_ai.operation.name": "chat", "gen_ai.system": "vertex_ai"},
            # OpenLIT writes plain text in these event attributes
            events=[
                ("gen_ai.content.prompt", {"gen_ai.prompt": "Hello"}),
                ("gen_ai.content.completion", {"gen_ai.completion": "Salut"}),
            ],
        ),
    )
    assert (json_events["provider"], json_events["model"]) == ("anthropic", "claude-3-5-sonnet")
    assert (json_events["input_tokens"], json_events["output_tokens"]) == (50, 7)
    assert json_events["input_messages"] == [
        msg("system", "Answer in French."),
        msg("user", "Hello"),
    ]
    assert json_events["output_text"] == "Bonjour"
    assert text_events["provider"] == "gcp.vertex_ai"  # renamed value mapped to the current one
    assert text_events["input_messages"] == [msg("user", "Hello")]
    assert text_events["output_text"] == "Salut"


def test_genai_per_message_events_in_both_body_shapes():
    r = one(
        "chat gpt-4o",
        {"gen_ai.operation.name": "chat", "gen_ai.system": "openai"},
        events=[
            (
                "gen_ai.system.message",
                {
                    "gen_ai.system": "openai",
                    "gen_ai.event.content": js({"content": "You are terse."}),
                },
            ),
            (
                "gen_ai.user.message",
                {"gen_ai.system": "openai", "content": "Weather in Paris?"},
            ),  # flattened body
            (
                "gen_ai.assistant.message",
                {
                    "gen_ai.event.content": js(
                        {
                            "tool_calls": [
                                {
                                    "id": "call_9",
                                    "type": "function",
                                    "function": {
                                        "name": "get_weather",
                                        "arguments": '{"city":"Paris"}',
                                    },
                                }
                            ]
                        }
                    )
                },
            ),
            (
                "gen_ai.tool.message",
                {"gen_ai.event.content": js({"content": "rainy, 57°F", "id": "call_9"})},
            ),
            (
                "gen_ai.choice",
                {
                    "gen_ai.event.content": js(
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"content": "It is rainy."},
                        }
                    )
                },
            ),
        ],
    )
    assert r["input_messages"] == [
        msg("system", "You are terse."),
        msg("user", "Weather in Paris?"),
        msg(
            "assistant",
            '[{"id":"call_9","name":"get_weather","arguments":"{\\"city\\":\\"Paris\\"}"}]',
        ),
        msg("tool", "rainy, 57°F", "call_9"),
    ]
    assert r["output_text"] == "It is rainy."
    assert r["finish_reasons"] == ["stop"]  # from the choice event: no attribute recorded one
    assert r["requested_calls"] == []


# -------------------------------------------------------------------------------------------------
# OpenInference
# -------------------------------------------------------------------------------------------------


def test_openinference_llm_span_with_flattened_messages_and_tool_calls():
    p, o = "llm.input_messages.", "llm.output_messages."
    r = one(
        "response",
        {
            "openinference.span.kind": "LLM",
            "llm.model_name": "gpt-4.1-2025-04-14",
            "llm.provider": "openai",
            "llm.invocation_parameters": '{"temperature": 0.3, "max_tokens": 512}',
            "llm.token_count.prompt": "85",  # Langfuse keeps these as strings
            "llm.token_count.completion": "29",
            "llm.token_count.total": "114",
            "llm.token_count.prompt_details.cache_read": "64",
            "llm.cost.total": 0.000402,
            "llm.finish_reason": "tool_calls",
            "session.id": "sess-7",
            "input.value": "ignored: flattened messages come first",
            p + "0.message.role": "system",
            p + "0.message.content": "You are a helpful agent.",
            p + "1.message.role": "user",
            p + "1.message.contents.0.message_content.type": "text",
            p + "1.message.contents.0.message_content.text": "What's the weather in Tokyo?",
            p + "2.message.role": "assistant",
            p + "2.message.tool_calls.0.tool_call.id": "call_K",
            p + "2.message.tool_calls.0.tool_call.function.name": "get_weather",
            p + "2.message.tool_calls.0.tool_call.function.arguments": '{"city":"Tokyo"}',
            p + "3.message.role": "tool",
            p + "3.message.tool_call_id": "call_K",
            p + "3.message.name": "get_weather",
            p + "3.message.content": "sunny",
            p + "10.message.role": "user",  # index 10 comes after 3, not after 1
            p + "10.message.content": "tenth",
            o + "0.message.role": "assistant",
            o + "0.message.tool_calls.0.tool_call.id": "call_L",
            o + "0.message.tool_calls.0.tool_call.function.name": "get_time",
            o + "0.message.tool_calls.0.tool_call.function.arguments": '{"tz":"Asia/Tokyo"}',
            o + "0.message.tool_calls.1.tool_call.id": "call_M",
            o + "0.message.tool_calls.1.tool_call.function.name": "get_weather",
            o + "0.message.tool_calls.1.tool_call.function.arguments": '{"city":"Osaka"}',
            "llm.tools.0.tool.json_schema": js(
                {
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "description": "Weather",
                        "parameters": {"type": "object"},
                    },
                }
            ),
        },
    )
    assert (r["role"], r["convention"], r["model"], r["provider"]) == (
        "model_call",
        "openinference",
        "gpt-4.1-2025-04-14",
        "openai",
    )
    assert r["temperature"] == 0.3
    assert (r["input_tokens"], r["output_tokens"], r["cached_input_tokens"]) == (85, 29, 64)
    assert r["recorded_cost_usd"] == pytest.approx(0.000402)
    assert r["input_messages"] == [
        msg("system", "You are a helpful agent."),
        msg("user", "What's the weather in Tokyo?"),
        msg(
            "assistant",
            '[{"id":"call_K","name":"get_weather","arguments":"{\\"city\\":\\"Tokyo\\"}"}]',
        ),
        msg("tool", "sunny", "call_K", "get_weather"),
        msg("user", "tenth"),
    ]
    assert r["output_text"] is None
    assert r["requested_calls"] == [
        call("call_L", "get_time", '{"tz":"Asia/Tokyo"}'),
        call("call_M", "get_weather", '{"city":"Osaka"}'),
    ]
    assert r["finish_reasons"] == ["tool_calls"]
    assert (
        r["tool_definitions"]
        == '[{"description":"Weather","name":"get_weather","parameters":{"type":"object"}}]'
    )
    assert r["conversation_id"] == "sess-7"


def test_arguments_a_flattened_call_leaves_out_come_from_the_raw_response():
    # OpenInference (OpenAI Agents) writes no function.arguments for a call whose arguments are
    # "{}"; output.value, the raw response, records them: the call's arguments are known
    o = "llm.output_messages.0.message."
    raw = {
        "object": "response",
        "output": [
            {"type": "function_call", "call_id": "call_T", "name": "transfer", "arguments": "{}"},
            {"type": "function_call", "call_id": "call_W", "name": "w", "arguments": '{"c": 2}'},
        ],
    }
    flat = {
        "openinference.span.kind": "LLM",
        o + "role": "assistant",
        o + "tool_calls.0.tool_call.id": "call_T",
        o + "tool_calls.0.tool_call.function.name": "transfer",
        o + "tool_calls.1.tool_call.id": "call_W",
        o + "tool_calls.1.tool_call.function.name": "w",
        o + "tool_calls.1.tool_call.function.arguments": '{"c": 1}',
    }
    filled, unknown = rows(
        span("response", {**flat, "output.value": js(raw)}),
        span("response", flat),  # near miss: no other source, the arguments stay unknown
    )
    # the flattened call's own arguments are kept: only what it left out is filled
    assert filled["requested_calls"] == [
        call("call_T", "transfer", "{}"),
        call("call_W", "w", '{"c": 1}'),
    ]
    assert unknown["requested_calls"] == [
        call("call_T", "transfer", None),
        call("call_W", "w", '{"c": 1}'),
    ]


def test_prompt_identity_is_name_version_and_recorded_template():
    """OpenInference and Traceloop record the template a prompt was rendered from: it is the
    prompt's identity (the config hash reads it instead of the text rendered per case)."""
    oi = {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4.1"}
    template = "Policy: {policy}."
    assert one("llm", oi)["prompt_id"] is None
    assert one("llm", oi | {"llm.prompt_template.template": template})["prompt_id"] == template
    versioned = oi | {"llm.prompt_template.template": template, "llm.prompt_template.version": "3"}
    assert one("llm", versioned)["prompt_id"] == "3\n" + template
    traceloop = {
        "llm.request.type": "chat",
        "gen_ai.request.model": "gpt-4o",
        "traceloop.prompt.key": "support",
        "traceloop.prompt.version": "7",
        "traceloop.prompt.template": template,
    }
    assert one("openai.chat", traceloop)["prompt_id"] == "support@7\n" + template


def test_openinference_kinds_decide_never_the_span_name():
    tool, agent, chain, unnamed_tool, embedding = rows(
        span(
            "get_weather",
            {
                "openinference.span.kind": "TOOL",
                "tool.name": "get_weather",
                "tool.id": "call_K",
                "input.value": '{"city":"Tokyo"}',
                "output.value": "sunny",
            },
        ),
        span(
            "Weather agent",
            {"openinference.span.kind": "AGENT", "output.value": "It is sunny in Tokyo."},
        ),
        # named like an ADK tool span, but the OpenInference kind says CHAIN
        span("execute_tool search", {"openinference.span.kind": "CHAIN"}),
        span("lookup_account", {"openinference.span.kind": "tool", "input.value": '{"id": 7}'}),
        span("embed", {"openinference.span.kind": "EMBEDDING", "llm.token_count.prompt": 12}),
    )
    assert (tool["role"], tool["tool_name"], tool["tool_call_id"]) == (
        "tool_call",
        "get_weather",
        "call_K",
    )
    assert (tool["arguments"], tool["result"]) == ('{"city":"Tokyo"}', "sunny")
    assert (agent["role"], agent["agent_name"], agent["output_text"]) == (
        "agent",
        "Weather agent",
        "It is sunny in Tokyo.",
    )
    assert (chain["role"], chain["convention"], chain["tool_name"]) == (
        "other",
        "openinference",
        None,
    )
    assert (unnamed_tool["role"], unnamed_tool["tool_name"]) == ("tool_call", "lookup_account")
    # embeddings are not model calls of the agent; their tokens are still kept
    assert (embedding["role"], embedding["input_tokens"]) == ("other", 12)


# -------------------------------------------------------------------------------------------------
# OpenLLMetry / Traceloop
# -------------------------------------------------------------------------------------------------


def test_openllmetry_flattened_prompt_completion_and_functions():
    r = one(
        "openai.chat",
        {
            "llm.request.type": "chat",
            "gen_ai.system": "OpenAI",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
            "gen_ai.usage.prompt_tokens": 40,
            "gen_ai.usage.completion_tokens": 12,
            "gen_ai.usage.cache_read_input_tokens": 32,
            "llm.usage.total_tokens": 52,
            "gen_ai.prompt.0.role": "system",
            "gen_ai.prompt.0.content": "Be nice.",
            "gen_ai.prompt.1.role": "user",
            "gen_ai.prompt.1.content": "Order status for 42?",
            "gen_ai.prompt.2.role": "assistant",
            "gen_ai.prompt.2.tool_calls.0.id": "call_a",
            "gen_ai.prompt.2.tool_calls.0.name": "order_status",
            "gen_ai.prompt.2.tool_calls.0.arguments": '{"id": 42}',
            "gen_ai.prompt.3.role": "tool",
            "gen_ai.prompt.3.tool_call_id": "call_a",
            "gen_ai.prompt.3.content": "shipped",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.finish_reason": "tool_calls",
            "gen_ai.completion.0.tool_calls.0.id": "call_b",
            "gen_ai.completion.0.tool_calls.0.name": "notify",
            "gen_ai.completion.0.tool_calls.0.arguments": '{"id": 42}',
            "llm.request.functions.0.name": "order_status",
            "llm.request.functions.0.description": "Look up an order",
            "llm.request.functions.0.parameters": js(
                {"type": "object", "properties": {"id": {"type": "integer"}}}
            ),
            "llm.request.functions.1.name": "notify",
        },
    )
    assert (r["role"], r["convention"], r["model"], r["provider"]) == (
        "model_call",
        "openllmetry",
        "gpt-4o-mini-2024-07-18",
        "openai",
    )
    assert (r["input_tokens"], r["output_tokens"], r["cached_input_tokens"]) == (40, 12, 32)
    assert r["input_messages"] == [
        msg("system", "Be nice."),
        msg("user", "Order status for 42?"),
        msg("assistant", '[{"id":"call_a","name":"order_status","arguments":"{\\"id\\": 42}"}]'),
        msg("tool", "shipped", "call_a"),
    ]
    assert r["output_text"] is None
    assert r["requested_calls"] == [call("call_b", "notify", '{"id": 42}')]
    assert r["finish_reasons"] == ["tool_calls"]
    assert r["tool_definitions"] == (
        '[{"description":null,"name":"notify","parameters":null},{"description":"Look up an order",'
        '"name":"order_status","parameters":{"properties":{"id":{"type":"integer"}},"type":"object"}}]'
    )


def test_openllmetry_anthropic_blocks_stored_as_json_text():
    r = one(
        "anthropic.chat",
        {
            "llm.request.type": "chat",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": js(
                [
                    {"type": "text", "text": "On it."},
                    {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}},
                ]
            ),
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "[1, 2] is a list, not content blocks",
        },
    )
    assert r["output_text"] == "On it."
    assert r["requested_calls"] == [call("toolu_1", "f", '{"a":1}')]
    assert r["input_messages"] == [msg("user", "[1, 2] is a list, not content blocks")]


def test_openai_tool_calls_stored_as_a_completion_s_json_text_are_its_requests():
    # Koog writes each requested call as its own completion, its content the JSON text of an
    # OpenAI tool_calls list; the next call's prompt repeats them as the assistant's turn
    def tool_calls(id: str, name: str) -> str:
        return js(
            [
                {
                    "function": {"name": name, "arguments": '{"name": "Bob"}'},
                    "id": id,
                    "type": "function",
                }
            ]
        )

    r = one(
        "llm.chat",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "Greet Bob",
            "gen_ai.prompt.1.role": "assistant",
            "gen_ai.prompt.1.content": tool_calls("c0", "Earlier"),
            # near miss: a text block whose `function` is a string stays text
            "gen_ai.prompt.2.role": "user",
            "gen_ai.prompt.2.content": js(
                [{"type": "text", "text": "a function: f", "function": "f"}]
            ),
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.finish_reason": "tool_calls",
            "gen_ai.completion.0.content": tool_calls("c1", "HelloTool"),
            "gen_ai.completion.1.role": "assistant",
            "gen_ai.completion.1.finish_reason": "tool_calls",
            "gen_ai.completion.1.content": tool_calls("c2", "ByeTool"),
        },
    )
    assert r["output_text"] is None
    assert r["requested_calls"] == [
        call("c1", "HelloTool", '{"name": "Bob"}'),
        call("c2", "ByeTool", '{"name": "Bob"}'),
    ]
    assert r["input_messages"] == [
        msg("user", "Greet Bob"),
        msg("assistant", '[{"id":"c0","name":"Earlier","arguments":"{\\"name\\": \\"Bob\\"}"}]'),
        msg("user", "a function: f"),
    ]


def test_a_call_record_written_as_its_python_repr_in_a_text_part_is_a_requested_call():
    # ADOT's OpenAI Agents spans put str(item) of the Responses API items into text parts
    item = (
        "ResponseFunctionToolCall(arguments='{\"a\":42}', call_id='call_1', name='multiply', "
        "type='function_call', id='fc_1', caller=None, status='completed')"
    )
    parts = [
        {"type": "text", "content": item},
        # near misses: another item type, a call with a positional argument, plain text
        {"type": "text", "content": "ResponseOutputText(text='hi', type='output_text')"},
        {"type": "text", "content": "print(x, type='function_call')"},
    ]
    r = one(
        "chat gpt-4o",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.output.messages": js([{"role": "assistant", "parts": parts}]),
        },
    )
    assert r["requested_calls"] == [call("call_1", "multiply", '{"a":42}')]
    assert r["output_text"] == (
        "ResponseOutputText(text='hi', type='output_text')\nprint(x, type='function_call')"
    )


def test_openllmetry_entity_spans():
    tool, workflow, agent, task, embedding = rows(
        span(
            "get_weather.tool",
            {
                "traceloop.span.kind": "tool",
                "traceloop.entity.name": "get_weather",
                "traceloop.entity.input": '{"args": [], "kwargs": {"city": "Paris"}}',
                "traceloop.entity.output": '"rainy"',
            },
        ),
        span(
            "trip_planner.workflow",
            {
                "traceloop.span.kind": "workflow",
                "traceloop.entity.name": "trip_planner",
                "traceloop.entity.version": 3,
                "traceloop.entity.output": '"Pack an umbrella."',
            },
        ),
        span("planner.agent", {"traceloop.span.kind": "agent"}),
        span("fetch.task", {"traceloop.span.kind": "task"}),
        span("openai.embeddings", {"llm.request.type": "embedding"}),
    )
    assert (tool["role"], tool["convention"], tool["tool_name"]) == (
        "tool_call",
        "openllmetry",
        "get_weather",
    )
    assert (tool["arguments"], tool["result"]) == ('{"city":"Paris"}', "rainy")
    assert (workflow["role"], workflow["agent_name"], workflow["agent_version"]) == (
        "agent",
        "trip_planner",
        "3",
    )
    assert workflow["output_text"] == "Pack an umbrella."
    assert (agent["role"], agent["agent_name"]) == ("agent", "planner")
    assert (task["role"], task["convention"]) == ("other", "openllmetry")
    assert (embedding["role"], embedding["convention"]) == ("other", "openllmetry")


def test_args_wrapper_with_positional_args_is_kept_as_recorded():
    r = one(
        "f.tool",
        {
            "traceloop.span.kind": "tool",
            "traceloop.entity.input": '{"args": ["Paris"], "kwargs": {"days": 2}}',
        },
    )
    assert r["arguments"] == '{"args": ["Paris"], "kwargs": {"days": 2}}'


# -------------------------------------------------------------------------------------------------
# LangSmith
# -------------------------------------------------------------------------------------------------


def test_langsmith_llm_tool_prompt_and_chain_runs():
    llm, tool, prompt, chain = rows(
        span(
            "ChatAnthropic",
            {
                "langsmith.span.kind": "llm",
                "gen_ai.operation.name": "chat",
                "gen_ai.system": "anthropic",
                "gen_ai.request.model": "claude-sonnet-4-5",
                "langsmith.metadata.ls_model_name": "claude-other",
                "gen_ai.usage.input_tokens": 19,
                "gen_ai.usage.output_tokens": 29,
                "gen_ai.response.finish_reasons": "stop, tool_use",  # LangSmith joins them
                "langsmith.trace.session_id": "thread-1",
                "gen_ai.prompt": js(
                    {
                        "messages": [
                            [
                                {
                                    "lc": 1,
                                    "type": "constructor",
                                    "id": ["langchain", "schema", "messages", "HumanMessage"],
                                    "kwargs": {"content": "Weather in Berlin?"},
                                }
                            ]
                        ]
                    }
                ),
                "gen_ai.completion": js(
                    {
                        "generations": [
                            [
                                {
                                    "text": "",
                                    "message": {
                                        "lc": 1,
                                        "type": "constructor",
                                        "id": ["langchain", "schema", "messages", "AIMessage"],
                                        "kwargs": {
                                            "content": "Checking.",
                                            "tool_calls": [
                                                {
                                                    "id": "toolu_1",
                                                    "name": "get_weather",
                                                    "args": {"city": "Berlin"},
                                                }
                                            ],
                                        },
                                    },
                                }
                            ]
                        ]
                    }
                ),
            },
        ),
        span(
            "get_weather",
            {
                "langsmith.span.kind": "tool",
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.prompt": '{"input": {"city": "Berlin"}}',
                "gen_ai.completion": '{"output": "Cloudy, 15°C"}',
            },
        ),
        # LangSmith maps its prompt runs to gen_ai.operation.name=chat: still not a model call
        span(
            "ChatPromptTemplate", {"langsmith.span.kind": "prompt", "gen_ai.operation.name": "chat"}
        ),
        span(
            "RunnableSequence", {"langsmith.span.kind": "chain", "gen_ai.operation.name": "chain"}
        ),
    )
    assert (llm["role"], llm["convention"], llm["model"]) == (
        "model_call",
        "langsmith",
        "claude-sonnet-4-5",
    )
    assert llm["finish_reasons"] == ["stop", "tool_use"]
    assert llm["input_messages"] == [msg("user", "Weather in Berlin?")]
    assert llm["output_text"] == "Checking."
    assert llm["requested_calls"] == [call("toolu_1", "get_weather", '{"city":"Berlin"}')]
    assert llm["conversation_id"] == "thread-1"
    assert (tool["role"], tool["tool_name"]) == ("tool_call", "get_weather")
    assert tool["arguments"] == '{"city":"Berlin"}'  # the raw-inputs wrapper {"input": ...} removed
    assert tool["result"] == '{"output": "Cloudy, 15°C"}'
    assert (prompt["role"], prompt["convention"]) == ("other", "langsmith")
    assert (chain["role"], chain["convention"]) == ("other", "langsmith")


# -------------------------------------------------------------------------------------------------
# Vercel AI SDK
# -------------------------------------------------------------------------------------------------


def test_vercel_generate_text_spans():
    outer, step1, step2, tool, embed = rows(
        span(
            "ai.generateText",
            {
                "operation.name": "ai.generateText weather-bot",
                "ai.operationId": "ai.generateText",
                "ai.model.id": "gpt-4o",
                "ai.model.provider": "openai.chat",
                "ai.telemetry.functionId": "weather-bot",
                "ai.settings.temperature": 0.5,
                "ai.usage.promptTokens": 110,
                "ai.usage.completionTokens": 25,
                "ai.prompt": '{"system":"Be brief.","prompt":"Weather in SF?"}',
                "ai.response.text": "It is 64°F in SF.",
                "ai.response.finishReason": "stop",
            },
        ),
        span(
            "ai.generateText.doGenerate",
            {
                "operation.name": "ai.generateText.doGenerate weather-bot",
                "ai.model.id": "gpt-4o",
                "ai.response.model": "gpt-4o-2024-08-06",
                "ai.usage.inputTokens": 60,
                "ai.usage.outputTokens": 15,
                "ai.usage.cachedInputTokens": 20,
                "ai.prompt.messages": js(
                    [
                        {"role": "system", "content": "Be brief."},
                        {"role": "user", "content": [{"type": "text", "text": "Weather in SF?"}]},
                    ]
                ),
                "ai.response.toolCalls": js(
                    [
                        {
                            "toolCallType": "function",
                            "toolCallId": "call_1",
                            "toolName": "getWeather",
                            "args": '{"city":"SF"}',
                        }
                    ]
                ),
                "ai.response.finishReason": "tool-calls",
            },
        ),
        span(
            "ai.generateText.doGenerate",
            {
                "ai.operationId": "ai.generateText.doGenerate",
                "ai.usage.promptTokens": "50",
                "ai.prompt.messages": js(
                    [
                        {
                            "role": "assistant",
                            "content": [
                                {
                                    "type": "tool-call",
                                    "toolCallId": "call_1",
                                    "toolName": "getWeather",
                                    "input": {"city": "SF"},
                                }
                            ],
                        },
                        {
                            "role": "tool",
                            "content": [
                                {
                                    "type": "tool-result",
                                    "toolCallId": "call_1",
                                    "toolName": "getWeather",
                                    "output": {"type": "json", "value": {"temp": 64}},
                                }
                            ],
                        },
                    ]
                ),
                "ai.response.text": "It is 64°F in SF.",
            },
        ),
        span(
            "ai.toolCall",
            {
                "operation.name": "ai.toolCall weather-bot",
                "ai.toolCall.name": "getWeather",
                "ai.toolCall.id": "call_1",
                "ai.toolCall.args": '{"city":"SF"}',
                "ai.toolCall.result": '{"temp":64}',
            },
        ),
        span("ai.embed", {"ai.operationId": "ai.embed", "ai.usage.tokens": 8}),
    )
    # the outer span runs the tool loop and sums the usage: an agent run, not a model call
    assert (outer["role"], outer["convention"], outer["agent_name"]) == (
        "agent",
        "vercel",
        "weather-bot",
    )
    assert (outer["model"], outer["provider"], outer["temperature"]) == (
        "gpt-4o",
        "openai.chat",
        0.5,
    )
    assert (outer["input_tokens"], outer["output_tokens"]) == (110, 25)
    assert outer["input_messages"] == [msg("system", "Be brief."), msg("user", "Weather in SF?")]
    assert (outer["output_text"], outer["finish_reasons"], outer["requested_calls"]) == (
        "It is 64°F in SF.",
        ["stop"],
        [],
    )

    assert (step1["role"], step1["model"]) == ("model_call", "gpt-4o-2024-08-06")
    assert (step1["input_tokens"], step1["output_tokens"], step1["cached_input_tokens"]) == (
        60,
        15,
        20,
    )
    assert step1["input_messages"] == [msg("system", "Be brief."), msg("user", "Weather in SF?")]
    assert step1["requested_calls"] == [call("call_1", "getWeather", '{"city":"SF"}')]
    assert (step1["output_text"], step1["finish_reasons"]) == (None, ["tool-calls"])

    assert step2["input_tokens"] == 50
    assert step2["input_messages"] == [
        msg(
            "assistant", '[{"id":"call_1","name":"getWeather","arguments":"{\\"city\\":\\"SF\\"}"}]'
        ),
        msg("tool", '{"type":"json","value":{"temp":64}}', "call_1", "getWeather"),
    ]
    assert (step2["output_text"], step2["requested_calls"]) == ("It is 64°F in SF.", [])

    assert (tool["role"], tool["tool_name"], tool["tool_call_id"]) == (
        "tool_call",
        "getWeather",
        "call_1",
    )
    assert (tool["arguments"], tool["result"]) == ('{"city":"SF"}', '{"temp":64}')
    assert (embed["role"], embed["convention"]) == ("other", "vercel")


# -------------------------------------------------------------------------------------------------
# Google ADK
# -------------------------------------------------------------------------------------------------


def test_a_call_llm_span_is_adks_model_call_only_with_adk_keys():
    # an application's own `call_llm` function around two model calls (its retry loop, say)
    # is no model call: counted as one, the two below it would be three
    app, first, second, adk_system, adk_key = rows(
        span("call_llm", {"code.function": "call_llm"}),
        span("chat gpt-4o", {"gen_ai.operation.name": "chat"}),
        span("chat gpt-4o", {"gen_ai.operation.name": "chat"}),
        span("call_llm", {"gen_ai.system": "gcp.vertex.agent"}),
        span("call_llm", {"gcp.vertex.agent.invocation_id": "e-1"}),
    )
    assert (app["role"], app["convention"]) == ("other", None)
    assert [r["role"] for r in (first, second, adk_system, adk_key)] == ["model_call"] * 4
    assert (adk_system["convention"], adk_key["convention"]) == ("adk", "adk")


def test_reasoning_parts_are_left_out_of_the_text_and_the_record_that_marks_them_wins():
    # ADK 2.x records a call twice: call_llm's llm_response flags the thought part; the
    # generate_content span under it writes that part as a plain text part
    thought = "The brief says 21 C and the weather tool said 21 C: grounded."
    response = {
        "content": {
            "role": "model",
            "parts": [{"text": thought, "thought": True}, {"text": "PASS"}],
        },
        "finish_reason": "STOP",
    }
    written = [{"role": "assistant", "parts": [{"type": "text", "content": thought}]}]
    written[0]["parts"].append({"type": "text", "content": "PASS"})
    adk = {"gen_ai.system": "gcp.vertex.agent", "gen_ai.request.model": "gemini-2.5-flash"}
    genai = {
        "gen_ai.operation.name": "generate_content",
        "gen_ai.request.model": "gemini-2.5-flash",
    }
    spans = table(
        span("call_llm", {**adk, "gcp.vertex.agent.llm_response": js(response)}),
        span("generate_content", {**genai, "gen_ai.output.messages": js(written)}),
    )
    outer, inner = normalize(spans).to_dicts()
    assert (outer["output_text"], outer["output_reasoning_apart"]) == ("PASS", True)
    assert (inner["output_text"], inner["output_reasoning_apart"]) == (thought + "\nPASS", False)
    # (merged as one call, the marked record's text is the call's: tests/test_same_call.py)
    # the other ways a reasoning part is marked; a Vercel step-start part is no reasoning
    marked = [
        [{"role": "assistant", "parts": [{"type": "reasoning", "content": "hm"}, text]}]
        for text in ({"type": "text", "content": "ok"},)
    ]
    responses = {
        "object": "response",
        "output": [
            {"type": "reasoning", "summary": []},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "ok"}],
            },
        ],
    }
    step_start = [
        {"role": "assistant", "content": [{"type": "step-start"}, {"type": "text", "text": "ok"}]}
    ]
    reasoning, response_item, vercel = rows(
        span("chat", {"gen_ai.operation.name": "chat", "gen_ai.output.messages": js(marked[0])}),
        span("chat", {"gen_ai.operation.name": "chat", "output.value": js(responses)}),
        span("chat", {"gen_ai.operation.name": "chat", "gen_ai.output.messages": js(step_start)}),
    )
    assert (reasoning["output_text"], reasoning["output_reasoning_apart"]) == ("ok", True)
    assert (response_item["output_text"], response_item["output_reasoning_apart"]) == ("ok", True)
    assert (vercel["output_text"], vercel["output_reasoning_apart"]) == ("ok", False)


def test_adk_spans_by_name_and_the_tool_span_near_misses():
    llm, tool, elided, merged, agent, nameless, bare_tool, invocation = rows(
        span(
            "call_llm",
            {
                "gen_ai.system": "gcp.vertex.agent",
                "gen_ai.request.model": "gemini-2.0-flash",
                "gen_ai.usage.input_tokens": 28,
                "gen_ai.usage.output_tokens": 3,
                "gen_ai.response.finish_reasons": ["stop"],
                "gcp.vertex.agent.session_id": "s-1",
                "gcp.vertex.agent.llm_request": js(
                    {
                        "model": "gemini-2.0-flash",
                        "config": {"system_instruction": "Greet with say_hello."},
                        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
                    }
                ),
                "gcp.vertex.agent.llm_response": js(
                    {
                        "content": {
                            "role": "model",
                            "parts": [
                                {"function_call": {"id": "adk-1", "name": "say_hello", "args": {}}}
                            ],
                        },
                        "finish_reason": "STOP",
                    }
                ),
            },
        ),
        span(
            "execute_tool say_hello",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "say_hello",
                "gen_ai.tool.call.id": "adk-1",
                "gcp.vertex.agent.tool_call_args": "{}",
                "gcp.vertex.agent.tool_response": '{"greeting": "hello"}',
                "gcp.vertex.agent.llm_request": "{}",  # on every ADK tool span: not a model call
                "gcp.vertex.agent.llm_response": "{}",
            },
        ),
        span(
            "execute_tool secret",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "secret",
                "gen_ai.tool.call.id": "<not specified>",
                "gcp.vertex.agent.tool_call_args": "<elided>",
                "gcp.vertex.agent.tool_response": "<elided>",
            },
        ),
        span(
            "execute_tool (merged)",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "(merged tools)",
                "gen_ai.tool.call.id": "evt-1",
                "gcp.vertex.agent.tool_call_args": "N/A",
            },
        ),
        span("agent_run [hello_agent]"),
        span("execute_tool", {"gen_ai.operation.name": "execute_tool"}),
        span("execute_tool greet"),
        span("invocation"),
    )
    assert (llm["role"], llm["convention"], llm["model"], llm["provider"]) == (
        "model_call",
        "adk",
        "gemini-2.0-flash",
        "gcp.vertex.agent",
    )
    assert (llm["input_tokens"], llm["output_tokens"], llm["conversation_id"]) == (28, 3, "s-1")
    assert llm["input_messages"] == [msg("system", "Greet with say_hello."), msg("user", "hi")]
    assert llm["requested_calls"] == [call("adk-1", "say_hello", "{}")]
    assert llm["finish_reasons"] == ["stop"]

    assert (tool["role"], tool["convention"], tool["tool_name"], tool["tool_call_id"]) == (
        "tool_call",
        "genai",
        "say_hello",
        "adk-1",
    )
    assert (tool["arguments"], tool["result"], tool["input_messages"]) == (
        "{}",
        '{"greeting": "hello"}',
        [],
    )

    assert (elided["tool_call_id"], elided["arguments"], elided["result"]) == (None, None, None)
    assert elided["has_content"] is False

    # the extra span ADK adds around parallel calls would double the calls it wraps
    assert (merged["role"], merged["convention"], merged["tool_name"]) == ("other", "adk", None)
    assert (agent["role"], agent["convention"], agent["agent_name"]) == (
        "agent",
        "adk",
        "hello_agent",
    )
    assert (nameless["role"], nameless["tool_name"]) == ("tool_call", None)
    assert (bare_tool["role"], bare_tool["tool_name"], bare_tool["has_content"]) == (
        "tool_call",
        "greet",
        False,
    )
    assert (invocation["role"], invocation["convention"]) == ("other", None)


# -------------------------------------------------------------------------------------------------
# Pydantic AI and Logfire
# -------------------------------------------------------------------------------------------------

_SYSTEM_EVENT = {
    "role": "system",
    "content": "Be kind.",
    "gen_ai.message.index": 0,
    "event.name": "gen_ai.system.message",
}
_USER_EVENT = {
    "role": "user",
    "content": "Refund 42",
    "gen_ai.message.index": 0,
    "event.name": "gen_ai.user.message",
}


def test_pydantic_ai_v1_spans():
    agent, chat, tool, tools = rows(
        span(
            "agent run",
            {
                "agent_name": "support",
                "model_name": "gpt-4o",
                "logfire.msg": "support run",
                "all_messages_events": js([_SYSTEM_EVENT, _USER_EVENT]),
                "final_result": "Refund issued.",
                "gen_ai.usage.input_tokens": 300,  # the run's total
                "gen_ai.usage.output_tokens": 40,
            },
        ),
        span(
            "chat gpt-4o",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.system": "openai",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.response.model": "gpt-4o-2024-08-06",
                "gen_ai.usage.input_tokens": 150,
                "gen_ai.usage.output_tokens": 20,
                "events": js(
                    [
                        _SYSTEM_EVENT,
                        _USER_EVENT,
                        {
                            "index": 0,
                            "message": {
                                "role": "assistant",
                                "tool_calls": [
                                    {
                                        "id": "call_r",
                                        "type": "function",
                                        "function": {"name": "refund", "arguments": {"order": 42}},
                                    }
                                ],
                            },
                            "gen_ai.system": "openai",
                            "event.name": "gen_ai.choice",
                        },
                    ]
                ),
            },
        ),
        span(
            "running tool",
            {
                "gen_ai.tool.name": "refund",
                "gen_ai.tool.call.id": "call_r",
                "tool_arguments": '{"order":42}',
                "tool_response": "Refund issued for 42",
                "logfire.msg": "running tool: refund",
            },
        ),
        span("running tools"),
    )
    assert (agent["role"], agent["convention"], agent["agent_name"], agent["model"]) == (
        "agent",
        "pydantic_ai",
        "support",
        "gpt-4o",
    )
    # an agent row keeps the aggregated usage it carries; runs sum model calls only
    assert (agent["input_tokens"], agent["output_tokens"]) == (300, 40)
    assert agent["input_messages"] == [msg("system", "Be kind."), msg("user", "Refund 42")]
    assert agent["output_text"] == "Refund issued."

    assert (chat["role"], chat["convention"], chat["model"]) == (
        "model_call",
        "genai",
        "gpt-4o-2024-08-06",
    )
    assert chat["input_messages"] == [msg("system", "Be kind."), msg("user", "Refund 42")]
    assert chat["requested_calls"] == [call("call_r", "refund", '{"order":42}')]
    assert chat["output_text"] is None

    assert (tool["role"], tool["convention"], tool["tool_name"], tool["tool_call_id"]) == (
        "tool_call",
        "pydantic_ai",
        "refund",
        "call_r",
    )
    assert (tool["arguments"], tool["result"]) == ('{"order":42}', "Refund issued for 42")
    assert (tools["role"], tools["convention"]) == ("other", "pydantic_ai")


def test_pydantic_ai_v5_spans():
    agent, chat, output_tool, v2_output = rows(
        span(
            "invoke_agent support",
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "support",
                "gen_ai.conversation.id": "c-9",
                "gen_ai.aggregated_usage.input_tokens": 300,
                "gen_ai.aggregated_usage.output_tokens": 40,
                "pydantic_ai.all_messages": js(
                    [
                        {"role": "user", "parts": [{"type": "text", "content": "Refund 42"}]},
                        {
                            "role": "assistant",
                            "parts": [{"type": "text", "content": "Refund issued."}],
                            "finish_reason": "stop",
                        },
                    ]
                ),
                "final_result": "Refund issued.",
            },
        ),
        span(
            "chat gpt-4o",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 150,
                "gen_ai.usage.output_tokens": 20,
                "gen_ai.usage.cache_read.input_tokens": 64,
                "operation.cost": 0.00188125,
                "gen_ai.input.messages": js(
                    [{"role": "user", "parts": [{"type": "text", "content": "Refund 42"}]}]
                ),
                "gen_ai.output.messages": js(
                    [
                        {
                            "role": "assistant",
                            "parts": [{"type": "text", "content": "Refund issued."}],
                            "finish_reason": "stop",
                        }
                    ]
                ),
            },
        ),
        span(
            "execute_tool final_result",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "final_result",
                "gen_ai.tool.call.id": "call_f",
                "gen_ai.tool.call.arguments": '{"answer":"ok"}',
            },
        ),
        span(
            "running output function",
            {"gen_ai.tool.name": "final_result", "tool_arguments": '{"answer":"ok"}'},
        ),
    )
    assert (agent["role"], agent["agent_name"], agent["conversation_id"]) == (
        "agent",
        "support",
        "c-9",
    )
    assert (agent["input_tokens"], agent["output_tokens"]) == (300, 40)
    assert agent["input_messages"] == [msg("user", "Refund 42"), msg("assistant", "Refund issued.")]
    assert agent["output_text"] == "Refund issued."
    assert (chat["recorded_cost_usd"], chat["cached_input_tokens"]) == (
        pytest.approx(0.00188125),
        64,
    )
    assert (chat["output_text"], chat["finish_reasons"]) == ("Refund issued.", ["stop"])
    assert (output_tool["role"], output_tool["tool_name"], output_tool["arguments"]) == (
        "tool_call",
        "final_result",
        '{"answer":"ok"}',
    )
    assert (v2_output["role"], v2_output["convention"], v2_output["arguments"]) == (
        "tool_call",
        "pydantic_ai",
        '{"answer":"ok"}',
    )


def test_logfire_openai_agents_templates_and_generic_attribute_names():
    agent, function, model, not_logfire = rows(
        span("Agent run: {name!r}", {"name": "Assistant", "logfire.msg": "Agent run: 'Assistant'"}),
        span(
            "Function: {name}",
            {"name": "get_weather", "input": '{"city":"Tokyo"}', "output": "Sunny"},
        ),
        span(
            "Responses API with {gen_ai.request.model!r}",
            {
                "gen_ai.system": "openai",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 80,
                "gen_ai.usage.output_tokens": 12,
                "input": js([{"role": "user", "content": "Weather in Tokyo?"}]),
                "output": js(
                    [
                        {
                            "type": "function_call",
                            "call_id": "call_w",
                            "id": "fc_1",
                            "name": "get_weather",
                            "arguments": '{"city":"Tokyo"}',
                        }
                    ]
                ),
            },
        ),
        # `name`/`input`/`output` are read only on Logfire spans
        span(
            "chat gpt-4o",
            {
                "gen_ai.operation.name": "chat",
                "name": "foo",
                "input": "not a prompt",
                "output": "x",
            },
        ),
    )
    assert (agent["role"], agent["convention"], agent["agent_name"]) == (
        "agent",
        "logfire",
        "Assistant",
    )
    assert (function["role"], function["tool_name"]) == ("tool_call", "get_weather")
    assert (function["arguments"], function["result"]) == ('{"city":"Tokyo"}', "Sunny")
    assert (model["role"], model["convention"], model["model"]) == (
        "model_call",
        "logfire",
        "gpt-4o",
    )
    assert model["input_messages"] == [msg("user", "Weather in Tokyo?")]
    assert model["requested_calls"] == [call("call_w", "get_weather", '{"city":"Tokyo"}')]
    assert (
        not_logfire["input_messages"],
        not_logfire["output_text"],
        not_logfire["has_content"],
    ) == ([], None, False)


# -------------------------------------------------------------------------------------------------
# Monocle
# -------------------------------------------------------------------------------------------------

MONOCLE = {"monocle_apptrace.version": "0.6.0"}


def test_monocle_span_types_entities_and_event_attributes():
    turn, agent, model, client, tool, mcp, other = rows(
        span("agents.run.Runner.run", {**MONOCLE, "span.type": "agentic.turn"}),
        span(
            "agents.run.AgentRunner._run_single_turn",
            {**MONOCLE, "span.type": "agentic.invocation", "entity.1.name": "Weather"},
        ),
        span(
            "openai.resources.responses.AsyncResponses.create",
            {
                **MONOCLE,
                "span.type": "inference",
                "entity.1.name": "openai",  # the provider, not the model
                "entity.2.name": "gpt-4o",
                "entity.2.type": "model.llm.gpt-4o",
            },
            events=[
                (
                    "data.input",
                    {"input": [js({"system": "Be brief."}), js({"user": "Weather in Paris?"})]},
                ),
                (
                    "data.output",
                    {
                        "response": js(
                            {
                                "tools": [
                                    {
                                        "tool_id": "call_1",
                                        "tool_name": "get_weather",
                                        "tool_arguments": '{"city":"Paris"}',
                                    }
                                ]
                            }
                        )
                    },
                ),
                (
                    "metadata",
                    {"prompt_tokens": 45, "completion_tokens": 60, "finish_reason": "tool_calls"},
                ),
            ],
        ),
        # the provider client under a framework's call: a model call with no model or usage
        span("openai.Completions.create", {**MONOCLE, "span.type": "inference.modelapi"}),
        span(
            "agent_framework._tools.AIFunction.invoke",
            {**MONOCLE, "span.type": "agentic.tool.invocation", "entity.1.name": "get_weather"},
            events=[
                ("data.input", {"input": "{'city': 'Paris', 'days': [1, 2], 'exact': True}"}),
                ("data.output", {"response": "18C"}),
            ],
        ),
        span(
            "mcp.shared.session.BaseSession.send_request",
            {**MONOCLE, "span.type": "agentic.mcp.invocation", "entity.1.name": "get_weather"},
            events=[
                ("data.input", {"input": ['{"city": "Paris"}']}),
                ("data.output", {"output": "18C"}),
            ],
        ),
        span("workflow", {**MONOCLE, "span.type": "workflow", "entity.1.name": "app"}),
    )
    assert [r["role"] for r in (turn, agent, model, client, tool, mcp, other)] == [
        "agent",
        "agent",
        "model_call",
        "model_call",
        "tool_call",
        "tool_call",
        "other",
    ]
    assert {r["convention"] for r in (turn, agent, model, tool, other)} == {"monocle"}
    assert (turn["agent_name"], agent["agent_name"]) == (None, "Weather")
    assert (model["model"], model["input_tokens"], model["output_tokens"]) == ("gpt-4o", 45, 60)
    assert (client["model"], client["input_tokens"]) == (None, None)
    assert model["finish_reasons"] == ["tool_calls"]
    assert model["input_messages"] == [msg("system", "Be brief."), msg("user", "Weather in Paris?")]
    assert model["requested_calls"] == [call("call_1", "get_weather", '{"city":"Paris"}')]
    # a Python repr of the arguments is read as the JSON it stands for
    assert (tool["tool_name"], tool["result"]) == ("get_weather", "18C")
    assert tool["arguments"] == '{"city":"Paris","days":[1,2],"exact":true}'
    assert (mcp["arguments"], mcp["result"]) == ('{"city": "Paris"}', "18C")


def test_monocle_history_messages_and_near_misses():
    history, not_monocle, not_an_entity_model = rows(
        span(
            "chat",
            {**MONOCLE, "span.type": "inference"},
            events=[
                (
                    "data.input",
                    {
                        "input": [
                            js({"user": [{"type": "text", "text": "Book BOM-JFK"}]}),
                            js(
                                {
                                    "assistant": [
                                        js({"tool_function": "book", "tool_arguments": "{}"})
                                    ]
                                }
                            ),
                            js({"tool": "booked"}),
                            js({"tool_function": "check", "tool_arguments": '{"id":1}'}),
                            js({"call_id": "c2", "output": "ok"}),
                        ]
                    },
                ),
                ("data.output", {"response": js({"assistant": "Done."})}),
            ],
        ),
        # another stack's `span.type` (Datadog's web, sql...) and a `metadata` event: no
        # Monocle span without Monocle's version attribute
        span(
            "GET /",
            {"span.type": "inference", "entity.1.name": "x"},
            events=[("metadata", {"prompt_tokens": 5})],
        ),
        span(
            "chat",
            {**MONOCLE, "span.type": "inference", "entity.2.name": "vector-db"},
        ),
    )
    assert history["input_messages"] == [
        msg("user", "Book BOM-JFK"),
        msg("assistant", '[{"id":null,"name":"book","arguments":"{}"}]'),
        msg("tool", "booked"),
        msg("assistant", '[{"id":null,"name":"check","arguments":"{\\"id\\":1}"}]'),
        msg("tool", "ok", "c2"),
    ]
    assert (history["output_text"], history["requested_calls"]) == ("Done.", [])
    assert (not_monocle["role"], not_monocle["convention"]) == ("other", None)
    assert not_monocle["agent_name"] is None
    # usage read from an event whatever the family: a span of no family that records it
    assert not_monocle["input_tokens"] == 5
    assert not_an_entity_model["model"] is None  # entity 2 is a model only when typed model.*


def test_python_literal_arguments_are_read_as_json_only_when_exact():
    read = ct.python_literal_json
    assert read("{'a': 1, 'b': [None, (1, 2)]}") == '{"a":1,"b":[null,[1,2]]}'
    assert read('{"a": 1}') == '{"a": 1}'  # JSON already: as recorded
    for kept in ("input: {'a': 1}", "{'a': {1, 2}}", "{1: 'a'}", "{'a': f(1)}", "[" * 5000):
        assert read(kept) == kept


def test_python_literal_arguments_of_a_tool_that_ran_are_read_as_json_whatever_the_convention():
    # the tool received its arguments parsed: a repr is how the instrumentation rendered them
    # (OpenInference's LangChain tool input). Kept as recorded: the arguments of a tool that
    # failed (they may be why) and those a model asked with (its own text)
    tool = {"openinference.span.kind": "TOOL", "tool.name": "search"}
    repr_args = "{'query': 'AI trends', 'days': None, 'exact': True}"
    ran, failed, model = rows(
        span("search", {**tool, "input.value": repr_args}),
        span("search", {**tool, "input.value": repr_args}, status="error"),
        span(
            "chat",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.output.messages": js(
                    [
                        {
                            "role": "assistant",
                            "parts": [
                                {
                                    "type": "tool_call",
                                    "id": "c1",
                                    "name": "search",
                                    "arguments": "{'query': 'x'}",
                                }
                            ],
                        }
                    ]
                ),
            },
        ),
    )
    assert ran["arguments"] == '{"query":"AI trends","days":null,"exact":true}'
    assert failed["arguments"] == repr_args
    assert model["requested_calls"] == [call("c1", "search", "{'query': 'x'}")]


def test_monocle_s_crewai_keyword_input_is_the_tool_s_arguments_without_crewai_s_fingerprints():
    # Monocle writes CrewAI's tool input as one "<keyword>: <str(value)>" text per keyword of
    # CrewStructuredTool.invoke; `input` holds the arguments, to which CrewAI (before 1.13)
    # added its fingerprints: read as malformed text, both ran tools were flagged
    crew = {**MONOCLE, "span.type": "agentic.tool.invocation", "entity.1.name": "book_hotel"}
    fingerprint = "{'agent_fingerprint': {'uuid_str': '5e119362-235a-4db9-960d-26736cb5e1b4'}}"
    given = f"{{'hotel_name': 'Marriott', 'nights': 2, 'security_context': {fingerprint}}}"
    ran, several, failed, not_monocle, other_form = rows(
        span(
            "CrewStructuredTool.invoke",
            crew,
            events=[("data.input", {"input": [f"input: {given}"]})],
        ),
        span(
            "CrewStructuredTool.invoke",
            crew,
            events=[("data.input", {"input": ["city: New York", "nights: 2", "late: True"]})],
        ),
        span(
            "CrewStructuredTool.invoke",
            crew,
            events=[("data.input", {"input": [f"input: {given}"]})],
            status="error",
        ),
        span(
            "search",
            {"openinference.span.kind": "TOOL", "tool.name": "search", "input.value": js(["q: x"])},
        ),
        # an MCP request's input: a list of one text, that text
        span(
            "BaseSession.send_request",
            {**MONOCLE, "span.type": "agentic.mcp.invocation", "entity.1.name": "get_weather"},
            events=[("data.input", {"input": ['{"city": "Paris"}']})],
        ),
    )
    assert ran["arguments"] == '{"hotel_name":"Marriott","nights":2}'
    assert several["arguments"] == '{"city":"New York","nights":2,"late":true}'
    # a failed tool's arguments may be why it failed: as recorded
    assert failed["arguments"] == js([f"input: {given}"])
    assert not_monocle["arguments"] == '["q: x"]'
    assert other_form["arguments"] == '{"city": "Paris"}'


def test_keyword_arguments_are_read_only_when_every_item_is_a_keyword():
    read = ct.keyword_arguments
    assert read("[\"input: {'a': 1}\"]") == '{"a":1}'
    assert read('["input: x", "n: 2"]') == '{"input":"x","n":2}'  # input beside others: a keyword
    assert read("[\"q: 'quoted'\"]") == '{"q":"\'quoted\'"}'  # a str() keeps no quotes
    assert read('["s: {1, 2}", "k: {1: 2}"]') == '{"s":"{1, 2}","k":"{1: 2}"}'  # no JSON value
    for kept in ('["not a keyword"]', '["a b: 1"]', '["a:1"]', "[1]", "[]", "x: 1"):
        assert read(kept) == kept


# -------------------------------------------------------------------------------------------------
# Claude Code
# -------------------------------------------------------------------------------------------------


def test_claude_code_spans_by_name_and_their_plain_attributes():
    interaction, llm, tool, execution, blocked, other_app = rows(
        span("claude_code.interaction", {"user_prompt": "list pods"}),
        span(
            "claude_code.llm_request",
            {
                "model": "claude-haiku-4-5",
                "input_tokens": "10",
                "output_tokens": "273",
                "cache_read_tokens": "23030",
                "cache_creation_tokens": "827",
                "stop_reason": "tool_use",
                # kagent's copy of an OTLP value: not a list of reasons
                "gen_ai.response.finish_reasons": "{'values': [{'stringValue': 'tool_use'}]}",
            },
        ),
        span(
            "claude_code.tool",
            {"tool_name": "Bash", "tool_use_id": "toolu_1"},
            events=[("tool.output", {"bash_command": "kubectl get ns", "output": "not found"})],
        ),
        span("claude_code.tool.execution", {"tool_use_id": "toolu_1"}, status="error"),
        span("claude_code.tool.blocked_on_user", {"decision": "accept"}),
        # near miss: the same plain names on a span of no family are no usage, model or tool
        span(
            "llm",
            {"model": "m", "input_tokens": 5, "tool_name": "x", "stop_reason": "tool_use"},
            events=[("tool.output", {"output": "o"})],
        ),
    )
    assert [r["role"] for r in (interaction, llm, tool, execution, blocked)] == [
        "agent",
        "model_call",
        "tool_call",
        "tool_call",  # the same call as its tool span: merged into it, failing it
        "other",
    ]
    assert {r["convention"] for r in (interaction, llm, tool, execution)} == {"claude_code"}
    # Anthropic's input_tokens leaves the cache reads and writes out; OTel's input includes them
    assert (llm["model"], llm["input_tokens"], llm["output_tokens"]) == (
        "claude-haiku-4-5",
        10 + 23030 + 827,
        273,
    )
    assert (llm["cached_input_tokens"], llm["finish_reasons"]) == (23030, ["tool_use"])
    assert (tool["tool_name"], tool["tool_call_id"]) == ("Bash", "toolu_1")
    assert tool["result"] == "not found"  # its tool.output event
    assert (execution["tool_name"], execution["tool_call_id"]) == (None, "toolu_1")
    assert execution["status"] == "error"
    assert (other_app["role"], other_app["convention"], other_app["model"]) == ("other", None, None)
    assert (other_app["input_tokens"], other_app["tool_name"], other_app["result"]) == (None,) * 3
    assert other_app["finish_reasons"] == []


def test_a_microsoft_agent_framework_workflow_run_is_one_run_of_its_agents():
    # a real MAF capture: a handoff workflow (coordinator, then writer) read as two runs, the
    # coordinator's ending in its handoff: "no answer" (high) on a workflow that answered
    from analyzer.runs import build_runs

    workflow = {"workflow.id": "62ef8b57", "workflow.name": "handoff"}
    agent = {"gen_ai.operation.name": "invoke_agent"}
    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
    spans = table(
        span("workflow.run", workflow),
        span("invoke_agent coordinator", {**agent, "gen_ai.agent.name": "coordinator"}),
        span("chat m", {**chat, "gen_ai.response.finish_reasons": '["tool_calls"]'}),
        span("invoke_agent writer", {**agent, "gen_ai.agent.name": "writer"}),
        span("chat m", {**chat, "gen_ai.response.finish_reasons": '["stop"]'}),
    )
    normalized = normalize(spans)
    root = normalized.row(0, named=True)
    assert (root["role"], root["agent_name"], root["convention"]) == ("agent", "handoff", "genai")
    runs = build_runs(spans, normalized).runs
    assert runs.select("agent", "model_calls").rows() == [("handoff", 2)]
    # near miss: another program's span of that name, without the framework's workflow id
    other = one("workflow.run", {"workflow.name": "nightly"})
    assert (other["role"], other["agent_name"]) == ("other", None)


def test_a_claude_code_call_whose_permission_was_refused_failed_and_never_ran():
    # a real Claude Agent SDK capture: the coordinator called two MCP tools itself, the
    # permission hook refused them (no execution span); they read as calls that ran fine
    from analyzer.runs import build_runs

    spans = [  # (span id, parent, name, attributes, start, end)
        ("a", None, "claude_code.interaction", {}, 0, 100),
        ("b", "a", "claude_code.tool", {"tool_name": "get_weather"}, 10, 20),
        ("c", "b", "claude_code.tool.blocked_on_user", {"decision": "reject"}, 10, 19),
        ("d", "a", "claude_code.tool", {"tool_name": "search"}, 30, 50),
        # near miss: allowed, then run
        ("e", "d", "claude_code.tool.blocked_on_user", {"decision": "accept"}, 30, 35),
        ("f", "d", "claude_code.tool.execution", {}, 36, 49),
    ]
    builder = SpanBatchBuilder()
    for i, (span_id, parent, name, attrs, start, end) in enumerate(spans):
        builder.add(
            trace_id=TRACE,
            span_id=span_id * 16,
            parent_span_id=parent and parent * 16,
            name=name,
            kind="internal",
            start_ns=start,
            end_ns=end,
            status_code="unset",
            attributes=attrs_from_mapping(attrs),
            source_file="mem",
            source_pos=i,
        )
    table_ = pa.Table.from_batches([builder.flush()])
    normalized = normalize(table_)
    assert normalized.select("role", "status", "tool_name").rows()[2:5] == [
        ("tool_call", "error", None),  # the refused call itself, with no name of its own
        ("tool_call", "unset", "search"),
        ("other", "unset", None),
    ]
    steps = build_runs(table_, normalized).steps
    assert steps.select("tool_name", "status").rows() == [
        ("get_weather", "error"),
        ("search", "unset"),
    ]


# -------------------------------------------------------------------------------------------------
# Prompt flow
# -------------------------------------------------------------------------------------------------

PROMPTFLOW = {"framework": "promptflow"}


def openai_response(text: str | None = None, call: tuple[str, str, str] | None = None) -> str:
    """An OpenAI chat completion as JSON: a text answer, or one tool call (id, name, arguments)."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if call is not None:
        message["tool_calls"] = [
            {"id": call[0], "type": "function", "function": {"name": call[1], "arguments": call[2]}}
        ]
    reason = "stop" if call is None else "tool_calls"
    return js({"choices": [{"finish_reason": reason, "message": message}]})


def test_promptflow_span_types_usage_and_content_and_near_misses():
    request = {
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        "model": "gpt-35-turbo",
        "tools": [{"type": "function", "function": {"name": "sales", "parameters": {}}}],
    }
    response = openai_response(call=("call_1", "sales", '{"q": 1}'))
    llm, function, flow, other_framework, untyped = rows(
        span(
            "openai_chat",
            {
                **PROMPTFLOW,
                "span_type": "LLM",
                "llm.response.model": "gpt-35-turbo",
                "llm.usage.prompt_tokens": 450,
                "llm.usage.completion_tokens": 17,
                "inputs": js(request),
                "output": response,
            },
        ),
        # a parent repeats its calls' usage under __computed__: never read
        span(
            "call_llm",
            {
                **PROMPTFLOW,
                "span_type": "function",
                "__computed__.cumulative_token_count.prompt": 450,
                "inputs": js(request),
                "output": response,
            },
        ),
        span("my_flow", {**PROMPTFLOW, "span_type": "Flow"}),
        # near misses: another framework's span_type, a promptflow span with none
        span("job", {"framework": "celery", "span_type": "LLM", "inputs": js(request)}),
        span("step", {**PROMPTFLOW, "output": response}),
    )
    assert (llm["role"], llm["convention"], llm["model"]) == (
        "model_call",
        "promptflow",
        "gpt-35-turbo",
    )
    assert (llm["input_tokens"], llm["output_tokens"]) == (450, 17)
    assert llm["input_messages"] == [msg("system", "Be brief."), msg("user", "hi")]
    assert llm["requested_calls"] == [call("call_1", "sales", '{"q": 1}')]
    assert llm["finish_reasons"] == ["tool_calls"]
    assert [(r["role"], r["convention"]) for r in (function, flow)] == [
        ("other", "promptflow"),
        ("other", "promptflow"),
    ]
    assert function["input_tokens"] is None
    assert (other_framework["role"], other_framework["convention"]) == ("other", None)
    assert other_framework["input_messages"] == []  # `inputs` read on promptflow spans only
    assert (untyped["role"], untyped["convention"]) == ("other", "promptflow")


def test_a_promptflow_function_a_model_asked_for_is_that_tool_s_run():
    from analyzer.runs import build_runs

    def llm(output: str) -> dict[str, Any]:
        return {**PROMPTFLOW, "span_type": "LLM", "llm.response.model": "gpt-4o", "output": output}

    spans = table(
        span("flow", {**PROMPTFLOW, "span_type": "Function", "inputs": js({"q": "sales?"})}),
        span("chat", llm(openai_response(call=("c1", "sales", '{"acc": "A-1"}')))),
        span(
            "sales",
            {
                **PROMPTFLOW,
                "span_type": "Function",
                "inputs": js({"acc": "A-1"}),
                "output": js("5 units"),
            },
        ),
        # near miss: a function no model asked for stays a plain span
        span("format", {**PROMPTFLOW, "span_type": "Function", "inputs": js({"x": 1})}),
        span("chat", llm(openai_response("A-1 sold 5."))),
    )
    steps = build_runs(spans, normalize(spans)).steps
    assert steps.select("kind", "name", "arguments", "result").rows() == [
        ("model_call", "gpt-4o", None, None),
        ("tool_call", "sales", '{"acc": "A-1"}', "5 units"),
        ("model_call", "gpt-4o", None, None),
    ]


# -------------------------------------------------------------------------------------------------
# any-agent
# -------------------------------------------------------------------------------------------------


def test_any_agent_call_llm_outputs_and_costs():
    calls, text, tool, one_cost = rows(
        span(
            "call_llm mistral-small",
            {
                "gen_ai.operation.name": "call_llm",
                "gen_ai.request.model": "mistral/mistral-small-latest",
                "gen_ai.input.messages": js(
                    [
                        {"role": "system", "content": "Use tools."},
                        {"content": "Year?", "role": "user"},
                    ]
                ),
                "gen_ai.output": js([{"tool.name": "write_file", "tool.args": '{"text": "2025"}'}]),
                "gen_ai.output.type": "json",
                "gen_ai.usage.input_cost": 3.59e-05,
                "gen_ai.usage.output_cost": 4.2e-06,
            },
        ),
        span(
            "call_llm mistral-small",
            {"gen_ai.operation.name": "call_llm", "gen_ai.output": '{"steps": []}'},
        ),
        span(
            "execute_tool write_file",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "write_file",
                "gen_ai.tool.args": '{"text": "2025"}',
                "gen_ai.output": "{}",
            },
        ),
        span("call_llm m", {"gen_ai.operation.name": "call_llm", "gen_ai.usage.input_cost": 1e-05}),
    )
    assert (calls["role"], calls["convention"], calls["model"]) == (
        "model_call",
        "genai",
        "mistral/mistral-small-latest",
    )
    assert calls["input_messages"] == [msg("system", "Use tools."), msg("user", "Year?")]
    assert calls["requested_calls"] == [call(None, "write_file", '{"text": "2025"}')]
    assert calls["output_text"] is None
    assert calls["recorded_cost_usd"] == pytest.approx(4.01e-05)
    assert (text["output_text"], text["requested_calls"]) == (
        '{"steps": []}',
        [],
    )  # kept as recorded
    assert (tool["role"], tool["arguments"], tool["result"]) == (
        "tool_call",
        '{"text": "2025"}',
        "{}",
    )
    assert one_cost["recorded_cost_usd"] == pytest.approx(1e-05)


# -------------------------------------------------------------------------------------------------
# Langfuse fallback fields
# -------------------------------------------------------------------------------------------------


def test_langfuse_fields_are_the_last_resort():
    fallback_only, attrs_win, lf_tool = rows(
        span(
            "chat gpt-5-mini",
            {
                "langfuse.observation.type": "GENERATION",
                "langfuse.observation.model": "gpt-5-mini-2025-08-07",
                "langfuse.observation.input": js(
                    [{"role": "user", "parts": [{"type": "text", "content": "Hi"}]}]
                ),
                "langfuse.observation.output": js(
                    [{"role": "assistant", "parts": [{"type": "text", "content": "Hello"}]}]
                ),
                "langfuse.observation.usage_details": {
                    "input": 77,
                    "output": 86,
                    "total": 163,
                    "prompt_details.cache_read": 4,
                },
                "langfuse.observation.cost_details": {
                    "input": 1e-05,
                    "output": 0.0002,
                    "total": 0.00021,
                },
                "langfuse.observation.model_parameters": {"temperature": "0.7"},
            },
        ),
        span(
            "chat gpt-5-mini",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.usage.input_tokens": "39",
                "langfuse.observation.type": "GENERATION",
                "langfuse.observation.usage_details": {"input": 44, "output": 5},
            },
        ),
        span(
            "get_weather",
            {
                "langfuse.observation.type": "TOOL",
                "langfuse.observation.input": '{"location":"Tokyo"}',
                "langfuse.observation.output": '"Stormy"',
            },
        ),
    )
    assert (fallback_only["role"], fallback_only["convention"]) == ("model_call", "langfuse")
    assert (fallback_only["model"], fallback_only["temperature"]) == ("gpt-5-mini-2025-08-07", 0.7)
    assert (
        fallback_only["input_tokens"],
        fallback_only["output_tokens"],
        fallback_only["cached_input_tokens"],
    ) == (77, 86, 4)
    assert fallback_only["recorded_cost_usd"] == pytest.approx(0.00021)
    assert fallback_only["input_messages"] == [msg("user", "Hi")]
    assert fallback_only["output_text"] == "Hello"
    # a value the original attributes carry wins; a missing one falls back
    assert (attrs_win["convention"], attrs_win["input_tokens"], attrs_win["output_tokens"]) == (
        "genai",
        39,
        5,
    )
    assert (lf_tool["role"], lf_tool["tool_name"], lf_tool["arguments"], lf_tool["result"]) == (
        "tool_call",
        "get_weather",
        '{"location":"Tokyo"}',
        "Stormy",
    )


# -------------------------------------------------------------------------------------------------
# Near misses and robustness
# -------------------------------------------------------------------------------------------------


def test_span_matching_no_convention_is_other_with_nulls():
    r = one("SELECT orders", {"db.system": "postgresql", "input": "x", "name": "y"})
    assert r["role"] == "other" and r["convention"] is None and r["status"] == "unset"
    for key in (
        "error_type",
        "model",
        "provider",
        "temperature",
        "input_tokens",
        "output_tokens",
        "cached_input_tokens",
        "recorded_cost_usd",
        "tool_name",
        "tool_call_id",
        "arguments",
        "result",
        "output_text",
        "agent_name",
        "agent_version",
        "prompt_id",
        "tool_definitions",
        "http_resend_count",
        "conversation_id",
    ):
        assert r[key] is None, key
    assert (r["input_messages"], r["requested_calls"], r["finish_reasons"], r["has_content"]) == (
        [],
        [],
        [],
        False,
    )


def test_unknown_genai_operation_is_mapped_to_other_not_rejected():
    unknown, create = rows(
        span(
            "summarize",
            {"gen_ai.operation.name": "summarize_chunk", "gen_ai.usage.input_tokens": 5},
        ),
        span("create_agent a", {"gen_ai.operation.name": "create_agent", "gen_ai.agent.name": "a"}),
    )
    assert (unknown["role"], unknown["convention"], unknown["input_tokens"]) == (
        "other",
        "genai",
        5,
    )
    assert (create["role"], create["agent_name"]) == ("other", "a")


def test_unknown_genai_operation_falls_through_to_another_family():
    r = one("x", {"gen_ai.operation.name": "summarize_chunk", "openinference.span.kind": "LLM"})
    assert (r["role"], r["convention"]) == ("model_call", "openinference")


def test_numbers_recorded_as_strings_or_floats_are_coerced():
    strings, floats, garbage = rows(
        span(
            "chat a",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.usage.input_tokens": " 120 ",
                "gen_ai.usage.output_tokens": "12.0",
            },
        ),
        span(
            "chat b",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.usage.input_tokens": 31.0,
                "gen_ai.request.temperature": "0.7",
            },
        ),
        span(
            "chat c",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.usage.input_tokens": "abc",
                "http.request.resend_count": "1",
            },
        ),
    )
    assert (strings["input_tokens"], strings["output_tokens"]) == (120, 12)
    assert (floats["input_tokens"], floats["temperature"]) == (31, 0.7)
    assert (garbage["input_tokens"], garbage["http_resend_count"]) == (None, 1)


def test_agent_span_with_aggregated_usage_keeps_it():
    agent, model = rows(
        span(
            "invoke_agent weather",
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.usage.input_tokens": 44,
                "gen_ai.usage.output_tokens": 180,
            },
        ),
        span("chat gpt-5-mini", {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 44}),
    )
    assert (agent["role"], agent["agent_name"], agent["input_tokens"], agent["output_tokens"]) == (
        "agent",
        "weather",
        44,
        180,
    )
    assert (model["role"], model["input_tokens"]) == ("model_call", 44)


def test_malformed_content_is_kept_as_text_and_never_raises():
    broken, odd, bad_defs = rows(
        span(
            "chat a",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": "[{broken",
                "gen_ai.output.messages": "{bad",
            },
        ),
        span(
            "chat b",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": '[1, null, {"role": "user"}]',
            },
        ),
        span(
            "chat c",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.tool.definitions": "[{",
                "gen_ai.response.finish_reasons": "{",
            },
        ),
    )
    assert broken["input_messages"] == [msg("user", "[{broken")]
    assert broken["output_text"] == "{bad"
    assert odd["input_messages"] == [msg("user", "1")]  # the empty message is dropped
    assert (bad_defs["tool_definitions"], bad_defs["finish_reasons"]) == (None, ["{"])


def test_empty_values_do_not_hide_the_next_source():
    r = one(
        "chat",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.response.model": "",
            "gen_ai.request.model": "gpt-4o",
        },
    )
    assert r["model"] == "gpt-4o"


def test_duplicate_attribute_keys_last_one_wins():
    def attr(key: str, value: str) -> dict[str, Any]:
        return {"key": key, "str": value, "int": None, "float": None, "bool": None, "json": None}

    raw = [
        attr("gen_ai.operation.name", "chat"),
        attr("gen_ai.request.model", "first"),
        attr("gen_ai.request.model", "second"),
    ]
    assert one("chat", raw_attrs=raw)["model"] == "second"


def test_one_row_per_span_in_input_order_across_slices(monkeypatch):
    spans = [
        span("chat a", {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 1}),
        span(
            "execute_tool b",
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.arguments": '"{}"'},
        ),
        span("other"),
        span(
            "response",
            {"openinference.span.kind": "LLM", "llm.input_messages.0.message.content": "hi"},
        ),
        span(
            "invoke_agent c",
            {"gen_ai.operation.name": "invoke_agent"},
            events=[("exception", {"exception.type": "E"})],
        ),
    ]
    whole = rows(*spans)
    monkeypatch.setattr(normalize_module, "SLICE_ROWS", 2)
    sliced = rows(*spans)
    assert sliced == whole
    assert [r["span_id"] for r in whole] == [f"{i:016x}" for i in range(1, 6)]
    assert [r["role"] for r in whole] == ["model_call", "tool_call", "other", "model_call", "agent"]
    assert whole[3]["input_messages"] == [msg("user", "hi")]  # no role recorded: a user message
    assert whole[4]["status"] == "error"


def test_empty_table_gives_an_empty_normalized_table():
    out = normalize(empty_table(SPAN_SCHEMA))
    assert out.height == 0 and out.schema == NORMALIZED_COLUMNS


def test_roles_are_the_schema_roles():
    assert ROLES == ("model_call", "tool_call", "agent", "other")


# -------------------------------------------------------------------------------------------------
# content.py shapes
# -------------------------------------------------------------------------------------------------


def test_unflatten_orders_indexes_numerically():
    entries = [("p.10.a", "ten"), ("p.2.a", "two"), ("p.2.b.0.c", "x"), ("other.0", "no")]
    assert ct.unflatten(entries, "p.") == [{"a": "two", "b": [{"c": "x"}]}, {"a": "ten"}]


def test_messages_from_anthropic_gemini_responses_and_langchain_shapes():
    anthropic = [
        {"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "w", "input": {"c": "B"}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "Cloudy"}],
                }
            ],
        },
    ]
    assert ct.parse_messages(anthropic) == [
        ("user", "Weather?", None, None),
        ("assistant", '[{"id":"toolu_1","name":"w","arguments":"{\\"c\\":\\"B\\"}"}]', None, None),
        ("tool", "Cloudy", "toolu_1", None),
    ]
    gemini = {
        "contents": [
            {"role": "user", "parts": [{"text": "hi"}]},
            {
                "role": "user",
                "parts": [
                    {"function_response": {"id": "f1", "name": "greet", "response": {"ok": True}}}
                ],
            },
        ]
    }
    assert ct.parse_messages(gemini) == [
        ("user", "hi", None, None),
        ("tool", '{"ok":true}', "f1", "greet"),
    ]
    responses = [
        {"role": "developer", "content": "Be brief."},
        {
            "type": "function_call",
            "call_id": "call_1",
            "id": "fc_1",
            "name": "f",
            "arguments": "{}",
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "done"},
        {"type": "reasoning", "summary": []},
    ]
    assert ct.parse_messages(responses) == [
        ("system", "Be brief.", None, None),
        ("assistant", '[{"id":"call_1","name":"f","arguments":"{}"}]', None, None),
        ("tool", "done", "call_1", None),
    ]
    langchain = {
        "messages": [{"type": "human", "content": "Hey"}, {"type": "ai", "content": "Hello"}]
    }
    assert ct.parse_messages(langchain) == [
        ("user", "Hey", None, None),
        ("assistant", "Hello", None, None),
    ]
    assert ct.parse_messages("plain prompt") == [("user", "plain prompt", None, None)]


def test_outputs_from_provider_response_shapes():
    chat = ct.parse_output(
        {
            "choices": [
                {
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "f", "arguments": '{"x":1}'},
                            }
                        ],
                    },
                }
            ]
        }
    )
    assert (chat.text, chat.calls, chat.finish_reasons) == (
        None,
        [("c1", "f", '{"x":1}')],
        ["tool_calls"],
    )
    gemini = ct.parse_output(
        {
            "candidates": [
                {"content": {"role": "model", "parts": [{"text": "Hi"}]}, "finishReason": "STOP"}
            ]
        }
    )
    assert (gemini.text, gemini.finish_reasons) == ("Hi", ["STOP"])
    responses = ct.parse_output(
        {
            "object": "response",
            "output": [
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "Done"}],
                }
            ],
        }
    )
    assert responses.text == "Done"
    anthropic = ct.parse_output(
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Ok"}],
            "stop_reason": "end_turn",
        }
    )
    assert (anthropic.text, anthropic.finish_reasons) == ("Ok", ["end_turn"])
    conversation = ct.parse_output(
        [
            {"role": "assistant", "parts": [{"type": "text", "content": "Checking."}]},
            {
                "role": "tool",
                "parts": [{"type": "tool_call_response", "id": "c", "response": "sunny"}],
            },
            {"role": "assistant", "parts": [{"type": "text", "content": "It is sunny."}]},
        ]
    )
    assert conversation.text == "It is sunny."  # the last assistant text; tool messages skipped
    unknown = ct.parse_output('{"verdict": "approve", "score": 3}')
    assert (unknown.text, unknown.calls) == ('{"verdict": "approve", "score": 3}', [])
    # an agent's structured output that merely looks like a LangChain result is kept whole
    assert ct.parse_output('{"text": "approve"}').text == '{"text": "approve"}'
    assert ct.parse_output('["a", "b"]').text == '["a", "b"]'
    assert ct.parse_output("[]").text is None


def test_a_graph_state_of_messages_is_read_as_a_conversation():
    # LangGraph under OpenInference: a graph's or node's output is its state, {"messages":
    # [...]}, each message serialized as {"type", "data"}
    ai = {"type": "ai", "data": {"content": "It is sunny.", "type": "ai", "tool_calls": []}}
    tool = {"type": "tool", "data": {"content": "sunny", "tool_call_id": "c1"}}
    asks = {
        "type": "ai",
        "data": {"content": "", "tool_calls": [{"name": "weather", "args": {}, "id": "c1"}]},
    }
    human = {"type": "human", "data": {"content": "Weather?"}}
    state = ct.parse_output(json.dumps({"messages": [human, asks, tool, ai]}))
    assert (state.text, state.recognized) == ("It is sunny.", True)
    turn = ct.parse_output(json.dumps({"messages": [asks]}))
    assert (turn.text, [c[1] for c in turn.calls]) == (None, ["weather"])
    # near misses: a structured answer holding "messages" that are no chat messages, or
    # holding more than the messages, stays as recorded
    for kept in ({"messages": ["hello", "bye"]}, {"messages": [ai], "verdict": "clear"}):
        assert ct.parse_output(json.dumps(kept)).text == json.dumps(kept)


def test_an_output_written_as_the_python_repr_of_a_message_is_read_as_that_message():
    # BeeAI's agent span: str() of its {'role', 'text'} message
    beeai = ct.parse_output("{'role': 'assistant', 'text': \"It's sunny.\"}")
    assert (beeai.text, beeai.recognized) == ("It's sunny.", True)
    # the same as JSON reads the same
    assert ct.parse_output('{"role": "assistant", "text": "It\'s sunny."}').text == "It's sunny."
    # near misses, kept as recorded: a repr of no message shape, a repr that is no literal
    assert ct.parse_output("{'verdict': 'approve'}").text == "{'verdict': 'approve'}"
    assert ct.parse_output("{'role': Role.ASSISTANT}").text == "{'role': Role.ASSISTANT}"


def test_a_tool_span_s_events_are_its_arguments_and_result_only_as_strands_writes_both():
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "book"}
    args = ("gen_ai.tool.message", {"role": "tool", "content": '{"id": "DL420"}', "id": "t1"})
    done = ("gen_ai.choice", {"message": '[{"text": "confirmed"}]', "id": "t1"})
    strands, alone, recorded = rows(
        span("execute_tool book", tool, events=[args, done]),
        # near miss: a tool message alone may be the result; it is not taken for arguments
        span("execute_tool book", tool, events=[args]),
        # near miss: attributes the span records win over its events
        span(
            "execute_tool book",
            {**tool, "gen_ai.tool.call.arguments": '{"id": "X"}'},
            events=[args, done],
        ),
    )
    assert (strands["arguments"], strands["result"]) == ('{"id":"DL420"}', "confirmed")
    assert (alone["arguments"], alone["result"]) == (None, None)
    assert recorded["arguments"] == '{"id": "X"}'


def test_an_openinference_handoff_span_is_a_handoff_not_a_tool():
    handoff = {"openinference.span.kind": "TOOL", "input.value": "coordinator"}
    assert one("handoff to math_specialist", handoff)["role"] == "other"
    # near misses: a tool that names itself so, and a span of another kind with that name
    named = one("handoff to desk", {**handoff, "tool.name": "handoff to desk"})
    assert (named["role"], named["tool_name"]) == ("tool_call", "handoff to desk")
    assert one("handoff to x", {"openinference.span.kind": "AGENT"})["role"] == "agent"


def test_bedrock_converse_blocks_in_a_choice_event_are_the_text_and_the_calls_requested():
    # Strands: gen_ai.choice's message is a JSON list of Converse blocks, or the text alone
    blocks = [
        {"text": "Searching."},
        {"toolUse": {"toolUseId": "tooluse_1", "name": "search", "input": {"q": "NYC"}}},
        {"toolUse": "not a block"},  # near miss: no call without the block's fields
    ]
    event = {"event.name": "gen_ai.choice", "finish_reason": "tool_use", "message": blocks}
    out = ct.parse_output([event])
    assert (out.text, out.calls) == ("Searching.", [("tooluse_1", "search", '{"q":"NYC"}')])
    text_only = ct.parse_output([{"event.name": "gen_ai.choice", "message": "Booked."}])
    assert (text_only.text, text_only.calls) == ("Booked.", [])
    # a toolResult block answers its toolUse: its text blocks are the result
    result = {"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "3 flights"}]}}
    [message] = ct.parse_messages([{"role": "user", "content": [result]}])
    assert (message[0], message[1], message[2]) == ("tool", "3 flights", "tooluse_1")


def test_normalize_arguments_and_unwrap():
    assert ct.unwrap_json_string('"{\\"a\\": 1}"') == '{"a": 1}'
    assert ct.unwrap_json_string('{"a": 1}') == '{"a": 1}'
    assert ct.unwrap_json_string('"not closed') == '"not closed'
    assert ct.normalize_arguments('{"args": [], "kwargs": {"a": 1}}') == '{"a":1}'
    # smolagents' Tool.__call__ records its own flag beside them (OpenInference 0.1.31)
    smol = '{"args": [], "sanitize_inputs_outputs": false, "kwargs": {"query": "x"}}'
    assert ct.normalize_arguments(smol) == '{"query":"x"}'
    # near miss: another key beside them is an argument of the tool's own
    other = '{"args": [], "kwargs": {"a": 1}, "mode": "fast"}'
    assert ct.normalize_arguments(other) == other
    assert ct.normalize_arguments('{"input": {"a": 1}}') == '{"input": {"a": 1}}'
    assert ct.normalize_arguments('{"input": {"a": 1}}', langsmith=True) == '{"a":1}'
    assert ct.normalize_arguments('{"input": "text"}', langsmith=True) == '{"input": "text"}'


def test_openllmetry_langchain_tool_input_is_read_as_its_arguments():
    def start(**fields) -> str:  # on_tool_start's record, as OpenLLMetry writes it
        meta = {"tags": ["seq:step:1"], "metadata": {"langgraph_node": "tools"}}
        return json.dumps({"input_str": "{}", **meta, **fields, "kwargs": {"tool_call_id": "t1"}})

    assert ct.normalize_arguments(start(inputs={"device": "R1"})) == '{"device":"R1"}'
    assert ct.normalize_arguments(start(inputs={})) == "{}"
    # before `inputs` was recorded: the input string (a JSON string literal decoded once)
    assert ct.normalize_arguments(start(input_str='"{\\"device\\": \\"R2\\"}"')) == (
        '{"device": "R2"}'
    )
    assert ct.normalize_arguments(start(input_str="R3")) == "R3"
    # near misses: a tool whose own arguments hold some of these keys is left as recorded
    own = '{"input_str": "x", "kwargs": {"a": 1}}'
    assert ct.normalize_arguments(own) == own
    extra = json.loads(start(inputs={"a": 1})) | {"other": 1}
    assert ct.normalize_arguments(json.dumps(extra)) == json.dumps(extra)


def test_tool_definitions_from_every_shape_sorted_by_name():
    defs = ct.parse_tool_definitions(
        [
            '{"type":"function","name":"b_vercel","description":"V","inputSchema":{"type":"object"}}',
            {"name": "c_anthropic", "input_schema": {"type": "object"}},
            {"function_declarations": [{"name": "a_gemini", "parameters": {"type": "object"}}]},
        ]
    )
    assert [d["name"] for d in json.loads(defs or "[]")] == ["a_gemini", "b_vercel", "c_anthropic"]
    assert json.loads(defs or "[]")[1] == {
        "description": "V",
        "name": "b_vercel",
        "parameters": {"type": "object"},
    }
    assert ct.parse_tool_definitions([{"no": "name"}]) is None


# -------------------------------------------------------------------------------------------------
# Real traces (read by the ingest reader)
# -------------------------------------------------------------------------------------------------

REAL = Path(os.environ.get("AGENTTRACE_REAL_TRACES", "/work/shared/real-traces"))


def real(name: str) -> dict[str, dict[str, Any]]:
    documents = pytest.importorskip("analyzer.ingest.documents")
    from analyzer.ingest.accounting import FileLog

    path = REAL / name
    if not path.is_file():
        pytest.skip(f"{path} not available")
    batches = list(documents.read_json_document(path.read_bytes(), FileLog(path=str(path))))
    out = normalize(pa.Table.from_batches(batches)).to_dicts()
    return {r["span_id"]: r for r in out}


def brief(r: dict[str, Any]) -> tuple:
    return (
        r["role"],
        r["model"],
        r["tool_name"],
        r["tool_call_id"],
        r["input_tokens"],
        r["output_tokens"],
    )


def test_real_any_agent_openai_trace():
    spans = real("any-agent__OPENAI_trace.json")
    m = "mistral/mistral-small-latest"
    assert {k: brief(v) for k, v in spans.items()} == {
        "8100d9dbee1f3e47": ("model_call", m, None, None, 269, 16),
        "bdf28428cc0e8eb5": ("tool_call", None, "get_current_time", None, None, None),
        "1b1e636a0d314482": ("model_call", m, None, None, 359, 14),
        "2f36d63682b5ff70": ("tool_call", None, "write_file", None, None, None),
        "975e0660433b7a8b": ("model_call", m, None, None, 392, 46),
        "ab08afea3548c547": ("agent", m, None, None, None, None),
    }
    assert spans["8100d9dbee1f3e47"]["requested_calls"] == [
        call(None, "get_current_time", '{"timezone": "America/New_York"}')
    ]
    assert spans["1b1e636a0d314482"]["requested_calls"] == [
        call(None, "write_file", '{"text": "2025"}')
    ]
    assert spans["975e0660433b7a8b"]["output_text"].startswith('{"steps": [{"number": 1,')
    assert spans["2f36d63682b5ff70"]["arguments"] == '{"text": "2025"}'
    assert spans["8100d9dbee1f3e47"]["recorded_cost_usd"] == pytest.approx(2.69e-05 + 4.8e-06)
    assert spans["ab08afea3548c547"]["agent_name"] == "any_agent"


def test_real_any_agent_google_trace():
    spans = real("any-agent__GOOGLE_trace.json")
    m = "mistral/mistral-small-latest"
    assert {k: brief(v) for k, v in spans.items()} == {
        "28b3922a9d89a4ac": ("model_call", m, None, None, 672, 16),
        "cfa478aff011e825": ("tool_call", None, "get_current_time", "jbUWqgIUr", None, None),
        "4dfb98a87c017887": ("model_call", m, None, None, 770, 14),
        "65fd4833c24a2fc0": ("tool_call", None, "write_file", "j5pzf0TaM", None, None),
        "5d77d7d20d0b5d84": ("model_call", m, None, None, 809, 56),
        "6fa6b13adfb42a2e": ("tool_call", None, "final_output", "Je755BQAS", None, None),
        "773076b4028f3d19": ("agent", m, None, None, None, None),
    }
    # here any-agent records the requested arguments as objects
    assert spans["4dfb98a87c017887"]["requested_calls"] == [
        call(None, "write_file", '{"text":"2025"}')
    ]
    assert spans["5d77d7d20d0b5d84"]["requested_calls"][0]["name"] == "final_output"


def test_real_langfuse_openai_agents_trace():
    spans = real("langfuse__openai-agents-2025-09-30.trace.json")
    m = "gpt-4.1-2025-04-14"
    assert {k: brief(v) for k, v in spans.items()} == {
        "e5a76f27f51ad40e": ("agent", None, None, None, None, None),
        "d950b668796240b5": ("agent", None, None, None, None, None),
        "98870087af69bf06": ("model_call", m, None, None, 55, 15),
        "90d94774e8e3724d": ("model_call", m, None, None, 85, 29),
        "5b99c3e3411ed17b": ("tool_call", None, "get_weather", None, None, None),
    }
    assert [spans[k]["agent_name"] for k in ("e5a76f27f51ad40e", "d950b668796240b5")] == [
        "Agent workflow",
        "Hello world",
    ]
    assert spans["98870087af69bf06"]["requested_calls"] == [
        call("call_Kud0j0DxWSmLzv9W5m6qVqXn", "get_weather", '{"city":"Tokyo"}')
    ]
    assert spans["90d94774e8e3724d"]["output_text"].startswith(
        "The weather in Tokyo is currently sunny."
    )
    assert spans["90d94774e8e3724d"]["input_messages"][-1] == msg(
        "tool", "The weather in Tokyo is sunny.", "call_Kud0j0DxWSmLzv9W5m6qVqXn"
    )
    assert (spans["5b99c3e3411ed17b"]["arguments"], spans["5b99c3e3411ed17b"]["result"]) == (
        '{"city":"Tokyo"}',
        "The weather in Tokyo is sunny.",
    )
    assert spans["98870087af69bf06"]["cached_input_tokens"] == 0


def test_real_langfuse_google_adk_trace():
    spans = real("langfuse__google-adk-2025-08-28.trace.json")
    m = "gemini-2.0-flash"
    assert {k: brief(v) for k, v in spans.items()} == {
        "86cd4912944ddc41": ("other", None, None, None, None, None),
        "6d8beb2e6a36b133": ("agent", None, None, None, None, None),
        "f6e4c65297e40c96": ("model_call", m, None, None, 28, 3),
        "bded677884f031ce": ("model_call", m, None, None, 39, 6),
        "04290e4d82aba1bc": (
            "tool_call",
            None,
            "say_hello",
            "adk-8bd8dc65-717d-4102-858b-3a1dd6b75a00",
            None,
            None,
        ),
    }
    assert spans["f6e4c65297e40c96"]["requested_calls"] == [call(None, "say_hello", None)]
    assert spans["bded677884f031ce"]["output_text"] == "Hello Langfuse 👋!\n"
    assert spans["04290e4d82aba1bc"]["result"] == '{"greeting": "Hello Langfuse 👋"}'
    assert spans["6d8beb2e6a36b133"]["agent_name"] == "hello_agent"


def test_real_langfuse_microsoft_agent_trace():
    spans = real("langfuse__microsoft-agent-2025-12-17.trace.json")
    m = "gpt-5-mini-2025-08-07"
    call_id = "call_CwaJHuXTm9dmHFQPlVbqyzJ0"
    assert {k: brief(v) for k, v in spans.items()} == {
        "4cd6caa32861956a": ("agent", "gpt-5-mini", None, None, 44, 180),  # aggregated usage kept
        "2406e8343fd49c0e": ("model_call", m, None, None, 77, 86),
        "b0913e7cd82d72b8": ("model_call", m, None, None, 216, 20),
        "a2de97aac476c036": ("tool_call", None, "get_weather", call_id, None, None),
    }
    assert spans["2406e8343fd49c0e"]["requested_calls"] == [
        call(call_id, "get_weather", '{"location":"Tokyo, Japan"}')
    ]
    answer = "Current conditions in Tokyo, Japan: stormy, high around 23°C."
    assert spans["b0913e7cd82d72b8"]["output_text"] == answer
    assert spans["4cd6caa32861956a"]["output_text"] == answer
    assert (
        spans["a2de97aac476c036"]["result"]
        == "The weather in Tokyo, Japan is stormy with a high of 23°C."
    )


def test_real_langfuse_claude_agent_trace():
    spans = real("langfuse__claude-agent-2025-12-22.trace.json")
    m, tool = "claude-sonnet-4-5-20250929", "mcp__weather__get_weather"
    assert {k: brief(v) for k, v in spans.items()} == {
        "805dc5dff9e33e32": ("other", None, None, None, None, None),
        "e9aac170e5d48125": ("model_call", m, None, None, 19, 29),
        "2cc13e77781787fd": ("model_call", m, None, None, 5, 53),
        "f8e8f040dc94e67e": ("model_call", m, None, None, 5, 56),
        "371496f71d82baed": ("model_call", m, None, None, 5, 94),
        "f411dab686a064b1": ("tool_call", None, tool, None, None, None),
        "edbd987c5f361fdf": ("tool_call", None, tool, None, None, None),
    }
    assert spans["2cc13e77781787fd"]["requested_calls"] == [
        call("toolu_01TKoqQLvY2UWuC49qnD48y7", tool, '{"city":"Berlin"}')
    ]
    assert spans["f8e8f040dc94e67e"]["requested_calls"] == [
        call("toolu_01NtVat4vJLFfVd5TqdLHcA7", tool, '{"city":"New York"}')
    ]
    assert spans["f411dab686a064b1"]["arguments"] == '{"city":"Berlin"}'
    assert spans["edbd987c5f361fdf"]["arguments"] == '{"city":"New York"}'
    assert spans["371496f71d82baed"]["output_text"].startswith(
        "Great! Here's the current weather for both cities:"
    )


def test_real_langfuse_vercel_trace():
    spans = real("langfuse__vercel-aisdk-2025-11-17.trace.json")
    call_id = "call_DgKARp7a7IhJPDczfifMp6Ra"
    assert {k: brief(v) for k, v in spans.items()} == {
        "1dc6768109615657": ("agent", "gpt-5", None, None, 62, 85),
        "91a17a2274bfd23f": ("model_call", "gpt-5-2025-08-07", None, None, 62, 85),
        "e9bb8c191e1e4706": ("tool_call", None, "getWeather", call_id, None, None),
    }
    assert spans["91a17a2274bfd23f"]["requested_calls"] == [
        call(call_id, "getWeather", '{"location":"San Francisco"}')
    ]
    assert spans["e9bb8c191e1e4706"]["result"] == '{"location":"San Francisco","temperature":64}'
    assert (
        spans["1dc6768109615657"]["output_text"] is None
    )  # the run stopped after requesting a tool


_GENAI_INPUTS = [
    [
        {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
        {
            "role": "User",
            "parts": [{"type": "text", "content": "Hi"}, {"type": "text", "content": "again"}],
        },
        {
            "role": "model",
            "parts": [
                {"type": "reasoning", "content": "hmm"},
                {"type": "tool_call", "id": "c1", "name": "f", "arguments": {"a": 1}},
                {"type": "tool_call", "id": "c2", "name": "g", "arguments": '"{\\"b\\": 2}"'},
            ],
        },
        {
            "role": "tool",
            "parts": [
                {"type": "tool_call_response", "id": "c1", "response": {"ok": True}},
                {"type": "tool_call_response", "id": "c2", "result": "done"},
            ],
        },
        {"role": "tool", "parts": [{"type": "text", "content": "loose tool text"}], "name": "f"},
        {"parts": [{"type": "text", "content": "no role"}]},
        {"role": "assistant", "parts": []},
    ],
    [
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": ""},
        {"role": "tool", "content": "sunny", "tool_call_id": "call_1", "name": "w"},
        {"role": "tool", "content": "", "tool_call_id": "call_2"},
        {"content": "no role", "role": None},
    ],
]
_GENAI_OUTPUTS = [
    [
        {
            "role": "assistant",
            "parts": [
                {"type": "text", "content": "Checking."},
                {"type": "tool_call", "id": "c1", "name": "f", "arguments": '{"x":1}'},
            ],
            "finish_reason": "tool_call",
        }
    ],
    [
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "c", "name": "f"}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c", "response": "r"}]},
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "Final."}],
            "finish_reason": "stop",
        },
    ],
]


_GENAI_MESSAGES = [
    [
        ("system", "Be brief.", None, None),
        ("user", "Hi\nagain", None, None),
        (
            "assistant",
            '[{"id":"c1","name":"f","arguments":"{\\"a\\":1}"},'
            '{"id":"c2","name":"g","arguments":"{\\"b\\": 2}"}]',
            None,
            None,
        ),
        ("tool", '{"ok":true}', "c1", None),
        ("tool", "done", "c2", None),
        ("tool", "loose tool text", None, "f"),
        ("user", "no role", None, None),
    ],
    [
        ("system", "Use tools.", None, None),
        ("tool", "sunny", "call_1", "w"),
        ("tool", None, "call_2", None),
        ("user", "no role", None, None),
    ],
]


@pytest.mark.parametrize(("value", "want"), list(zip(_GENAI_INPUTS, _GENAI_MESSAGES, strict=True)))
def test_genai_and_plain_messages(value, want):
    assert ct.parse_messages(js(value)) == want


def test_genai_output_messages():
    first, last = (ct.parse_output(js(v)) for v in _GENAI_OUTPUTS)
    assert first == ct.Output("Checking.", [("c1", "f", '{"x":1}')], ["tool_call"], True)
    assert last == ct.Output("Final.", [("c", "f", None)], ["stop"], True)


def test_spans_without_attributes_or_events():
    a, b = rows(span("a"), span("b", status="ok"))
    assert (a["role"], a["convention"], a["status"], a["has_content"]) == (
        "other",
        None,
        "unset",
        False,
    )
    assert (b["status"], b["input_messages"], b["finish_reasons"]) == ("ok", [], [])


def test_many_small_batches_give_the_same_rows_as_one_batch():
    spans = [
        span("chat a", {"gen_ai.operation.name": "chat", "gen_ai.usage.output_tokens": "7"}),
        span("t", {"openinference.span.kind": "TOOL", "tool.name": "t", "input.value": '"{}"'}),
        span("x", {"llm.request.type": "chat", "gen_ai.completion.0.content": "ok"}),
    ]
    whole = table(*spans)
    chunked = pa.Table.from_batches(whole.to_batches(max_chunksize=1))
    assert chunked.column("attributes").num_chunks == 3
    assert normalize(chunked).equals(normalize(whole))
    assert normalize(chunked).get_column("output_tokens").to_list() == [7, None, None]


def test_chunks_too_big_to_concatenate_are_read_one_by_one(monkeypatch):
    spans = [
        span(
            "chat a", {"gen_ai.operation.name": "chat", "llm.input_messages.0.message.content": "x"}
        ),
        span(
            "execute_tool b", {"gen_ai.operation.name": "execute_tool"}, events=[("exception", {})]
        ),
        span("response", {"openinference.span.kind": "LLM", "llm.token_count.prompt": 3}),
    ]
    whole = table(*spans)
    chunked = pa.Table.from_batches(whole.to_batches(max_chunksize=1))
    monkeypatch.setattr(normalize_module, "COMBINE_MAX_BYTES", 0)
    out = normalize(chunked).to_dicts()
    assert out == normalize(whole).to_dicts()
    assert [r["role"] for r in out] == ["model_call", "tool_call", "model_call"]
    assert out[0]["input_messages"] == [msg("user", "x")]
    assert (out[1]["status"], out[2]["input_tokens"]) == ("error", 3)


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.sampled_from(["", "text", "tool", "user", "{", '"x"', "[1]", "tool_call", "function"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "role",
                    "content",
                    "parts",
                    "type",
                    "id",
                    "name",
                    "arguments",
                    "tool_calls",
                    "function",
                    "messages",
                    "contents",
                    "choices",
                    "message",
                    "output",
                    "text",
                    "event.name",
                    "lc",
                    "kwargs",
                    "response",
                    "candidates",
                ]
            ),
            inner,
            max_size=5,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_json_values)
def test_content_parsers_never_raise_on_any_json(value):
    text = js(value)
    for arg in (value, text):
        messages = ct.parse_messages(arg)
        assert all(m[1] is not None or m[2] is not None for m in messages)
        out = ct.parse_output(arg)
        assert out.text is None or isinstance(out.text, str)
        assert all(isinstance(c, tuple) and len(c) == 3 for c in out.calls)
        defs = ct.parse_tool_definitions([arg])
        assert defs is None or isinstance(json.loads(defs), list)
    assert isinstance(ct.normalize_arguments(text, langsmith=True), str)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(
                [
                    "gen_ai.input.messages",
                    "gen_ai.output.messages",
                    "gen_ai.system_instructions",
                    "gen_ai.tool.definitions",
                    "gen_ai.response.finish_reasons",
                    "llm.input_messages.0.message.contents.0.message_content.text",
                    "gen_ai.completion.0.tool_calls.0.arguments",
                    "events",
                    "ai.response.toolCalls",
                    "output.value",
                    "gen_ai.tool.call.arguments",
                    "gen_ai.usage.input_tokens",
                ]
            ),
            _json_values.map(js),
        ),
        max_size=6,
    )
)
def test_normalize_never_raises_on_garbage_content(pairs):
    attrs = dict(pairs)
    out = rows(
        span("chat x", {"gen_ai.operation.name": "chat", **attrs}),
        span("execute_tool y", {"gen_ai.operation.name": "execute_tool", **attrs}),
        span("z", {"openinference.span.kind": "AGENT", **attrs}),
    )
    assert [r["role"] for r in out] == ["model_call", "tool_call", "agent"]


# -------------------------------------------------------------------------------------------------
# Shapes seen in real third-party traces (issue: one call is one call)
# -------------------------------------------------------------------------------------------------


def _llm_result(usage: dict[str, int]) -> str:
    message = {"lc": 1, "type": "constructor", "kwargs": {"content": "hi", "usage_metadata": usage}}
    return js({"generations": [[{"text": "hi", "message": message}]], "llm_output": None})


def test_langchain_usage_held_only_in_the_generation_message():
    usage = {"input_tokens": 60, "output_tokens": 15, "total_tokens": 75}
    llm = one(
        "ChatVertexAI", {"openinference.span.kind": "LLM", "output.value": _llm_result(usage)}
    )
    assert (llm["role"], llm["input_tokens"], llm["output_tokens"]) == ("model_call", 60, 15)
    # the span's own token attributes win
    both = one(
        "ChatVertexAI",
        {
            "openinference.span.kind": "LLM",
            "llm.token_count.prompt": 61,
            "llm.token_count.completion": 16,
            "output.value": _llm_result(usage),
        },
    )
    assert (both["input_tokens"], both["output_tokens"]) == (61, 16)
    # a chain's output repeats it: not a model call's usage
    chain = one(
        "RunnableSequence", {"openinference.span.kind": "CHAIN", "output.value": _llm_result(usage)}
    )
    assert (chain["input_tokens"], chain["output_tokens"]) == (None, None)
    result = {
        "generations": [[]],
        "llm_output": {"token_usage": {"prompt_tokens": 9, "completion_tokens": 2}},
    }
    openai = one("ChatOpenAI", {"openinference.span.kind": "LLM", "output.value": js(result)})
    assert (openai["input_tokens"], openai["output_tokens"]) == (9, 2)


def test_dspy_tool_spans_are_named_after_their_tool_not_its_method():
    # openinference-instrumentation-dspy names a tool's span "<tool>.acall" or "<tool>.__call__"
    # (its _AsyncToolCallWrapper, _ToolCallWrapper) and records no tool.name
    kind = {"openinference.span.kind": "TOOL"}
    acall, call_, named, other, plain = rows(
        span("get_weather.acall", {**kind, "input.value": js({"city": "Lisbon"})}),
        span("search_facts.__call__", kind),
        span("x.acall", {**kind, "tool.name": "lookup"}),  # a recorded name wins
        span("fetch.page", kind),  # near miss: another suffix is part of the name
        span("get_weather.acall", {"gen_ai.operation.name": "execute_tool"}),  # not OpenInference
    )
    assert [r["tool_name"] for r in (acall, call_, named, other, plain)] == [
        "get_weather",
        "search_facts",
        "lookup",
        "fetch.page",
        "get_weather.acall",
    ]


def test_crewai_s_report_of_a_tool_failure_is_no_second_call():
    # CrewAI's event spans: a failed tool call is its tool_usage_error span, then a zero-length
    # tool_failure_detected span reporting the same failure (same tool, same arguments)
    tool = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.call.arguments": '{"city": "Lisbon"}',
    }
    failed, report, ran = rows(
        span("call tool", {**tool, "crewai.event_name": "tool_usage_error"}, status="error"),
        span(
            "tool failure", {**tool, "crewai.event_name": "tool_failure_detected"}, status="error"
        ),
        span("call tool", {**tool, "crewai.event_name": "tool_usage_finished"}),  # near miss
    )
    assert (failed["role"], report["role"], ran["role"]) == ("tool_call", "other", "tool_call")


def test_a_tool_call_waiting_for_an_approval_is_no_call_that_ran():
    # Pydantic AI: a tool raising ApprovalRequired/CallDeferred names it on its span; before
    # 2026-03 (and in format versions < 5 still) only status ERROR and the exception event.
    # Strands: a tool's interrupt ends its span with no result and no tool status.
    pai = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "screen_sanctions",
        "gen_ai.tool.call.id": "call_screen",
    }
    deferral = {"pydantic_ai.tool.deferral.name": "ApprovalRequired"}
    raised = [("exception", {"exception.type": "pydantic_ai.exceptions.CallDeferred"})]
    other_error = [("exception", {"exception.type": "ValueError"})]
    strands = {**pai, "gen_ai.system": "strands-agents"}
    paused = rows(
        span("execute_tool screen_sanctions", {**pai, **deferral}),
        span("running tool", {**pai, **deferral}, status="error", events=raised),
        span("running tool", pai, status="error", events=raised),  # before the attribute
        span("execute_tool screen_sanctions", strands, status="ok"),
    )
    assert [r["role"] for r in paused] == ["other"] * 4
    failed, ran, errored, old_error, ran_no_status = rows(
        span("running tool", pai, status="error", events=other_error),  # near miss: a failure
        span("execute_tool x", {**strands, "gen_ai.tool.status": "success"}, status="ok"),
        span("execute_tool x", {**strands, "gen_ai.tool.status": "error"}, status="ok"),
        span("Tool: x", {**strands, "tool.status": "error"}, status="ok"),  # before 2025-10
        span("execute_tool x", pai),  # near miss: not Strands, no status is no interrupt
    )
    calls = (failed, ran, errored, old_error, ran_no_status)
    assert [r["role"] for r in calls] == ["tool_call"] * 5
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "kyc"}
    # near miss: the exception on a span that names no tool (an agent's) pauses no call
    assert one("kyc run", agent, status="error", events=raised)["role"] == "agent"
    assert [r["status"] for r in calls] == ["error", "ok", "error", "error", "unset"]


def test_llamaindex_s_request_preparation_span_is_no_model_call():
    # openinference-instrumentation-llama-index gives every span of an LLM's methods the LLM
    # kind: _prepare_chat_with_tools builds the request (its output: messages and tools) beside
    # the call that sends it; counted, each call of a tool-calling agent counted twice
    llm = {"openinference.span.kind": "LLM", "llm.model_name": "m"}
    prepare, chat, private = rows(
        span("OpenAILike._prepare_chat_with_tools", {**llm, "output.value": js({"tools": []})}),
        span("OpenAILike.achat", {**llm, "llm.token_count.prompt": 5}),
        span("OpenAILike._achat", {**llm, "llm.token_count.prompt": 5}),  # near miss: a call
    )
    assert (prepare["role"], chat["role"], private["role"]) == ("other", "model_call", "model_call")


def test_pydantic_ai_agent_spans_named_after_their_agent():
    named, plain, other, tools, near = rows(
        span("joke_agent run", {"agent_name": "joke_agent", "gen_ai.agent.name": "joke_agent"}),
        span("agent run", {"agent_name": "qa_agent"}),
        span("weather run", {"agent_name": "joke_agent"}),  # not its agent's name
        span("running 3 tools", {"logfire.msg": "running 3 tools"}),
        span("joke_agent run", {}),  # no agent name recorded
    )
    assert (named["role"], named["agent_name"]) == ("agent", "joke_agent")
    assert (plain["role"], plain["agent_name"]) == ("agent", "qa_agent")
    assert (other["role"], tools["role"], near["role"]) == ("other", "other", "other")


def test_ag2_conversation_root_is_an_agent_span():
    attrs = {"gen_ai.operation.name": "conversation", "ag2.span.type": "conversation"}
    assert one("conversation", attrs)["role"] == "agent"


def test_strands_swarm_and_graph_roots_are_agent_spans():
    # strands/telemetry/tracer.py start_multiagent_span: `invoke_{instance}`, a Swarm or a Graph
    swarm, graph, node, other = rows(
        span(
            "invoke_swarm", {"gen_ai.operation.name": "invoke_swarm", "gen_ai.agent.name": "swarm"}
        ),
        span("invoke_graph", {"gen_ai.operation.name": "invoke_graph"}),
        span("execute_node", {"gen_ai.operation.name": "execute_node"}),  # one node of the graph
        span("invoke_team", {"gen_ai.operation.name": "invoke_team"}),  # no such instance
    )
    assert (swarm["role"], graph["role"]) == ("agent", "agent")
    assert (node["role"], other["role"]) == ("other", "other")
    # the agents under a swarm are one run, as under any conversation root
    from analyzer.runs import build_runs

    invoke = {"gen_ai.operation.name": "invoke_agent"}
    spans = table(
        span("invoke_swarm", {"gen_ai.operation.name": "invoke_swarm"}),
        span("invoke_agent researcher", {**invoke, "gen_ai.agent.name": "researcher"}),
        span("invoke_agent writer", {**invoke, "gen_ai.agent.name": "writer"}),
    )
    assert build_runs(spans, normalize(spans)).runs["run_id"].to_list() == [TRACE]


def test_event_style_spans_carry_their_call_key():
    start, success, update, tool_start = rows(
        span("backend.openai.chat.start-16", {"openinference.span.kind": "LLM"}),
        span("backend.openai.chat.success-16", {"openinference.span.kind": "LLM"}),
        span("agent.react.update-13", {"openinference.span.kind": "AGENT", "tool.name": "Wiki"}),
        span("tool.search.wikipedia.start-12", {"openinference.span.kind": "TOOL"}),
    )
    assert start["event_call"] == success["event_call"] == "backend.openai.chat#16"
    assert (update["event_call"], update["named_tool"]) == (None, "Wiki")
    assert (tool_start["event_call"], tool_start["tool_name"], tool_start["named_tool"]) == (
        "tool.search.wikipedia#12",
        "tool.search.wikipedia",
        None,
    )
    # near misses: no event word, no number
    plain, unnumbered = rows(
        span("backend.openai.chat.stream-16", {"openinference.span.kind": "LLM"}),
        span("backend.openai.chat.start", {"openinference.span.kind": "LLM"}),
    )
    assert plain["event_call"] is None and unnumbered["event_call"] is None


def test_openllmetry_unknown_model_is_no_model_and_langchain_names_it_on_model_calls():
    ls = "traceloop.association.properties.ls_model_name"
    chat = {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 5}
    unknown = {"gen_ai.request.model": "unknown", "gen_ai.response.model": "unknown"}
    named, bare, recorded, web, tool = rows(
        span("ChatLiteLLM.chat", {**chat, **unknown, ls: "anthropic/claude-opus-4-5"}),
        span("ChatLiteLLM.chat", {**chat, **unknown}),
        span("ChatOpenAI.chat", {**chat, "gen_ai.request.model": "gpt-4o", ls: "gpt-4o-mini"}),
        # LangChain's metadata rides on every span started inside the call: read on model
        # calls only, or an HTTP client span would be a span with a model no convention reads
        span("POST /v1/messages", {"http.request.method": "POST", ls: "anthropic/claude"}),
        # "unknown" is a placeholder of the model keys only: a tool may be named so
        span(
            "execute_tool", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "unknown"}
        ),
    )
    assert [r["model"] for r in (named, bare, recorded, web)] == [
        "anthropic/claude-opus-4-5",
        None,
        "gpt-4o",
        None,
    ]
    assert (named["role"], web["role"]) == ("model_call", "other")
    assert (tool["role"], tool["tool_name"]) == ("tool_call", "unknown")


def test_ioa_observe_attributes_are_read_as_the_traceloop_ones_they_fork():
    agent, task = rows(
        span(
            "supervisor.run.agent",
            {"ioa_observe.span.kind": "agent", "ioa_observe.entity.name": "supervisor.run"},
        ),
        span("supervisor.plan.task", {"ioa_observe.span.kind": "task"}),
    )
    assert (agent["role"], agent["agent_name"], agent["convention"]) == (
        "agent",
        "supervisor.run",
        "openllmetry",
    )
    assert task["role"] == "other"
    # under --redact the names stay in clear, as Traceloop's do
    from analyzer.conventions import semconv as sc

    assert {"ioa_observe.span.kind", "ioa_observe.entity.name"} <= sc.REDACT_KEPT_KEYS


def test_agentops_kinds_and_entity_attributes_are_read_as_the_traceloop_ones_they_fork():
    crew, task, agent, llm, session = rows(
        span(
            "crewai.workflow",
            {
                "agentops.span.kind": "workflow",
                "agentops.entity.name": "Crew",  # the entity's type, not a name
                "crewai.crew.result": "Verse 1",
                "gen_ai.usage.prompt_tokens": 481,  # the sum of its calls'
            },
        ),
        span(
            "Write a song..task",
            {"agentops.span.kind": "workflow.step", "agentops.entity.output": "Verse 1"},
        ),
        span("Songwriter.agent", {"agentops.span.kind": "agent", "agentops.entity.name": "Agent"}),
        span(
            "ollama/llama3:latest.llm",
            {
                "agentops.span.kind": "llm",
                "gen_ai.request.model": "ollama/llama3:latest",
                "gen_ai.usage.prompt_tokens": 271,
                "gen_ai.completion.0.role": "assistant",
                "gen_ai.completion.0.content": "Final Answer: Verse 1",
            },
        ),
        span("session", {"agentops.span.kind": "session"}),
    )
    assert [r["role"] for r in (crew, task, agent, llm, session)] == [
        "agent",
        "other",
        "agent",
        "model_call",
        "other",
    ]
    assert {r["convention"] for r in (crew, agent, llm)} == {"openllmetry"}
    assert (crew["agent_name"], agent["agent_name"]) == (None, "Songwriter")
    assert crew["output_text"] == "Verse 1"  # the crew's result: its answer
    assert (llm["model"], llm["input_tokens"]) == ("ollama/llama3:latest", 271)
    assert llm["output_text"] == "Final Answer: Verse 1"


def test_openllmetry_langchain_tool_output_is_read_as_the_tool_message_content():
    def end(content, **extra) -> str:  # on_tool_end's record, as OpenLLMetry writes it
        message = {
            "lc": 1,
            "type": "constructor",
            "id": ["langchain", "schema", "messages", "ToolMessage"],
            "kwargs": {"content": content, "type": "tool", "tool_call_id": "t1", **extra},
        }
        return json.dumps({"output": message, "kwargs": {"color": "green"}})

    assert ct.normalize_result(end("42 devices")) == "42 devices"
    parts = [{"type": "text", "text": '{"status": "ok"}'}, {"type": "text", "text": "more"}]
    assert ct.normalize_result(end(parts)) == '{"status": "ok"}\nmore'
    assert ct.normalize_result(json.dumps(end("x"))) == "x"  # JSON-encoded once more
    # near misses, kept as recorded: another message class, another key beside the output,
    # an output that is no LangChain message, a message with no content
    human = end("hi").replace('"ToolMessage"', '"HumanMessage"')
    other = json.dumps(json.loads(end("x")) | {"extra": 1})
    plain = json.dumps({"output": {"lc": "x", "kwargs": {"content": "y"}}})
    for text in (human, other, plain, end(None)):
        assert ct.normalize_result(text) == text


def test_openinference_langchain_tool_output_gives_its_content_and_call_id():
    # OpenInference's LangChain tracer records a tool's output as the serialized ToolMessage,
    # and the span records no call id: the message names the call it answers
    def message(content, **data) -> str:
        fields = {"content": content, "type": "tool", "tool_call_id": "call_owner"}
        return json.dumps({"type": "tool", "data": fields | data})

    tool = {"openinference.span.kind": "TOOL", "tool.name": "lookup_owner"}
    answered, unanswered, data = rows(
        span("lookup_owner", tool | {"output.value": message("Jean Dupont", status="success")}),
        # near misses: a result that only looks like one (no call id; not a tool message)
        span("lookup_owner", tool | {"output.value": js({"type": "tool", "data": {"x": 1}})}),
        span("lookup_owner", tool | {"output.value": js({"tool_call_id": "c", "data": {}})}),
    )
    assert (answered["result"], answered["tool_call_id"]) == ("Jean Dupont", "call_owner")
    assert (unanswered["result"], unanswered["tool_call_id"]) == (
        js({"type": "tool", "data": {"x": 1}}),
        None,
    )
    assert (data["result"], data["tool_call_id"]) == (js({"tool_call_id": "c", "data": {}}), None)
    assert ct.normalize_result(message(None)) == message(None)  # no content: kept as recorded
