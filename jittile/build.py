"""Building one specialization: key it, then load its disk entry, or lower, compile and store it.

``metadata["cache"]`` of the result says which: ``"hit"`` (loaded from disk, not lowered again
unless lowering warned), ``"stored"`` (compiled and written, or written first by a racing
process), ``"off"`` (compiled; disk cache off or not writable). ``JITTILE_DEBUG=cache`` logs each
hit and miss, a miss with the components that differ from the closest entry of the same kernel.
"""

from __future__ import annotations

import time
import warnings

from . import cache as jcache
from . import stages
from .entry import BrokenEntry, CompiledKernel, decode, encode
from .errors import JittileWarning, user_stacklevel
from .frontend.source import KernelSource
from .keying import key_components
from .targets import Target


def build(
    name: str,
    qualname: str,
    source: KernelSource,
    params: list,
    target: Target,
    launch,
    use_disk_cache: bool,
) -> CompiledKernel:
    """The compiled kernel of one specialization, from the disk cache when it holds it."""
    start = time.perf_counter()
    components = key_components(qualname, source, params, target, launch)
    key = jcache.make_key(components)
    debug = jcache.debug_enabled()
    override = stages.override_ptx(name, key)
    store = jcache.default_store() if use_disk_cache and override is None else None
    usable = store is not None and store.enabled
    if usable and not stages.always_compile():
        entry = store.load(key)
        compiled = _from_entry(entry, source, params, target, launch, key) if entry else None
        if compiled is not None:
            if debug:
                jcache.log(
                    f"hit {qualname} {key[:12]} ({target.name}, {entry.hits} hits, "
                    f"{1000 * (time.perf_counter() - start):.1f} ms)"
                )
            return compiled
    if debug:
        jcache.log(f"{qualname} {key[:12]} {_why_missed(store, qualname, components)}")
    from .backend import warmup

    warmup.start(target)  # NVVM and nvJitLink load while the frontend lowers
    from .backend.compiler import compile_lowered
    from .frontend.lower import lower_kernel

    lowered = lower_kernel(source, params, target, launch)
    artifact = compile_lowered(lowered, target, override)
    meta = encode(
        name,
        qualname,
        source,
        target,
        key,
        components,
        lowered,
        artifact,
        time.perf_counter() - start,
    )
    stored = store.store(key, artifact.cubin, artifact.ptx, meta) if usable else None
    meta["cache"] = "stored" if stored is not None else "off"
    if debug:
        jcache.log(
            f"{'stored' if stored is not None else 'compiled (memory only)'} "
            f"{qualname} {key[:12]} in {meta['compile_seconds']:.3f} s"
        )
    compiled = CompiledKernel(
        artifact.ptx,
        artifact.cubin,
        meta,
        lowered.ir,
        artifact.python,
        artifact.entry,
        artifact.param_layout,
        target,
    )
    stages.dump(compiled.asm, name, key)
    return compiled


def _why_missed(store, qualname: str, components: dict) -> str:
    if store is not None and store.enabled:
        previous = [e for e in store.entries() if e.qualname == qualname]
        return jcache.explain_miss(components, previous)
    reason = "cache=False on this kernel" if store is None else store.disabled_reason
    return f"miss: disk cache off ({reason})"


def _from_entry(
    entry, source: KernelSource, params: list, target: Target, launch, key: str
) -> CompiledKernel | None:
    """The compiled kernel of a verified disk entry; ``None`` (a miss) when its files vanished
    meanwhile or its metadata cannot describe this launch (then it is removed, with a warning)."""
    try:
        cubin, ptx = entry.cubin(), entry.ptx()
    except FileNotFoundError:
        return None  # removed by another process (prune, clear) since it was verified
    except (OSError, UnicodeDecodeError) as exc:
        problem = f"unreadable files ({exc})"
    else:
        try:
            return decode(entry.metadata, cubin, ptx, source, params, target, launch, key)
        except BrokenEntry as exc:
            problem = str(exc)
    warnings.warn(
        f"jittile cache: ignoring broken entry {key[:12]} in {entry.path.parent.parent}: "
        f"{problem}; it will be rebuilt",
        JittileWarning,
        stacklevel=user_stacklevel(),
    )
    jcache.default_store().remove(key)
    return None
