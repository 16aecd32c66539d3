"""The one user-facing error class and its kinds; the CLI prints them and exits with code 2."""

__all__ = [
    "AgentTraceError",
    "GateError",
    "InputError",
    "PriceTableError",
    "RulePackError",
    "TraceFormatError",
]


class AgentTraceError(Exception):
    """A problem the user can fix (bad path, bad option, bad rule pack); never a bug."""


class InputError(AgentTraceError):
    """No usable input: a missing path, an empty folder, an unreadable dataset."""


class TraceFormatError(AgentTraceError):
    """A whole file that is not a trace in any format agenttrace reads."""


class RulePackError(AgentTraceError):
    """A rule pack that cannot be loaded; the message lists every problem found."""


class PriceTableError(AgentTraceError):
    """A price table (``--prices FILE``) that cannot be loaded; the message lists every problem."""


class GateError(AgentTraceError):
    """A gate file (``diff --gate FILE``) that cannot be used; the message lists every problem."""
