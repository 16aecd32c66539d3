"""Message, tool-call and argument content in the many shapes emitters record it.

Pure functions over decoded JSON values (dicts, lists, strings). They never raise on malformed
content: what cannot be understood is kept as text. The field names read here are those of the
message payloads (GenAI parts schema, OpenAI chat and Responses API, Anthropic, Gemini, Vercel AI
SDK, LangChain, pydantic-ai events); attribute names live in `semconv`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from analyzer.conventions import semconv as sc

__all__ = [
    "Call",
    "Message",
    "Output",
    "arguments_text",
    "flattened_tool_definitions",
    "keyword_arguments",
    "load_json",
    "normalize_arguments",
    "normalize_result",
    "openinference_messages",
    "openllmetry_messages",
    "parse_messages",
    "parse_output",
    "parse_system_instructions",
    "parse_tool_definitions",
    "result_text",
    "to_text",
    "tool_span_definition",
    "unflatten",
    "unwrap_json_string",
]

#: (role, content, tool_call_id, name), the fields of `schema.MESSAGE`.
Message = tuple[str | None, str | None, str | None, str | None]
#: (id, name, arguments), the fields of `schema.REQUESTED_CALL`.
Call = tuple[str | None, str | None, str | None]

_JSON_START = frozenset('[{"')


def load_json(value: Any) -> Any:
    """Decode `value` when it is a string holding a JSON array, object or string; else return it.

    Text that merely looks like JSON but does not parse is returned unchanged.
    """
    if not isinstance(value, str):
        return value
    s = value.lstrip()
    if not s or s[0] not in _JSON_START:
        return value
    try:
        return orjson.loads(s)
    except orjson.JSONDecodeError:
        return value


def to_text(value: Any) -> str | None:
    """A value as text: strings unchanged, structures as compact JSON, None stays None."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return str(value)


def unwrap_json_string(text: str) -> str:
    """Remove one level of JSON string encoding: ``"\\"{\\\\"a\\\\":1}\\""`` -> ``{"a":1}``.

    Text that is not a JSON string literal is returned unchanged.
    """
    s = text.strip()
    if len(s) >= 2 and s[0] == '"' and s[-1] == '"':
        try:
            inner = orjson.loads(s)
        except orjson.JSONDecodeError:
            return text
        if isinstance(inner, str):
            return inner
    return text


def arguments_text(value: Any) -> str | None:
    """Tool-call arguments as JSON text: objects serialised, strings kept (unwrapped once)."""
    if value is None:
        return None
    if isinstance(value, str):
        return unwrap_json_string(value)
    return to_text(value)


#: A tool result as text (a JSON-encoded string is decoded once).
result_text = arguments_text


#: The parameters of a recorded Python call whose keyword arguments are the tool's arguments
#: (smolagents' ``Tool.__call__(*args, sanitize_inputs_outputs=False, **kwargs)``).
_CALL_PARAMETERS = frozenset(("args", "kwargs", "sanitize_inputs_outputs"))


def normalize_arguments(text: str, langsmith: bool = False) -> str:
    """Undo the wrappers some emitters put around tool arguments (recorded text otherwise kept).

    - a JSON string literal holding the arguments (double encoding) is unwrapped once;
    - OpenLLMetry/smolagents ``{"args": [], "kwargs": {...}}`` becomes the kwargs object (also
      with smolagents' ``sanitize_inputs_outputs`` flag beside them);
    - OpenLLMetry's LangChain tool input ``{"input_str": ..., "tags": ..., "metadata": ...,
      "inputs": {...}, "kwargs": ...}`` becomes ``inputs`` (else ``input_str``);
    - LangSmith tool runs ``{"input": {...}}`` (raw run inputs) become the inner object.
    """
    out = unwrap_json_string(text)
    value = load_json(out)
    if isinstance(value, dict):
        keys = set(value)
        if "kwargs" in keys and keys <= _CALL_PARAMETERS:
            args, kwargs = value.get("args"), value.get("kwargs")
            if not args and isinstance(kwargs, dict):
                return to_text(kwargs) or out
        if sc.LANGCHAIN_TOOL_START_KEYS <= keys <= sc.LANGCHAIN_TOOL_START_KEYS | {"inputs"}:
            inputs, text = value.get("inputs"), value["input_str"]
            if isinstance(inputs, dict):
                return to_text(inputs) or out
            if isinstance(text, str):
                return unwrap_json_string(text)
        if langsmith and keys == {"input"} and isinstance(value["input"], dict):
            return to_text(value["input"]) or out
    return out


#: Longest text `python_literal_json` reads (a literal is parsed whole, in memory).
LITERAL_MAX_CHARS = 100_000
#: What `ast` raises on text that is no literal (or one too deep or too large to read).
_NOT_A_LITERAL = (ValueError, TypeError, SyntaxError, MemoryError, RecursionError)


def python_literal_json(text: str) -> str:
    """A Python dict or list written as its repr (``{'city': 'Paris'}``: how Monocle and
    OpenInference's LangChain tools record some arguments) as JSON text; `text` unchanged when
    it is JSON already, or no such literal of JSON values (parsed by `ast.literal_eval`, which
    runs no code)."""
    if len(text) > LITERAL_MAX_CHARS or not text.lstrip().startswith(("{", "[")):
        return text
    if load_json(text) is not text:
        return text
    try:
        value = ast.literal_eval(text.strip())
        return orjson.dumps(value).decode() if isinstance(value, dict | list) else text
    except _NOT_A_LITERAL:
        return text


def _keyword_value(text: str) -> Any:
    """A keyword argument's value from its ``str()``: a literal of JSON values read as its value
    (``2``, ``{'city': 'Paris'}``), any other text (``New York``, a set) kept as that string."""
    if len(text) > LITERAL_MAX_CHARS:
        return text
    try:
        value = ast.literal_eval(text.strip())
        orjson.dumps(value)
    except (*_NOT_A_LITERAL, orjson.JSONEncodeError):
        return text
    return text if isinstance(value, str) else value  # quotes a str() did not write


def keyword_arguments(text: str) -> str:
    """Monocle's record of a CrewAI tool's input (a JSON list of ``"<keyword>: <str(value)>"``
    texts, `semconv.MONOCLE_KEYWORD_INPUT`) as the JSON object of the tool's arguments.

    The ``input`` keyword of ``CrewStructuredTool.invoke`` holds the arguments; the fingerprints
    CrewAI added to them (`semconv.CREWAI_ADDED_ARGUMENTS`) are left out. `text` unchanged when
    an item is not of that form.
    """
    items = load_json(text)
    if not isinstance(items, list) or not items:
        return text
    keywords: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition(": ") if isinstance(item, str) else ("", "", "")
        if not sep or not name.isidentifier():
            return text
        keywords[name] = _keyword_value(value)
    arguments = keywords.get(sc.CREWAI_TOOL_INPUT)
    if keywords.keys() == {sc.CREWAI_TOOL_INPUT} and isinstance(arguments, dict):
        keywords = {k: v for k, v in arguments.items() if k not in sc.CREWAI_ADDED_ARGUMENTS}
    return orjson.dumps(keywords).decode()


def normalize_result(text: str) -> str:
    """Undo the wrappers some emitters put around a tool's result (recorded text otherwise kept):

    - a JSON string literal holding the result is unwrapped once;
    - the LangChain ``ToolMessage`` that OpenLLMetry records as a LangChain tool's output (its
      ``on_tool_end`` call: ``{"output": {"lc": 1, "id": [..., "ToolMessage"], "kwargs":
      {"content": ...}}, "kwargs": {...}}``), or that OpenInference records serialized
      (``{"type": "tool", "data": {"content": ..., "tool_call_id": ...}}``), becomes the text
      of its content.
    """
    out = unwrap_json_string(text)
    value = load_json(out) if '"lc"' in out or LANGCHAIN_TOOL_CALL_ID in out else None
    message = None
    if (
        isinstance(value, dict)
        and {"output"} <= value.keys() <= {"output", "kwargs"}
        and isinstance(value["output"], dict)
    ):
        message = value["output"]
    elif langchain_tool_message(value):
        message = value
    if message is not None:
        messages: list[Message] = []
        _message(message, messages)
        if len(messages) == 1 and messages[0][0] == "tool" and messages[0][1] is not None:
            return messages[0][1]
    return out


#: The key of a serialized LangChain ``ToolMessage`` naming the call it answers.
LANGCHAIN_TOOL_CALL_ID = "tool_call_id"


def langchain_tool_message(value: Any) -> bool:
    """Whether `value` is a serialized LangChain ``ToolMessage``, ``{"type": "tool", "data":
    {..., "tool_call_id": ...}}``: what OpenInference records as a LangChain tool's output."""
    return (
        isinstance(value, dict)
        and value.get("type") == "tool"
        and isinstance(value.get("data"), dict)
        and isinstance(value["data"].get(LANGCHAIN_TOOL_CALL_ID), str)
    )


# -------------------------------------------------------------------------------------------------
# Messages
# -------------------------------------------------------------------------------------------------


def _role(value: Any, default: str | None) -> str | None:
    if not isinstance(value, str) or not value:
        return default
    low = value.strip().lower()
    return sc.ROLE_ALIASES.get(low, low)


def _kind(value: Any) -> str | None:
    """A discriminator field (type, event name): only a string counts."""
    return value if isinstance(value, str) else None


def _str_or_none(value: Any) -> str | None:
    if value is None or value == "":
        return None
    return value if isinstance(value, str) else to_text(value)


def _call(obj: Mapping[str, Any]) -> Call:
    """One requested tool call from any of the known shapes."""
    fn = obj.get("function")
    fn = fn if isinstance(fn, dict) else {}
    for key in ("function_call", "functionCall", "toolUse"):  # Gemini, Bedrock Converse parts
        inner = obj.get(key)
        if isinstance(inner, dict):
            obj, fn = inner, {}
            break
    call_id = (
        obj.get("call_id")
        or obj.get("toolCallId")
        or obj.get("id")
        or obj.get("tool_call_id")
        or obj.get("toolUseId")
    )
    name = (
        obj.get("name") or obj.get("toolName") or fn.get("name") or obj.get(sc.ANY_AGENT_CALL_NAME)
    )
    keys = ("arguments", "args", "input", sc.ANY_AGENT_CALL_ARGS)
    args = next((obj[key] for key in keys if key in obj), fn.get("arguments"))
    return (_str_or_none(call_id), _str_or_none(name), arguments_text(args))


def _tool_calls(value: Any) -> list[Call]:
    """An OpenAI-style ``tool_calls`` list (anything else holds none)."""
    if not isinstance(value, list):
        return []
    return [_call(tc) for tc in value if isinstance(tc, dict)]


def _add_calls(message: dict[str, Any], acc: _Parts) -> None:
    """The calls a message lists beside its content (``tool_calls``, legacy ``function_call``)."""
    acc.calls.extend(_tool_calls(message.get("tool_calls")))
    if isinstance(message.get("function_call"), dict):
        acc.calls.append(_call(message["function_call"]))


def _is_call_record(obj: Any) -> bool:
    """A bare tool-call record (Vercel toolCalls, any-agent output, OpenAI tool_calls entry)."""
    if not isinstance(obj, dict):
        return False
    if "toolName" in obj or sc.ANY_AGENT_CALL_NAME in obj:
        return True
    if _kind(obj.get("type")) in sc.PART_TOOL_CALL_TYPES and "role" not in obj:
        return True
    return isinstance(obj.get("function"), dict) and "role" not in obj


def _call_repr(text: str) -> dict[str, Any] | None:
    """The fields of a tool-call record written as its Python repr, keywords only, all of them
    literals (ADOT's OpenAI Agents spans put ``ResponseFunctionToolCall(arguments='{}',
    call_id='call_1', name='f', type='function_call', ...)`` in text parts); None for any other
    text. Parsed by `ast`, which runs no code."""
    if len(text) > LITERAL_MAX_CHARS or not text.endswith(")") or "function_call'" not in text:
        return None
    try:
        node = ast.parse(text.strip(), mode="eval").body
        if not isinstance(node, ast.Call) or node.args:
            return None
        fields = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
    except _NOT_A_LITERAL:
        return None
    return fields if _kind(fields.get("type")) in sc.PART_TOOL_CALL_TYPES else None


@dataclass
class _Parts:
    """What one message's parts/content blocks hold."""

    texts: list[str] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    results: list[tuple[str | None, str | None, str | None]] = field(default_factory=list)
    other: list[Any] = field(default_factory=list)
    reasoning: bool = False  # parts marked as reasoning were left out of the texts


def _read_parts(content: Any, acc: _Parts) -> None:
    if content is None:
        return
    if isinstance(content, str):
        if content:
            acc.texts.append(content)
        return
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        acc.texts.append(to_text(content) or "")
        return
    for part in content:
        if isinstance(part, str):
            if part:
                acc.texts.append(part)
            continue
        if not isinstance(part, dict):
            acc.other.append(part)
            continue
        ptype = _kind(part.get("type"))
        if ptype in sc.PART_REASONING_TYPES or part.get("thought") is True:
            acc.reasoning = True
            continue
        if ptype in sc.PART_SKIP_TYPES:
            continue
        if ptype in sc.PART_TEXT_TYPES or (ptype is None and isinstance(part.get("text"), str)):
            text = part.get("text")
            if not isinstance(text, str):
                text = part.get("content")
            record = _call_repr(text) if isinstance(text, str) else None
            if record is not None:
                acc.calls.append(_call(record))
            elif isinstance(text, str) and text:
                acc.texts.append(text)
            continue
        if (
            ptype in sc.PART_TOOL_CALL_TYPES
            or "function_call" in part
            or "functionCall" in part
            or isinstance(part.get("function"), dict)  # an OpenAI tool_calls entry (Koog)
            or isinstance(part.get("toolUse"), dict)
        ):
            acc.calls.append(_call(part))
            continue
        fresp = (
            part.get("function_response") or part.get("functionResponse") or part.get("toolResult")
        )
        if ptype in sc.PART_TOOL_RESULT_TYPES or isinstance(fresp, dict):
            src = fresp if isinstance(fresp, dict) else part
            rid = (
                src.get("id")
                or src.get("call_id")
                or src.get("tool_use_id")
                or src.get("toolCallId")
                or src.get("toolUseId")
            )
            name = src.get("name") or src.get("toolName")
            keys = ("response", "result", "output", "content")
            value = next((src[key] for key in keys if key in src), None)
            if isinstance(value, list) and (ptype == "tool_result" or "toolResult" in part):
                # Anthropic tool_result and Bedrock toolResult content blocks: keep their text
                inner = _Parts()
                _read_parts(value, inner)
                value = "\n".join(inner.texts) if inner.texts and not inner.other else value
            acc.results.append((_str_or_none(rid), _str_or_none(name), result_text(value)))
            continue
        acc.other.append(part)


def _calls_json(calls: list[Call]) -> str:
    return orjson.dumps([{"id": i, "name": n, "arguments": a} for i, n, a in calls]).decode()


def _emit(
    role: str | None,
    acc: _Parts,
    out: list[Message],
    tool_call_id: str | None = None,
    name: str | None = None,
) -> None:
    if role == "tool" and not acc.results:
        content = "\n".join(acc.texts) if acc.texts else (to_text(acc.other) if acc.other else None)
        if content is not None or tool_call_id:
            out.append(("tool", content, tool_call_id, name))
        return
    if acc.texts:
        content: str | None = "\n".join(acc.texts)
    elif acc.calls:
        # an assistant turn that only called tools: keep the calls as its (JSON) content
        content = _calls_json(acc.calls)
    elif acc.other:
        content = to_text(acc.other)
    else:
        content = None
    if content is not None:
        out.append((role, content, None, name if role == "tool" else None))
    for rid, rname, rvalue in acc.results:
        out.append(("tool", rvalue, rid, rname))


def _lc_unwrap(d: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """LangChain serialized messages -> (plain message dict, role)."""
    if d.get("lc") == 1 and isinstance(d.get("kwargs"), dict):
        ids = d.get("id")
        cls = ids[-1] if isinstance(ids, list) and ids and isinstance(ids[-1], str) else None
        kwargs = d["kwargs"]
        return kwargs, sc.LANGCHAIN_MESSAGE_ROLES.get(cls) or kwargs.get("role")
    ltype = d.get("type")
    if ltype in ("human", "ai", "system", "tool") and ("content" in d or "data" in d):
        inner = d.get("data") if isinstance(d.get("data"), dict) else d
        return inner, ltype
    return d, None


def _message(d: dict[str, Any], out: list[Message]) -> None:
    event = _kind(d.get(sc.EVENT_NAME_FIELD))
    if event == sc.EVENT_CHOICE:
        return  # a model output, not an input message
    d, lc_role = _lc_unwrap(d)
    mtype = _kind(d.get("type"))
    if mtype in sc.PART_SKIP_TYPES:
        return
    if mtype == "function_call" and "role" not in d:  # Responses API item
        acc = _Parts(calls=[_call(d)])
        _emit("assistant", acc, out)
        return
    if mtype == "function_call_output" and "role" not in d:
        out.append(("tool", result_text(d.get("output")), _str_or_none(d.get("call_id")), None))
        return
    role = _role(d.get("role") or lc_role or sc.MESSAGE_EVENT_ROLES.get(event or ""), "user")
    acc = _Parts()
    if "parts" in d:
        _read_parts(d.get("parts"), acc)
    elif role == "tool" and isinstance(d.get("content"), dict):
        acc.texts.append(to_text(d["content"]) or "")  # a tool's return value, kept whole
    else:
        _read_parts(d.get("content"), acc)
    _add_calls(d, acc)
    tool_call_id = None
    if role == "tool":
        tool_call_id = _str_or_none(d.get("tool_call_id") or d.get("id") or d.get("call_id"))
    _emit(role, acc, out, tool_call_id, _str_or_none(d.get("name")))


def _system_from(value: Any, out: list[Message]) -> None:
    acc = _Parts()
    _read_parts(value["parts"] if isinstance(value, dict) and "parts" in value else value, acc)
    if acc.texts or acc.other:
        _emit("system", acc, out)


def _collect_messages(value: Any, out: list[Message], depth: int = 0) -> None:
    """The messages of `value` (a role-less text or value is the user's)."""
    if value is None or depth > 8:
        return
    if isinstance(value, str):
        if value.strip():
            out.append(("user", value, None, None))
        return
    if isinstance(value, list):
        for item in value:
            if isinstance(item, dict):
                _message(item, out)
            else:  # read as a value; a nested list one level deeper
                _collect_messages(item, out, depth + isinstance(item, list))
        return
    if not isinstance(value, dict):
        out.append(("user", to_text(value), None, None))
        return
    d = value
    # a request body: (its system instructions, its messages)
    if "messages" in d and isinstance(d["messages"], list):
        system, messages = d.get("system"), d["messages"]
    elif isinstance(d.get("contents"), list):  # Gemini / ADK LlmRequest
        config = d.get("config") if isinstance(d.get("config"), dict) else {}
        system = config.get("system_instruction", d.get("system_instruction"))
        messages = d["contents"]
    elif isinstance(d.get("new_message"), dict):  # ADK runner input
        system, messages = None, [d["new_message"]]
    elif "role" in d or "parts" in d or "content" in d or sc.EVENT_NAME_FIELD in d or "lc" in d:
        _message(d, out)
        return
    elif "prompt" in d or "system" in d:  # Vercel ai.prompt, Claude Agent SDK inputs
        system, messages = d.get("system"), d.get("prompt")
    elif "input" in d and len(d) <= 3:  # Responses API body / LangChain {"input": ...}
        system, messages = d.get("instructions"), d["input"]
    else:
        out.append(("user", to_text(d), None, None))
        return
    if system is not None:
        _system_from(system, out)
    _collect_messages(messages, out, depth + 1)


def parse_system_instructions(value: Any) -> list[Message]:
    """GenAI ``gen_ai.system_instructions`` (a list of parts, or text) as one system message."""
    out: list[Message] = []
    _system_from(load_json(value), out)
    return out


def parse_messages(value: Any) -> list[Message]:
    """Input messages from a decoded value of any known shape (strings become one message).

    Roles are canonical (system, user, assistant, tool). Tool results become role ``tool``
    messages with their ``tool_call_id``; an assistant turn that only called tools keeps its calls
    as JSON content. Reasoning parts are dropped; messages with no content are dropped.
    """
    out: list[Message] = []
    _collect_messages(load_json(value), out)
    return [m for m in out if m[1] is not None or m[2] is not None]


# -------------------------------------------------------------------------------------------------
# Outputs
# -------------------------------------------------------------------------------------------------


@dataclass
class Output:
    """What a model call or agent produced: final text, requested tool calls, finish reasons."""

    text: str | None = None
    calls: list[Call] = field(default_factory=list)
    finish_reasons: list[str] = field(default_factory=list)
    recognized: bool = False
    #: the output marked its reasoning apart (thought parts, reasoning items), and the text
    #: leaves it out: of two records of one call, this one's text is the answer's
    reasoning: bool = False

    def empty(self) -> bool:
        return self.text is None and not self.calls


def _finish(acc: Output, value: Any) -> None:
    if isinstance(value, str) and value:
        acc.finish_reasons.append(value)
    elif isinstance(value, list):
        acc.finish_reasons.extend(v for v in value if isinstance(v, str) and v)


def _output_message(m: dict[str, Any], acc: Output) -> None:
    m, lc_role = _lc_unwrap(m)
    role = _role(m.get("role") or lc_role, "assistant")
    parts = _Parts()
    # BeeAI's messages hold their text as `text`
    _read_parts(m["parts"] if "parts" in m else m.get("content", m.get("text")), parts)
    _add_calls(m, parts)
    extra = m.get("additional_kwargs")
    if not parts.calls and isinstance(extra, dict):
        # LangChain's AIMessage keeps the provider's raw calls there (OpenAI's shape); its own
        # `tool_calls` repeat them when both are recorded
        parts.calls.extend(_tool_calls(extra.get("tool_calls")))
    _finish(acc, m.get("finish_reason") or m.get("stop_reason") or m.get("finishReason"))
    acc.recognized = True
    if role in ("tool", "user", "system"):
        return  # whole-conversation outputs (agent spans) hold these too: not the answer
    acc.calls.extend(parts.calls)
    acc.reasoning |= parts.reasoning
    if parts.texts:
        acc.text = "\n".join(parts.texts)  # the last assistant message with text wins


def _collect_output(value: Any, acc: Output) -> None:
    if value is None:
        return
    if isinstance(value, str):
        if value:
            acc.text = value
            acc.recognized = True
        return
    if isinstance(value, list):
        if value and all(_is_call_record(v) for v in value):
            acc.calls.extend(_call(v) for v in value)
            acc.recognized = True
            return
        for item in value:
            if isinstance(item, dict):
                _output_item(item, acc)
        return  # strings in a list are data (an agent's output), not messages
    if isinstance(value, dict):
        _output_item(value, acc)


def _output_item(d: dict[str, Any], acc: Output) -> None:
    if isinstance(d.get("choices"), list):  # OpenAI chat / completions response
        for choice in d["choices"]:
            if isinstance(choice, dict):
                _choice(choice, acc)
        return
    if isinstance(d.get("candidates"), list):  # Gemini GenerateContentResponse
        for cand in d["candidates"]:
            if isinstance(cand, dict):
                if isinstance(cand.get("content"), dict):
                    _output_message(cand["content"], acc)
                _finish(acc, cand.get("finish_reason") or cand.get("finishReason"))
        return
    if isinstance(d.get("output"), list) and (
        d.get("object") == "response"
        or any(
            isinstance(i, dict) and _kind(i.get("type")) in _RESPONSES_ITEM_TYPES
            for i in d["output"]
        )
    ):
        for item in d["output"]:  # OpenAI Responses API
            if not isinstance(item, dict):
                continue
            itype = item.get("type")
            if itype == "function_call":
                acc.calls.append(_call(item))
                acc.recognized = True
            elif itype == "reasoning":
                acc.reasoning = True
            elif itype == "message" or "role" in item:
                _output_message(item, acc)
        return
    if isinstance(d.get("generations"), list):  # LangChain LLMResult
        for gen in d["generations"]:
            for g in gen if isinstance(gen, list) else [gen]:
                if not isinstance(g, dict):
                    continue
                if isinstance(g.get("message"), dict):
                    _output_message(g["message"], acc)
                elif isinstance(g.get("text"), str):
                    acc.text, acc.recognized = g["text"], True
                info = g.get("generation_info")
                if isinstance(info, dict):
                    _finish(acc, info.get("finish_reason"))
        return
    if d.get(sc.EVENT_NAME_FIELD) not in (None, sc.EVENT_CHOICE):
        return  # an input event inside a mixed event list
    if isinstance(d.get("message"), dict) or d.get(sc.EVENT_NAME_FIELD) == sc.EVENT_CHOICE:
        _choice(d, acc)
        return
    if isinstance(d.get("content"), dict) and "parts" in d["content"]:  # ADK LlmResponse / event
        _output_message(d["content"], acc)
        _finish(acc, d.get("finish_reason"))
        return
    if (
        "role" in d
        or "parts" in d
        or "tool_calls" in d
        or "lc" in d
        or isinstance(d.get("content"), list)
    ):
        _output_message(d, acc)
        return
    messages = d.get("messages")
    if d.keys() == {"messages"} and isinstance(messages, list) and _all_messages(messages):
        for message in messages:  # a graph's state of messages (LangGraph): a conversation
            _output_message(message, acc)
        return
    if _is_call_record(d):
        acc.calls.append(_call(d))
        acc.recognized = True
    # Anything else (an agent's structured output, LangChain's {"output": ...}) stays as recorded.


def _all_messages(items: list[Any]) -> bool:
    """Whether every item is a chat message (a role, or LangChain's serialized forms)."""
    return bool(items) and all(
        isinstance(i, dict) and ("role" in i or _lc_unwrap(i)[1] is not None) for i in items
    )


_RESPONSES_ITEM_TYPES = frozenset({"message", "function_call", "reasoning", "web_search_call"})


def _choice(choice: dict[str, Any], acc: Output) -> None:
    _finish(acc, choice.get("finish_reason") or choice.get("finishReason"))
    msg = choice.get("message")
    if isinstance(msg, dict):
        _output_message(msg, acc)
    elif isinstance(msg, list | str) and msg:  # the content alone (Strands: Converse blocks)
        _output_message({"role": "assistant", "content": msg}, acc)
    elif isinstance(choice.get("text"), str):  # completions API
        acc.text, acc.recognized = choice["text"], True
    else:
        acc.recognized = True


def parse_output(value: Any) -> Output:
    """Text, requested calls and finish reasons of an output value of any known shape.

    The text is that of the last assistant message that has text (tool, user and system messages
    in whole-conversation outputs are skipped). A value in no known shape is kept as text as
    recorded (JSON text for structures): an agent's final output is often such an object. Text
    that is the Python repr of a dict or list is read as that value.
    """
    decoded = load_json(value)
    if isinstance(decoded, str) and decoded.lstrip().startswith(("{'", "[{'")):
        decoded = load_json(python_literal_json(decoded))  # a Python repr (BeeAI's agent output)
    if decoded == [] or decoded == {}:
        return Output(recognized=True)  # an empty output records nothing
    acc = Output()
    _collect_output(decoded, acc)
    if not acc.recognized and decoded is not None:
        acc.text = value if isinstance(value, str) else to_text(decoded)
    return acc


# -------------------------------------------------------------------------------------------------
# Tool definitions and flattened attributes
# -------------------------------------------------------------------------------------------------


def _tool_defs(value: Any, out: list[dict[str, Any]], depth: int = 0) -> None:
    value = load_json(value)
    if depth > 4 or value is None:
        return
    if isinstance(value, list):
        for item in value:
            _tool_defs(item, out, depth + 1)
        return
    if not isinstance(value, dict):
        return
    for key in ("function_declarations", "functionDeclarations", "tools"):
        if isinstance(value.get(key), list):
            _tool_defs(value[key], out, depth + 1)
            return
    src = value.get("function") if isinstance(value.get("function"), dict) else value
    name = src.get("name")
    if not isinstance(name, str):
        return
    keys = ("parameters", "input_schema", "inputSchema", "parameters_json_schema", "json_schema")
    params = load_json(next((src[key] for key in keys if src.get(key) is not None), None))
    description = src.get("description")
    out.append(
        {
            "name": name,
            "description": description if isinstance(description, str) else None,
            "parameters": params,
        }
    )


def parse_tool_definitions(values: Iterable[Any]) -> str | None:
    """Offered tools from any definition shape, as a JSON array of {name, description, parameters}.

    Sorted by name (then content) with sorted keys, so the same tool set always gives the same
    text (it feeds the config hash). None when no definition could be read.
    """
    out: list[dict[str, Any]] = []
    for value in values:
        _tool_defs(value, out)
    if not out:
        return None
    options = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
    encoded = sorted((d["name"], orjson.dumps(d, option=options).decode()) for d in out)
    return "[" + ",".join(text for _, text in encoded) + "]"


def _listify(node: Any) -> Any:
    if isinstance(node, dict):
        if node and all(k.isdigit() for k in node):
            return [_listify(node[k]) for k in sorted(node, key=int)]
        return {k: _listify(v) for k, v in node.items()}
    return node


def unflatten(entries: Iterable[tuple[str, str]], prefix: str) -> list[Any]:
    """Rebuild the list that flattened ``prefix.N.a.b`` attributes describe.

    ``[("p.0.message.role", "user"), ("p.0.message.content", "hi")]`` with prefix ``"p."`` gives
    ``[{"message": {"role": "user", "content": "hi"}}]``. Numeric path segments become list
    positions (in index order; gaps close up).
    """
    root: dict[str, Any] = {}
    for key, value in entries:
        if not key.startswith(prefix):
            continue
        path = key[len(prefix) :].split(".")
        node = root
        for seg in path[:-1]:
            if not isinstance(node.get(seg), dict):
                node[seg] = {}
            node = node[seg]
        node[path[-1]] = value
    tree = _listify(root)
    return tree if isinstance(tree, list) else []


def _blocks_from_json_text(content: Any) -> Any:
    """OpenLLMetry stores Anthropic-style content blocks as a JSON string: decode those only."""
    if isinstance(content, str) and content.lstrip().startswith("["):
        decoded = load_json(content)
        if (
            isinstance(decoded, list)
            and decoded
            and all(isinstance(b, dict) and "type" in b for b in decoded)
        ):
            return decoded
    return content


def openinference_messages(entries: Iterable[tuple[str, str]], prefix: str) -> list[dict[str, Any]]:
    """Message dicts (OpenAI chat shape) from flattened OpenInference ``llm.*_messages`` keys."""
    out: list[dict[str, Any]] = []
    for item in unflatten(entries, prefix):
        m = item.get(sc.OI_MESSAGE) if isinstance(item, dict) else None
        if not isinstance(m, dict):
            continue
        msg: dict[str, Any] = {
            "role": m.get("role"),
            "name": m.get("name"),
            "tool_call_id": m.get("tool_call_id"),
        }
        content = m.get("content")
        contents = m.get("contents")
        if content is None and isinstance(contents, list):
            blocks = []
            for c in contents:
                mc = c.get(sc.OI_MESSAGE_CONTENT) if isinstance(c, dict) else None
                if isinstance(mc, dict):
                    if (mc.get("type") or "text") == "text":
                        blocks.append({"type": "text", "text": mc.get("text")})
                    else:
                        blocks.append(mc)
            content = blocks
        msg["content"] = content
        calls = [
            tc[sc.OI_TOOL_CALL]
            for tc in m.get("tool_calls") or ()
            if isinstance(tc, dict) and isinstance(tc.get(sc.OI_TOOL_CALL), dict)
        ]
        if calls:
            msg["tool_calls"] = calls
        if m.get("function_call_name"):
            msg["function_call"] = {
                "name": m["function_call_name"],
                "arguments": m.get("function_call_arguments_json"),
            }
        out.append(msg)
    return out


def openllmetry_messages(entries: Iterable[tuple[str, str]], prefix: str) -> list[dict[str, Any]]:
    """Message dicts from flattened OpenLLMetry ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*``"""
    out: list[dict[str, Any]] = []
    for item in unflatten(entries, prefix):
        if isinstance(item, dict):
            msg = dict(item)
            msg["content"] = _blocks_from_json_text(msg.get("content"))
            out.append(msg)
    return out


def _monocle_call(item: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI tool-call entry from Monocle's ``{"tool_function", "tool_arguments"}`` or a
    model output's ``{"tool_id", "tool_name", "tool_arguments"}``."""
    name = item.get(sc.MONOCLE_TOOL_FUNCTION, item.get(sc.MONOCLE_OUTPUT_TOOL_NAME))
    function = {"name": name, "arguments": item.get(sc.MONOCLE_TOOL_ARGUMENTS)}
    return {"id": item.get(sc.MONOCLE_OUTPUT_TOOL_ID), "type": "function", "function": function}


def _monocle_message(item: Any) -> Any:
    """One of Monocle's messages (a JSON text) as a message dict in the OpenAI chat shape."""
    item = load_json(item)
    if not isinstance(item, dict):
        return item
    if sc.MONOCLE_TOOL_FUNCTION in item:
        return {"role": "assistant", "tool_calls": [_monocle_call(item)]}
    if "call_id" in item and "output" in item:
        return {"type": "function_call_output", **item}
    if len(item) != 1 or next(iter(item)) not in sc.ROLE_ALIASES:
        return item
    role, content = next(iter(item.items()))
    if not isinstance(content, list):
        return {"role": role, "content": content}
    entries = [load_json(c) for c in content]
    calls = [
        _monocle_call(c) for c in entries if isinstance(c, dict) and sc.MONOCLE_TOOL_FUNCTION in c
    ]
    parts = [c for c in entries if not (isinstance(c, dict) and sc.MONOCLE_TOOL_FUNCTION in c)]
    return {"role": role, "content": parts or None, "tool_calls": calls}


def monocle_messages(value: Any) -> list[Any] | None:
    """Monocle's input messages (a list of JSON texts, `semconv` Monocle section) as message
    dicts in the OpenAI chat shape; None when `value` is not such a list."""
    items = load_json(value)
    return [_monocle_message(item) for item in items] if isinstance(items, list) else None


def monocle_output(value: Any) -> Any:
    """A Monocle model output as an OpenAI chat message (`{"<role>": text}`, or the calls of
    `{"tools": [...]}`); any other value as recorded."""
    item = load_json(value)
    if not isinstance(item, dict) or len(item) != 1:
        return value
    key, content = next(iter(item.items()))
    if key == sc.MONOCLE_OUTPUT_TOOLS and isinstance(content, list):
        calls = [_monocle_call(c) for c in content if isinstance(c, dict)]
        return {"role": "assistant", "content": None, "tool_calls": calls}
    if key in sc.ROLE_ALIASES:
        return {"role": key, "content": content}
    return value


def flattened_tool_definitions(
    oi_entries: Iterable[tuple[str, str]], tl_entries: Iterable[tuple[str, str]]
) -> str | None:
    """Tool definitions from OpenInference ``llm.tools.N.tool.json_schema`` and OpenLLMetry
    ``llm.request.functions.N.{name,description,parameters}`` keys."""
    values: list[Any] = []
    for item in unflatten(oi_entries, sc.LLM_TOOLS_PREFIX):
        tool = item.get(sc.OI_TOOL) if isinstance(item, dict) else None
        if isinstance(tool, dict) and tool.get(sc.OI_JSON_SCHEMA) is not None:
            values.append(tool[sc.OI_JSON_SCHEMA])
    values.extend(unflatten(tl_entries, sc.LLM_REQUEST_FUNCTIONS_PREFIX))
    return parse_tool_definitions(values)


def _looks_like_schema(value: Any) -> bool:
    """An object's argument schema: ``type: object``, or ``properties`` whose entries are all
    schemas (an arguments object such as ``{"query": "x"}`` is neither)."""
    if not isinstance(value, dict):
        return False
    if value.get("type") == "object":
        return True
    props = value.get("properties")
    return isinstance(props, dict) and all(isinstance(v, dict | bool) for v in props.values())


def tool_span_definition(key: str) -> str | None:
    """The definition a tool span records of its own tool, as `parse_tool_definitions` writes it.

    ``key`` is the JSON object ``{"name", "json_schema", "parameters"}`` (texts or null) of one
    span. ``json_schema`` may be a whole definition (``{"type": "function", "function": ...}``)
    or a bare schema; ``parameters`` counts only when it looks like a schema (some emitters put
    the call's arguments there). None when neither gives a schema.
    """
    fields = load_json(key)
    if not isinstance(fields, dict):
        return None
    name = fields.get("name")
    described = load_json(fields.get("json_schema"))
    if isinstance(described, dict) and (
        isinstance(described.get("name"), str) or isinstance(described.get("function"), dict)
    ):
        return parse_tool_definitions([described])
    if not isinstance(name, str) or not name:
        return None
    for candidate in (described, load_json(fields.get("parameters"))):
        if _looks_like_schema(candidate):
            return parse_tool_definitions([{"name": name, "parameters": candidate}])
    return None
