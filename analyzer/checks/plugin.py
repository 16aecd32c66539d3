"""Plugin rules: a class named by import path (``module:Class``), loaded only when allowed."""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

import polars as pl

from analyzer.checks.base import (
    COMMON_FIELDS,
    INTERNAL,
    Check,
    CheckContext,
    LoadEnv,
    RunFinding,
)

__all__ = ["PLUGIN_TYPE", "PluginCheck", "build_plugin", "load_plugin_class"]

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
    mappings with ``kind``, ``detail`` and optionally ``tool``, ``argument``, ``span_ids``.
    ``run`` is the run's row as a dict (``answer`` holds the full answer text), ``steps`` its
    steps in order, as dicts. A run on which ``check_run`` raises is recorded as a check error
    for that run. A class deriving from ``analyzer.checks.base.Check`` is used as is, like a
    built-in rule type (it receives all keys and checks every run at once).

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
        runs = (
            ctx.runs.join(
                ctx.answers.select("run_id", pl.col("text").alias("_full")), on="run_id", how="left"
            )
            .with_columns(answer=pl.coalesce("_full", "answer"))
            .drop("_full")
        )
        steps = ctx.steps.sort("run_id", "index").to_dicts()
        by_run = {k: list(g) for k, g in groupby(steps, key=lambda s: s["run_id"])}
        plugin = self.instance

        def one(row: dict[str, Any]) -> list[RunFinding]:
            found = plugin.check_run(row, by_run.get(row["run_id"], []))
            return [_as_finding(f) for f in found or ()]

        return ctx.each(runs, one)


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
