"""Record real Google ADK agent runs of a KYC review, as OTLP JSON lines.

Usage: ``python tests/data/recorded/record_adk.py [OUTDIR]`` (default: this folder) in an
environment with ``google-adk`` and ``opentelemetry-sdk`` (recorded with google-adk 2.15.0,
google-genai 2.34.0, opentelemetry-sdk 1.45.2, Python 3.11) and this package. ADK's own
instrumentation (scope ``gcp.vertex.agent``, through the global tracer provider) writes the
spans; only the model is scripted (a ``BaseLlm`` subclass yielding fixed ``LlmResponse``
objects, no network), and the agents run with ``InMemoryRunner``. Ids and times come from the
SDK and the clock: a new recording gives other bytes, the same runs.

ADK 2.x writes one of two telemetry schemas (``ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN``, read when
a run starts), so each is recorded by a child process into the same file:

- schema 2, the default (cases ``ADK-*``): ``invoke_workflow {agent}`` > ``invoke_agent
  {agent}`` > ``generate_content {model}`` and ``execute_tool {tool}``; content
  (``gen_ai.input/output.messages``, ``gen_ai.tool.definitions``, ``gen_ai.tool.call.*``) only
  with ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY``, set here (without it the
  spans hold no answer, arguments or results).
- schema 1, the legacy one (cases ``ADK-V1-*``): ``invocation`` (no attributes) >
  ``invoke_agent {agent}`` > ``call_llm`` (``gcp.vertex.agent.llm_request/llm_response``) >
  ``generate_content {model}``, and ``execute_tool {tool}`` (``gcp.vertex.agent.tool_call_args``,
  ``gcp.vertex.agent.tool_response``); content on by default.

A KYC agent looks up the owner of ACME SA (``lookup_owner`` -> "Jean Dupont"), screens that
owner against sanctions lists (``screen_sanctions`` -> "no match") and answers
``{"verdict": "clear", "owner": "Jean Dupont"}``. Each trace is one ``kyc review`` span (case id
``app.case_id``) holding one runner invocation. ``adk_kyc.jsonl``, per schema:

- ``-1``: straight run: lookup_owner, then screen_sanctions, then the verdict (3 model calls,
  2 tool calls).
- ``-2``: multi-agent by transfer: the coordinator ``kyc_reviewer`` (``sub_agents``) looks up
  the owner and calls ``transfer_to_agent(agent_name="sanctions_screener")``; the screener runs
  screen_sanctions and answers (2 + 2 model calls; 3 tool spans counting the transfer).
- ``-3``: screen_sanctions raises ``ConnectionError`` once; ADK's ``ReflectAndRetryToolPlugin``
  turns the exception into an error response for the model (the span ends unset, the error is
  in its result only), which calls it again with the same arguments; the second call succeeds
  (4 model calls, 3 tool calls, one failed).
- ``-4``: parallel calls: the model requests lookup_owner and screen_sanctions in one response;
  ADK runs both and adds its ``execute_tool (merged)`` span (2 model calls, 2 tool calls).
- ``-5``: agent as a tool: the coordinator calls the screener through ``AgentTool``; the
  screener's own ``invoke_workflow``/``invocation`` and ``invoke_agent`` run inside that tool
  span (3 + 2 model calls; 3 tool calls counting the agent tool).
"""

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from analyzer.otel_export import OtlpJsonLinesExporter

OWNER = {"company": "ACME SA"}
SCREENING = {"name": "Jean Dupont"}
VERDICT = '{"verdict": "clear", "owner": "Jean Dupont"}'
PROMPT = "Review the KYC file of ACME SA."
SCHEMA_ENV = "ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN"
CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
CHILD = "--child"


def recorder(path: Path, append: bool) -> TracerProvider:
    provider = TracerProvider(resource=Resource({"service.name": "kyc-agent"}))
    provider.add_span_processor(BatchSpanProcessor(OtlpJsonLinesExporter(path, append=append)))
    return provider


# ADK's tracer is a proxy of the global provider: set it before ADK runs anything. ADK reads its
# schema from the environment when a run starts, so each schema is recorded by a child process.
SCHEMA = os.environ.get(SCHEMA_ENV, "2")
PREFIX = {"2": "ADK", "1": "ADK-V1"}[SCHEMA]
if CHILD in sys.argv:
    PROVIDER = recorder(Path(sys.argv[-1]), append=SCHEMA == "1")
    trace.set_tracer_provider(PROVIDER)

from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.models import BaseLlm, LlmRequest, LlmResponse  # noqa: E402
from google.adk.plugins.reflect_retry_tool_plugin import ReflectAndRetryToolPlugin  # noqa: E402
from google.adk.runners import InMemoryRunner  # noqa: E402
from google.adk.tools.agent_tool import AgentTool  # noqa: E402
from google.genai import types  # noqa: E402

Results = list[tuple[str, dict[str, Any]]]
Script = Callable[[Results], list[types.Part]]


def results_seen(request: LlmRequest) -> Results:
    """The tool results in the model's request, oldest first: (tool name, response)."""
    return [
        (part.function_response.name, part.function_response.response or {})
        for content in request.contents
        for part in content.parts or []
        if part.function_response is not None
    ]


class Scripted(BaseLlm):
    """Answers each request with the parts its script gives for the tool results seen so far."""

    script: Script

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        parts = self.script(results_seen(llm_request))
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=50, candidates_token_count=12, total_token_count=62
        )
        yield LlmResponse(
            content=types.Content(role="model", parts=parts),
            usage_metadata=usage,
            finish_reason=types.FinishReason.STOP,
        )


def call(name: str, args: dict[str, Any], call_id: str) -> types.Part:
    return types.Part(function_call=types.FunctionCall(name=name, args=args, id=call_id))


def text(value: str) -> list[types.Part]:
    return [types.Part(text=value)]


def lookup_owner(company: str) -> str:
    """Find a company's beneficial owner."""
    return "Jean Dupont"


def screen_sanctions(name: str) -> str:
    """Screen a person against sanctions lists."""
    return "no match"


def flaky_screening() -> Callable[[str], str]:
    failures = [ConnectionError("sanctions list service unavailable")]

    def screen_sanctions(name: str) -> str:
        """Screen a person against sanctions lists."""
        if failures:
            raise failures.pop()
        return "no match"

    return screen_sanctions


def sequential(results: Results) -> list[types.Part]:
    names = [name for name, _ in results]
    if "screen_sanctions" in names:
        return text(VERDICT)
    if "lookup_owner" in names:
        return [call("screen_sanctions", SCREENING, "call_screen")]
    return [call("lookup_owner", OWNER, "call_owner")]


def retrying(results: Results) -> list[types.Part]:
    screenings = [response for name, response in results if name == "screen_sanctions"]
    if screenings and "error_type" not in screenings[-1]:
        return text(VERDICT)
    if results:
        return [call("screen_sanctions", SCREENING, f"call_screen_{len(screenings) + 1}")]
    return [call("lookup_owner", OWNER, "call_owner")]


def parallel(results: Results) -> list[types.Part]:
    if results:
        return text(VERDICT)
    return [
        call("lookup_owner", OWNER, "call_owner"),
        call("screen_sanctions", SCREENING, "call_screen"),
    ]


def screener_script(answer: str) -> Script:
    def screener(results: Results) -> list[types.Part]:
        if any(name == "screen_sanctions" for name, _ in results):
            return text(answer)
        return [call("screen_sanctions", SCREENING, "call_screen")]

    return screener


def coordinator_transfer(results: Results) -> list[types.Part]:
    if results:
        transfer = {"agent_name": "sanctions_screener"}
        return [call("transfer_to_agent", transfer, "call_transfer")]
    return [call("lookup_owner", OWNER, "call_owner")]


def coordinator_tool(results: Results) -> list[types.Part]:
    names = [name for name, _ in results]
    if "sanctions_screener" in names:
        return text(VERDICT)
    if "lookup_owner" in names:
        request = {"request": "Screen Jean Dupont against sanctions lists."}
        return [call("sanctions_screener", request, "call_screener")]
    return [call("lookup_owner", OWNER, "call_owner")]


def screener_agent(script: Script) -> LlmAgent:
    return LlmAgent(
        name="sanctions_screener",
        model=Scripted(model="scripted", script=script),
        description="Screens a person against sanctions lists and says whether they match.",
        instruction="Screen the person you are given against sanctions lists.",
        tools=[screen_sanctions],
    )


def reviewer(script: Script, **kwargs: Any) -> LlmAgent:
    return LlmAgent(
        name="kyc_reviewer",
        model=Scripted(model="scripted", script=script),
        instruction="Review a company's KYC file and answer with a JSON verdict.",
        **kwargs,
    )


async def run(case: str, agent: LlmAgent, **runner_kwargs: Any) -> str:
    """Runs one case in its own ``kyc review`` span; returns the last text the agents said."""
    tracer = PROVIDER.get_tracer("kyc-app")
    runner = InMemoryRunner(agent=agent, app_name="kyc", **runner_kwargs)
    session = await runner.session_service.create_session(app_name="kyc", user_id="analyst")
    message = types.Content(role="user", parts=[types.Part(text=PROMPT)])
    answer = ""
    with tracer.start_as_current_span("kyc review", attributes={"app.case_id": case}):
        async for event in runner.run_async(
            user_id="analyst", session_id=session.id, new_message=message
        ):
            for part in (event.content.parts or []) if event.content else []:
                if part.text:
                    answer = part.text
    await runner.close()
    return answer


async def record() -> None:
    tools = [lookup_owner, screen_sanctions]
    answers = {
        f"{PREFIX}-1": await run(f"{PREFIX}-1", reviewer(sequential, tools=tools)),
        f"{PREFIX}-2": await run(
            f"{PREFIX}-2",
            reviewer(
                coordinator_transfer,
                tools=[lookup_owner],
                sub_agents=[screener_agent(screener_script(VERDICT))],
            ),
        ),
        f"{PREFIX}-3": await run(
            f"{PREFIX}-3",
            reviewer(retrying, tools=[lookup_owner, flaky_screening()]),
            plugins=[ReflectAndRetryToolPlugin(max_retries=2)],
        ),
        f"{PREFIX}-4": await run(f"{PREFIX}-4", reviewer(parallel, tools=tools)),
        f"{PREFIX}-5": await run(
            f"{PREFIX}-5",
            reviewer(
                coordinator_tool,
                tools=[
                    lookup_owner,
                    AgentTool(agent=screener_agent(screener_script("no match for Jean Dupont"))),
                ],
            ),
        ),
    }
    PROVIDER.shutdown()
    print(json.dumps(answers, indent=1))


if __name__ == "__main__":
    if CHILD in sys.argv:
        asyncio.run(record())
    else:
        out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent
        path = out / "adk_kyc.jsonl"
        for schema, content in (("2", "SPAN_ONLY"), ("1", "")):  # default, then legacy (appended)
            env = {**os.environ, SCHEMA_ENV: schema, CONTENT_ENV: content}
            subprocess.run([sys.executable, __file__, CHILD, str(path)], env=env, check=True)
