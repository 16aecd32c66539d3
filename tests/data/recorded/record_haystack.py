"""Record real Haystack runs of several agents in one trace, as OTLP JSON lines.

Usage: ``python tests/data/recorded/record_haystack.py [OUTDIR]`` (default: this folder) in an
environment with ``haystack-ai`` and ``openinference-instrumentation-haystack`` (recorded with
3.4.1 and 0.1.46) and this package. The OpenInference instrumentation writes the spans; only
the chat generator is scripted (no network), so the file is what the framework records. Ids
and times come from the SDK and the clock: a new recording gives other bytes, the same runs.

Haystack's agents open no agent span of their own (each is a ``CHAIN`` component span): a
trace holding several agents is one run whose model calls no agent tells apart. Each trace is
one ``kyc review`` span (case id ``app.case_id``):

- ``HS-1``: a planner model call answers which checks to run; then an owner agent (calls
  ``lookup_owner``, answers) and a screening agent (calls ``screen_sanctions``, answers), one
  after the other. The agents' first calls follow another call's answer, in conversations of
  their own: no retry.
- ``HS-2``: the planner's answer is no JSON list; the application sends the planner's
  conversation again with that answer and a correction (a retry), then the owner agent runs.
"""

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from haystack import component
from haystack.components.agents import Agent
from haystack.dataclasses import ChatMessage, ToolCall
from haystack.tools import Tool
from openinference.instrumentation.haystack import HaystackInstrumentor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from analyzer.otel_export import OtlpJsonLinesExporter

PLAN = "Which checks does the review of ACME SA need? Answer with a JSON list of checks."
Script = Callable[[list[ChatMessage]], ChatMessage]


def reply(text: str | None = None, call: ToolCall | None = None) -> ChatMessage:
    usage = {"prompt_tokens": 40, "completion_tokens": 8, "total_tokens": 48}
    meta = {"model": "scripted-model", "finish_reason": "tool_calls" if call else "stop"}
    return ChatMessage.from_assistant(
        text, tool_calls=[call] if call else None, meta={**meta, "usage": usage}
    )


@component
class ScriptedChatGenerator:
    """A chat generator whose replies a script decides from the messages it is given."""

    def __init__(self, script: Script) -> None:
        self.script = script

    @component.output_types(replies=list[ChatMessage])
    def run(self, messages: list[ChatMessage], tools: Any = None, **kwargs: Any) -> dict:
        return {"replies": [self.script(messages)]}


def checker(tool: str, arguments: dict, answer: str, call_id: str) -> Script:
    """An agent's model: asks for its tool once, then answers."""

    def script(messages: list[ChatMessage]) -> ChatMessage:
        if any(m.tool_call_result for m in messages):
            return reply(answer)
        return reply(call=ToolCall(tool_name=tool, arguments=arguments, id=call_id))

    return script


def agent(system: str, tool: Tool, script: Script) -> Agent:
    worker = Agent(chat_generator=ScriptedChatGenerator(script), tools=[tool], system_prompt=system)
    worker.warm_up()
    return worker


def main(out: Path) -> None:
    provider = TracerProvider(resource=Resource({"service.name": "kyc-agent"}))
    provider.add_span_processor(
        BatchSpanProcessor(OtlpJsonLinesExporter(out / "haystack_agents.jsonl"))
    )
    HaystackInstrumentor().instrument(tracer_provider=provider)
    tracer = provider.get_tracer("kyc-app")

    owner_tool = Tool(
        name="lookup_owner",
        description="The beneficial owner of a company.",
        parameters={"type": "object", "properties": {"company": {"type": "string"}}},
        function=lambda company: "Jean Dupont",
    )
    screen_tool = Tool(
        name="screen_sanctions",
        description="Screen a person against the sanctions lists.",
        parameters={"type": "object", "properties": {"name": {"type": "string"}}},
        function=lambda name: "no match",
    )
    owners = agent(
        "You find the owner of a company. Always call lookup_owner.",
        owner_tool,
        checker("lookup_owner", {"company": "ACME SA"}, "The owner is Jean Dupont.", "call-owner"),
    )
    screening = agent(
        "You screen people against sanctions lists. Always call screen_sanctions.",
        screen_tool,
        checker("screen_sanctions", {"name": "Jean Dupont"}, "Jean Dupont: no match.", "call-scr"),
    )

    answers = iter(['["owner", "sanctions"]'])
    planner = ScriptedChatGenerator(lambda messages: reply(next(answers)))
    with tracer.start_as_current_span("kyc review", attributes={"app.case_id": "HS-1"}):
        planner.run(messages=[ChatMessage.from_user(PLAN)])
        owners.run(messages=[ChatMessage.from_user("Who owns ACME SA?")])
        screening.run(messages=[ChatMessage.from_user("Screen Jean Dupont.")])

    answers = iter(["owner and sanctions", '["owner"]'])
    with tracer.start_as_current_span("kyc review", attributes={"app.case_id": "HS-2"}):
        first = [ChatMessage.from_user(PLAN)]
        draft = planner.run(messages=first)["replies"][0]
        fix = ChatMessage.from_user("That is no JSON list. Answer with a JSON list only.")
        planner.run(messages=[*first, draft, fix])
        owners.run(messages=[ChatMessage.from_user("Who owns ACME SA?")])
    provider.shutdown()


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent)
