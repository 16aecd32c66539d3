"""One meaning of "correct" across the terminal, summary.json and report.html.

With labels, a correct run is a labelled run whose label fields are all right; without,
a run with no finding at or above --fail-on's severity (high when --fail-on is never). Every
figure that counts correct runs says which, next to it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner

from analyzer.cli import main

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_traces"


def report(*args: str):
    return CliRunner().invoke(main, ["report", str(SAMPLES), *args], catch_exceptions=False)


def test_correct_follows_fail_on_everywhere(tmp_path: Path):
    # The default pack's findings on the samples: 3 high (3 runs), 1 medium (KYC-2026-0011),
    # 3 low. At high: 37 of 40 runs correct; at medium: 36; at low: 33.
    for fail_on, correct in (("never", 37), ("high", 37), ("medium", 36), ("low", 33)):
        at = "high" if fail_on == "never" else fail_on
        meaning = f"no finding at or above {at}"
        summary = json.loads(report("--format", "json", "--fail-on", fail_on).stdout)
        metrics = summary["metrics"]
        assert metrics["methods"]["correct"] == f"a run with {meaning}"
        assert (metrics["cost"]["correct_threshold"], metrics["cost"]["correct_runs"]) == (
            at,
            correct,
        )
        assert sum(f["correct_runs"] for f in metrics["routing"]["families"]) == correct
        assert sum(r["passed_runs"] for r in metrics["breakdowns"]["agent"]) == correct
        text = report("--fail-on", fail_on).stdout
        assert "per correct run " in text and f"({correct} of 40 runs: {meaning})" in text
        assert f"(correct: {meaning}; 10+ judged runs)" in text
        out = tmp_path / fail_on
        report("--fail-on", fail_on, "--out", str(out))
        page = (out / "report.html").read_text(encoding="utf-8")
        assert f"{correct} correct runs ({meaning})" in page
        assert f"Correct: a run with {meaning}." in re.sub(r"<[^>]+>", "", page)


def test_correct_means_labels_when_labels_are_given():
    result = CliRunner().invoke(
        main,
        [
            "report",
            str(SAMPLES / "kyc"),
            "--rules",
            "kyc",
            "--labels",
            str(ROOT / "rules" / "kyc-labels.jsonl"),
            "--format",
            "json",
        ],
    )
    metrics = json.loads(result.stdout)["metrics"]
    assert metrics["methods"]["correct"].startswith("a labelled run whose label fields are all")
    assert metrics["cost"]["correct_by"] == "labels"
    routing = metrics["routing"]
    assert routing["correct_by"] == "labels"
    # one family (gpt-4.1: 0012's dated snapshot and 0005's second model grouped under it)
    assert [f["model_family"] for f in routing["families"]] == ["gpt-4.1"]
    family = routing["families"][0]
    assert (family["judged_runs"], family["correct_runs"]) == (
        metrics["cost"]["judged_runs"],
        metrics["cost"]["correct_runs"],
    )
    assert routing["pick"] is None and routing["reason"].startswith("only gpt-4.1 has")
