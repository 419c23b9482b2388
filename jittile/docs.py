"""The generated sections of the language reference (docs/language.md), rendered from the code
they describe: the ``T`` names from their signatures and docstrings, and each tile-pattern family
from its declarations (``grammar``, ``operand_forms``, ``completions``, ``parameters``,
``companions``).

    python -m jittile.docs docs/language.md           # rewrite the generated sections in place
    python -m jittile.docs --check docs/language.md   # exit 1 when they are out of date

tests/test_language_reference.py fails when the file differs from what the code gives.
"""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path

from .language import T
from .language.markers import Namespace, call_signature
from .language.types import ScalarType
from .patterns import registry
from .patterns.base import TilePattern

SECTIONS = ("language", "patterns")


def marker(section: str, end: bool = False) -> str:
    if end:
        return f"<!-- END GENERATED: {section} -->"
    return f"<!-- BEGIN GENERATED: {section} (python -m jittile.docs docs/language.md) -->"


def _paragraphs(obj) -> str:
    return (inspect.getdoc(obj) or "").strip()


def _entry(name: str, obj) -> list[str]:
    signature = call_signature(obj)
    return [f"#### `{name}{'' if signature is None else signature}`", "", _paragraphs(obj), ""]


def _namespace_entries(prefix: str, space) -> list[str]:
    lines: list[str] = []
    scalars = []
    for name in dir(space):
        obj = getattr(space, name)
        if isinstance(obj, ScalarType):
            scalars.append(name)
        elif isinstance(obj, Namespace) or inspect.ismodule(obj):
            lines += _namespace_entries(f"{prefix}.{name}", obj)
        else:
            lines += _entry(f"{prefix}.{name}", obj)
    if scalars:
        names = ", ".join(f"`{prefix}.{n}`" for n in scalars)
        lines += [
            f"#### `{prefix}.<scalar>(value, /)`",
            "",
            f"{names}.",
            "",
            _paragraphs(ScalarType),
            "",
        ]
    return lines


def render_language() -> str:
    """Every public name of ``T``, ``T.cuda`` and ``T.cuda.tile``: signature and docstring."""
    return "\n".join(_namespace_entries("T", T)).rstrip() + "\n"


def render_pattern(pattern: TilePattern) -> str:
    """One family's section: its own :meth:`~jittile.patterns.base.TilePattern.reference`."""
    return pattern.reference()


def render_patterns() -> str:
    """Every registered tile-pattern family, in registration order."""
    return "\n".join(render_pattern(p) for p in registry.patterns())


RENDERERS = {"language": render_language, "patterns": render_patterns}


def updated(text: str) -> str:
    """``text`` with each generated section replaced by what the code gives now."""
    for section in SECTIONS:
        begin, end = marker(section), marker(section, end=True)
        head, found, rest = text.partition(begin)
        if not found or end not in rest:
            raise ValueError(f"no '{begin}' ... '{end}' section")
        rest = rest.partition(end)[2]
        text = f"{head}{begin}\n\n{RENDERERS[section]()}\n{end}{rest}"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m jittile.docs", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("path", type=Path, help="the reference, e.g. docs/language.md")
    parser.add_argument(
        "--check",
        action="store_true",
        help="only say whether the generated sections are up to date",
    )
    args = parser.parse_args(argv)
    text = args.path.read_text()
    fresh = updated(text)
    if args.check:
        if fresh != text:
            print(
                f"{args.path}: generated sections are out of date; run python -m jittile.docs "
                f"{args.path}",
                file=sys.stderr,
            )
            return 1
        return 0
    if fresh != text:
        args.path.write_text(fresh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
