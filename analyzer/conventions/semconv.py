"""Every attribute name, span-name pattern and enum value agenttrace reads, grouped by family.

Nothing else in the code may spell an attribute name: modules import it from here. Each group
says where it comes from and which version of its convention it follows. See
/work/shared/spec/CONVENTIONS.md for the research behind each entry.
"""

from __future__ import annotations

# -------------------------------------------------------------------------------------------------
# Family labels written to the `convention` column (which family classified the span).
# -------------------------------------------------------------------------------------------------
GENAI = "genai"
OPENINFERENCE = "openinference"
OPENLLMETRY = "openllmetry"
LANGSMITH = "langsmith"
VERCEL = "vercel"
ADK = "adk"
PYDANTIC_AI = "pydantic_ai"
LOGFIRE = "logfire"
LANGFUSE = "langfuse"
MONOCLE = "monocle"
CLAUDE_CODE = "claude_code"
PROMPTFLOW = "promptflow"

# Roles (mirrors conventions.schema.ROLES; repeated here so the maps below are self-contained).
MODEL_CALL = "model_call"
TOOL_CALL = "tool_call"
AGENT = "agent"
OTHER = "other"

# -------------------------------------------------------------------------------------------------
# OpenTelemetry GenAI semantic conventions, current names.
# Source: open-telemetry/semantic-conventions v1.41.0 (docs/registry/attributes/gen-ai.md,
# docs/gen-ai/gen-ai-spans.md, gen-ai-agent-spans.md), Development stability; since 2026-05 in
# open-telemetry/semantic-conventions-genai.
# -------------------------------------------------------------------------------------------------
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"  # v1.37
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_REQUEST_TEMPERATURE = "gen_ai.request.temperature"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"  # v1.27
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"  # v1.27
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"  # v1.40
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"  # string[]
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"  # v1.34
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_AGENT_VERSION = "gen_ai.agent.version"  # v1.40
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"  # v1.38, opt-in, any
GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result"  # v1.38, opt-in, any
GEN_AI_TOOL_DEFINITIONS = "gen_ai.tool.definitions"  # any: [{type,name,description,parameters}]
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"  # v1.37, opt-in, JSON [{role, parts[]}]
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"  # v1.37, opt-in
GEN_AI_SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"  # v1.37, opt-in, JSON [parts]
GEN_AI_PROMPT_NAME = "gen_ai.prompt.name"
# Strands Agents (strands/telemetry/tracer.py): "success" | "error", the tool result's status; a
# tool that returned an error result ends its span with status OK. Before October 2025 the key
# was `tool.status`. A call that raised an interrupt (it waits for a person's answer, and runs
# again on resume) ends its span with no result: neither key, no result event.
GEN_AI_TOOL_STATUS = "gen_ai.tool.status"
STRANDS_TOOL_STATUS = "tool.status"
STRANDS_SYSTEM = "strands-agents"  # gen_ai.system (or gen_ai.provider.name) of every Strands span
TOOL_STATUS_KEYS = (GEN_AI_TOOL_STATUS, STRANDS_TOOL_STATUS)
# Strands (strands/tools/executors/_executor.py): on its execute_tool span, the invoked tool's
# input JSON Schema (a bare schema), read like OpenInference's `tool.json_schema`.
GEN_AI_TOOL_JSON_SCHEMA = "gen_ai.tool.json_schema"
# Stable general conventions used by GenAI spans.
ERROR_TYPE = "error.type"  # stable; "Conditionally Required if the operation ended in an error"
HTTP_REQUEST_RESEND_COUNT = "http.request.resend_count"  # stable HTTP conventions
EXCEPTION_EVENT = "exception"  # stable exception span event
EXCEPTION_TYPE = "exception.type"

#: gen_ai.operation.name -> role. Values are matched lower-cased; unknown values are not
#: rejected: the span falls through to the next family, and stays `other` if none decides.
GENAI_OPERATION_ROLES = {
    # spec operations (v1.41 + semantic-conventions-genai)
    "chat": MODEL_CALL,
    "text_completion": MODEL_CALL,
    "generate_content": MODEL_CALL,
    "execute_tool": TOOL_CALL,
    "invoke_agent": AGENT,
    "invoke_workflow": AGENT,  # v1.41; treated like traceloop `workflow`: an agent run
    "create_agent": OTHER,  # creates an agent definition; no run happens in that span
    "embeddings": OTHER,  # not a model call of the agent loop
    "retrieval": OTHER,
    "plan": OTHER,
    # custom values seen in the wild (CONVENTIONS.md section 1.2)
    "call_llm": MODEL_CALL,  # any-agent
    "completion": MODEL_CALL,  # Latitude
    "llm_request": MODEL_CALL,  # OpenLLMetry GenAICustomOperationName
    "response": MODEL_CALL,  # OpenAI-Agents bridges: a Responses API model call
    "execute_task": OTHER,  # OpenLLMetry GenAICustomOperationName
    "chain": OTHER,  # LangSmith run_type passed through
    "agent_handoff": OTHER,  # OTel contrib openai-agents-v2
    "guardrail_check": OTHER,
    "transcription": OTHER,
    "speech_generation": OTHER,
    "agent_step": OTHER,
    "rerank": OTHER,
    # AG2 (ag2ai/ag2 autogen/instrumentation.py): the root of a group chat; its agents are
    # one run (CONTRACT section 2: a conversation root holds its agents)
    "conversation": AGENT,
    # Strands multi-agent orchestration (strands/telemetry/tracer.py `start_multiagent_span`,
    # `invoke_{instance}` for a Swarm or a Graph): the agents under it are one run
    "invoke_swarm": AGENT,
    "invoke_graph": AGENT,
}
#: A tool's failure that only its result reports (the span of the call ends ok): a key of the
#: result object and the value that says so. MCP reports a tool's errors in its
#: ``CallToolResult`` (``isError``), not as a protocol error; Google ADK's
#: ``ReflectAndRetryToolPlugin`` turns a tool's exception into a result for the model to retry
#: on (``error_type`` names the exception there).
RESULT_ERROR_MARKERS = {
    "isError": "true",
    "response_type": "ERROR_HANDLED_BY_REFLECT_AND_RETRY_PLUGIN",
}
RESULT_ERROR_TYPE = "error_type"
#: Microsoft Agent Framework workflows (microsoft/agent-framework, its workflow observability:
#: span names of its own beside the GenAI agent spans). A `workflow.run` span is one run of a
#: workflow and holds its agents' `invoke_agent` spans: an agent run, like `invoke_workflow`.
MAF_WORKFLOW_RUN = "workflow.run"
MAF_WORKFLOW_ID = "workflow.id"  # with the span name, marks the span as the framework's
MAF_WORKFLOW_NAME = "workflow.name"  # the name of the run's agent

# -------------------------------------------------------------------------------------------------
# OpenTelemetry GenAI, deprecated names still emitted in the wild.
# Source: semantic-conventions CHANGELOG.md and model/gen-ai/deprecated/registry-deprecated.yaml.
# -------------------------------------------------------------------------------------------------
GEN_AI_SYSTEM = "gen_ai.system"  # -> gen_ai.provider.name in v1.37
GEN_AI_USAGE_PROMPT_TOKENS = "gen_ai.usage.prompt_tokens"  # -> input_tokens in v1.27
GEN_AI_USAGE_COMPLETION_TOKENS = "gen_ai.usage.completion_tokens"  # -> output_tokens in v1.27
# Span events removed in v1.28 (OpenLIT still emits them) and the attribute each one carries.
EVENT_CONTENT_PROMPT = "gen_ai.content.prompt"
EVENT_CONTENT_COMPLETION = "gen_ai.content.completion"
GEN_AI_PROMPT = "gen_ai.prompt"  # attribute of EVENT_CONTENT_PROMPT; LangSmith: raw run inputs
GEN_AI_COMPLETION = (
    "gen_ai.completion"  # attribute of EVENT_CONTENT_COMPLETION; LangSmith: raw outputs
)
# Per-message events, v1.28-v1.36 (semantic-conventions@v1.36.0 docs/gen-ai/gen-ai-events.md).
EVENT_SYSTEM_MESSAGE = "gen_ai.system.message"
EVENT_USER_MESSAGE = "gen_ai.user.message"
EVENT_ASSISTANT_MESSAGE = "gen_ai.assistant.message"
EVENT_TOOL_MESSAGE = "gen_ai.tool.message"
EVENT_CHOICE = "gen_ai.choice"
#: Role implied by each per-message event name.
MESSAGE_EVENT_ROLES = {
    EVENT_SYSTEM_MESSAGE: "system",
    EVENT_USER_MESSAGE: "user",
    EVENT_ASSISTANT_MESSAGE: "assistant",
    EVENT_TOOL_MESSAGE: "tool",
}
#: Event bodies as span-event attributes: Azure AI Inference puts the JSON body in this
#: attribute; pydantic-ai v1 writes the event name inside its `events` JSON list.
GEN_AI_EVENT_CONTENT = "gen_ai.event.content"
EVENT_NAME_FIELD = "event.name"
#: gen_ai.system values renamed by the spec (v1.33 / v1.35), mapped to the current names.
PROVIDER_RENAMES = {
    "vertex_ai": "gcp.vertex_ai",
    "gemini": "gcp.gemini",
    "az.ai.openai": "azure.ai.openai",
    "az.ai.inference": "azure.ai.inference",
}

# -------------------------------------------------------------------------------------------------
# OpenInference (Arize-ai/openinference spec/semantic_conventions.md, semconv package 0.1.x at
# 1fe497f1). Lists are flattened as <prefix>.<index>.<suffix>, zero-based.
# -------------------------------------------------------------------------------------------------
OPENINFERENCE_SPAN_KIND = "openinference.span.kind"
LLM_MODEL_NAME = "llm.model_name"
LLM_REQUEST_MODEL_NAME = "llm.request.model_name"
LLM_RESPONSE_MODEL_NAME = "llm.response.model_name"
LLM_PROVIDER = "llm.provider"
LLM_SYSTEM = "llm.system"
LLM_INVOCATION_PARAMETERS = "llm.invocation_parameters"  # JSON string; holds temperature
LLM_TOKEN_COUNT_PROMPT = "llm.token_count.prompt"
LLM_TOKEN_COUNT_COMPLETION = "llm.token_count.completion"
LLM_TOKEN_COUNT_CACHE_READ = "llm.token_count.prompt_details.cache_read"
LLM_COST_TOTAL = "llm.cost.total"  # USD
LLM_FINISH_REASON = "llm.finish_reason"
# N.message.{role,content,name,tool_call_id,contents.K.message_content.*,tool_calls.M.tool_call.*}
LLM_INPUT_MESSAGES_PREFIX = "llm.input_messages."
LLM_OUTPUT_MESSAGES_PREFIX = "llm.output_messages."
LLM_TOOLS_PREFIX = "llm.tools."  # N.tool.json_schema
INPUT_VALUE = "input.value"
OUTPUT_VALUE = "output.value"
TOOL_NAME = "tool.name"
TOOL_ID = "tool.id"  # = tool_call.id of the request
# On a TOOL span: the invoked tool's definition. `tool.json_schema` is a definition or a schema;
# `tool.parameters` is an argument schema for some instrumentors (LlamaIndex) but the call's
# arguments for others (Dify), so it is read as a schema only when it looks like one.
TOOL_JSON_SCHEMA = "tool.json_schema"
TOOL_PARAMETERS = "tool.parameters"
TOOL_CALL_ID = "tool_call.id"
TOOL_CALL_FUNCTION_NAME = "tool_call.function.name"
TOOL_CALL_FUNCTION_ARGUMENTS = "tool_call.function.arguments"
SESSION_ID = "session.id"
AGENT_NAME = "agent.name"
PROMPT_ID = "prompt.id"
LLM_PROMPT_TEMPLATE_VERSION = "llm.prompt_template.version"
LLM_PROMPT_TEMPLATE = "llm.prompt_template.template"
#: openinference.span.kind (upper-cased) -> role. Match on the kind, never on the span name.
OPENINFERENCE_KIND_ROLES = {
    "LLM": MODEL_CALL,
    "TOOL": TOOL_CALL,
    "AGENT": AGENT,
    "CHAIN": OTHER,
    "EMBEDDING": OTHER,
    "RETRIEVER": OTHER,
    "RERANKER": OTHER,
    "GUARDRAIL": OTHER,
    "EVALUATOR": OTHER,
    "PROMPT": OTHER,
}
#: openinference-instrumentation-openai-agents names a handoff's TOOL span "handoff to <agent>"
#: (`_get_span_name`), with no tool name: input.value the agent handing off, output.value the next.
OPENINFERENCE_HANDOFF_PREFIX = "handoff to "
#: openinference-instrumentation-dspy names a tool's span after the tool and the method that ran
#: it (`_ToolCallWrapper`, `_AsyncToolCallWrapper`), with no tool name: group 1 is the tool.
OPENINFERENCE_DSPY_TOOL_SPAN = r"^(.+)\.(?:acall|__call__)$"
#: openinference-instrumentation-llama-index gives every span of an LLM's methods the LLM kind;
#: this one builds the request (its output: messages and tools) beside the call that sends it.
OPENINFERENCE_LLAMAINDEX_PREPARE_SUFFIX = "._prepare_chat_with_tools"
# Keys inside the flattened message entries (suffixes after the index).
OI_MESSAGE = "message"
OI_MESSAGE_CONTENT = "message_content"
OI_TOOL_CALL = "tool_call"
OI_TOOL = "tool"
OI_JSON_SCHEMA = "json_schema"

# -------------------------------------------------------------------------------------------------
# OpenLLMetry / Traceloop (traceloop/openllmetry packages/opentelemetry-semantic-conventions-ai,
# pre-0.5 indexed form at 93429cfb; traceloop-sdk decorators).
# -------------------------------------------------------------------------------------------------
TRACELOOP_SPAN_KIND = "traceloop.span.kind"
TRACELOOP_ENTITY_NAME = "traceloop.entity.name"
TRACELOOP_ENTITY_VERSION = "traceloop.entity.version"
TRACELOOP_ENTITY_INPUT = "traceloop.entity.input"  # {"args": [...], "kwargs": {...}}
TRACELOOP_ENTITY_OUTPUT = "traceloop.entity.output"
TRACELOOP_SESSION_ID = "traceloop.association.properties.session_id"
TRACELOOP_PROMPT_KEY = "traceloop.prompt.key"
TRACELOOP_PROMPT_VERSION = "traceloop.prompt.version"
TRACELOOP_PROMPT_TEMPLATE = "traceloop.prompt.template"
#: LangChain's run metadata, as the LangChain callback copies it onto the spans of the call: the
#: model where the callback recorded none (read on model calls only: every span started inside
#: the call carries it, an HTTP client's too)
TRACELOOP_LS_MODEL_NAME = "traceloop.association.properties.ls_model_name"
#: Forks of the Traceloop SDK that write its attributes under a prefix of their own, read as
#: Traceloop's: AGNTCY's ioa-observe (tracer ``ioa.observe.tracer``) and AgentOps
#: (AgentOps-AI/agentops ``agentops/semconv``; its ``agentops.entity.name`` is the entity's
#: type, "Agent", "LLM", not its name).
KEY_ALIASES = {
    prefix + key.removeprefix("traceloop."): key
    for prefix, keys in (
        (
            "ioa_observe.",
            (
                TRACELOOP_SPAN_KIND,
                TRACELOOP_ENTITY_NAME,
                TRACELOOP_ENTITY_VERSION,
                TRACELOOP_ENTITY_INPUT,
                TRACELOOP_ENTITY_OUTPUT,
                TRACELOOP_SESSION_ID,
                TRACELOOP_LS_MODEL_NAME,
            ),
        ),
        (
            "agentops.",
            (
                TRACELOOP_SPAN_KIND,
                TRACELOOP_ENTITY_INPUT,
                TRACELOOP_ENTITY_OUTPUT,
            ),
        ),
    )
    for key in keys
}
LLM_REQUEST_TYPE = "llm.request.type"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS_OLD = (
    "gen_ai.usage.cache_read_input_tokens"  # underscore form, < 0.5
)
GEN_AI_PROMPT_PREFIX = (
    "gen_ai.prompt."  # N.{role,content,tool_call_id,tool_calls.M.{id,name,arguments}}
)
GEN_AI_COMPLETION_PREFIX = "gen_ai.completion."  # N.{role,content,finish_reason,tool_calls.M.*}
LLM_REQUEST_FUNCTIONS_PREFIX = "llm.request.functions."  # N.{name,description,parameters}
TRACELOOP_KIND_ROLES = {
    "tool": TOOL_CALL,
    "agent": AGENT,
    "workflow": AGENT,  # CONVENTIONS.md section 7: workflow spans are agent runs
    "task": OTHER,
    "handoff": OTHER,
    "llm": MODEL_CALL,  # AgentOps' kind of a model call (Traceloop writes llm.request.type)
}
TRACELOOP_AGENT_KINDS = tuple(sorted(k for k, v in TRACELOOP_KIND_ROLES.items() if v == AGENT))
TRACELOOP_TOOL_KINDS = tuple(sorted(k for k, v in TRACELOOP_KIND_ROLES.items() if v == TOOL_CALL))
LLM_REQUEST_TYPE_ROLES = {
    "chat": MODEL_CALL,
    "completion": MODEL_CALL,
    "embedding": OTHER,
    "rerank": OTHER,
}
TRACELOOP_TOOL_SUFFIX = ".tool"  # span name f"{entity}.tool"
TRACELOOP_AGENT_SUFFIX = ".agent"
#: The answer of a CrewAI crew, on its kickoff's workflow span (the CrewAI instrumentations of
#: OpenLLMetry and AgentOps): read as that agent span's output.
CREWAI_CREW_RESULT = "crewai.crew.result"
#: CrewAI's own event spans name their event. A failed tool call is its `tool_usage_error`
#: span, then a zero-length `tool_failure_detected` span reporting the same failure (same tool,
#: arguments and execute_tool operation): a report, not a second call.
CREWAI_EVENT_NAME = "crewai.event_name"
CREWAI_REPORT_EVENTS = ("tool_failure_detected",)

# -------------------------------------------------------------------------------------------------
# LangSmith OTel export (langchain-ai/langsmith-sdk at 0f0b8e43,
# python/langsmith/_internal/otel/_otel_exporter.py). It writes gen_ai.operation.name derived
# from its run type, lossily (prompt -> chat), so its own kind is read before the GenAI one.
# -------------------------------------------------------------------------------------------------
LANGSMITH_SPAN_KIND = "langsmith.span.kind"
LANGSMITH_MODEL_NAME = "langsmith.metadata.ls_model_name"
LANGSMITH_TRACE_SESSION_ID = "langsmith.trace.session_id"
LANGSMITH_METADATA_SESSION_ID = "langsmith.metadata.session_id"
LANGSMITH_KIND_ROLES = {
    "llm": MODEL_CALL,
    "tool": TOOL_CALL,
    "chain": OTHER,
    "retriever": OTHER,
    "prompt": OTHER,
    "embedding": OTHER,
    "parser": OTHER,
}

# -------------------------------------------------------------------------------------------------
# Vercel AI SDK (scope `ai`; vercel/ai telemetry docs, v4 and v5 names; mapping as in
# Arize-ai/openinference js/packages/openinference-vercel/src/constants.ts).
# -------------------------------------------------------------------------------------------------
VERCEL_OPERATION_NAME = "operation.name"  # "<operationId> <functionId>"
AI_OPERATION_ID = "ai.operationId"
AI_MODEL_ID = "ai.model.id"
AI_MODEL_PROVIDER = "ai.model.provider"
AI_RESPONSE_MODEL = "ai.response.model"
AI_USAGE_INPUT_TOKENS = "ai.usage.inputTokens"  # v5
AI_USAGE_OUTPUT_TOKENS = "ai.usage.outputTokens"  # v5
AI_USAGE_PROMPT_TOKENS = "ai.usage.promptTokens"  # v4
AI_USAGE_COMPLETION_TOKENS = "ai.usage.completionTokens"  # v4
AI_USAGE_CACHED_INPUT_TOKENS = "ai.usage.cachedInputTokens"  # v5
AI_SETTINGS_TEMPERATURE = "ai.settings.temperature"
AI_TOOL_CALL_ID = "ai.toolCall.id"
AI_TOOL_CALL_NAME = "ai.toolCall.name"
AI_TOOL_CALL_ARGS = "ai.toolCall.args"
AI_TOOL_CALL_RESULT = "ai.toolCall.result"
AI_TOOL_CALL_INPUT = "ai.toolCall.input"  # newer SDKs (unverified rename, accepted anyway)
AI_TOOL_CALL_OUTPUT = "ai.toolCall.output"
AI_PROMPT = "ai.prompt"  # {"system","prompt"|"messages"} on the outer span
AI_PROMPT_MESSAGES = "ai.prompt.messages"
AI_PROMPT_TOOLS = "ai.prompt.tools"  # list of JSON strings {type,name,description,inputSchema}
AI_RESPONSE_TEXT = "ai.response.text"
AI_RESPONSE_OBJECT = "ai.response.object"
AI_RESPONSE_TOOL_CALLS = "ai.response.toolCalls"  # [{toolCallId, toolName, args|input}]
AI_RESPONSE_FINISH_REASON = "ai.response.finishReason"
AI_TELEMETRY_FUNCTION_ID = "ai.telemetry.functionId"
AI_TELEMETRY_SESSION_ID = "ai.telemetry.metadata.sessionId"
VERCEL_PREFIX = "ai."
#: ai.operationId (or span name) -> role. The outer generateText/streamText span runs the
#: multi-step tool loop and carries the summed usage: it is the agent run, as in OpenInference.
VERCEL_OPERATION_ROLES = {
    "ai.generateText": AGENT,
    "ai.streamText": AGENT,
    "ai.generateObject": AGENT,
    "ai.streamObject": AGENT,
    "ai.generateText.doGenerate": MODEL_CALL,
    "ai.streamText.doStream": MODEL_CALL,
    "ai.generateObject.doGenerate": MODEL_CALL,
    "ai.streamObject.doStream": MODEL_CALL,
    "ai.toolCall": TOOL_CALL,
    "ai.embed": OTHER,
    "ai.embedMany": OTHER,
    "ai.embed.doEmbed": OTHER,
    "ai.embedMany.doEmbed": OTHER,
}

# -------------------------------------------------------------------------------------------------
# Google ADK (google/adk-python src/google/adk/telemetry/tracing.py at 692af950; old span names at
# 7c670f63). Tool spans also carry gcp.vertex.agent.llm_request='{}': never classify by it.
# -------------------------------------------------------------------------------------------------
ADK_TOOL_CALL_ARGS = "gcp.vertex.agent.tool_call_args"
ADK_TOOL_RESPONSE = "gcp.vertex.agent.tool_response"
ADK_LLM_REQUEST = "gcp.vertex.agent.llm_request"  # content only
ADK_LLM_RESPONSE = "gcp.vertex.agent.llm_response"  # content only
ADK_SESSION_ID = "gcp.vertex.agent.session_id"
ADK_INVOCATION_ID = "gcp.vertex.agent.invocation_id"
ADK_EVENT_ID = "gcp.vertex.agent.event_id"
ADK_CALL_LLM = "call_llm"  # span name of a model call
#: What makes a `call_llm` span ADK's model call (an application's own function may have that
#: name): `gen_ai.system` = ADK_SYSTEM, or one of the ADK_EVIDENCE keys ADK writes on it.
ADK_SYSTEM = "gcp.vertex.agent"
ADK_EVIDENCE = (ADK_LLM_REQUEST, ADK_LLM_RESPONSE, ADK_SESSION_ID, ADK_INVOCATION_ID, ADK_EVENT_ID)
ADK_EXECUTE_TOOL_PREFIX = "execute_tool "  # span name "execute_tool {tool}"
ADK_AGENT_RUN_PREFIX = "agent_run ["  # old span name "agent_run [{agent}]"
ADK_INVOKE_AGENT_PREFIX = "invoke_agent"  # span name "invoke_agent {agent}"
#: The extra span ADK adds around parallel tool calls (execute_tool with this tool name):
#: counting it as a tool call would double the calls it wraps.
ADK_MERGED_SPAN = "execute_tool (merged)"
ADK_MERGED_TOOL_NAME = "(merged tools)"

# -------------------------------------------------------------------------------------------------
# Pydantic AI (pydantic/pydantic-ai _instrumentation.py InstrumentationNames at 4fda3898; format
# v1 from 849aa4c9). v1/v2 span names and attributes; v3+ uses the GenAI names above.
# -------------------------------------------------------------------------------------------------
PYDANTIC_AGENT_RUN = "agent run"
PYDANTIC_RUNNING_TOOL = "running tool"
PYDANTIC_RUNNING_OUTPUT_FUNCTION = "running output function"  # v5: execute_tool final_result
PYDANTIC_RUNNING_TOOLS = "running tools"  # parent of the tool spans
PYDANTIC_RUNNING_N_TOOLS = r"^running \d+ tools?$"  # the same, since v0.4: "running 3 tools"
#: an agent span named after its agent ("{agent_name} run", since v0.4), beside "agent run"
PYDANTIC_NAMED_AGENT_RUN_SUFFIX = " run"
PYDANTIC_CHAT_PREFIX = "chat "  # "chat {model}"
PYDANTIC_AGENT_NAME = "agent_name"
PYDANTIC_MODEL_NAME = "model_name"
PYDANTIC_FINAL_RESULT = "final_result"
PYDANTIC_ALL_MESSAGES_EVENTS = "all_messages_events"  # v1 agent span, JSON list of events
PYDANTIC_ALL_MESSAGES = "pydantic_ai.all_messages"  # v2+ agent span, parts schema
PYDANTIC_EVENTS = "events"  # v1 model span (and Logfire): JSON list of gen_ai.* events
PYDANTIC_TOOL_ARGUMENTS = "tool_arguments"  # v1/v2
PYDANTIC_TOOL_RESPONSE = "tool_response"  # v1/v2
PYDANTIC_OPERATION_COST = "operation.cost"  # USD
# A tool call that raised ApprovalRequired or CallDeferred waits for an approval or a result from
# outside the run, and runs (a new span) when the run is resumed: since 2026-03 its span names
# the exception here; before (and in format versions < 5 still) the span has status ERROR and
# the exception event (`_instrumentation.py`, `capabilities/instrumentation.py`).
PYDANTIC_TOOL_DEFERRAL = "pydantic_ai.tool.deferral.name"
PYDANTIC_DEFERRALS = (
    "pydantic_ai.exceptions.ApprovalRequired",
    "pydantic_ai.exceptions.CallDeferred",
    "ApprovalRequired",  # exception.type as older OpenTelemetry SDKs wrote it
    "CallDeferred",
)
GEN_AI_AGGREGATED_INPUT_TOKENS = "gen_ai.aggregated_usage.input_tokens"  # agent span since V2
GEN_AI_AGGREGATED_OUTPUT_TOKENS = "gen_ai.aggregated_usage.output_tokens"
GEN_AI_AGGREGATED_CACHE_READ_TOKENS = "gen_ai.aggregated_usage.cache_read.input_tokens"

# -------------------------------------------------------------------------------------------------
# Logfire openai-agents integration (pydantic/logfire at e484a6b5,
# logfire/_internal/integrations/openai_agents.py). Span names are the unformatted message
# templates; the span_data fields are written as plain attributes `name`, `input`, `output`,
# read only on spans of this family.
# -------------------------------------------------------------------------------------------------
LOGFIRE_AGENT_PREFIX = "Agent run: "
LOGFIRE_FUNCTION_PREFIX = "Function: "
LOGFIRE_MODEL_PREFIXES = (
    "Responses API",
    "Chat completion with",
    "Chat Completion with",
    "Message with",
)
LOGFIRE_OTHER_PREFIXES = ("Handoff: ", "Guardrail ", "Embedding Creation with", "MCP: ")
LOGFIRE_NAME = "name"
LOGFIRE_INPUT = "input"
LOGFIRE_OUTPUT = "output"

# -------------------------------------------------------------------------------------------------
# Monocle (monocle2ai/monocle apptrace at 850a6099: instrumentation/common/constants.py SPAN_TYPES,
# span_handler.py). Every span says `monocle_apptrace.version`; its kind is `span.type`, what it
# names are numbered entities (`entity.N.name`, `entity.N.type`), and its content and usage are
# span events (`data.input`, `data.output`, `metadata`), read as attributes `<event>.<key>`
# (`ATTRIBUTE_EVENTS`). Content is a list of JSON texts, one message each: `{"<role>": content}`,
# `{"tool_function", "tool_arguments"}` (a requested call), `{"call_id", "output"}` (a result);
# a model's output `{"<role>": text}` or `{"tools": [{"tool_id", "tool_name", "tool_arguments"}]}`.
# -------------------------------------------------------------------------------------------------
MONOCLE_VERSION = "monocle_apptrace.version"
MONOCLE_SPAN_TYPE = "span.type"
MONOCLE_SPAN_TYPE_ROLES = {
    "agentic.turn": AGENT,  # the request an agent serves; it holds the agents' invocations
    "agentic.request": AGENT,  # the same, before it was renamed
    "agentic.invocation": AGENT,
    "inference": MODEL_CALL,
    "inference.framework": MODEL_CALL,
    "inference.modelapi": MODEL_CALL,  # the provider client inside a framework's call
    "agentic.tool.invocation": TOOL_CALL,
    "agentic.mcp.invocation": TOOL_CALL,  # the MCP request of a tool call, or a call alone
    "agentic.delegation": OTHER,
    "retrieval": OTHER,
    "workflow": OTHER,
    "generic": OTHER,
    "http.process": OTHER,
    "http.send": OTHER,
}
MONOCLE_ENTITY_1_NAME = "entity.1.name"  # the agent of an invocation, the tool of a tool span
MONOCLE_ENTITY_2_NAME = "entity.2.name"  # the model of an inference span, when entity 2 is one
MONOCLE_ENTITY_2_TYPE = "entity.2.type"  # "model.llm.gpt-4o"
MONOCLE_MODEL_TYPE_PREFIX = "model."
#: Span events read as attributes `<event>.<key>`: Monocle's three and Claude Code's tool result.
ATTRIBUTE_EVENTS = frozenset(("data.input", "data.output", "metadata", "tool.output"))
MONOCLE_INPUT = "data.input.input"
#: How Monocle writes CrewAI's tool input: a list of ``"<keyword>: <str(value)>"`` texts, one per
#: keyword argument of the tool's ``invoke`` (``["input: {'city': 'Paris'}"]``).
MONOCLE_KEYWORD_INPUT = r'^\["[A-Za-z_][A-Za-z0-9_]*: '
#: The keyword of ``CrewStructuredTool.invoke`` that holds the tool's arguments.
CREWAI_TOOL_INPUT = "input"
#: What CrewAI added to every tool's arguments until 1.13 moved it to the call's config: its
#: agent and task fingerprints, not an argument the model gave.
CREWAI_ADDED_ARGUMENTS = frozenset(("security_context",))
MONOCLE_RESPONSE = "data.output.response"
MONOCLE_OUTPUT = "data.output.output"  # an MCP request's result
MONOCLE_PROMPT_TOKENS = "metadata.prompt_tokens"
MONOCLE_COMPLETION_TOKENS = "metadata.completion_tokens"
MONOCLE_FINISH_REASON = "metadata.finish_reason"
MONOCLE_TOOL_FUNCTION = "tool_function"  # keys inside Monocle's messages
MONOCLE_TOOL_ARGUMENTS = "tool_arguments"
MONOCLE_OUTPUT_TOOLS = "tools"
MONOCLE_OUTPUT_TOOL_ID = "tool_id"  # keys of an entry of MONOCLE_OUTPUT_TOOLS
MONOCLE_OUTPUT_TOOL_NAME = "tool_name"

# -------------------------------------------------------------------------------------------------
# Claude Code's own OpenTelemetry traces (beta; scope com.anthropic.claude_code.tracing, as
# Claude Code 2.1.285 wrote them in agentevals' kagent v1.0.0-alpha9 fixtures). Known by span
# name; their plain attribute names are read on these spans only. A tool span holds its
# `claude_code.tool.execution`, the same call (status error when the tool failed); a
# subagent's calls are nested in its Agent tool's execution.
# -------------------------------------------------------------------------------------------------
CLAUDE_CODE_PREFIX = "claude_code."
#: The wait for permission, and its `decision` ("accept", "reject", "unknown"): a call rejected
#: there never ran (no execution span): read as the call, failed.
CLAUDE_CODE_BLOCKED = "claude_code.tool.blocked_on_user"
CLAUDE_CODE_DECISION = "decision"
CLAUDE_CODE_REJECTED = "reject"
CLAUDE_CODE_ROLES = {
    "claude_code.interaction": AGENT,  # one user prompt and what the agent did about it
    "claude_code.llm_request": MODEL_CALL,
    "claude_code.tool": TOOL_CALL,
    "claude_code.tool.execution": TOOL_CALL,
    CLAUDE_CODE_BLOCKED: OTHER,  # waiting for the user's permission
}
CLAUDE_CODE_MODEL = "model"
# Anthropic's counts: `input_tokens` leaves out the cache reads and writes, which OTel's input
# tokens include, so the input read is the sum of the three (as kagent's Collector recipe
# writes `gen_ai.usage.input_tokens` for the same spans)
CLAUDE_CODE_INPUT_TOKENS = "input_tokens"
CLAUDE_CODE_OUTPUT_TOKENS = "output_tokens"
CLAUDE_CODE_CACHE_READ_TOKENS = "cache_read_tokens"
CLAUDE_CODE_CACHE_CREATION_TOKENS = "cache_creation_tokens"
CLAUDE_CODE_STOP_REASON = "stop_reason"
CLAUDE_CODE_TOOL_NAME = "tool_name"
CLAUDE_CODE_TOOL_USE_ID = "tool_use_id"
CLAUDE_CODE_TOOL_OUTPUT = "tool.output.output"  # a tool span's `tool.output` event: its result
CLAUDE_CODE_KEYS = (
    CLAUDE_CODE_MODEL,
    CLAUDE_CODE_DECISION,
    CLAUDE_CODE_STOP_REASON,
    CLAUDE_CODE_TOOL_NAME,
    CLAUDE_CODE_TOOL_USE_ID,
    CLAUDE_CODE_TOOL_OUTPUT,
)
CLAUDE_CODE_USAGE_KEYS = (
    CLAUDE_CODE_INPUT_TOKENS,
    CLAUDE_CODE_OUTPUT_TOKENS,
    CLAUDE_CODE_CACHE_READ_TOKENS,
    CLAUDE_CODE_CACHE_CREATION_TOKENS,
)

# -------------------------------------------------------------------------------------------------
# Prompt flow tracing (microsoft/promptflow: docs/reference/trace-span-spec-reference.md, TraceType
# in promptflow/contracts/trace.py; promptflow 1.7+). Every span says `framework` = promptflow;
# its kind is `span_type`, which has no tool type (a Function span a model asked for by name is
# that tool's run, its `inputs` and `output` the arguments and result). An LLM span holds the
# OpenAI request and response as JSON in `inputs` and `output` (generic names: read on these
# spans only), its model and usage in the keys below; a parent's
# `__computed__.cumulative_token_count.*` repeats the usage of the calls under it: never read.
# -------------------------------------------------------------------------------------------------
PROMPTFLOW_FRAMEWORK = "framework"
PROMPTFLOW_SPAN_TYPE = "span_type"
PROMPTFLOW_SPAN_TYPE_ROLES = {
    "llm": MODEL_CALL,
    "function": OTHER,
    "flow": OTHER,
    "langchain": OTHER,
    "embedding": OTHER,
    "retrieval": OTHER,
}
PROMPTFLOW_MODEL = "llm.response.model"
PROMPTFLOW_PROMPT_TOKENS = "llm.usage.prompt_tokens"
PROMPTFLOW_COMPLETION_TOKENS = "llm.usage.completion_tokens"
PROMPTFLOW_INPUTS = "inputs"
PROMPTFLOW_OUTPUT = "output"

# -------------------------------------------------------------------------------------------------
# any-agent (mozilla-ai/any-agent at 3e248d1c; GenAI-like custom keys, operation `call_llm`).
# -------------------------------------------------------------------------------------------------
ANY_AGENT_TOOL_ARGS = "gen_ai.tool.args"
ANY_AGENT_OUTPUT = (
    "gen_ai.output"  # tool result, or model output (text or [{tool.name, tool.args}])
)
ANY_AGENT_INPUT_COST = "gen_ai.usage.input_cost"
ANY_AGENT_OUTPUT_COST = "gen_ai.usage.output_cost"
ANY_AGENT_CALL_NAME = "tool.name"  # keys of an entry of gen_ai.output
ANY_AGENT_CALL_ARGS = "tool.args"

# -------------------------------------------------------------------------------------------------
# Output tools: frameworks that return a structured answer have the model call a tool whose
# arguments are that answer, and end the run there. Tool names, not attribute names.
# - pydantic-ai: `final_result` (_output.py DEFAULT_OUTPUT_TOOL_NAME); with several output types
#   `final_result_<TypeName>` (OutputToolset.build). Names set by ToolOutput(name=...) are not
#   recognisable.
# - any-agent: `final_output` (shared/real-traces any-agent__GOOGLE_trace.json: the tool "used to
#   validate the final output", called last with {"answer": <JSON text>}).
# - smolagents and TinyAgent: `final_answer` (smolagents FinalAnswerTool; any-agent's
#   SMOLAGENTS and TINYAGENT traces end with it, its `answer` argument being the answer).
# -------------------------------------------------------------------------------------------------
OUTPUT_TOOL_NAMES = ("final_answer", "final_output", "final_result")
OUTPUT_TOOL_PREFIXES = ("final_result_",)

# -------------------------------------------------------------------------------------------------
# Event-style spans: BeeAI's OpenInference instrumentation (openinference-instrumentation-beeai,
# shared/real-traces: langfuse beeai-2025-08-01) writes one span per event of a call, named
# "{target}-{n}" with the target ending in the event: "backend.openai.chat.start-14",
# "backend.openai.chat.success-16", "tool.search.wikipedia.finish-12". The spans of one call
# share the target's stem and n. The tool's own name is `tool.name` on an ancestor
# (`agent.react.update`), the stem naming only the tool's class.
# -------------------------------------------------------------------------------------------------
EVENT_SPAN_NAME = r"^(.+)\.(?:start|success|finish|error|retry|partial_update|new_token)-(\d+)$"

# -------------------------------------------------------------------------------------------------
# OpenLIT (openlit/openlit): cost attribute.
# -------------------------------------------------------------------------------------------------
GEN_AI_USAGE_COST = "gen_ai.usage.cost"

# -------------------------------------------------------------------------------------------------
# Langfuse trace exports (langfuse/langfuse observation JSON). The ingest reader keeps each
# observation's original attributes and adds these fallback fields; read only as the last resort.
# -------------------------------------------------------------------------------------------------
LANGFUSE_TYPE = "langfuse.observation.type"  # GENERATION | TOOL | AGENT | SPAN | CHAIN | ...
LANGFUSE_MODEL = "langfuse.observation.model"
LANGFUSE_INPUT = "langfuse.observation.input"
LANGFUSE_OUTPUT = "langfuse.observation.output"
LANGFUSE_USAGE_DETAILS = "langfuse.observation.usage_details"  # JSON {"input","output","total",...}
LANGFUSE_COST_DETAILS = "langfuse.observation.cost_details"  # JSON {"input","output","total"}
LANGFUSE_MODEL_PARAMETERS = "langfuse.observation.model_parameters"  # JSON {"temperature",...}
LANGFUSE_LEVEL = "langfuse.observation.level"  # ERROR marks a failed observation
LANGFUSE_PROMPT_NAME = "langfuse.observation.prompt_name"
LANGFUSE_PROMPT_VERSION = "langfuse.observation.prompt_version"
LANGFUSE_TOOL_DEFINITIONS = "langfuse.observation.tool_definitions"
LANGFUSE_SESSION_ID = "langfuse.session.id"  # set by applications that export to Langfuse
LANGFUSE_TYPE_ROLES = {
    "GENERATION": MODEL_CALL,
    "TOOL": TOOL_CALL,
    "AGENT": AGENT,
    "SPAN": OTHER,
    "CHAIN": OTHER,
    "EVENT": OTHER,
    "RETRIEVER": OTHER,
    "EMBEDDING": OTHER,
    "EVALUATOR": OTHER,
    "GUARDRAIL": OTHER,
}
LANGFUSE_ERROR_LEVEL = "ERROR"
#: JSON paths inside the Langfuse detail objects (polars json_path_match syntax).
LANGFUSE_USAGE_INPUT_PATHS = ("$.input", "$.prompt_tokens", "$.input_tokens")
LANGFUSE_USAGE_OUTPUT_PATHS = ("$.output", "$.completion_tokens", "$.output_tokens")
#: LangChain's serialized LLMResult, as a model span's output (OpenInference output.value,
#: OpenLLMetry traceloop.entity.output, a Langfuse observation's output): where the provider's
#: usage reached only the generation's message (Vertex AI, Gemini: `usage_metadata`) or the
#: result's `llm_output.token_usage` (OpenAI).
LANGCHAIN_RESULT_KEYS = (OUTPUT_VALUE, TRACELOOP_ENTITY_OUTPUT, LANGFUSE_OUTPUT)
LANGCHAIN_USAGE_INPUT_PATHS = (
    "$.generations[0][0].message.kwargs.usage_metadata.input_tokens",
    "$.generations[0][0].message.usage_metadata.input_tokens",
    "$.llm_output.token_usage.prompt_tokens",
)
LANGCHAIN_USAGE_OUTPUT_PATHS = (
    "$.generations[0][0].message.kwargs.usage_metadata.output_tokens",
    "$.generations[0][0].message.usage_metadata.output_tokens",
    "$.llm_output.token_usage.completion_tokens",
)
#: Langfuse's flat usage types are disjoint parts of its total (total = input + output +
#: input_cache_read + output_reasoning + ...: langgraph-js-2025-10-30), where OpenTelemetry's
#: input and output token counts include them: added back. Dotted keys
#: (`completion_details.reasoning`) are details inside `output`, never added.
LANGFUSE_USAGE_INPUT_PARTS = ("$.input_cache_read", "$.input_audio")
LANGFUSE_USAGE_OUTPUT_PARTS = ("$.output_reasoning", "$.output_audio")
LANGFUSE_USAGE_CACHED_PATHS = (
    "$.input_cached_tokens",
    "$.cache_read_input_tokens",
    "$.input_cache_read",
    "$['prompt_details.cache_read']",
)
LANGFUSE_COST_TOTAL_PATH = "$.total"
TEMPERATURE_PATH = "$.temperature"  # inside llm.invocation_parameters / model parameters

# -------------------------------------------------------------------------------------------------
# Values that mean "not recorded", per key: ADK placeholders (Python tracing.py; Go ADK elides
# content), and the model OpenLLMetry's LangChain callback names when LangChain gave none
# (span_utils.set_request_params). Read as null for these keys only (a real tool may well
# return "N/A"); empty strings are null for every key.
# -------------------------------------------------------------------------------------------------
_ADK_PLACEHOLDERS = ("<not specified>", "N/A", "<elided>")
PLACEHOLDERS = {
    ADK_TOOL_CALL_ARGS: _ADK_PLACEHOLDERS,
    ADK_TOOL_RESPONSE: _ADK_PLACEHOLDERS,
    GEN_AI_TOOL_CALL_ID: _ADK_PLACEHOLDERS,
    GEN_AI_REQUEST_MODEL: ("unknown",),
    GEN_AI_RESPONSE_MODEL: ("unknown",),
}

# -------------------------------------------------------------------------------------------------
# Message content formats (values inside content JSON, not attribute names).
# GenAI parts schema: semantic-conventions docs/gen-ai/gen-ai-{input,output}-messages.json (v1.37+).
# -------------------------------------------------------------------------------------------------
#: The keys of what OpenLLMetry's LangChain callback records as a tool's input (its
#: ``on_tool_start`` arguments, JSON-encoded; ``inputs``, the arguments as an object, from
#: LangChain 0.2 on): the arguments are ``inputs``, else ``input_str``.
LANGCHAIN_TOOL_START_KEYS = frozenset(("input_str", "tags", "metadata", "kwargs"))
#: Roles as recorded -> canonical role (system | user | assistant | tool).
ROLE_ALIASES = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",  # Gemini
    "bot": "assistant",
    "tool": "tool",
    "function": "tool",
    "ipython": "tool",
}
#: LangChain message class / type names -> role.
LANGCHAIN_MESSAGE_ROLES = {
    "SystemMessage": "system",
    "HumanMessage": "user",
    "AIMessage": "assistant",
    "ToolMessage": "tool",
    "FunctionMessage": "tool",
    "ChatMessage": None,  # carries its own role
}
PART_TEXT_TYPES = frozenset({"text", "input_text", "output_text"})
#: Parts that hold a model's reasoning, never its answer (a part may also be flagged
#: ``"thought": true``, as Gemini and ADK write it).
PART_REASONING_TYPES = frozenset({"reasoning", "thinking", "redacted_thinking"})
PART_SKIP_TYPES = PART_REASONING_TYPES | {"step-start"}
PART_TOOL_CALL_TYPES = frozenset({"tool_call", "tool_use", "tool-call", "function_call"})
PART_TOOL_RESULT_TYPES = frozenset(
    {
        "tool_call_response",
        "tool_result",
        "tool-result",
        "function_call_output",
        "function_response",
    }
)

# -------------------------------------------------------------------------------------------------
# Precedence lists (first present value wins). normalize.py builds its expressions from these.
# -------------------------------------------------------------------------------------------------
MODEL_KEYS = (
    GEN_AI_RESPONSE_MODEL,
    LLM_RESPONSE_MODEL_NAME,
    AI_RESPONSE_MODEL,
    LLM_MODEL_NAME,
    GEN_AI_REQUEST_MODEL,
    LLM_REQUEST_MODEL_NAME,
    AI_MODEL_ID,
    LANGSMITH_MODEL_NAME,
    PROMPTFLOW_MODEL,
)
PROVIDER_KEYS = (GEN_AI_PROVIDER_NAME, GEN_AI_SYSTEM, LLM_PROVIDER, LLM_SYSTEM, AI_MODEL_PROVIDER)
INPUT_TOKEN_KEYS = (
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_PROMPT_TOKENS,
    LLM_TOKEN_COUNT_PROMPT,
    AI_USAGE_INPUT_TOKENS,
    AI_USAGE_PROMPT_TOKENS,
    GEN_AI_AGGREGATED_INPUT_TOKENS,
    MONOCLE_PROMPT_TOKENS,
    PROMPTFLOW_PROMPT_TOKENS,
)
OUTPUT_TOKEN_KEYS = (
    GEN_AI_USAGE_OUTPUT_TOKENS,
    GEN_AI_USAGE_COMPLETION_TOKENS,
    LLM_TOKEN_COUNT_COMPLETION,
    AI_USAGE_OUTPUT_TOKENS,
    AI_USAGE_COMPLETION_TOKENS,
    GEN_AI_AGGREGATED_OUTPUT_TOKENS,
    MONOCLE_COMPLETION_TOKENS,
    PROMPTFLOW_COMPLETION_TOKENS,
)
CACHED_TOKEN_KEYS = (
    GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
    GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS_OLD,
    LLM_TOKEN_COUNT_CACHE_READ,
    AI_USAGE_CACHED_INPUT_TOKENS,
    GEN_AI_AGGREGATED_CACHE_READ_TOKENS,
)
COST_KEYS = (LLM_COST_TOTAL, PYDANTIC_OPERATION_COST, GEN_AI_USAGE_COST)
TOOL_NAME_KEYS = (GEN_AI_TOOL_NAME, TOOL_NAME, AI_TOOL_CALL_NAME)
TOOL_CALL_ID_KEYS = (GEN_AI_TOOL_CALL_ID, TOOL_ID, TOOL_CALL_ID, AI_TOOL_CALL_ID)
#: Tool arguments on a tool span; the generic OpenInference input.value and LangSmith's raw
#: inputs come after the specific keys (ADK's OpenInference layer wraps them differently).
ARGUMENT_KEYS = (
    GEN_AI_TOOL_CALL_ARGUMENTS,
    PYDANTIC_TOOL_ARGUMENTS,
    ADK_TOOL_CALL_ARGS,
    AI_TOOL_CALL_ARGS,
    AI_TOOL_CALL_INPUT,
    ANY_AGENT_TOOL_ARGS,
    TRACELOOP_ENTITY_INPUT,
)
ARGUMENT_FALLBACK_KEYS = (TOOL_CALL_FUNCTION_ARGUMENTS, INPUT_VALUE, GEN_AI_PROMPT, LANGFUSE_INPUT)
RESULT_KEYS = (
    GEN_AI_TOOL_CALL_RESULT,
    PYDANTIC_TOOL_RESPONSE,
    ADK_TOOL_RESPONSE,
    AI_TOOL_CALL_RESULT,
    AI_TOOL_CALL_OUTPUT,
    ANY_AGENT_OUTPUT,
    TRACELOOP_ENTITY_OUTPUT,
)
RESULT_FALLBACK_KEYS = (OUTPUT_VALUE, GEN_AI_COMPLETION, LANGFUSE_OUTPUT)
FINISH_REASON_KEYS = (
    GEN_AI_RESPONSE_FINISH_REASONS,
    LLM_FINISH_REASON,
    AI_RESPONSE_FINISH_REASON,
    MONOCLE_FINISH_REASON,
)
#: On a tool span: the tool's own definition or argument schema (`content.tool_span_definition`).
TOOL_SCHEMA_KEYS = (TOOL_JSON_SCHEMA, GEN_AI_TOOL_JSON_SCHEMA)
TOOL_DEFINITION_KEYS = (GEN_AI_TOOL_DEFINITIONS, AI_PROMPT_TOOLS, LANGFUSE_TOOL_DEFINITIONS)
AGENT_NAME_KEYS = (GEN_AI_AGENT_NAME, AGENT_NAME, PYDANTIC_AGENT_NAME)
CONVERSATION_KEYS = (
    GEN_AI_CONVERSATION_ID,
    SESSION_ID,
    ADK_SESSION_ID,
    LANGSMITH_TRACE_SESSION_ID,
    LANGSMITH_METADATA_SESSION_ID,
    TRACELOOP_SESSION_ID,
    AI_TELEMETRY_SESSION_ID,
    LANGFUSE_SESSION_ID,
)
PROMPT_NAME_KEYS = (GEN_AI_PROMPT_NAME, PROMPT_ID, TRACELOOP_PROMPT_KEY, LANGFUSE_PROMPT_NAME)
#: The text of a prompt's template, recorded beside the prompt rendered from it.
PROMPT_TEMPLATE_KEYS = (LLM_PROMPT_TEMPLATE, TRACELOOP_PROMPT_TEMPLATE)
PROMPT_VERSION_KEYS = (
    LLM_PROMPT_TEMPLATE_VERSION,
    TRACELOOP_PROMPT_VERSION,
    LANGFUSE_PROMPT_VERSION,
)

#: Attributes holding message content, parsed in Python for the spans that carry them only.
CONTENT_KEYS = (
    GEN_AI_INPUT_MESSAGES,
    GEN_AI_SYSTEM_INSTRUCTIONS,
    GEN_AI_OUTPUT_MESSAGES,
    PYDANTIC_EVENTS,
    PYDANTIC_ALL_MESSAGES_EVENTS,
    PYDANTIC_ALL_MESSAGES,
    PYDANTIC_FINAL_RESULT,
    AI_PROMPT,
    AI_PROMPT_MESSAGES,
    AI_RESPONSE_TEXT,
    AI_RESPONSE_OBJECT,
    AI_RESPONSE_TOOL_CALLS,
    ANY_AGENT_OUTPUT,
    GEN_AI_PROMPT,
    GEN_AI_COMPLETION,
    TRACELOOP_ENTITY_INPUT,
    TRACELOOP_ENTITY_OUTPUT,
    INPUT_VALUE,
    OUTPUT_VALUE,
    ADK_LLM_REQUEST,
    ADK_LLM_RESPONSE,
    LANGFUSE_INPUT,
    LANGFUSE_OUTPUT,
    MONOCLE_INPUT,
    MONOCLE_RESPONSE,
    CREWAI_CREW_RESULT,
)
#: Generic attribute names read only on Logfire-classified spans.
LOGFIRE_KEYS = (LOGFIRE_NAME, LOGFIRE_INPUT, LOGFIRE_OUTPUT)
#: Content under generic attribute names, read only on the spans of its family: (input, output).
FAMILY_CONTENT_KEYS = {
    LOGFIRE: (LOGFIRE_INPUT, LOGFIRE_OUTPUT),
    PROMPTFLOW: (PROMPTFLOW_INPUTS, PROMPTFLOW_OUTPUT),
}

#: Attributes read as numbers (strings such as "39" from Jaeger, Zipkin or Langfuse are coerced).
NUMERIC_KEYS = frozenset(
    (
        GEN_AI_REQUEST_TEMPERATURE,
        AI_SETTINGS_TEMPERATURE,
        HTTP_REQUEST_RESEND_COUNT,
        ANY_AGENT_INPUT_COST,
        ANY_AGENT_OUTPUT_COST,
        *INPUT_TOKEN_KEYS,
        *OUTPUT_TOKEN_KEYS,
        *CACHED_TOKEN_KEYS,
        *COST_KEYS,
        *CLAUDE_CODE_USAGE_KEYS,
    )
)

#: Keys that name or count things rather than hold content: the normalizer reads them, and
#: `--redact` keeps their values in clear (`REDACT_KEPT_KEYS`).
NAMING_KEYS = (
    GEN_AI_OPERATION_NAME,
    OPENINFERENCE_SPAN_KIND,
    TRACELOOP_SPAN_KIND,
    LLM_REQUEST_TYPE,
    LANGSMITH_SPAN_KIND,
    AI_OPERATION_ID,
    VERCEL_OPERATION_NAME,
    AI_TELEMETRY_FUNCTION_ID,
    LANGFUSE_TYPE,
    LANGFUSE_MODEL,
    LANGFUSE_LEVEL,
    *TOOL_STATUS_KEYS,
    LANGFUSE_USAGE_DETAILS,
    LANGFUSE_COST_DETAILS,
    GEN_AI_AGENT_VERSION,
    TRACELOOP_ENTITY_NAME,
    TRACELOOP_ENTITY_VERSION,
    PYDANTIC_MODEL_NAME,
    TRACELOOP_LS_MODEL_NAME,
    TOOL_CALL_FUNCTION_NAME,
    MONOCLE_VERSION,
    MONOCLE_SPAN_TYPE,
    MONOCLE_ENTITY_1_NAME,
    MONOCLE_ENTITY_2_NAME,
    MONOCLE_ENTITY_2_TYPE,
    PROMPTFLOW_FRAMEWORK,
    PROMPTFLOW_SPAN_TYPE,
    MAF_WORKFLOW_ID,
    MAF_WORKFLOW_NAME,
    *CLAUDE_CODE_KEYS,
    *MODEL_KEYS,
    *PROVIDER_KEYS,
    *NUMERIC_KEYS,
    *TOOL_NAME_KEYS,
    *TOOL_CALL_ID_KEYS,
    *FINISH_REASON_KEYS,
    *AGENT_NAME_KEYS,
    *PROMPT_NAME_KEYS,
    *PROMPT_VERSION_KEYS,
)

#: Every exact attribute key the normalizer keeps when it pivots the attribute lists.
EXACT_KEYS = frozenset(
    (
        *NAMING_KEYS,
        LANGFUSE_MODEL_PARAMETERS,
        *ADK_EVIDENCE,
        ERROR_TYPE,
        LLM_INVOCATION_PARAMETERS,
        *ARGUMENT_KEYS,
        *ARGUMENT_FALLBACK_KEYS,
        *RESULT_KEYS,
        *RESULT_FALLBACK_KEYS,
        *TOOL_DEFINITION_KEYS,
        *TOOL_SCHEMA_KEYS,
        TOOL_PARAMETERS,
        *CONVERSATION_KEYS,
        *PROMPT_TEMPLATE_KEYS,
        *CONTENT_KEYS,
        *LOGFIRE_KEYS,
        PROMPTFLOW_INPUTS,
        MONOCLE_OUTPUT,
        CREWAI_EVENT_NAME,
        PYDANTIC_TOOL_DEFERRAL,
    )
)

#: Flattened families (prefix -> family tag); an index must follow the prefix. Their entries are
#: regrouped per span in Python, for the spans that carry them only.
PREFIX_FAMILIES = {
    LLM_INPUT_MESSAGES_PREFIX: "oi_input",
    LLM_OUTPUT_MESSAGES_PREFIX: "oi_output",
    LLM_TOOLS_PREFIX: "oi_tools",
    GEN_AI_PROMPT_PREFIX: "tl_prompt",
    GEN_AI_COMPLETION_PREFIX: "tl_completion",
    LLM_REQUEST_FUNCTIONS_PREFIX: "tl_functions",
}

#: Span events the normalizer reads.
CONTENT_EVENTS = frozenset(
    (EVENT_CONTENT_PROMPT, EVENT_CONTENT_COMPLETION, EVENT_CHOICE, *MESSAGE_EVENT_ROLES)
)

# -------------------------------------------------------------------------------------------------
# OpenTelemetry resource conventions (stable): the service and the SDK that wrote the spans.
# -------------------------------------------------------------------------------------------------
SERVICE_NAME = "service.name"
SERVICE_VERSION = "service.version"
SERVICE_NAMESPACE = "service.namespace"
TELEMETRY_SDK_NAME = "telemetry.sdk.name"
TELEMETRY_SDK_LANGUAGE = "telemetry.sdk.language"
TELEMETRY_SDK_VERSION = "telemetry.sdk.version"
DEPLOYMENT_ENVIRONMENT = "deployment.environment"  # -> deployment.environment.name in v1.27
DEPLOYMENT_ENVIRONMENT_NAME = "deployment.environment.name"

#: The allow-list of `--redact` (analyzer.redact): attributes whose values are kept in clear.
#: Names of models, providers, agents, tools and prompts, kinds of operation and span, finish
#: reasons, versions, token counts and costs, tool call ids (made by the model provider, like
#: trace and span ids), the service and the SDK. Every other value is hashed: identifiers of
#: conversations, sessions, users and cases, error types, content.
REDACT_KEPT_KEYS = frozenset(
    (
        *NAMING_KEYS,
        SERVICE_NAME,
        SERVICE_VERSION,
        SERVICE_NAMESPACE,
        TELEMETRY_SDK_NAME,
        TELEMETRY_SDK_LANGUAGE,
        TELEMETRY_SDK_VERSION,
        DEPLOYMENT_ENVIRONMENT,
        DEPLOYMENT_ENVIRONMENT_NAME,
        *(alias for alias, key in KEY_ALIASES.items() if key in NAMING_KEYS),
    )
)

__all__ = sorted(name for name in list(globals()) if name.isupper())  # every constant is public
