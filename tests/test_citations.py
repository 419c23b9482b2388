"""Comments and docstrings of the package cite benchmark scripts and results by path; each cited
file exists (a result that was never committed, or a script since renamed, is a broken citation)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CITATION = re.compile(r"\bbench/[\w./-]*\w")


def citations(text: str) -> set[str]:
    """The ``bench/...`` paths ``text`` cites."""
    return set(CITATION.findall(text))


def test_every_cited_bench_file_exists():
    missing = {}
    for path in sorted((REPO / "jittile").rglob("*.py")):
        absent = sorted(c for c in citations(path.read_text()) if not (REPO / c).exists())
        if absent:
            missing[str(path.relative_to(REPO))] = absent
    assert not missing


def test_citations_are_found_in_comments_and_prose():
    text = (
        "# checked on the H200 (bench/probe_reduce_types.py,\n"
        "# bench/results/probe_reduce_types.json). See bench/results.\n"
    )
    assert citations(text) == {
        "bench/probe_reduce_types.py",
        "bench/results/probe_reduce_types.json",
        "bench/results",
    }
