"""The ``jittile`` command: inspect and manage the kernel cache, and compile kernels ahead of time.

``jittile cache ...`` needs only the standard library, so it works where no CUDA toolchain is
installed; ``jittile compile`` imports the kernel's file and uses the compiler, but no GPU.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import sys
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

from . import cache
from .cache.changes import Changes, what_changed
from .cache.keys import describe, differing_components, lookup
from .cache.select import KernelId, by_kernel, selected, selects
from .cache.store import Damaged, DiskStore, Entry
from .errors import JittileError, user_traceback
from .targets import Target
from .version import __version__

KEY_PREFIX = 12
_STATICS_WIDTH = 32
_TENSOR_SPEC = re.compile(r"^\s*(\w+)\s*\[([^\]]*)\]\s*$")
_SCALAR_SPEC = re.compile(r"^\s*(\w+)\s*=\s*(\S+)\s*$")
_KERNEL_HELP = "a kernel's name or qualified name, or FILE.py:NAME for that file's kernel"
_SASS_OPCODE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)")


# -- formatting ------------------------------------------------------------------------------------


def _human_size(size: int) -> str:
    """Binary units, matching what ``--max-size`` accepts."""
    value, unit = float(size), "B"
    for larger in ("K", "M", "G", "T"):
        if value < 1024:
            break
        value, unit = value / 1024, larger
    return f"{size}B" if unit == "B" else f"{value:.1f}{unit}"


def _count(number: int, noun: str, plural: str | None = None) -> str:
    """``1 entry``, ``2 entries``."""
    return f"{number} {noun if number == 1 else plural or noun + 's'}"


def _source(metadata: dict) -> str:
    """Where an entry's kernel is defined: ``/path/to/file.py:line``."""
    where, line = metadata.get("source_file"), metadata.get("source_line")
    return f"{where}:{line}" if where else "-"


def _when(timestamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp))


def _statics(params: dict) -> str:
    text = ",".join(f"{name}={describe(value)}" for name, value in sorted(params.items())) or "-"
    return text if len(text) <= _STATICS_WIDTH else text[: _STATICS_WIDTH - 3] + "..."


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
        for row in [header, *rows]
    )


def _sass_summary(sass: str) -> str:
    """Instruction count and the opcodes by frequency: enough to see what the kernel compiled to."""
    opcodes = Counter(match.group(1) for match in _SASS_OPCODE.finditer(sass))
    lines = [f"{sum(opcodes.values())} instructions"]
    lines += [f"  {opcode:<12} {count}" for opcode, count in opcodes.most_common()]
    return "\n".join(lines)


# -- cache commands --------------------------------------------------------------------------------


def _store() -> DiskStore:
    store = cache.default_store()
    if store.disabled_reason is not None:
        raise JittileError(f"the disk cache is off: {store.disabled_reason}")
    return store


def _say_damaged(damaged: list[Damaged]) -> None:
    """One line per damaged entry, on stderr: the table on stdout stays parseable."""
    for item in damaged:
        print(f"jittile: damaged {item.label}: {item.reason}", file=sys.stderr)


def _where(store: DiskStore) -> str:
    return f"{store.directory}" + ("" if store.writable else " (read-only)")


def _entry_json(entry: Entry) -> dict:
    """What ``list --json`` says of one entry."""
    meta = entry.metadata
    return {
        "key": entry.key,
        "kernel": entry.kernel,
        "qualname": entry.qualname,
        "target": entry.target,
        "static_params": entry.static_params,
        "size": entry.size,
        "hits": entry.hits,
        "created": entry.created,
        "last_used": entry.last_used,
        "source_file": meta.get("source_file"),
        "source_line": meta.get("source_line"),
        "path": str(entry.path),
        "files": {part: str(path) for part, path in entry.files.items()},
    }


def _damaged_json(item: Damaged) -> dict:
    return {"key": item.key, "path": str(item.path), "reason": item.reason}


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True))


def _no_entries(store: DiskStore, kernel: str | None) -> str:
    return f"no entries{f' of kernel {kernel!r}' if kernel else ''} in {_where(store)}"


def _cache_list(args: argparse.Namespace) -> int:
    store = _store()
    survey = store.survey()
    found = selected(survey.entries, args.kernel)
    damaged = [
        d
        for d in survey.damaged
        if args.kernel is None or d.metadata is None or selects(args.kernel, d.metadata)
    ]
    if args.json:
        _print_json(
            {
                "directory": str(store.directory),
                "writable": store.writable,
                "entries": [_entry_json(e) for e in found],
                "damaged": [_damaged_json(d) for d in damaged],
            }
        )
        return 0
    if found:
        rows = [
            [
                e.key[:KEY_PREFIX],
                e.qualname,
                e.target,
                _statics(e.static_params),
                _human_size(e.size),
                str(e.hits),
                _when(e.last_used),
                _source(e.metadata),
            ]
            for e in found
        ]
        print(
            _table(
                ["KEY", "KERNEL", "TARGET", "STATICS", "SIZE", "HITS", "LAST USED", "SOURCE"], rows
            )
        )
        print(
            f"\n{_count(len(found), 'entry', 'entries')}, {_human_size(sum(e.size for e in found))} in "
            f"{_where(store)}"
        )
    else:
        print(_no_entries(store, args.kernel))
    if damaged:
        print(f"{len(damaged)} damaged (`jittile cache prune` or `clear` removes them)")
        _say_damaged(damaged)
    return 0


def _disassemble(cubin: bytes) -> str:
    """The SASS summary, or why there is none (no toolchain here is not an error of ``show``)."""
    try:
        from .backend.toolchain import disassemble
    except ImportError as exc:
        return f"(SASS unavailable: cannot import jittile.backend.toolchain: {exc})"
    try:
        return _sass_summary(disassemble(cubin))
    except (JittileError, OSError) as exc:
        return f"(SASS unavailable: {exc})"


def _plan_lines(kernel_ir: dict) -> list[str]:
    """One line per tile call site and per native instruction of a recorded kernel IR."""
    lines = []
    for site in kernel_ir.get("sites", []):
        lines.append(f"{':'.join(map(str, site['location']))}  {site['opcode']}")
        for record in site["plan"]:
            lines.append(
                f"    {record['opcode']}  coords {record['coords']}  shared +"
                f"{record['shared_offset']}  {record['bytes']} bytes"
            )
    return lines or ["(no tile calls)"]


def _plan(kernel_ir: dict) -> str:
    """The plan lines, or a note when the record has a form this command does not know."""
    try:
        return "\n".join(_plan_lines(kernel_ir))
    except (KeyError, TypeError, AttributeError) as exc:
        return f"(the recorded plan has an unexpected form: {exc!r})"


def _part(found: Entry | Damaged, part: str) -> bytes | str:
    """The bytes of the entry's file of ``part`` (``cubin``, ``ptx``), or why there are none."""
    if isinstance(found, Entry):
        return found.verified[part]
    name = found.file_name(part)
    try:
        return found.read(part)
    except FileNotFoundError:
        return f"{name} is missing"
    except OSError as exc:
        return f"cannot read {name}: {exc.strerror or exc}"


def _cache_show(args: argparse.Namespace) -> int:
    found = _store().find(args.key)
    damaged = isinstance(found, Damaged)
    print(f"entry {found.key}\npath  {found.path}")
    if damaged:
        print(f"DAMAGED: {found.reason} (shown unverified)")
    else:
        print(f"hits  {found.hits}, last used {_when(found.last_used)}")
    metadata = dict(found.metadata or {})
    kernel_ir, lowered = metadata.pop("kernel_ir", None), metadata.pop("lowered_source", None)
    print("\n--- metadata ---")
    print(
        json.dumps(metadata, indent=2, sort_keys=True)
        if found.metadata is not None
        else "(unreadable)"
    )
    if isinstance(kernel_ir, dict):
        print("\n--- plan ---")
        print(_plan(kernel_ir))
    if isinstance(lowered, str):
        print("\n--- lowered kernel ---")
        print(lowered.rstrip("\n"))
    ptx, cubin = _part(found, "ptx"), _part(found, "cubin")
    print("\n--- PTX ---")
    print(ptx.decode("utf-8", "replace").rstrip("\n") if isinstance(ptx, bytes) else f"({ptx})")
    print("\n--- SASS summary ---")
    print(_disassemble(cubin) if isinstance(cubin, bytes) else f"(SASS unavailable: {cubin})")
    if damaged:
        _say_damaged([found])
        return 1
    return 0


def _tuning_took(seconds: dict) -> str:
    """A record's tuning time, compiling and timing apart ("-" for records that predate it)."""
    if "compiling" not in seconds:
        return "-"
    timing = sum(seconds.get("timing", {}).values())
    return f"{seconds['compiling'] + timing:.1f} s ({seconds['compiling']:.1f} compiling)"


def _cache_tunings(args: argparse.Namespace) -> int:
    """The autotuner's records (jittile/cache/tunings.py), of one kernel if named."""
    from .cache import tunings

    found = [
        r
        for r in tunings.records()
        if args.kernel is None
        or args.kernel in (r["identity"]["kernel"], r["identity"]["qualname"])
    ]
    if args.json:
        _print_json({"directory": str(tunings.folder()), "tunings": found})
        return 0
    if not found:
        of = f" of kernel {args.kernel!r}" if args.kernel else ""
        print(f"no tunings{of} in {tunings.folder()}")
        return 0
    rows = []
    for record in found:
        identity = record["identity"]
        best = identity["configs"][record["best"]]
        key = ", ".join(f"{k}={v}" for k, v in zip(identity["key"], identity["key_values"]))
        rows.append(
            [
                identity["qualname"],
                key,
                identity["device"],
                _statics(best["kwargs"]),
                f"{len(record['timings_ms'])}/{len(identity['configs'])}",
                _tuning_took(record.get("seconds") or {}),
                _when(record.get("created", 0)),
                identity["source_file"],
            ]
        )
    print(_table(["KERNEL", "KEY", "DEVICE", "BEST", "TIMED", "TOOK", "TUNED", "SOURCE"], rows))
    print(f"\n{_count(len(found), 'tuning')} in {tunings.folder()}")
    return 0


def _cache_clear(args: argparse.Namespace) -> int:
    store = _store()
    kernel = args.kernel
    cleared = store.clear(None if kernel is None else (lambda meta: selects(kernel, meta)))
    of = f" of kernel {kernel!r}" if kernel else ""
    print(f"removed {_count(cleared.removed, 'entry', 'entries')}{of} from {store.directory}")
    for failure in cleared.failures:
        print(f"jittile: {failure}", file=sys.stderr)
    return 1 if cleared.failures else 0


def _cache_prune(args: argparse.Namespace) -> int:
    store = _store()
    limit = cache.parse_size(args.max_size)
    removed = store.prune(limit)
    for item in removed:
        if isinstance(item, Damaged):
            print(f"removed damaged {item.label}: {item.reason}")
        else:
            print(
                f"removed {item.key[:KEY_PREFIX]}  {item.qualname}  {_human_size(item.size)}  "
                f"last used {_when(item.last_used)}"
            )
    left = store.survey()
    total = sum(e.size for e in left.entries)
    print(
        f"{_count(len(removed), 'entry', 'entries')} removed; {_human_size(total)} left "
        f"(limit {_human_size(limit)})"
    )
    if total > limit or left.damaged:
        _say_damaged(left.damaged)
        print(f"jittile: some entries could not be removed from {_where(store)}", file=sys.stderr)
        return 1
    return 0


def _components(entry: Entry) -> dict:
    return entry.metadata.get("key_components", {})


def _cache_why(args: argparse.Namespace) -> int:
    survey = _store().survey()
    groups = by_kernel(selected(survey.entries, args.kernel))
    # Damaged entries of this kernel, or of no kernel one can tell.
    _say_damaged(
        [d for d in survey.damaged if d.metadata is None or selects(args.kernel, d.metadata)]
    )
    if not groups:
        raise JittileError(f"no cache entries for kernel {args.kernel!r}")
    if args.json:
        _print_json(
            {
                "kernel": args.kernel,
                "kernels": [_why_json(kernel, found) for kernel, found in groups.items()],
            }
        )
        return 0
    if len(groups) > 1:
        print(
            f"{args.kernel}: {len(groups)} kernels of that name, compared separately "
            f"(`jittile cache why FILE.py:{args.kernel}` picks one):\n"
        )
    print("\n\n".join(_why_text(kernel, found) for kernel, found in groups.items()))
    return 0


def _differing(found: list[Entry]) -> list[str]:
    """The key components that differ between any two of ``found``."""
    # Equal values are transitive, so comparing every entry with the first finds every difference.
    paths: list[str] = []
    for other in found[1:]:
        paths += [
            p
            for p in differing_components(_components(found[0]), _components(other))
            if p not in paths
        ]
    return paths


def _why_text(kernel: KernelId, found: list[Entry]) -> str:
    """``why`` of one kernel (one file's qualified name)."""
    if len(found) == 1:
        return f"{kernel}: 1 entry ({found[0].key[:KEY_PREFIX]}); nothing to compare"
    paths = _differing(found)
    if not paths:
        return f"{kernel}: {len(found)} entries with identical key components"
    rows = [
        [
            e.key[:KEY_PREFIX],
            *(describe(lookup(_components(e), p)) for p in paths),
            _when(e.last_used),
        ]
        for e in found
    ]
    return "\n".join(
        [
            f"{kernel}: {len(found)} entries differ in: {', '.join(paths)}",
            _table(["KEY", *paths, "LAST USED"], rows),
            "",
            *_change_lines(what_changed(found)),
        ]
    )


def _why_json(kernel: KernelId, found: list[Entry]) -> dict:
    """``why --json`` of one kernel: its entries' differing components and what changed last."""
    paths = _differing(found)
    data = {
        "qualname": kernel.qualname,
        "source_file": kernel.source_file,
        "entries": [
            {
                "key": e.key,
                "target": e.target,
                "created": e.created,
                "last_used": e.last_used,
                "components": {p: lookup(_components(e), p) for p in paths},
            }
            for e in found
        ],
        "differ_in": paths,
        "newest": None,
        "nearest": None,
        "changes": [],
        "source_diff": None,
    }
    if len(found) > 1:
        changes = what_changed(found)
        data.update(
            newest=changes.newest.key,
            nearest=changes.nearest.key if changes.nearest else None,
            changes=[
                {"path": path, "old": old, "new": new} for path, old, new in changes.components
            ],
            source_changed=changes.source_changed,
            source_diff=changes.source_diff,
        )
    return data


def _change_lines(changes: Changes) -> list[str]:
    """What changed from the nearest entry of the newest entry's target to the newest entry."""
    newest, nearest = changes.newest, changes.nearest
    head = (
        f"newest entry {newest.key[:KEY_PREFIX]} ({newest.target}, created {_when(newest.created)})"
    )
    if nearest is None:
        return [f"{head}: no other {newest.target} entry to compare it with"]
    lines = [
        f"{head} against the nearest {newest.target} entry {nearest.key[:KEY_PREFIX]} "
        f"(created {_when(nearest.created)}):"
    ]
    lines += [
        f"  {path}: {describe(old)} -> {describe(new)}" for path, old, new in changes.components
    ]
    if changes.source_diff:
        lines.append("  source:")
        lines += [f"    {line}" for line in changes.source_diff]
    elif changes.source_changed:
        why = (
            "an entry has no recorded source text"
            if changes.source_diff is None
            else "its digest differs, its text does not"
        )
        lines.append(f"  source: changed ({why})")
    return lines


# -- compile ---------------------------------------------------------------------------------------


def _parse_arg_spec(spec: str) -> Any:
    """``uint32[16,16]`` / ``float32[?,128]`` -> ``T.Tensor``; ``int32=5`` -> the scalar value."""
    from .dtypes import dtype

    tensor, scalar = _TENSOR_SPEC.match(spec), _SCALAR_SPEC.match(spec)
    if tensor:
        from .language import T

        name, extents = tensor.groups()
        parts = [p.strip() for p in extents.split(",")] if extents.strip() else []
        if not all(p == "?" or p.isdigit() for p in parts):
            raise JittileError(f"--arg {spec!r}: extents must be integers or '?'")
        return T.Tensor(tuple(None if p == "?" else int(p) for p in parts), dtype(name).name)
    if scalar:
        name, text = scalar.groups()
        kind = dtype(name)
        try:
            if kind.name == "bool":
                if text.lower() not in ("true", "false", "1", "0"):
                    raise ValueError(text)
                return text.lower() in ("true", "1")
            return float(text) if kind.kind == "float" else int(text, 0)
        except ValueError:
            raise JittileError(f"--arg {spec!r}: {text!r} is not a {kind.name} value") from None
    raise JittileError(
        f"--arg {spec!r}: expected DTYPE[EXTENTS] (e.g. float32[?,128]) or DTYPE=VALUE"
    )


class _ImportFailed(Exception):
    """The user's module raised while it was imported: shown as the user's own traceback."""

    def __init__(self, filename: str, error: Exception):
        super().__init__(filename)
        self.filename = filename
        self.error = error

    def report(self) -> str:
        error = self.error
        lines = traceback.format_exception(type(error), error, user_traceback(error.__traceback__))
        return f"jittile: error: importing {self.filename} failed:\n{''.join(lines).rstrip()}"


def _load_kernel(location: str) -> Any:
    """Import ``FILE.py`` as a module (its directory first on ``sys.path``, as ``python FILE.py``)."""
    filename, _, name = location.rpartition(":")
    if not filename or not name:
        raise JittileError(f"{location!r}: expected FILE.py:KERNEL")
    path = Path(filename).resolve()
    if not path.is_file():
        raise JittileError(f"{filename}: no such file")
    module_name = path.stem if path.stem not in sys.modules else f"_jittile_compile_{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise JittileError(f"{filename}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    except JittileError:
        raise  # located at the user's line already
    except Exception as exc:
        raise _ImportFailed(filename, exc) from None
    kernel = getattr(module, name, None)
    if kernel is None:
        raise JittileError(f"{filename} defines no {name!r}")
    if not callable(getattr(kernel, "compile", None)):
        raise JittileError(f"{filename}:{name} is not a jittile kernel (no .compile)")
    return kernel


def _named_value(annotation: Any, text: str) -> Any:
    """The value of ``--arg NAME=VALUE`` for a parameter with ``annotation``: a scalar of its
    ``T`` scalar type, a tensor spec (``uint32[16,16]``) for a tensor, else a Python literal
    (``64``, ``(8, 16)``) or, failing that, the text itself (``float32``)."""
    import ast

    from .language.types import ScalarType, Tensor

    if isinstance(annotation, ScalarType):
        return _parse_arg_spec(f"{annotation.dtype_name}={text}")
    if isinstance(annotation, Tensor) or _TENSOR_SPEC.match(text):
        return _parse_arg_spec(text)
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _arguments(kernel: Any, specs: list[str]) -> list:
    """The example arguments of ``--arg`` specs: positional specs fill the parameters, in order,
    that no ``NAME=VALUE`` names; a parameter given neither way compiles from its annotation."""
    import inspect

    signature = inspect.signature(kernel.pyfunc, eval_str=True)
    named, positional = {}, []
    for spec in specs:
        name, equals, text = spec.partition("=")
        if equals and name.strip() in signature.parameters:
            named[name.strip()] = text.strip()
        else:
            positional.append(_parse_arg_spec(spec))
    if not named:
        return positional  # none: the kernel specializes on its own annotations
    from .language.types import ScalarType, Tensor

    values = []
    for name, parameter in signature.parameters.items():
        annotation = parameter.annotation
        if name in named:
            values.append(_named_value(annotation, named[name]))
        elif positional:
            values.append(positional.pop(0))
        elif isinstance(annotation, Tensor):
            values.append(annotation)
        elif isinstance(annotation, ScalarType):
            values.append(annotation(0))
        else:
            raise JittileError(
                f"parameter {name!r} has no --arg and no T.Tensor or scalar "
                f"annotation: pass --arg {name}=VALUE"
            )
    if positional:
        raise JittileError(
            f"{_count(len(positional), 'positional --arg')} left over: every "
            f"parameter already has a value"
        )
    return values


def _compile(args: argparse.Namespace) -> int:
    # Parsed here, where it enters; none: the kernel's own target, else the GPU's, else sm_90a
    # (as kernel.compile()).
    target = None if args.target is None else Target.parse(args.target)
    kernel = _load_kernel(args.location)
    compiled = kernel.compile(*_arguments(kernel, args.arg), target=target)
    meta = compiled.metadata
    store = cache.default_store()
    where = store.entry_dir(meta["key"])
    if not store.enabled:
        stored = f"memory only ({store.disabled_reason})"
    else:
        stored = str(where) if where.is_dir() else "not stored"
    summary = _table(
        ["kernel", meta["name"]],
        [
            ["target", str(meta["target"])],
            ["key", meta["key"][:KEY_PREFIX]],
            ["registers", str(meta.get("registers", "?"))],
            ["shared", f"{meta.get('shared_bytes', '?')} bytes"],
            ["cache", stored],
        ],
    )
    plan = str(compiled.plan) or "(no tile calls)"
    # With --ptx/--sass the code goes to stdout alone, so it can be redirected to a file.
    report = sys.stderr if args.ptx or args.sass else sys.stdout
    print(f"{summary}\n\nplan:\n{plan}", file=report)
    if args.ptx:
        print(compiled.ptx.rstrip("\n"))
    if args.sass:
        print(compiled.sass.rstrip("\n"))
    return 0


# -- entry point -----------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jittile",
        description="Inspect and manage the kernel cache; compile kernels ahead of time.",
    )
    parser.add_argument("--version", action="version", version=f"jittile {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    cache_parser = commands.add_parser("cache", help="inspect and manage the kernel cache")
    actions = cache_parser.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="one line per entry (of one kernel, if named)")
    listing.add_argument("kernel", nargs="?", metavar="KERNEL", help=_KERNEL_HELP)
    listing.add_argument("--json", action="store_true", help="print the entries as JSON")
    listing.set_defaults(run=_cache_list)
    show = actions.add_parser("show", help="metadata, PTX and SASS summary of one entry")
    show.add_argument("key", help="the key or a unique prefix of it")
    show.set_defaults(run=_cache_show)
    clear = actions.add_parser(
        "clear", help="remove every entry, damaged ones included, or only one kernel's"
    )
    clear.add_argument("kernel", nargs="?", metavar="KERNEL", help=_KERNEL_HELP)
    clear.set_defaults(run=_cache_clear)
    prune = actions.add_parser(
        "prune", help="remove damaged entries, then least recently used ones down to a size"
    )
    prune.add_argument("--max-size", required=True, help="e.g. 500M (K/M/G/T are powers of 1024)")
    prune.set_defaults(run=_cache_prune)
    why = actions.add_parser("why", help="which key components differ between a kernel's entries")
    why.add_argument("kernel", metavar="KERNEL", help=_KERNEL_HELP)
    why.add_argument("--json", action="store_true", help="print the comparison as JSON")
    why.set_defaults(run=_cache_why)
    tuned = actions.add_parser("tunings", help="the autotuner's choices (of one kernel, if named)")
    tuned.add_argument("kernel", nargs="?", metavar="KERNEL", help="a kernel's name or qualname")
    tuned.add_argument("--json", action="store_true", help="print the records as JSON")
    tuned.set_defaults(run=_cache_tunings)

    compile_parser = commands.add_parser(
        "compile", help="compile a kernel into the cache (no GPU needed)"
    )
    compile_parser.add_argument("location", metavar="FILE.py:KERNEL")
    compile_parser.add_argument(
        "--target",
        help="e.g. sm_90a, sm_100a; default: the kernel's own, "
        "else the GPU's, else sm_90a (as kernel.compile())",
    )
    output = compile_parser.add_mutually_exclusive_group()
    output.add_argument("--ptx", action="store_true", help="print the PTX")
    output.add_argument("--sass", action="store_true", help="print the SASS (needs nvdisasm)")
    compile_parser.add_argument(
        "--arg",
        action="append",
        default=[],
        metavar="SPEC",
        help="an argument: NAME=VALUE for a named parameter (BLOCK=64, "
        "A=uint32[16,16], alpha=2.5), or, in order, uint32[16,16], "
        "float32[?,128] or int32=5; parameters given no --arg compile "
        "from their T.Tensor or scalar annotations",
    )
    compile_parser.set_defaults(run=_compile)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        status = args.run(args)
        sys.stdout.flush()  # here, so that a closed pipe is met below rather than at exit
        return status
    except JittileError as exc:
        print(f"jittile: error: {exc}", file=sys.stderr)
        return 1
    except _ImportFailed as failed:
        print(failed.report(), file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (`jittile cache show KEY | head`): stop quietly, as other tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
