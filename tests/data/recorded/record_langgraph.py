"""Record real LangGraph agent runs of a KYC review, as OTLP JSON lines.

Usage: ``python tests/data/recorded/record_langgraph.py [OUTDIR]`` (default: this folder) in an
environment with ``langgraph``, ``langchain-core`` and
``openinference-instrumentation-langchain`` (recorded with langgraph 1.2.24, langgraph-prebuilt
1.1.3, langchain-core 1.8.3, openinference-instrumentation-langchain 0.1.80, opentelemetry-sdk
1.45.2) and agenttrace's ``analyzer`` on the path. The OpenInference instrumentation writes the
spans; only the model is scripted (langchain-core's ``FakeMessagesListChatModel`` given a list
of replies, no network; its ``bind_tools`` binds the tool definitions as invocation parameters,
as a real chat model does), so the file is what the framework records. Agents are
``langgraph.prebuilt.create_react_agent`` graphs (deprecated in langgraph 1.x in favour of
``langchain.agents.create_agent``, still shipped). Ids and times come from the SDK and the
clock: a new recording gives other bytes, the same runs.

A KYC agent looks up the owner of ACME SA (``lookup_owner``), screens that owner against the
sanctions lists (``screen_sanctions``) and answers with a verdict. Each trace is one ``kyc
review`` span (case id ``app.case_id``) holding the graph runs of one case
(``langgraph_kyc.jsonl``):

- ``LG-1``: one agent asks for ``lookup_owner``, then ``screen_sanctions``, then answers
  (3 model calls, 2 tool calls).
- ``LG-2``: two agents run one after the other as nodes of a ``StateGraph``: ``owner-agent``
  calls ``lookup_owner`` and answers the owner; ``screening-agent`` (seeing that conversation)
  calls ``screen_sanctions`` and answers the verdict (4 model calls, 2 tool calls).
- ``LG-3``: ``screen_sanctions`` raises once (``ToolNode(handle_tool_errors=True)`` turns the
  exception into an error ``ToolMessage``); the model asks for it again with the same arguments,
  it succeeds, the agent answers (4 model calls, 3 tool calls, one failed, one retry).
- ``LG-4``: the model asks for both tools in one reply; LangGraph's ``ToolNode`` runs them in
  parallel, then the agent answers (2 model calls, 2 tool calls).
- ``LG-5``: structured output (``response_format``): after the straight run, the agent makes one
  more model call (node ``generate_structured_response``), bound to the ``Verdict`` schema as
  its only tool with ``tool_choice="any"``; LangChain parses that tool call into
  ``structured_response`` (a ``PydanticToolsParser`` span) and never executes it (4 model
  calls, 2 tool calls, the answer given as the ``Verdict`` call's arguments).
- ``LG-6``: a turn limit: the model keeps asking for ``lookup_owner``; the graph stops at
  ``recursion_limit=5`` with ``GraphRecursionError`` (the graph's span ends in error) before the
  third request runs (3 model calls, 2 tool calls run and 1 requested that never ran, no answer).

Every graph is a ``CHAIN`` span; OpenInference's LangChain tracer gives kind ``AGENT`` to any run
whose name contains "agent", so each turn of ``create_react_agent``'s ``agent`` node is an
``AGENT`` span (and, in ``LG-2``, the ``owner_agent``/``screening_agent`` nodes and the agent
graphs they run). Tool spans record ``input.value`` as the bare value of a one-argument tool
(``ACME SA``) and ``output.value`` as the serialized ``ToolMessage``.
"""

import sys
import warnings
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.errors import GraphRecursionError
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, create_react_agent
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from pydantic import BaseModel

from analyzer.otel_export import OtlpJsonLinesExporter

warnings.filterwarnings("ignore", message=".*create_react_agent.*")

QUESTION = "Review the KYC file of ACME SA."
OWNER = {"company": "ACME SA"}
SCREENING = {"name": "Jean Dupont"}
VERDICT = '{"verdict": "clear", "owner": "Jean Dupont"}'


class Scripted(FakeMessagesListChatModel):
    """Replies with the next scripted message. Tools are bound as a chat model binds them (their
    OpenAI definitions and ``tool_choice`` become invocation parameters, which the
    instrumentation records) and change no reply."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Runnable:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)


def script(*replies: AIMessage) -> Scripted:
    return Scripted(responses=list(replies))


def ask(*calls: tuple[str, dict, str]) -> AIMessage:
    """A reply asking for tool calls, each given as (name, arguments, call id)."""
    return AIMessage(content="", tool_calls=[{"name": n, "args": a, "id": i} for n, a, i in calls])


def say(text: str) -> AIMessage:
    return AIMessage(content=text)


class Verdict(BaseModel):
    """The KYC verdict on a company file."""

    verdict: str
    owner: str


@tool
def lookup_owner(company: str) -> str:
    """Find a company's beneficial owner."""
    return "Jean Dupont"


@tool
def screen_sanctions(name: str) -> str:
    """Screen a person against the sanctions lists."""
    return "no match"


def flaky_screening() -> Any:
    failures = iter([True])

    @tool("screen_sanctions")
    def screen(name: str) -> str:
        """Screen a person against the sanctions lists."""
        if next(failures, False):
            raise ConnectionError("sanctions service unavailable")
        return "no match"

    return screen


def straight() -> Any:
    model = script(
        ask(("lookup_owner", OWNER, "call_owner")),
        ask(("screen_sanctions", SCREENING, "call_screen")),
        say(VERDICT),
    )
    return create_react_agent(model, [lookup_owner, screen_sanctions], name="kyc-reviewer")


def two_agents() -> Any:
    owner_agent = create_react_agent(
        script(
            ask(("lookup_owner", OWNER, "call_owner")), say("The owner of ACME SA is Jean Dupont.")
        ),
        [lookup_owner],
        name="owner-agent",
    )
    screening_agent = create_react_agent(
        script(ask(("screen_sanctions", SCREENING, "call_screen")), say(VERDICT)),
        [screen_sanctions],
        name="screening-agent",
    )
    graph = StateGraph(MessagesState)
    graph.add_node("owner_agent", owner_agent)
    graph.add_node("screening_agent", screening_agent)
    graph.add_edge(START, "owner_agent")
    graph.add_edge("owner_agent", "screening_agent")
    graph.add_edge("screening_agent", END)
    return graph.compile(name="kyc-review")


def retried() -> Any:
    model = script(
        ask(("lookup_owner", OWNER, "call_owner")),
        ask(("screen_sanctions", SCREENING, "call_screen_1")),
        ask(("screen_sanctions", SCREENING, "call_screen_2")),
        say(VERDICT),
    )
    tools = ToolNode([lookup_owner, flaky_screening()], handle_tool_errors=True)
    return create_react_agent(model, tools, name="kyc-reviewer")


def parallel() -> Any:
    model = script(
        ask(("lookup_owner", OWNER, "call_owner"), ("screen_sanctions", SCREENING, "call_screen")),
        say(VERDICT),
    )
    return create_react_agent(model, [lookup_owner, screen_sanctions], name="kyc-reviewer")


def structured() -> Any:
    model = script(
        ask(("lookup_owner", OWNER, "call_owner")),
        ask(("screen_sanctions", SCREENING, "call_screen")),
        say("Jean Dupont owns ACME SA and is on no sanctions list."),
        ask(("Verdict", {"verdict": "clear", "owner": "Jean Dupont"}, "call_verdict")),
    )
    return create_react_agent(
        model, [lookup_owner, screen_sanctions], response_format=Verdict, name="kyc-reviewer"
    )


def looping() -> Any:
    model = script(*(ask(("lookup_owner", OWNER, f"call_owner_{n}")) for n in range(1, 6)))
    return create_react_agent(model, [lookup_owner, screen_sanctions], name="kyc-reviewer")


def record(path: Path) -> None:
    provider = TracerProvider(resource=Resource({"service.name": "kyc-agent"}))
    provider.add_span_processor(BatchSpanProcessor(OtlpJsonLinesExporter(path)))
    LangChainInstrumentor().instrument(tracer_provider=provider)
    tracer = provider.get_tracer("kyc-app")
    cases = (
        ("LG-1", straight, {}),
        ("LG-2", two_agents, {}),
        ("LG-3", retried, {}),
        ("LG-4", parallel, {}),
        ("LG-5", structured, {}),
        ("LG-6", looping, {"recursion_limit": 5}),
    )
    for case, build, config in cases:
        graph = build()
        with tracer.start_as_current_span("kyc review", attributes={"app.case_id": case}):
            try:
                state = graph.invoke({"messages": [("user", QUESTION)]}, config=config)
            except GraphRecursionError:
                assert case == "LG-6"
                continue
            if case == "LG-5":
                assert state["structured_response"] == Verdict(verdict="clear", owner="Jean Dupont")
            else:
                assert state["messages"][-1].content == VERDICT, state["messages"][-1]
    LangChainInstrumentor().uninstrument()
    provider.shutdown()


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent
    record(out / "langgraph_kyc.jsonl")
