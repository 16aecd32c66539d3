"""diff.html in report.html's style: headline cards, gate, metrics, the regressed and fixed
cases, what was compared; no script, every link on the page, hostile text escaped."""

from __future__ import annotations

import dataclasses
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from diff_sets import copy_baseline, drop_screening

from analyzer.metrics.compare import compare
from analyzer.metrics.gate import gate_from_mapping, judge
from analyzer.pack import load_packs
from analyzer.render.diff import render_html
from analyzer.sides import load_side

ROOT = Path(__file__).resolve().parent.parent
KYC_PACK = ROOT / "rules" / "kyc.yaml"
# test_diff.py: the four clean KYC runs whose screening the "after" prompt drops
DROPPED = {
    "99d85dea74a2af2495957cd7c66339ae",
    "0be5cd35bd6a796515e40d26493d98a1",
    "7004a3dc334d12750f49de7eae785e46",
    "7f6583b6a2a16a3d669154c43378b8d4",
}


class Tags(HTMLParser):
    def __init__(self, source: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self._style = False
        self.feed(source)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._style = tag == "style"
        self.text.append(" ")

    def handle_endtag(self, tag):
        self._style = False
        self.text.append(" ")

    def handle_data(self, data):
        if not self._style:
            self.text.append(data)

    def joined(self) -> str:
        return re.sub(r"\s+", " ", "".join(self.text))


@pytest.fixture(scope="module")
def diff(tmp_path_factory):
    root = tmp_path_factory.mktemp("diffhtml")
    copy_baseline(root / "base")
    drop_screening(root / "drop", set(DROPPED))
    packs = load_packs([KYC_PACK])
    return compare(load_side(root / "base", packs=packs), load_side(root / "drop", packs=packs))


def test_the_diff_page_has_the_report_style_and_every_part(diff):
    gate = gate_from_mapping({"omission_rate": {"max_increase": 0.0}})
    checks = judge(gate, diff)
    page = render_html(diff, checks)
    parsed = Tags(page)
    text = parsed.joined()
    # report.html's cards and sections
    assert '<div class="cards">' in page and 'class="card' in page
    for title in ("Headline", "Gate", "Metrics", "What was compared", "Methods"):
        assert f"<h2>{title}</h2>" in page
    assert "Gate FAILED" in text and "Metrics worse" in text
    # the four runs whose screening was dropped regress their cases
    regressed = (diff.cases or {}).get("regressed") or []
    assert len(regressed) == 4
    assert f"Regressed cases: {len(regressed)}" in text
    for case in regressed:
        assert case["case_id"] in text
    # links land on the page; nothing external, no script
    ids = [a["id"] for _, a in parsed.tags if a.get("id")]
    hrefs = [a["href"] for _, a in parsed.tags if a.get("href")]
    assert hrefs and all(h.startswith("#") and h[1:] in ids for h in hrefs)
    assert not [t for t, _ in parsed.tags if t in ("script", "img", "iframe", "link")]
    assert "default-src 'none'; style-src 'unsafe-inline'" in page
    assert not re.search(r"https?://|@import|url\(", page)


def test_the_diff_page_escapes_hostile_text(diff):
    hostile = dataclasses.replace(
        diff, baseline={**diff.baseline, "source": '<img src=x onerror="alert(1)">'}
    )
    page = render_html(hostile)
    assert "<img" not in page and "&lt;img src=x" in page
