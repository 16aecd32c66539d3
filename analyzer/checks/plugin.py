"""Plugin rules: a class named by import path (``module:Class``), loaded only when allowed."""

from __future__ import annotations

import ctypes
import importlib
import inspect
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import polars as pl

from analyzer.checks.base import (
    COMMON_FIELDS,
    INTERNAL,
    Check,
    CheckContext,
    LoadEnv,
    RunFinding,
)

__all__ = [
    "PLUGIN_SECONDS",
    "PLUGIN_TYPE",
    "PluginCheck",
    "PluginFailure",
    "PluginTimeout",
    "build_plugin",
    "guarded",
    "load_plugin_class",
]

_T = TypeVar("_T")

#: Seconds one call of a plugin may take (``check_run`` of one run, or ``check`` of a plugin
#: deriving from `Check`) before it is stopped and recorded as a check error; the environment
#: variable ``AGENTTRACE_PLUGIN_SECONDS`` sets another.
PLUGIN_SECONDS = 10.0
#: Budgets a ``check_run`` plugin may spend over all the runs of one check (60 s by default);
#: the runs left when they are spent are check errors, not run.
PLUGIN_TOTAL_BUDGETS = 6
#: Seconds a plugin stopped at its deadline may keep swallowing the stop before agenttrace
#: gives up on it: it then says so on stderr and ends with exit code 2 (never silently).
PLUGIN_GRACE_SECONDS = 5.0

#: What a plugin ``type:`` looks like: a dotted module path, a colon, a class name.
PLUGIN_TYPE = re.compile(
    r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$"
)


@dataclass(frozen=True, kw_only=True)
class PluginCheck(Check):
    """A rule written in Python, named by import path (module:Class).

    Flags
    -----
    Whatever the plugin yields. The class is imported only when plugins are allowed
    (``--allow-plugins``, ``load_packs(..., allow_plugins=True)``): a pack must not run code
    on its own. It is constructed with the rule's keys other than ``id``, ``type``,
    ``severity``, ``weight``, ``when`` and ``description``, and must have a method
    ``check_run(run, steps)`` that yields findings for one run: `RunFinding` objects or
    mappings with ``kind``, ``detail`` and optionally ``tool``, ``argument``, ``span_ids``,
    ``pos`` (the finding's place among the rule's findings of the run).
    ``run`` is the run's row as a dict (``answer`` holds the full answer text), ``steps`` its
    steps in order, as dicts. A run on which ``check_run`` raises is recorded as a check error
    for that run; so is one on which it takes more than `PLUGIN_SECONDS` (10 s, or
    ``AGENTTRACE_PLUGIN_SECONDS``), tries to end the process (``sys.exit``, ``os._exit``,
    ``SystemExit``) or raises any other ``BaseException``; runs left after six times that
    spent in the plugin are check errors, not run. A plugin that swallows the stop for 5 s
    more ends agenttrace with exit code 2 and a message naming it.
    A class deriving from ``analyzer.checks.base.Check`` is used as is, like a built-in rule
    type (it receives all keys and checks every run at once with ``check(ctx)``, or one run at
    a time with ``check_run(run)``: docs/rule-types.md), under the same guard: a call of its
    ``check`` past the time budget is a check error on each of its runs.

    Why it matters
    --------------
    Every team has a rule no generic type expresses (a length limit, a house format); a
    plugin keeps it in the same report, with the same findings, severities and scores.

    Options
    -------
    (any) : the plugin's own keys
        Passed to the class constructor as keyword arguments.

    Example
    -------
    - id: short-answers
      type: "mypkg.rules:MaxLength"
      max_chars: 400
      severity: low
    """

    type = "plugin"
    kinds = ()

    target: str
    options: Mapping[str, Any] = field(default_factory=dict)
    instance: Any = field(default=None, repr=False, compare=False, metadata=INTERNAL)

    def identity(self) -> None:
        return None  # the plugin's code is not known to us

    def check(self, ctx: CheckContext) -> pl.DataFrame:
        plugin = self.instance
        seconds = plugin_seconds()
        total = seconds * PLUGIN_TOTAL_BUDGETS
        spent = [0.0]

        def one(row: dict[str, Any]) -> list[RunFinding]:
            if spent[0] >= total:
                raise PluginTimeout(
                    f"not run: the plugin {self.target} spent its {total:g} s on the runs before"
                )
            steps = row.pop("steps")  # the plugin API takes them apart: check_run(run, steps)

            def call() -> list[RunFinding]:
                return [_as_finding(f) for f in plugin.check_run(row, steps) or ()]

            start = time.monotonic()
            try:
                left = min(seconds, total - spent[0])
                return guarded(call, left, self.target, budget=seconds)
            finally:
                spent[0] += time.monotonic() - start

        return ctx.per_run(one)


class PluginFailure(Exception):
    """A plugin that tried to end the process or raised a ``BaseException`` (a check error)."""


class PluginTimeout(PluginFailure):
    """A plugin call stopped at its time budget (a check error, not retried)."""


class _Deadline(BaseException):
    """Raised inside a plugin call at its deadline (a BaseException: ``except Exception`` in
    the plugin does not swallow it)."""


class _ExitCalled(BaseException):
    """What ``os._exit`` raises while a plugin runs."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def plugin_seconds() -> float:
    """`PLUGIN_SECONDS`, or the environment's ``AGENTTRACE_PLUGIN_SECONDS`` (when a number
    above 0)."""
    raw = os.environ.get("AGENTTRACE_PLUGIN_SECONDS")
    try:
        value = float(raw) if raw else PLUGIN_SECONDS
    except ValueError:
        return PLUGIN_SECONDS
    return value if value > 0 else PLUGIN_SECONDS


class _Watchdog:
    """One thread per process that stops plugin calls past their deadline: it raises
    `_Deadline` in the calling thread (``PyThreadState_SetAsyncExc``, seen at the next
    bytecode), again every half second while the call goes on (a plugin may swallow it), and
    wakes the main thread out of a blocking call with SIGALRM (its handler is a no-op: the
    pending exception is raised as it runs)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        #: token -> [thread id, next deadline, what, when given up on (0: not stopped yet)]
        self._armed: dict[int, list[Any]] = {}
        self._token = 0
        self._thread: threading.Thread | None = None

    def arm(self, thread_id: int, seconds: float, what: str) -> int:
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._watch, name="agenttrace-plugin-watchdog", daemon=True
                )
                self._thread.start()
            self._token += 1
            self._armed[self._token] = [thread_id, time.monotonic() + seconds, what, 0.0]
            self._cond.notify()
            return self._token

    def disarm(self, token: int) -> None:
        with self._cond:
            self._armed.pop(token, None)

    def _watch(self) -> None:
        with self._cond:
            while True:
                if not self._armed:
                    self._cond.wait()
                    continue
                now = time.monotonic()
                for entry in self._armed.values():
                    thread_id, deadline, what, given_up = entry
                    if deadline > now:
                        continue
                    if not given_up:
                        entry[3] = now + PLUGIN_GRACE_SECONDS
                    elif now >= given_up:
                        os.write(
                            2,
                            f"Error: the plugin {what} went on past its time budget and ignored "
                            f"being stopped for {PLUGIN_GRACE_SECONDS:g} s; agenttrace ends "
                            "here\n".encode(),
                        )
                        _EXIT(2)
                    _raise_in(thread_id, _Deadline)
                    if thread_id == threading.main_thread().ident and hasattr(signal, "SIGALRM"):
                        signal.pthread_kill(thread_id, signal.SIGALRM)
                    entry[1] = now + 0.5
                self._cond.wait(max(0.0, min(e[1] for e in self._armed.values()) - now))


def _raise_in(thread_id: int, exc: type[BaseException] | None) -> None:
    """Raise `exc` in the thread `thread_id` at its next bytecode (None: clear a pending one)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc is not None else None
    )


_WATCHDOG = _Watchdog()
if hasattr(os, "register_at_fork"):  # a forked worker: a lock of its own, no thread yet
    os.register_at_fork(after_in_child=_WATCHDOG.__init__)
_EXIT = os._exit  # the real one: a plugin call sees `_no_exit` in its place


def guarded(
    function: Callable[[], _T], seconds: float, what: str, *, budget: float | None = None
) -> _T:
    """``function()`` (plugin code) within `seconds`; a call past them raises `PluginTimeout`,
    one ending the process (``sys.exit``, ``os._exit``) or raising another ``BaseException``
    raises `PluginFailure`, so the caller records a check error and goes on.

    The plugin is stopped between two bytecodes, or (in the main thread) out of a blocking
    call; C code that never returns to Python is not interrupted. `budget` is the budget
    named in the error (default: `seconds`).
    """
    thread_id = threading.get_ident()
    in_main = threading.current_thread() is threading.main_thread()
    previous = None
    interrupted: list[bool] = []
    if in_main and hasattr(signal, "SIGALRM"):
        previous = signal.signal(signal.SIGALRM, _wake)
    sigint = None
    if in_main and signal.getsignal(signal.SIGINT) is signal.default_int_handler:

        def on_interrupt(signum: int, frame: Any) -> None:
            interrupted.append(True)  # a real Ctrl-C, not a plugin raising KeyboardInterrupt
            raise KeyboardInterrupt

        sigint = signal.signal(signal.SIGINT, on_interrupt)
    exit_was = os._exit
    token = 0
    try:
        try:
            os._exit = _no_exit  # type: ignore[assignment]
            token = _WATCHDOG.arm(thread_id, seconds, what)
            return function()
        finally:
            _WATCHDOG.disarm(token)
            _raise_in(thread_id, None)  # a deadline raised just too late
            os._exit = exit_was
            if previous is not None:
                signal.signal(signal.SIGALRM, previous)
            if sigint is not None:
                signal.signal(signal.SIGINT, sigint)
    except _Deadline:
        _WATCHDOG.disarm(token)
        raise PluginTimeout(
            f"the plugin {what} ran past its time budget of {budget or seconds:g} s and was stopped"
        ) from None
    except _ExitCalled as exc:
        raise PluginFailure(f"the plugin {what} called os._exit({exc.code})") from None
    except SystemExit as exc:
        raise PluginFailure(
            f"the plugin {what} tried to end the process (SystemExit: {exc.code!r})"
        ) from None
    except Exception:
        raise
    except BaseException as exc:
        if interrupted:  # the user's Ctrl-C stops agenttrace, plugin or not
            raise
        said = f": {exc}" if str(exc) else ""
        raise PluginFailure(f"the plugin {what} raised {type(exc).__name__}{said}") from None
    finally:
        _WATCHDOG.disarm(token)
        os._exit = exit_was


def _wake(signum: int, frame: Any) -> None:
    """SIGALRM during a plugin call: nothing to do, the deadline's exception is pending."""


def _no_exit(code: int) -> None:
    raise _ExitCalled(code)


def _as_finding(item: Any) -> RunFinding:
    if isinstance(item, RunFinding):
        return item
    if isinstance(item, Mapping):
        return RunFinding(
            kind=str(item["kind"]),
            detail=str(item["detail"]),
            tool=item.get("tool"),
            argument=item.get("argument"),
            span_ids=tuple(item.get("span_ids") or ()),
            pos=int(item.get("pos") or 0),
        )
    raise TypeError(f"a plugin yielded {type(item).__name__}, not a RunFinding or a mapping")


def load_plugin_class(target: str) -> type:
    """Import ``module:Class``; ValueError says what went wrong."""
    module_name, _, class_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the plugin's own import may fail in any way
        raise ValueError(f"cannot import {module_name}: {type(exc).__name__}: {exc}") from exc
    cls = getattr(module, class_name, None)
    if not inspect.isclass(cls):
        raise ValueError(f"module {module_name} has no class {class_name}")
    return cls


def build_plugin(target: str, options: dict[str, Any], env: LoadEnv) -> Check | None:
    """The rule for a ``module:Class`` type (the caller has checked plugins are allowed)."""
    try:
        cls = load_plugin_class(target)
    except ValueError as err:
        env.report(("type",), str(err))
        return None
    if issubclass(cls, Check):
        try:
            return cls.from_options(options, env)
        except TypeError as err:
            env.report((), f"{target}: {err}")
            return None
    if not callable(getattr(cls, "check_run", None)):
        env.report(("type",), f"{target} has no check_run(run, steps) method")
        return None
    common = {k: v for k, v in options.items() if k in COMMON_FIELDS}
    own = {k: v for k, v in options.items() if k not in COMMON_FIELDS}
    try:
        instance = cls(**own)
    except Exception as exc:  # a constructor refusing its keys is a pack error
        env.report((), f"{target}({', '.join(sorted(own))}) failed: {type(exc).__name__}: {exc}")
        return None
    rule = PluginCheck.from_options({**common, "target": target, "options": own}, env)
    assert isinstance(rule, PluginCheck)
    object.__setattr__(rule, "instance", instance)
    return rule
