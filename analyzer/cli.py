"""The `agenttrace` command line; the one place that turns AgentTraceError into exit code 2."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from analyzer import __version__
from analyzer.errors import AgentTraceError, InputError
from analyzer.textsafe import clip, terminal_safe

__all__ = ["main"]

_PATHS = click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
_RUN_KEY = click.option(
    "--run-key", metavar="ATTR", help="Group spans into runs by this attribute instead of by trace."
)
_CASE_KEY = click.option(
    "--case-key",
    metavar="ATTR",
    help="Attribute holding the case id (default: app.case_id, case_id).",
)


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except AgentTraceError as err:
            click.echo(f"Error: {err}", err=True)
            ctx.exit(2)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="agenttrace")
def main() -> None:
    """Offline analysis of the OpenTelemetry traces LLM agents leave behind."""


def _progress() -> Callable[[str, int], None] | None:
    if not sys.stderr.isatty():
        return None

    def show(path: str, spans: int) -> None:
        click.echo(f"\r\x1b[Kread {clip(path, 60)} ({spans:,} spans)", err=True, nl=False)

    return show


def _analyze(
    paths: tuple[Path, ...],
    run_key: str | None = None,
    case_key: str | None = None,
    packs: tuple = (),
    prices=None,
):
    from analyzer.pipeline import analyze_paths

    if not paths:
        raise InputError("no input: give at least one trace file or folder")
    analysis = analyze_paths(
        list(paths),
        run_key=run_key,
        case_key=case_key,
        packs=packs,
        prices=prices,
        progress=_progress(),
    )
    if sys.stderr.isatty():
        click.echo("\r\x1b[K", err=True, nl=False)
    return analysis


def _accounting_line(log, skipped: list[str]) -> str:
    parts = [
        f"{log.spans_kept:,} spans kept from {len(log.files):,} files ({log.records:,} records)"
    ]
    if log.duplicates:
        parts.append(f"{log.duplicates:,} duplicate spans dropped")
    if log.spans_quarantined or log.records_quarantined:
        parts.append(
            f"QUARANTINED: {log.spans_quarantined:,} spans, {log.records_quarantined:,} records"
        )
    if log.orphans:
        parts.append(f"{log.orphans:,} orphan spans (parent missing) treated as roots")
    if skipped:
        parts.append(f"{len(skipped)} non-trace files skipped by name")
    return "; ".join(parts)


def _quarantine_lines(log, limit: int = 10) -> list[str]:
    entries = log.quarantine
    lines = [
        f"  quarantined {terminal_safe(q.file)} {q.position}: {clip(q.reason, 120)}"
        for q in entries[:limit]
    ]
    if len(entries) > limit:
        lines.append(f"  ... and {len(entries) - limit} more (see quarantine.jsonl with --out)")
    return lines


@main.command()
@_PATHS
@click.option(
    "--out", "out", required=True, type=click.Path(path_type=Path), help="New dataset folder."
)
def ingest(paths: tuple[Path, ...], out: Path) -> None:
    """Parse trace files once into a Parquet dataset that every command reads back fast."""
    from analyzer.ingest import read_traces, write_dataset

    if not paths:
        raise InputError("no input: give at least one trace file or folder")
    ingested = read_traces(list(paths), progress=_progress())
    write_dataset(ingested.spans, ingested.log, out, tool_version=__version__)
    click.echo(_accounting_line(ingested.log, ingested.skipped))
    for line in _quarantine_lines(ingested.log):
        click.echo(line)
    click.echo(f"dataset written to {out}")


def _fmt_int(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


@main.command()
@_PATHS
@_RUN_KEY
@_CASE_KEY
@click.option(
    "--format", "fmt", type=click.Choice(["table", "jsonl"]), default="table", show_default=True
)
def runs(paths: tuple[Path, ...], run_key: str | None, case_key: str | None, fmt: str) -> None:
    """List every reconstructed run, one line each."""
    analysis = _analyze(paths, run_key, case_key)
    frame = analysis.runs.runs
    if fmt == "jsonl":
        cols = [
            "run_id",
            "agent",
            "case_id",
            "models",
            "model_calls",
            "tool_calls",
            "input_tokens",
            "output_tokens",
            "has_answer",
        ]
        for row in frame.select(cols).iter_rows(named=True):
            click.echo(json.dumps(row, ensure_ascii=False, sort_keys=True))
    else:
        header = (
            f"{'RUN':<32}  {'AGENT':<16} {'CASE':<12} {'MODELS':<22} "
            f"{'LLM':>4} {'TOOLS':>5} {'TOKENS':>9}  ANSWER"
        )
        click.echo(header)
        for row in frame.iter_rows(named=True):
            tokens = None
            if row["input_tokens"] is not None or row["output_tokens"] is not None:
                tokens = (row["input_tokens"] or 0) + (row["output_tokens"] or 0)
            click.echo(
                f"{clip(row['run_id'], 32):<32}  {clip(row['agent'] or '-', 16):<16} "
                f"{clip(row['case_id'] or '-', 12):<12} "
                f"{clip(','.join(row['models']) or '-', 22):<22} "
                f"{row['model_calls']:>4} {row['tool_calls']:>5} {_fmt_int(tokens):>9}  "
                f"{'yes' if row['has_answer'] else 'no'}"
            )
    click.echo(
        f"{frame.height:,} runs; "
        + _accounting_line(analysis.ingested.log, analysis.ingested.skipped),
        err=True,
    )


@main.command()
@click.argument("run_id")
@_PATHS
@_RUN_KEY
@_CASE_KEY
@click.option(
    "--width", default=60, show_default=True, help="Characters kept of arguments and results."
)
def show(
    run_id: str, paths: tuple[Path, ...], run_key: str | None, case_key: str | None, width: int
) -> None:
    """Print one run's trajectory step by step (RUN_ID may be a unique prefix)."""
    analysis = _analyze(paths, run_key, case_key)
    ids = analysis.runs.runs.get_column("run_id").to_list()
    matches = [r for r in ids if r == run_id] or [r for r in ids if r.startswith(run_id)]
    if len(matches) != 1:
        what = "no run" if not matches else f"{len(matches)} runs"
        raise InputError(f"{what} with id {run_id!r} in the input ({len(ids)} runs read)")
    run, steps = analysis.runs.run(matches[0])
    click.echo(f"run      {run['run_id']}")
    click.echo(
        f"agent    {terminal_safe(run['agent'] or '-')}   "
        f"case {terminal_safe(run['case_id'] or '-')}"
    )
    click.echo(
        f"models   {terminal_safe(', '.join(run['models']) or '-')}   temperature(s) "
        f"{', '.join(str(t) for t in run['temperatures']) or '-'}   config {run['config_hash']}"
    )
    click.echo(
        f"totals   {run['model_calls']} model calls, {run['tool_calls']} tool calls, "
        f"{_fmt_int(run['input_tokens'])} in / {_fmt_int(run['output_tokens'])} out tokens, "
        f"{run['duration_s']:.3f} s"
    )
    origin = run["started_ns"]
    click.echo("")
    click.echo(
        f"{'#':>3}  {'T+ms':>9}  {'KIND':<5} {'NAME':<24} {'TOKENS':>11}  {'STATUS':<6} DETAIL"
    )
    for step in steps.iter_rows(named=True):
        t = (step["start_ns"] - origin) / 1e6
        kind = "model" if step["kind"] == "model_call" else "tool"
        tokens = ""
        if step["kind"] == "model_call" and (
            step["input_tokens"] is not None or step["output_tokens"] is not None
        ):
            tokens = f"{_fmt_int(step['input_tokens'])}/{_fmt_int(step['output_tokens'])}"
        status = step["status"] if step["executed"] else "never ran"
        if step["kind"] == "model_call":
            asked = ", ".join(
                f"{c['name']}({c['arguments'] or ''})" for c in step["requested_calls"] or []
            )
            detail = (
                f"-> {asked}"
                if asked
                else (f"says {step['output_text']}" if step["output_text"] else "")
            )
        else:
            detail = f"args {step['arguments'] or '-'}"
            if step["result"] is not None:
                detail += f" -> {step['result']}"
        click.echo(
            f"{step['index']:>3}  {t:>+9.1f}  {kind:<5} "
            f"{clip(step['name'] or '?', 24):<24} {tokens:>11}  "
            f"{status:<6} {clip(detail, width * 2)}"
        )
    click.echo("")
    if run["has_answer"]:
        click.echo(
            f"answer at T+{(run['answer_ns'] - origin) / 1e6:.1f} ms: "
            f"{clip(run['answer'] or '(content not recorded)', width * 3)}"
        )
    else:
        click.echo("no answer: the run ended without a final model output")


_SEVERITIES = ("critical", "high", "medium", "low")


@main.command()
@_PATHS
@_RUN_KEY
@_CASE_KEY
@click.option(
    "--rules",
    "rule_packs",
    multiple=True,
    type=click.Path(path_type=Path),
    metavar="PACK",
    help="Rule pack (YAML); repeatable. Default: the built-in pack (rules/default.yaml).",
)
@click.option(
    "--allow-plugins",
    is_flag=True,
    help="Load plugin rule types (module:Class): this runs Python code named by the pack.",
)
@click.option(
    "--prices",
    "prices_file",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="Price table (YAML, USD per million tokens). Default: the bundled rules/prices.yaml.",
)
@click.option(
    "--out",
    "out",
    type=click.Path(path_type=Path),
    help="Folder for summary.json, findings, runs/steps Parquet, quarantine, manifest.",
)
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@click.option(
    "--fail-on",
    type=click.Choice([*_SEVERITIES, "never"]),
    default="never",
    show_default=True,
    help="Exit 1 when a finding has this severity or a higher one.",
)
def report(
    paths: tuple[Path, ...],
    run_key: str | None,
    case_key: str | None,
    rule_packs: tuple[Path, ...],
    allow_plugins: bool,
    prices_file: Path | None,
    out: Path | None,
    fmt: str,
    fail_on: str,
) -> None:
    """Analyze trace files: accounting, runs, findings (the main job)."""
    from analyzer.pack import load_default_pack, load_packs
    from analyzer.pricing import load_prices
    from analyzer.report import build_summary, write_outputs

    packs = (
        tuple(load_packs(rule_packs, allow_plugins=allow_plugins))
        if rule_packs
        else (load_default_pack(),)
    )
    prices = load_prices(prices_file)
    analysis = _analyze(paths, run_key, case_key, packs, prices)
    summary = build_summary(analysis)
    if out is not None:
        write_outputs(analysis, summary, out, command=sys.argv)
    if fmt == "json":
        click.echo(json.dumps(summary, indent=2, sort_keys=True, ensure_ascii=False))
    else:
        from analyzer.report import terminal_summary

        for line in terminal_summary(analysis, summary):
            click.echo(line)
        if out is not None:
            click.echo(f"outputs written to {out}")
    if fail_on != "never":
        failing = _SEVERITIES[: _SEVERITIES.index(fail_on) + 1]
        by_severity = summary["findings"]["by_severity"]
        if any(by_severity.get(s, 0) for s in failing):
            click.get_current_context().exit(1)


# --- rules ---------------------------------------------------------------------------------------

_ALLOW_PLUGINS = click.option(
    "--allow-plugins",
    is_flag=True,
    help="Load plugin rule types (module:Class): this runs Python code named by the pack.",
)


@main.group()
def rules() -> None:
    """List rule types, explain one, or check rule packs."""


@rules.command("list")
def rules_list() -> None:
    """One line per rule type: its name, the finding kinds it yields, what it checks."""
    from analyzer.checks import REGISTRY
    from analyzer.checks.base import doc_sections
    from analyzer.checks.plugin import PluginCheck

    entries = [(name, cls) for name, cls in sorted(REGISTRY.items())] + [("plugin", PluginCheck)]
    for name, cls in entries:
        kinds = ", ".join(cls.kinds) or "(any)"
        summary = doc_sections(cls)[""].splitlines()[0]
        click.echo(f"{name:<16} {kinds:<58} {summary}")


@rules.command("explain")
@click.argument("rule_type")
@_ALLOW_PLUGINS
def rules_explain(rule_type: str, allow_plugins: bool) -> None:
    """Print the documentation of RULE_TYPE (a type name, `plugin`, or module:Class)."""
    from analyzer.checks import REGISTRY
    from analyzer.checks.base import COMMON_FIELDS, DOC_SECTIONS, did_you_mean, doc_sections
    from analyzer.checks.plugin import PLUGIN_TYPE, PluginCheck, load_plugin_class

    if rule_type in REGISTRY or rule_type == "plugin":
        cls = REGISTRY.get(rule_type, PluginCheck)
        parts = doc_sections(cls)
        click.echo(f"{rule_type}: {parts['']}")
        click.echo(f"kinds: {', '.join(cls.kinds) or '(any: the plugin decides)'}")
        for title in DOC_SECTIONS:
            click.echo("")
            click.echo(title)
            click.echo("-" * len(title))
            click.echo(parts.get(title, ""))
        click.echo("")
        click.echo(
            f"Every rule also takes: {', '.join(COMMON_FIELDS)} (severity: critical, high, "
            "medium (default), low; when: {attributes: {NAME: [VALUES]}} and/or {agent: NAME})."
        )
        return
    if PLUGIN_TYPE.match(rule_type):
        if not allow_plugins:
            raise click.BadParameter(
                "explaining a plugin imports its module: pass --allow-plugins",
                param_hint="RULE_TYPE",
            )
        try:
            cls = load_plugin_class(rule_type)
        except ValueError as err:
            raise click.BadParameter(str(err), param_hint="RULE_TYPE") from err
        click.echo(f"{rule_type}: {doc_sections(cls)[''] or '(no docstring)'}")
        return
    choices = [*sorted(REGISTRY), "plugin"]
    raise click.BadParameter(
        f"unknown rule type {rule_type!r}{did_you_mean(rule_type, choices)} "
        f"(rule types: {', '.join(choices)})",
        param_hint="RULE_TYPE",
    )


@rules.command("check")
@click.argument("packs", nargs=-1, required=True, type=click.Path(path_type=Path))
@_ALLOW_PLUGINS
def rules_check(packs: tuple[Path, ...], allow_plugins: bool) -> None:
    """Validate rule packs (all problems at once) and summarize their rules."""
    from analyzer.pack import load_packs

    for pack in load_packs(list(packs), allow_plugins=allow_plugins):
        sha = f", sha256 {pack.sha256[:12]}" if pack.sha256 else ""
        click.echo(
            f"pack {terminal_safe(pack.name)} ({pack.path}{sha}): {len(pack.rules)} rules, "
            f"{len(pack.tools)} tool specs"
        )
        for rule in pack.rules:
            kind = getattr(rule, "target", None) or rule.type
            weight = f"weight {rule.weight:g}" if rule.weight is not None else "no weight"
            when = rule.when.describe() if rule.when is not None else "every run"
            click.echo(
                f"  {terminal_safe(rule.id):<24} {kind:<16} {rule.severity:<8} {weight:<10} "
                f"when {terminal_safe(when)}"
            )
