"""The interpreter's semantics of each opcode family's plan records: one module per family, named
after its pattern module and declared by it (``TilePattern.interpreter``), each with
``execute(machine, thread, record, op, operands)``. The dispatch (:mod:`..instructions`) finds
them through the registry; nothing here is listed by hand."""
