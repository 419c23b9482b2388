"""numba-cuda lowering of the generated function, PTX post-pass, nvJitLink and disassembly."""
