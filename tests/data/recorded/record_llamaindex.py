"""Record real LlamaIndex runs of several agents in one trace, as OTLP JSON lines.

Usage: ``python tests/data/recorded/record_llamaindex.py [OUTDIR]`` (default: this folder) in
an environment with ``llama-index-core`` and ``openinference-instrumentation-llama-index``
(recorded with 0.14.25 and 4.6.1) and this package. The OpenInference instrumentation writes
the spans; only the model is scripted (LlamaIndex's own ``MockFunctionCallingLLM`` given a
script, no network), so the file is what the framework records. Ids and times come from the
SDK and the clock: a new recording gives other bytes, the same runs.

Each trace is one ``kyc review`` span (case id ``app.case_id``):

- ``LI-1``: a planner model call answers which checks to run; then an owner agent (calls
  ``lookup_owner``, answers) and a screening agent (calls ``screen_sanctions``, answers), two
  ``FunctionAgent`` workflows run one after the other. Each agent's first call follows another
  call's answer, in a conversation of its own: no retry.
- ``LI-2``: the planner's answer is no JSON list; the application sends the planner's
  conversation again with that answer and a correction (a retry), then the owner agent runs.
"""

import asyncio
import sys
from pathlib import Path
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from analyzer.otel_export import OtlpJsonLinesExporter

PLAN = "Which checks does the review of ACME SA need? Answer with a JSON list of checks."


def lookup_owner(company: str) -> str:
    """The beneficial owner of a company."""
    return "Jean Dupont"


def screen_sanctions(name: str) -> str:
    """Screen a person against the sanctions lists."""
    return "no match"


def checker(tool: str, arguments: dict, answer: str, call_id: str) -> MockFunctionCallingLLM:
    """An agent's model: asks for its tool once, then answers."""

    def script(messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
        if any(m.role == MessageRole.TOOL for m in messages):
            return ChatMessage(role=MessageRole.ASSISTANT, content=answer)
        call = ToolCallBlock(tool_call_id=call_id, tool_name=tool, tool_kwargs=arguments)
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=[call])

    return MockFunctionCallingLLM(response_generator=script, is_chat_model=True)


def planner(answers: list[str]) -> MockFunctionCallingLLM:
    replies = iter(answers)
    return MockFunctionCallingLLM(
        response_generator=lambda messages, **kwargs: ChatMessage(
            role=MessageRole.ASSISTANT, content=next(replies)
        ),
        is_chat_model=True,
    )


async def review(
    tracer: Any, case: str, plans: list[str], agents: list[tuple[FunctionAgent, str]]
) -> None:
    llm = planner(plans)
    with tracer.start_as_current_span("kyc review", attributes={"app.case_id": case}):
        first = [ChatMessage(role=MessageRole.USER, content=PLAN)]
        draft = (await llm.achat(first)).message
        if len(plans) > 1:
            fix = ChatMessage(
                role=MessageRole.USER, content="That is no JSON list. Answer with a JSON list only."
            )
            await llm.achat([*first, draft, fix])
        for agent, question in agents:
            await agent.run(user_msg=question)


def main(out: Path) -> None:
    provider = TracerProvider(resource=Resource({"service.name": "kyc-agent"}))
    provider.add_span_processor(
        BatchSpanProcessor(OtlpJsonLinesExporter(out / "llamaindex_agents.jsonl"))
    )
    LlamaIndexInstrumentor().instrument(tracer_provider=provider)
    tracer = provider.get_tracer("kyc-app")

    owners = FunctionAgent(
        name="owner_agent",
        description="Finds the owner of a company.",
        system_prompt="You find the owner of a company. Always call lookup_owner.",
        tools=[lookup_owner],
        llm=checker(
            "lookup_owner", {"company": "ACME SA"}, "The owner is Jean Dupont.", "call-owner"
        ),
    )
    screening = FunctionAgent(
        name="screening_agent",
        description="Screens people against sanctions lists.",
        system_prompt="You screen people against sanctions lists. Always call screen_sanctions.",
        tools=[screen_sanctions],
        llm=checker(
            "screen_sanctions", {"name": "Jean Dupont"}, "Jean Dupont: no match.", "call-scr"
        ),
    )
    owner_q = (owners, "Who owns ACME SA?")
    screen_q = (screening, "Screen Jean Dupont.")
    asyncio.run(review(tracer, "LI-1", ['["owner", "sanctions"]'], [owner_q, screen_q]))
    asyncio.run(review(tracer, "LI-2", ["owner and sanctions", '["owner"]'], [owner_q]))
    provider.shutdown()


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent)
