"""Record real agent runs whose tool call waits for a person's approval, as OTLP JSON lines.

Usage: ``python tests/data/recorded/record_approvals.py [OUTDIR]`` (default: this folder) in an
environment with ``pydantic-ai-slim`` and ``strands-agents`` (recorded with 2.78.0 and 1.65.0)
and this package. The frameworks' own instrumentation writes the spans; only the model is
scripted (no network), so each file is what the framework records. Ids and times come from the
SDK and the clock: a new recording gives other bytes, the same runs.

A KYC agent asks for two checks at once: the company's owner, and a sanctions screening of that
owner. The screening waits for a compliance officer's approval, so the first agent run pauses;
the approval resumes the conversation in a second agent run, where the screening runs and the
agent answers. Each trace is one ``kyc review`` span (case id ``app.case_id``) holding the agent
runs of one case:

``pydantic_ai_approval.jsonl``, the tool raising ``ApprovalRequired``, resumed with
``deferred_tool_results``:

- ``PAI-1``: instrumentation version 5 (``execute_tool`` spans); paused, then approved.
- ``PAI-2``: version 2 (``running tool`` spans; the paused call's span also has status ERROR and
  an exception event); paused, then approved.
- ``PAI-3``: version 5; paused, never approved: the screening never ran.

``strands_interrupt.jsonl``, the tool raising an interrupt, resumed with an
``interruptResponse``:

- ``STR-1``: paused, then approved.
- ``STR-2``: paused, never approved.
"""

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from pydantic_ai import (
    Agent,
    ApprovalRequired,
    DeferredToolRequests,
    DeferredToolResults,
    RunContext,
)
from pydantic_ai.capabilities.instrumentation import Instrumentation
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings
from strands import Agent as StrandsAgent
from strands import tool
from strands.models.model import Model

from analyzer.otel_export import OtlpJsonLinesExporter

OWNER = {"company": "ACME SA"}
SCREENING = {"name": "Jean Dupont"}
VERDICT = '{"verdict": "clear", "owner": "Jean Dupont"}'
REASON = "a compliance officer approves sanctions screenings"


def recorder(path: Path) -> TracerProvider:
    provider = TracerProvider(resource=Resource({"service.name": "kyc-agent"}))
    provider.add_span_processor(BatchSpanProcessor(OtlpJsonLinesExporter(path)))
    return provider


def record_pydantic_ai(path: Path) -> None:
    def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returned = {
            part.tool_name
            for message in messages
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, ToolReturnPart)
        }
        if "screen_sanctions" in returned:
            return ModelResponse(parts=[TextPart(VERDICT)])
        return ModelResponse(
            parts=[
                ToolCallPart("lookup_owner", OWNER, tool_call_id="call_owner"),
                ToolCallPart("screen_sanctions", SCREENING, tool_call_id="call_screen"),
            ]
        )

    provider = recorder(path)
    tracer = provider.get_tracer("kyc-app")
    for case, version, approved in (("PAI-1", 5, True), ("PAI-2", 2, True), ("PAI-3", 5, False)):
        settings = InstrumentationSettings(tracer_provider=provider, version=version)
        agent = Agent(
            FunctionModel(scripted),
            output_type=[str, DeferredToolRequests],
            name="kyc-reviewer",
            capabilities=[Instrumentation(settings=settings)],
        )

        @agent.tool_plain
        def lookup_owner(company: str) -> str:
            return "Jean Dupont"

        @agent.tool
        def screen_sanctions(ctx: RunContext, name: str) -> str:
            if not ctx.tool_call_approved:
                raise ApprovalRequired(metadata={"reason": REASON})
            return "no match"

        with tracer.start_as_current_span("kyc review", attributes={"app.case_id": case}):
            paused = agent.run_sync("Review the KYC file of ACME SA.")
            assert isinstance(paused.output, DeferredToolRequests)
            if approved:
                results = DeferredToolResults(approvals={"call_screen": True})
                agent.run_sync(message_history=paused.all_messages(), deferred_tool_results=results)
    provider.shutdown()


def record_strands(path: Path) -> None:
    class Scripted(Model):
        """Streams Converse events: both tool requests, then the verdict once screened."""

        def __init__(self) -> None:
            self.config: dict[str, Any] = {"model_id": "scripted"}

        def update_config(self, **config: Any) -> None:
            self.config.update(config)

        def get_config(self) -> dict[str, Any]:
            return self.config

        async def structured_output(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

        async def stream(self, messages: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            done = {
                block["toolResult"]["toolUseId"]
                for message in messages
                for block in message["content"]
                if "toolResult" in block
            }
            yield {"messageStart": {"role": "assistant"}}
            if "tooluse_screen" in done:
                yield {"contentBlockDelta": {"delta": {"text": VERDICT}}}
                yield {"contentBlockStop": {}}
                yield {"messageStop": {"stopReason": "end_turn"}}
            else:
                calls = (
                    ("tooluse_owner", "lookup_owner", OWNER),
                    ("tooluse_screen", "screen_sanctions", SCREENING),
                )
                for call_id, name, args in calls:
                    use = {"toolUseId": call_id, "name": name}
                    yield {"contentBlockStart": {"start": {"toolUse": use}}}
                    yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(args)}}}}
                    yield {"contentBlockStop": {}}
                yield {"messageStop": {"stopReason": "tool_use"}}
            usage = {"inputTokens": 50, "outputTokens": 12, "totalTokens": 62}
            yield {"metadata": {"usage": usage, "metrics": {"latencyMs": 5}}}

    @tool
    def lookup_owner(company: str) -> str:
        """Find a company's beneficial owner."""
        return "Jean Dupont"

    @tool(context=True)
    def screen_sanctions(name: str, tool_context: Any) -> str:
        """Screen a person against sanctions lists."""
        if tool_context.interrupt("kyc-approval", reason=REASON) != "approved":
            return "refused"
        return "no match"

    provider = recorder(path)
    trace.set_tracer_provider(provider)  # Strands writes through the global provider
    tracer = provider.get_tracer("kyc-app")
    for case, approved in (("STR-1", True), ("STR-2", False)):
        agent = StrandsAgent(
            model=Scripted(),
            tools=[lookup_owner, screen_sanctions],
            name="kyc-reviewer",
            callback_handler=None,
        )
        with tracer.start_as_current_span("kyc review", attributes={"app.case_id": case}):
            paused = agent("Review the KYC file of ACME SA.")
            assert paused.stop_reason == "interrupt"
            if approved:
                answer = {"interruptId": paused.interrupts[0].id, "response": "approved"}
                agent([{"interruptResponse": answer}])
    provider.shutdown()


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent
    record_pydantic_ai(out / "pydantic_ai_approval.jsonl")
    record_strands(out / "strands_interrupt.jsonl")
