"""The `agenttrace` command line; the one place that turns errors into exit codes (`_Group`)."""

from __future__ import annotations

import gc
import json
import signal
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from analyzer import __version__
from analyzer.errors import AgentTraceError, InputError
from analyzer.jsonpath import key_path
from analyzer.textsafe import clip, json_safe, terminal_lines, terminal_safe
from analyzer.workers import quiet_blas

if TYPE_CHECKING:
    import polars as pl

__all__ = ["main", "run"]

_PATHS = click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
_RUN_KEY = click.option(
    "--run-key", metavar="ATTR", help="Group spans into runs by this attribute instead of by trace."
)


def _attribute_name(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """An attribute name the analysis can read: no quote, no backslash (as in a rule pack)."""
    if value is not None:
        try:
            key_path(value)
        except ValueError as err:
            raise click.BadParameter(str(err)) from None
    return value


_CASE_KEY = click.option(
    "--case-key",
    metavar="ATTR",
    callback=_attribute_name,
    help="Attribute holding the case id (default: app.case_id, case_id).",
)
_ALLOW_PLUGINS = click.option(
    "--allow-plugins",
    is_flag=True,
    help="Load plugin rule types (module:Class): this runs Python code named by the pack.",
)
_RULES = click.option(
    "--rules",
    "rule_packs",
    multiple=True,
    type=click.Path(path_type=Path),
    metavar="PACK",
    help="Rule pack (YAML); repeatable. Default: the built-in pack (rules/default.yaml).",
)
_PRICES = click.option(
    "--prices",
    "prices_file",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="Price table (YAML, USD per million tokens). Default: the bundled rules/prices.yaml.",
)
_CASE_CLASS = click.option(
    "--case-class",
    metavar="ATTR",
    callback=_attribute_name,
    default="app.case_type",
    show_default=True,
    help="Run attribute holding the case class, for the case_class breakdown.",
)
_LABELS = click.option(
    "--labels",
    "labels_file",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="Golden labels (JSONL, schemas/labels.schema.json), joined to runs by case id.",
)
_REDACT = click.option(
    "--redact",
    is_flag=True,
    help="Replace argument values, results, answers and message content with salted hashes "
    "in every output (ids, names and figures stay).",
)
_REDACT_SALT = click.option(
    "--redact-salt",
    metavar="TEXT",
    help="Salt of --redact (implies it): the same salt gives the same hashes across reports. "
    "Default: a random salt, printed on stderr and written to no file.",
)
_QUIET = "agenttrace.quiet"
_QUIET_OPTION = click.option(
    "--quiet",
    "-q",
    is_flag=True,
    expose_value=False,
    callback=lambda ctx, _param, value: ctx.meta.__setitem__(_QUIET, value),
    help="No progress on standard error (a bar on a terminal, log lines otherwise).",
)
_JOBS = click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    help="Processes to parse and analyze with (default: the CPUs this process may use).",
)


def _options(*decorators: Callable) -> Callable:
    """One decorator that adds the options `decorators` add, listed in --help in this order."""

    def apply(func: Callable) -> Callable:
        for decorator in reversed(decorators):
            func = decorator(func)
        return func

    return apply


#: The options of the commands that check runs: the keys of runs and cases, the rule packs and
#: prices, the golden labels; and those of redaction.
_CHECKS = _options(_RULES, _ALLOW_PLUGINS, _PRICES)
_KEYS = _options(_RUN_KEY, _CASE_KEY)
_ANALYSIS = _options(_KEYS, _CHECKS, _LABELS)
_REDACTION = _options(_REDACT, _REDACT_SALT)


def _redacted(
    analysis, redact: bool, salt: str | None, labels=None
) -> tuple[Any, dict[str, str] | None, Any]:
    """`analysis` redacted when asked (see analyzer.redact), the manifest's record of it, and
    `labels`: scored on the real content first, then redacted alike (answers become tokens)."""
    if not redact and salt is None:
        return analysis, None, labels
    from analyzer.redact import new_salt, redact_analysis, redact_label_scores, redaction_record

    given = salt is not None
    salt = salt if given else new_salt()
    if not given:
        click.echo(f"redaction salt (generated, written to no file): {salt}", err=True)
    if labels is not None:
        from analyzer.metrics.labels import scored

        labels = redact_label_scores(scored(labels, analysis.runs), salt)
    return redact_analysis(analysis, salt), redaction_record(salt, given=given), labels


def _packs(rule_packs: tuple[Path, ...], allow_plugins: bool) -> tuple:
    """The rule packs given (--rules), else the built-in pack."""
    from analyzer.pack import load_default_pack, load_packs

    if rule_packs:
        return tuple(load_packs(rule_packs, allow_plugins=allow_plugins))
    return (load_default_pack(),)


def _labels(labels_file: Path | None):
    """The golden labels of --labels (`analyzer.metrics.labels.load_labels`), None without."""
    if labels_file is None:
        return None
    from analyzer.metrics.labels import load_labels

    return load_labels(labels_file)


def _command_line(salt: str | None) -> list[str]:
    """sys.argv with the value of --redact-salt hidden (the manifest records the command)."""
    args = list(sys.argv)
    for i, arg in enumerate(args):
        if salt is not None and arg == "--redact-salt" and i + 1 < len(args):
            args[i + 1] = "***"
        elif arg.startswith("--redact-salt="):
            args[i] = "--redact-salt=***"
    return args


class _Group(click.Group):
    """Exit codes: 2 for a problem the user can fix (`AgentTraceError`); 3, with one line and
    no traceback unless ``--debug``, for the environment (a full disk, a permission) or a bug.
    Click's own exits (usage errors, ``ctx.exit``) and a closed pipe pass through."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except AgentTraceError as err:
            click.echo(f"Error: {terminal_lines(err)}", err=True)
            ctx.exit(2)
        except (
            click.exceptions.ClickException,
            click.exceptions.Exit,
            click.exceptions.Abort,
            BrokenPipeError,  # click's own handling: a closed pipe is no error
        ):
            raise
        except Exception as err:
            if ctx.params.get("debug"):
                traceback.print_exc()
            click.echo(f"Error: {_environment_error(err)} (--debug shows the traceback)", err=True)
            ctx.exit(3)


def _environment_error(err: Exception) -> str:
    """One line for an error that is not the user's input: the OS's words and the file, or
    the kind of internal error."""
    if isinstance(err, OSError):
        where = f"{err.filename}: " if err.filename else ""
        return terminal_safe(f"{where}{err.strerror or err}")
    return terminal_safe(f"internal error: {type(err).__name__}: {clip(str(err), 200)}")


def run() -> None:
    """The ``agenttrace`` program: `main`, whose exit then skips the garbage collection of
    what the command left. Every object is frozen (``gc.freeze``) when the command ends, so
    that the interpreter's collection at exit no longer walks the objects of polars, Arrow
    and the analysis. Exit handlers still run (the spill folder is removed).

    SIGTERM stops the command as Ctrl-C would: worker processes ended, spill folders removed,
    exit code 143."""
    signal.signal(signal.SIGTERM, _stopped)
    try:
        main()
    finally:
        gc.freeze()


def _stopped(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="agenttrace")
@click.option(
    "--debug", is_flag=True, help="Show the traceback of an internal or environment error."
)
def main(debug: bool) -> None:
    """Offline analysis of the OpenTelemetry traces LLM agents leave behind.

    Exit codes: 0 done; 1 findings at or above --fail-on, or a gate broken; 2 bad input or
    usage; 3 an environment (disk full, permissions) or internal error.
    """
    quiet_blas()  # before any command imports numpy


def _progress():
    """Where the engine reports its stages (`analyzer.progress.Progress`); None with --quiet."""
    if click.get_current_context().meta.get(_QUIET):
        return None
    from analyzer.progress import Progress

    return Progress()


def _early_pool(paths: tuple[Path, ...], jobs: int | None, partitions: int | None, engine: str):
    """Worker processes started now (`analyzer.workers.start_pool`) when the command will read
    `paths` partitioned on several processes: trace files (not a dataset) whose span table
    would reach `AUTO_MIN_BYTES` (`partitions` None: auto), or a partition count given. They
    import while the command does; they are shut down when the command ends, used or not.
    None otherwise, and when the paths are not readable (the command reports that as it
    would)."""
    from analyzer.ingest.files import AUTO_MIN_BYTES, estimate_bytes, expand_paths
    from analyzer.workers import default_jobs, start_pool

    jobs = jobs or default_jobs()
    if engine != "inprocess" or jobs < 2 or partitions == 0:
        return None
    try:
        files, _ = expand_paths(list(paths))
        if any(f.is_dir() for f in files) or (
            partitions is None and estimate_bytes(files) < AUTO_MIN_BYTES
        ):
            return None
    except (AgentTraceError, OSError):
        return None
    pool = start_pool(jobs, "analyzer.engine")
    click.get_current_context().call_on_close(lambda: pool.shutdown(wait=False))
    return pool


def _analyze(paths: tuple[Path, ...], **options: Any):
    """`analyze_paths` of `paths` with `options` (its keywords; `pool`: the workers
    `_early_pool` started), reporting its stages unless --quiet; InputError when `paths` is
    empty or holds no trace file."""
    from analyzer.engine import analyze_paths

    if not paths:
        raise InputError("no input: give at least one trace file or folder")
    analysis = analyze_paths(list(paths), progress=_progress(), **options)
    _require_traces(analysis.ingested.log)
    return analysis


def _require_traces(log) -> None:
    """Raise InputError when no file read is a trace at all (each refused whole): there is no
    input (exit 2). A trace file that holds no span yet is input."""
    refused = [
        q for f in log.files for q in f.quarantine if q.position == "file" and not f.spans_read
    ]
    if not log.files or len({q.file for q in refused}) < len(log.files):
        return
    shown = "; ".join(f"{terminal_safe(q.file)}: {terminal_safe(q.reason)}" for q in refused[:3])
    more = f"; and {len(refused) - 3} more" if len(refused) > 3 else ""
    raise InputError(f"no input: no trace file among the {len(log.files)} read ({shown}{more})")


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
    if log.outside_runs:
        parts.append(f"{log.outside_runs:,} spans in no run (no agent holds them)")
    if log.warnings:
        parts.append(
            f"{len(log.warnings):,} warnings (kept, but altered or suspect: a report lists them)"
        )
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


def _time_ns(value: str | None, option: str) -> int | None:
    """An ISO 8601 time (a date, or date and time; UTC unless an offset is given) in ns."""
    if value is None:
        return None
    from datetime import UTC, datetime

    try:
        moment = datetime.fromisoformat(value)
    except ValueError as err:
        raise click.BadParameter(f"not an ISO 8601 time: {value!r}", param_hint=option) from err
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


@main.command()
@_PATHS
@click.option(
    "--out",
    required=True,
    type=click.Path(path_type=Path),
    help="Dataset folder: a new one, or an existing dataset to append the new files to.",
)
@_JOBS
@_QUIET_OPTION
@_CHECKS
@_CASE_CLASS
def ingest(
    paths: tuple[Path, ...],
    out: Path,
    jobs: int | None,
    rule_packs: tuple[Path, ...],
    allow_plugins: bool,
    prices_file: Path | None,
    case_class: str,
) -> None:
    """Parse trace files once into a Parquet dataset that every command reads back fast.

    Into an existing dataset, only files not ingested before (by SHA-256) are read; running
    the same command again changes nothing. The new runs are also checked with the rule packs
    and prices given (by default those of `report`), and the results kept: a `report` of the
    dataset with the same packs and prices reads them instead of running the checks again.

    One ingest at a time writes to a dataset: another one fails at once, naming the holder.
    What an interrupted ingest left is cleared first; a file that changed while it was read
    is not recorded as ingested (a warning says so) and is read whole again next time.
    """
    from analyzer.engine import CHANGED_WHILE_READ, ingest_partitioned
    from analyzer.ingest.dataset import ingesting
    from analyzer.ingest.files import expand_paths, sha256_of
    from analyzer.pricing import load_prices

    if not paths:
        raise InputError("no input: give at least one trace file or folder")
    packs = _packs(rule_packs, allow_plugins)
    prices = load_prices(prices_file)
    files, skipped = expand_paths(list(paths))
    # read once, here: not walked again once the dataset is locked (an --out inside a folder
    # given would then be an unfinished dataset in it); never the dataset itself
    files = [f for f in files if not (f.is_dir() and out.exists() and f.samefile(out))]
    if not files:
        raise InputError(f"no input: {', '.join(map(str, paths))} holds no file but {out}")
    with ingesting(out) as target:
        if target.recovered or target.interrupted:
            holder = f" ({target.interrupted})" if target.interrupted else ""
            click.echo(
                f"recovered the dataset {out} from an interrupted ingest{holder}: "
                f"{len(target.recovered):,} unfinished files removed",
                err=True,
            )
        manifest = target.manifest or {}
        done = {f["sha256"] for f in manifest.get("files", []) if f.get("sha256")}
        digests = {}
        if done:
            digests = {str(f): sha256_of(f) for f in files if not f.is_dir()}
            new = [f for f in files if f.is_dir() or digests[str(f)] not in done]
            if not new:
                click.echo(f"nothing new: {len(files):,} files already in the dataset {out}")
                return
            if len(new) < len(files):
                click.echo(f"{len(files) - len(new):,} files already in the dataset skipped")
            files = new
        ingested = ingest_partitioned(
            files,
            out,
            tool_version=__version__,
            jobs=jobs,
            progress=_progress(),
            packs=packs,
            prices=prices,
            case_class=case_class,
            digests=digests,
        )
    click.echo(_accounting_line(ingested.log, [str(p) for p in skipped]))
    for line in _quarantine_lines(ingested.log):
        click.echo(line)
    for file_log in ingested.log.files:
        if any(w.reason == CHANGED_WHILE_READ for w in file_log.warnings):
            click.echo(f"warning: {terminal_safe(file_log.path)} {CHANGED_WHILE_READ}", err=True)
    from analyzer.materialized import results_key

    names = ", ".join(p.name for p in packs)
    if results_key(packs, prices) is None:
        click.echo(f"rule results not kept (a plugin rule's code is not known): {names}")
    else:
        click.echo(f"rule results kept for the packs {names}, with the prices of {prices.source}")
    click.echo(f"dataset written to {out}")


def _fmt_int(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


@main.command()
@_QUIET_OPTION
@_PATHS
@_KEYS
@click.option(
    "--format", "fmt", type=click.Choice(["table", "jsonl"]), default="table", show_default=True
)
def runs(paths: tuple[Path, ...], run_key: str | None, case_key: str | None, fmt: str) -> None:
    """List every reconstructed run, one line each."""
    analysis = _analyze(paths, run_key=run_key, case_key=case_key)
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
            click.echo(json_safe(json.dumps(row, ensure_ascii=False, sort_keys=True)))
    else:
        from analyzer.render.terminal import run_id_cells

        run_ids, width = run_id_cells(frame.get_column("run_id").to_list(), 32)
        header = (
            f"{'RUN':<{width}}  {'AGENT':<16} {'CASE':<12} {'MODELS':<22} "
            f"{'LLM':>4} {'TOOLS':>5} {'TOKENS':>9}  ANSWER"
        )
        click.echo(header)
        for run_id, row in zip(run_ids, frame.iter_rows(named=True), strict=True):
            tokens = None
            if row["input_tokens"] is not None or row["output_tokens"] is not None:
                tokens = (row["input_tokens"] or 0) + (row["output_tokens"] or 0)
            click.echo(
                f"{run_id}  {clip(row['agent'] or '-', 16):<16} "
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
@click.argument("run_id", metavar="RUN_OR_CASE")
@_QUIET_OPTION
@_PATHS
@_ANALYSIS
@click.option(
    "--width", default=60, show_default=True, help="Characters kept of arguments and results."
)
@_REDACTION
def show(
    run_id: str,
    paths: tuple[Path, ...],
    run_key: str | None,
    case_key: str | None,
    rule_packs: tuple[Path, ...],
    allow_plugins: bool,
    prices_file: Path | None,
    labels_file: Path | None,
    width: int,
    redact: bool,
    redact_salt: str | None,
) -> None:
    """Print one run's trajectory step by step. RUN_OR_CASE: a run id, a case id, or a unique
    prefix of a run id (a trace id also as a backend spells it: a UUID, upper case). With
    --rules, its findings, the offending steps marked (!); with --labels, each labelled field,
    expected against answered."""
    import polars as pl

    from analyzer.pack import load_packs
    from analyzer.pricing import load_prices

    packs = tuple(load_packs(rule_packs, allow_plugins=allow_plugins)) if rule_packs else ()
    labels = _labels(labels_file)
    prices = load_prices(prices_file)
    analysis = _analyze(paths, run_key=run_key, case_key=case_key, packs=packs, prices=prices)
    matches = _runs_named(analysis.runs.runs, run_id)  # before --redact hashes the case ids
    analysis, _, _ = _redacted(analysis, redact, redact_salt)
    runs = analysis.runs.runs
    run, steps = analysis.runs.run(matches[0])
    findings = (
        analysis.evaluation.findings.filter(pl.col("run_id") == run["run_id"])
        if analysis.evaluation is not None
        else None
    )
    click.echo(f"run      {terminal_safe(run['run_id'])}")
    click.echo(
        f"agent    {terminal_safe(run['agent'] or '-')}   "
        f"case {terminal_safe(run['case_id'] or '-')}"
    )
    temperatures = ", ".join(str(t) for t in run["temperatures"] or [])  # none: no model call
    click.echo(
        f"models   {terminal_safe(', '.join(run['models']) or '-')}   temperature(s) "
        f"{temperatures or '-'}   config {run['config_hash']}"
    )
    cost = run.get("cost_usd")
    click.echo(
        f"totals   {run['model_calls']} model calls, {run['tool_calls']} tool calls, "
        f"{_fmt_int(run['input_tokens'])} in / {_fmt_int(run['output_tokens'])} out tokens, "
        + ("duration unknown" if run["duration_s"] is None else f"{run['duration_s']:.3f} s")
        + ("" if cost is None else f", ${cost:.6f}")
    )
    flagged = _flagged_steps(steps, findings)
    origin = run["started_ns"]
    click.echo("")
    click.echo(
        f"{'#':>3}  {'T+ms':>9}  {'KIND':<5} {'NAME':<24} {'TOKENS':>11}  {'STATUS':<6} DETAIL"
    )
    for step in steps.iter_rows(named=True):
        t = (step["start_ns"] - origin) / 1e6
        kind = {"model_call": "model", "output": "out"}.get(step["kind"], "tool")
        tokens = ""
        if step["kind"] == "model_call" and (
            step["input_tokens"] is not None or step["output_tokens"] is not None
        ):
            tokens = f"{_fmt_int(step['input_tokens'])}/{_fmt_int(step['output_tokens'])}"
        status = step["status"] if step["executed"] else "no span"
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
        if step["status"] == "error" and step["error_type"]:
            detail = f"({step['error_type']}) {detail}".rstrip()
        mark = "!" if step["index"] in flagged else " "
        click.echo(
            f"{mark}{step['index']:>2}  {t:>+9.1f}  {kind:<5} "
            f"{clip(step['name'] or '?', 24):<24} {tokens:>11}  "
            f"{status:<6} {clip(detail, width * 2)}"
        )
        if step["merge_reason"]:
            why = "; ".join(_MERGE_REASONS[r] for r in step["merge_reason"].split("+"))
            click.echo(
                f"{'':>16}span {step['span_id']} merged with "
                f"{', '.join(step['merged_span_ids'])} ({why})"
            )
        for f in flagged.get(step["index"], []):
            click.echo(clip(f"{'':>16}! {f['rule_id']} ({f['severity']}): {f['detail']}", 200))
    if run["conventions"]:
        click.echo(f"\nread as  {terminal_safe(', '.join(run['conventions']))}")
    click.echo("")
    if run["has_answer"]:
        click.echo(
            f"answer at T+{(run['answer_ns'] - origin) / 1e6:.1f} ms: "
            f"{clip(run['answer'] or '(content not recorded)', width * 3)}"
        )
    else:
        click.echo("no answer: the run ended without a final model output")
    if findings is not None:
        click.echo(f"\nfindings {findings.height}" + (":" if findings.height else ""))
        for f in findings.sort("severity", "rule_id").iter_rows(named=True):
            where = ", ".join(f["span_ids"] or []) or "the run"
            click.echo(
                clip(
                    f"  {f['rule_id']} ({f['severity']}, {f['kind']}): {f['detail']} [{where}]", 200
                )
            )
    if labels is not None:
        from analyzer.metrics.labels import score_labels

        fields = score_labels(labels, runs.filter(pl.col("run_id") == run["run_id"]), steps).fields
        if fields.is_empty():
            click.echo("\nlabels   no label for this case")
        else:
            click.echo("\nlabels   (expected -> answered)")
            for f in fields.iter_rows(named=True):
                answered = "(missing)" if f["actual"] is None else repr(f["actual"])
                click.echo(
                    clip(
                        f"  {f['field']:<20} {f['status']:<8} {f['expected']!r} -> {answered}", 200
                    )
                )


def _runs_named(runs: pl.DataFrame, name: str) -> list[str]:
    """The run ids `name` designates: a run id, else the runs of that case id (one), else the
    runs whose id starts with it (one). A trace id may be given as a backend spells it
    (upper case, ``0x``, a UUID's hyphens: Langfuse's): run ids spell it in lowercase hex."""
    import polars as pl

    ids = runs.get_column("run_id")
    parts = [p.strip().lower().removeprefix("0x").replace("-", "") for p in name.split(":")]
    is_hex = all(p and not p.strip("0123456789abcdef") for p in parts)
    hex_name = ":".join(parts) if is_hex else name
    for key in (name, hex_name):
        if key in ids:
            return [key]
    of_case = runs.filter(pl.col("case_id") == name).get_column("run_id").sort().to_list()
    if len(of_case) == 1:
        return of_case
    if len(of_case) > 1:
        listed = ", ".join(of_case[:10]) + (" ..." if len(of_case) > 10 else "")
        raise InputError(f"case {name!r} has {len(of_case)} runs: give one of {listed}")
    prefixed = [r for r in ids.to_list() if r.startswith((name, hex_name))]
    if len(prefixed) != 1:
        what = "no run or case" if not prefixed else f"{len(prefixed)} runs"
        raise InputError(f"{what} with id {name!r} in the input ({runs.height} runs read)")
    return prefixed


def _flagged_steps(steps: pl.DataFrame, findings: pl.DataFrame | None) -> dict[int, list[dict]]:
    """Step index -> the findings whose evidence names one of the step's spans."""
    if findings is None or findings.is_empty():
        return {}
    owner: dict[str, int] = {}
    for step in steps.select("index", "span_id", "merged_span_ids").iter_rows(named=True):
        for span in [step["span_id"], *(step["merged_span_ids"] or [])]:
            if span is not None:
                owner.setdefault(span, step["index"])
    out: dict[int, list[dict]] = {}
    for f in findings.iter_rows(named=True):
        for span in f["span_ids"] or []:
            if span in owner:
                out.setdefault(owner[span], []).append(f)
    return out


#: Runs with findings listed after the terminal summary without --verbose.
_WHERE_RUNS = 10


def _run_facts(analysis) -> pl.DataFrame | None:
    """One row per run with its score and findings; None without rule packs."""
    if analysis.evaluation is None:
        return None
    # a partitioned result's summary facts hold the runs' columns; else the runs are in memory
    return analysis.facts.runs() if analysis.facts is not None else analysis.runs.runs


def _finding_runs(analysis) -> pl.DataFrame | None:
    """The runs with a finding, worst first (`finding_runs`); None without rule packs."""
    from analyzer.render.terminal import finding_runs

    runs = _run_facts(analysis)
    return None if runs is None else finding_runs(runs)


def _where(
    analysis,
    verbose: bool,
    paths: tuple[Path, ...],
    rule_packs: tuple[Path, ...],
    prices_file: Path | None,
    labels_file: Path | None,
    redacted: bool = False,
) -> None:
    """The runs behind the findings, worst first, and the command that shows the worst (by
    its run id when `redacted`: its case id is a token then)."""
    import shlex

    import polars as pl

    from analyzer.render.terminal import finding_runs, finding_runs_lines

    runs = _run_facts(analysis)
    if runs is None:
        return
    bad = finding_runs(runs)
    for line in finding_runs_lines(bad, None if verbose else _WHERE_RUNS):
        click.echo(line)
    if bad.is_empty():
        return
    worst = bad.row(0, named=True)
    case = worst["case_id"]
    unique = (
        case is not None and not redacted and runs.filter(pl.col("case_id") == case).height == 1
    )
    args = [case if unique else worst["run_id"], *map(str, paths)]
    for pack in rule_packs:
        args += ["--rules", str(pack)]
    if prices_file is not None:
        args += ["--prices", str(prices_file)]
    if labels_file is not None:
        args += ["--labels", str(labels_file)]
    if redacted:
        args.append("--redact")
    click.echo(terminal_safe("see the worst: agenttrace show " + shlex.join(args)))


_MERGE_REASONS = {
    "nested": "spans nested in one another record the same call",
    "events": "one span per event of the call",
    "overlap": "another instrumentation recorded the same call within its time",
}
#: `analyzer.checks.base.SEVERITIES`, spelled here for --fail-on's choices: that module imports
#: polars, which this one does not at start (`quiet_blas` runs first).
_SEVERITIES = ("critical", "high", "medium", "low")


@main.command()
@_PATHS
@_ANALYSIS
@_CASE_CLASS
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    help="Folder for summary.json, findings, runs/steps Parquet, quarantine, report.html, "
    "manifest.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "html", "markdown"]),
    default="table",
    show_default=True,
    help="table: the terminal summary; json: summary.json; html: the report.html page; "
    "markdown: a CI step summary or comment (under 64 KB, no raw HTML).",
)
@click.option(
    "--fail-on",
    type=click.Choice([*_SEVERITIES, "never"]),
    default="never",
    show_default=True,
    help="Exit 1 when a finding has this severity or a higher one. Without labels, a run is "
    "correct when it has no finding at this severity or above (default: high).",
)
@click.option(
    "--verbose",
    is_flag=True,
    help="List every run with a finding (default: the ten worst).",
)
@click.option(
    "--routing-min-runs",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Judged runs a model family needs before the routing pick considers it.",
)
@click.option(
    "--junit",
    "junit_file",
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="FILE",
    help="Also write the rule results as JUnit XML: a test suite per rule, a test case per "
    "run (failures: its findings; skipped: runs the rule could not judge).",
)
@click.option(
    "--annotations",
    type=click.Choice(["github"]),
    help="Also print the findings as GitHub Actions annotations (on standard output, after the "
    "table; not with --format json or html): the ten most severe of each level.",
)
@click.option(
    "--fail-on-unchecked",
    is_flag=True,
    help="Exit 1 when a rule applied to no run or judged none, or its filter or tools name "
    "something no trace holds (summary.json: checks.unchecked).",
)
@_JOBS
@_QUIET_OPTION
@click.option(
    "--partitions",
    default="auto",
    show_default=True,
    metavar="N|auto",
    help="Analyze in N hash partitions of runs, one at a time per process (bounded memory); "
    "0: all in memory; auto: partitioned when the input would take over 512 MB in memory, "
    "and for a dataset with prebuilt runs (one unit per part; no span is read again).",
)
@click.option(
    "--spill",
    type=click.Path(path_type=Path, file_okay=False),
    help="Folder for the partitions' temporary files (default: the system temporary folder).",
)
@click.option(
    "--since",
    metavar="TIME",
    help="Only runs that started at or after TIME (ISO 8601; UTC unless an offset is given).",
)
@click.option("--until", metavar="TIME", help="Only runs that started before TIME (ISO 8601).")
@click.option(
    "--engine",
    type=click.Choice(["inprocess", "spark"]),
    default="inprocess",
    show_default=True,
    help="spark: analyze inside PySpark (the spark extra), the same checks grouped by run key; "
    "--jobs, --partitions and --spill then do not apply.",
)
@click.option(
    "--spark-master",
    metavar="URL",
    help="Spark master of --engine spark (local[N], spark://HOST:PORT, yarn, sc://HOST for "
    "Spark Connect). Default: $SPARK_REMOTE, else local[*].",
)
@_REDACTION
def report(
    paths: tuple[Path, ...],
    run_key: str | None,
    case_key: str | None,
    rule_packs: tuple[Path, ...],
    allow_plugins: bool,
    prices_file: Path | None,
    labels_file: Path | None,
    case_class: str,
    out: Path | None,
    fmt: str,
    fail_on: str,
    routing_min_runs: int,
    junit_file: Path | None,
    annotations: str | None,
    fail_on_unchecked: bool,
    verbose: bool,
    jobs: int | None,
    partitions: str,
    spill: Path | None,
    since: str | None,
    until: str | None,
    engine: str,
    spark_master: str | None,
    redact: bool,
    redact_salt: str | None,
) -> None:
    """Analyze trace files: accounting, runs, findings (the main job)."""
    if annotations and fmt != "table":
        raise click.BadParameter(
            f"annotations go to standard output, which --format {fmt} fills",
            param_hint="--annotations",
        )
    if partitions.strip().lower() == "auto":
        parts: int | None = None
    else:
        try:
            parts = int(partitions)
        except ValueError:
            parts = -1
        if parts < 0:
            raise click.BadParameter(
                f"{partitions!r} is neither a count of partitions nor auto",
                param_hint="--partitions",
            )
    pool = _early_pool(paths, jobs, parts, engine)  # before the imports below
    from analyzer.metrics.summary import build_summary
    from analyzer.outputs import write_outputs
    from analyzer.pricing import load_prices

    if out is not None:
        from analyzer.outfiles import check_folder

        check_folder(out)
    packs = _packs(rule_packs, allow_plugins)
    prices = load_prices(prices_file)
    labels = _labels(labels_file)  # before the traces: a bad file fails fast
    common = {
        "run_key": run_key,
        "case_key": case_key,
        "packs": packs,
        "prices": prices,
        "since_ns": _time_ns(since, "--since"),
        "until_ns": _time_ns(until, "--until"),
    }
    if engine == "spark":
        from analyzer.spark import analyze_spark

        analysis = analyze_spark(list(paths), master=spark_master, **common)
    else:
        # the summary, printed or as JSON, reads no runs, steps or coverage: not written then;
        # the input files' digests are read by the manifest of --out alone
        redacted = redact or redact_salt is not None
        reads_tables = (
            out is not None or fmt == "html" or labels is not None or redacted or junit_file
        )
        analysis = _analyze(
            paths,
            **common,
            jobs=jobs,
            partitions=parts,
            spill=spill,
            case_class=case_class,
            tables=None if reads_tables else (),
            digests=out is not None,
            pool=pool,
        )
    if labels is not None:  # once, for the summary, labels.parquet and the page
        from analyzer.metrics.labels import scored

        labels = scored(labels, analysis.runs)
    analysis, redaction, labels = _redacted(analysis, redact, redact_salt, labels)
    summary = build_summary(
        analysis,
        labels,
        case_class=case_class,
        # one meaning of "correct": what --fail-on fails on (default: high and above)
        correct_at="high" if fail_on == "never" else fail_on,
        routing_min_runs=routing_min_runs,
    )
    if out is not None:
        write_outputs(
            analysis,
            summary,
            out,
            command=_command_line(redact_salt),
            redaction=redaction,
            labels=labels,
        )
    if junit_file is not None:
        from analyzer.render.junit import write_junit

        write_junit(analysis, junit_file)
    if fmt == "json":
        click.echo(json_safe(json.dumps(summary, indent=2, sort_keys=True, ensure_ascii=False)))
    elif fmt == "html":
        from analyzer.render.html import render_html

        click.echo(render_html(analysis, summary, labels=labels), nl=False)
    elif fmt == "markdown":
        from analyzer.render.markdown import markdown_summary

        limit = None if verbose else _WHERE_RUNS
        click.echo(markdown_summary(summary, _finding_runs(analysis), limit=limit), nl=False)
    else:
        from analyzer.render.terminal import terminal_summary

        for line in terminal_summary(summary, color=sys.stdout.isatty()):
            click.echo(line)
        _where(
            analysis, verbose, paths, rule_packs, prices_file, labels_file, redaction is not None
        )
        if out is not None:
            click.echo(f"outputs written to {out}")
        if annotations == "github" and analysis.evaluation is not None:
            from analyzer.render.annotations import github_annotations

            for line in github_annotations(analysis.evaluation.findings):
                click.echo(line)
    unchecked = summary["checks"]["unchecked"]
    if fail_on_unchecked and unchecked:
        rules_named = sorted({f"{u['pack']}/{u['rule_id']}" for u in unchecked})
        click.echo(f"unchecked rules: {', '.join(rules_named)}", err=True)
        click.get_current_context().exit(1)
    if fail_on != "never":
        failing = _SEVERITIES[: _SEVERITIES.index(fail_on) + 1]
        by_severity = summary["findings"]["by_severity"]
        if any(by_severity.get(s, 0) for s in failing):
            click.get_current_context().exit(1)


# --- rules ---------------------------------------------------------------------------------------


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
    from analyzer.checks.base import did_you_mean, doc_sections
    from analyzer.checks.plugin import PLUGIN_TYPE, load_plugin_class

    if rule_type in REGISTRY or rule_type == "plugin":
        from analyzer.checks.reference import explain

        click.echo(explain(rule_type))
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


@rules.command("reference")
def rules_reference() -> None:
    """Every rule type's documentation as Markdown (what docs/rules.md holds)."""
    from analyzer.checks.reference import reference

    click.echo(reference(), nl=False)


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


# --- diff ----------------------------------------------------------------------------------------


@main.command()
@click.argument("baseline", type=click.Path(path_type=Path))
@click.argument("candidate", type=click.Path(path_type=Path))
@_ANALYSIS
@click.option(
    "--gate",
    "gate_file",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="Limits on the deltas (YAML, schemas/gate.schema.json); exit 1 when one is broken.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "markdown", "html"]),
    default="table",
    show_default=True,
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    help="Folder for diff.json, diff.md and diff.html.",
)
def diff(
    baseline: Path,
    candidate: Path,
    run_key: str | None,
    case_key: str | None,
    rule_packs: tuple[Path, ...],
    allow_plugins: bool,
    prices_file: Path | None,
    labels_file: Path | None,
    gate_file: Path | None,
    fmt: str,
    out: Path | None,
) -> None:
    """Compare a BASELINE and a CANDIDATE (trace paths or report folders) and gate the change.

    Runs are paired by case id when both sides have case ids. Every headline metric gets
    baseline, candidate, delta (candidate - baseline) and a 95% interval on the delta.
    """
    from analyzer.metrics.compare import compare
    from analyzer.metrics.gate import judge, load_gate
    from analyzer.pricing import load_prices
    from analyzer.render.diff import render_html, render_json, render_markdown, render_table
    from analyzer.sides import load_side

    # Every file the user wrote is checked before any trace is read: a typo fails fast.
    if out is not None:
        from analyzer.outfiles import check_folder

        check_folder(out)
    gate = load_gate(gate_file) if gate_file is not None else None
    packs = _packs(rule_packs, allow_plugins)
    prices = load_prices(prices_file)
    labels = _labels(labels_file)
    sides = [
        load_side(
            path, packs=packs, prices=prices, run_key=run_key, case_key=case_key, labels=labels
        )
        for path in (baseline, candidate)
    ]
    result = compare(sides[0], sides[1])
    checks = judge(gate, result) if gate is not None else None
    if out is not None:
        from analyzer.outfiles import output_folder, write_text

        output_folder(out)
        write_text(out / "diff.json", render_json(result, checks, gate) + "\n")
        write_text(out / "diff.md", render_markdown(result, checks))
        write_text(out / "diff.html", render_html(result, checks))
    if fmt == "json":
        click.echo(render_json(result, checks, gate))
    elif fmt == "markdown":
        click.echo(render_markdown(result, checks), nl=False)
    elif fmt == "html":
        click.echo(render_html(result, checks), nl=False)
    else:
        for line in render_table(result, checks):
            click.echo(line)
        if out is not None:
            click.echo(f"diff written to {out}")
    if checks is not None and any(not c.passed for c in checks):
        click.get_current_context().exit(1)
