"""What ``help(T.ptx[opcode])`` shows for a tile opcode, and what each completion mechanism asks
of the caller (also in the generated reference, jittile/docs.py). Here, below the language, so
that ``T.ptx``'s docstring can ask for it without importing the reference generator, which
imports the language."""
from __future__ import annotations

from . import registry

# What each declared completion mechanism asks of the caller.
COMPLETION_TEXT = {
    "mbarrier": "completes on the `mbar=` barrier: each instruction's bytes count against the "
                "barrier's expected transaction bytes (set them with `mbarrier.arrive.expect_tx`, "
                "then `T.cuda.mbarrier_wait`)",
    "bulk_group": "joins the thread's bulk async-group: `T.ptx.cp.async_.bulk.commit_group()`, "
                  "then `T.ptx.cp.async_.bulk.wait_group(n)`",
    "tcgen05_commit": "completes through `tcgen05.commit...mbarrier::arrive::one` on a barrier "
                      "the caller waits on (one arrival, no transaction bytes)",
    "wgmma_group": "joins the warpgroup's wgmma group: `T.ptx.wgmma.commit_group.sync.aligned()`, "
                   "then `T.ptx.wgmma.wait_group.sync.aligned(n)` before the registers are read; "
                   "`T.ptx.wgmma.fence.sync.aligned()` before the first MMA and after the kernel "
                   "touches its registers",
    "none": "nothing to wait for",
}


def opcode_help(opcode: str) -> str | None:
    """What ``help(T.ptx[opcode])`` shows for a tile opcode: its family's forms, completions,
    parameters (``static``: a compile-time value, ``runtime``: any value) and an example; None
    for an opcode no family claims (a raw instruction)."""
    pattern = registry.pattern_for(opcode)
    if pattern is None:
        return None
    lines = [f"T.ptx[{opcode!r}]: a tile opcode of the {pattern.family} family, issued by "
             f"T.cuda.tile.apply(T.ptx[opcode], *operands, **parameters).", "",
             "PTX ISA syntax:", *(f"    {g}" for g in pattern.grammar), "", "Operands, per form:"]
    for form, roles in pattern.operand_forms.items():
        operands = ", ".join(role.name for role in roles)
        lines.append(f"    {form}: ({operands}); {COMPLETION_TEXT[pattern.completions[form]]}")
        lines += [f"        {r.name} ({' or '.join(r.kinds)}): {r.doc}" for r in roles]
    width = max(len(p.name) for p in pattern.parameters)
    lines += ["", "Parameters (T.ptx[opcode].parameters):"]
    lines += [f"    {p.name:<{width}}  {p.kind:<7}  {' '.join(p.doc.split())}"
              for p in pattern.parameters]
    lines += ["", "Example:", *(f"    {line}" for line in pattern.example.splitlines())]
    return "\n".join(lines)
