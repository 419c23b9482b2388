"""Where a test file's marked line is, so location assertions survive edits above it."""

from pathlib import Path


def line_of(path: Path, marker: str) -> int:
    """Line number of the unique line of ``path`` that contains ``marker`` (ignoring the lines
    that look the marker up)."""
    hits = [
        i
        for i, text in enumerate(Path(path).read_text().splitlines(), 1)
        if marker in text and "_line(" not in text and "line_of(" not in text
    ]
    assert len(hits) == 1, (marker, hits)
    return hits[0]
