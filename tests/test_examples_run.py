"""Every example's main() runs and checks its result: on the GPU where there is one, else on the
CPU interpreter (the Blackwell examples interpret wherever no Blackwell device is present)."""

import importlib

import pytest

EXAMPLES = [
    "tma_two_boxes",
    "tma_store",
    "tma_reduce_add",
    "tma_swizzled_copy",
    "tmem_copy_readback",
    "tmem_decompress",
]


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_main_checks_its_result(name, capsys):
    importlib.import_module(name).main()
    assert f"{name}: OK" in capsys.readouterr().out
