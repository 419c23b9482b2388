"""Barriers and proxies, both ways: a load on an mbarrier that no expect_tx arms is a
ContractError at the load; shared memory written through the generic proxy and read by the async
proxy with no proxy fence between is a JittileWarning at compile time (textual order) and a race
in the interpreter (whose write, which fence)."""
import importlib
import re
import warnings
from pathlib import Path

import numpy as np
import proxy_kernels as k
import pytest
from lines import line_of

import jittile
from jittile import ContractError, InterpreterError, JittileWarning

KERNELS = Path(k.__file__)
IMAGE = np.arange(256, dtype=np.float32).reshape(8, 32)
T_RING = jittile.T.Tensor((4, 256), "uint32")
T_WORDS = jittile.T.Tensor((256,), "uint32")


@pytest.fixture(autouse=True)
def _no_disk_cache(monkeypatch):
    monkeypatch.setenv("JITTILE_CACHE", "0")


def _line(marker: str) -> int:
    return line_of(KERNELS, marker)


def _quiet_interpret(kernel, *args):
    """Interpret ``kernel``, recording the compile-time warnings instead of showing them."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel.interpret(*args)
    return [w for w in caught if issubclass(w.category, JittileWarning)]


def _proxy_warnings(kernel, *specs, target: str = "sm_90a") -> list[str]:
    """The proxy-fence warnings of compiling ``kernel`` (for the parameter ``specs``)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel.compile(*specs, target=target)
    return [str(w.message) for w in caught
            if issubclass(w.category, JittileWarning) and "async proxy" in str(w.message)]


# ------------------------------------------------------------------------------- armed barriers
def test_a_load_on_a_barrier_nothing_arms_is_an_error_at_the_load():
    with pytest.raises(ContractError) as info:
        k.unarmed.compile(target="sm_90a")
    error = info.value
    assert (error.filename, error.lineno) == (str(KERNELS), _line("# the unarmed load") - 1)
    assert error.opcode == k.LOAD and error.parameter == "mbar"
    text = str(error)
    assert "no mbarrier.arrive.expect_tx or mbarrier.expect_tx" in text
    assert "mbar.ptr_to([0])" in text and "1024 transaction bytes" in text
    assert ("T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(1024))"
            in error.hint)


def test_the_interpreter_refuses_the_unarmed_load_before_it_runs():
    with pytest.raises(ContractError, match="arms a barrier of shared buffer 'mbar'"):
        k.unarmed.interpret(IMAGE.copy(), np.zeros_like(IMAGE))


@pytest.mark.parametrize("arm", ["arrive", "expect"])
def test_a_ring_armed_at_a_runtime_stage_runs(arm):
    a = np.arange(1024, dtype=np.uint32).reshape(4, 256)
    out = np.zeros_like(a)
    k.ring.interpret(a, out, arm)
    np.testing.assert_array_equal(out, a)


def test_a_ring_nothing_arms_is_an_error():
    with pytest.raises(ContractError, match=r"mbarrier full.ptr_to\(\[s\]\)") as info:
        k.ring.compile(T_RING, T_RING, None, target="sm_90a")
    assert info.value.opcode == k.BULK_LOAD and info.value.parameter == "mbar"



def test_arming_and_loading_in_helpers():
    out = np.zeros_like(IMAGE)
    k.through_helpers.interpret(IMAGE.copy(), out, True)
    np.testing.assert_array_equal(out, IMAGE)
    with pytest.raises(ContractError, match=r"mbar.ptr_to\(\[0\]\)") as info:
        k.through_helpers.compile(k.OUT, k.OUT, False, target="sm_90a")
    assert info.value.lineno == _line("# helper load")


def test_a_multicast_load_on_barriers_each_cta_arms():
    out = np.zeros((2, 8, 32), dtype=np.float32)
    k.multicast.interpret(IMAGE.copy(), out, True)
    np.testing.assert_array_equal(out, np.stack([IMAGE, IMAGE]))
    with pytest.raises(ContractError, match="no mbarrier.arrive.expect_tx") as info:
        k.multicast.compile(k.OUT, jittile.T.Tensor((2, 8, 32), "float32"), False,
                            target="sm_90a")
    assert info.value.opcode == k.MULTICAST


# ------------------------------------------------------------------------- compile-time fences
def test_a_store_of_unfenced_writes_warns_at_the_store():
    (message,) = _proxy_warnings(k.stored_image, k.OUT, "none")
    assert message.startswith(f"{KERNELS}:{_line('# async read')}:")
    assert f"{k.STORE} reads shared buffer 'buf'" in message
    assert f"write to it at line {_line('# generic write')} " in message
    assert "T.ptx.fence.proxy.async_.shared__cta()" in message


def test_strict_mode_makes_the_missing_fence_an_error():
    strict = jittile.kernel(k.stored_image.pyfunc, strict=True)
    with pytest.raises(ContractError, match="through the async proxy") as info:
        strict.compile(k.OUT, "none", target="sm_90a")
    assert info.value.lineno == _line("# async read") and info.value.opcode == k.STORE


@pytest.mark.parametrize("fence", ["all", "issuer", "one lane"])
def test_a_fence_between_the_writes_and_the_store_does_not_warn(fence):
    assert _proxy_warnings(k.stored_image, k.OUT, fence) == []


def test_a_load_read_by_a_store_does_not_warn():
    assert _proxy_warnings(k.loaded_then_stored) == []


@pytest.mark.parametrize("fence", ["early", "global"])
def test_a_fence_before_the_writes_or_for_global_memory_warns(fence):
    (message,) = _proxy_warnings(k.stored_image, k.OUT, fence)
    assert f"line {_line('# generic write')} " in message


def test_st_shared_before_a_bulk_store():
    (message,) = _proxy_warnings(k.st_shared_then_bulk_store, T_WORDS, False)
    assert message.startswith(f"{KERNELS}:{_line('# bulk read')}:")
    assert f"line {_line('# st.shared')}" in message
    assert _proxy_warnings(k.st_shared_then_bulk_store, T_WORDS, True) == []



# --------------------------------------------------------------------------- interpreted races
def _race(kernel, *args) -> InterpreterError:
    with pytest.raises(InterpreterError) as info:
        _quiet_interpret(kernel, *args)
    return info.value


def test_the_interpreter_reports_the_unfenced_store_as_a_race():
    error = _race(k.stored_image, np.zeros_like(IMAGE), "none")
    assert (error.filename, error.lineno) == (str(KERNELS), _line("# async read"))
    text = str(error)
    assert "race" in text and "CTA (0, 0, 0) thread (0, 0, 0)" in text
    assert "byte 0 of 'buf'" in text
    assert f"thread (0, 0, 0) (warp 0, lane 0) at {KERNELS}:{_line('# generic write')}:" in text
    assert "T.ptx.fence.proxy.async_.shared__cta()" in text


@pytest.mark.parametrize("fence", ["all", "issuer"])
def test_fenced_writes_are_stored(fence):
    out = np.zeros_like(IMAGE)
    assert _quiet_interpret(k.stored_image, out, fence) == []
    np.testing.assert_array_equal(out, IMAGE)


def test_a_loaded_image_is_stored():
    out = np.zeros_like(IMAGE)
    k.loaded_then_stored.interpret(IMAGE.copy(), out)
    np.testing.assert_array_equal(out, IMAGE)


def test_a_fence_by_one_lane_leaves_the_other_lanes_writes_unfenced():
    error = _race(k.stored_image, np.zeros_like(IMAGE), "one lane")
    assert "byte 4 of 'buf'" in str(error)
    assert f"thread (1, 0, 0) (warp 0, lane 1) at {KERNELS}:{_line('# generic write')}:" \
        in str(error)


@pytest.mark.parametrize("fence", ["early", "global"])
def test_a_fence_before_the_writes_or_for_global_memory_is_a_race(fence):
    error = _race(k.stored_image, np.zeros_like(IMAGE), fence)
    assert f"{KERNELS}:{_line('# generic write')}:" in str(error)


def test_st_shared_words_need_the_fence_before_a_bulk_store():
    out = np.zeros(256, dtype=np.uint32)
    error = _race(k.st_shared_then_bulk_store, out, False)
    assert error.lineno == _line("# bulk read")
    assert re.search(rf"{KERNELS}:{_line('# st.shared')}:\d+", str(error))
    k.st_shared_then_bulk_store.interpret(out, True)
    np.testing.assert_array_equal(out, np.arange(256, dtype=np.uint32))


def _mma_inputs():
    from wgmma_kernels import exact_values, storage_bits

    rng = np.random.default_rng(0)
    a, b = exact_values((64, 16), "bfloat16", rng), exact_values((8, 16), "bfloat16", rng)
    return a, b, storage_bits(a, "bfloat16"), storage_bits(b, "bfloat16")


def test_wgmma_operands_written_by_threads_need_the_fence():
    a, b, a_bits, b_bits = _mma_inputs()
    d = np.zeros((64, 8), dtype=np.float32)
    specs = (jittile.T.Tensor((64, 16), "uint16"), jittile.T.Tensor((8, 16), "uint16"),
             jittile.T.Tensor((64, 8), "float32"))
    warned = _proxy_warnings(k.mma_of_written_operands, *specs, False)
    assert [m.split(" reads shared buffer ")[1].split()[0] for m in warned] == ["'A_s'", "'B_s'"]
    write = _line("# A's generic write")
    assert f"{k.MMA} reads" in warned[0] and f"line {write} " in warned[0]
    assert _proxy_warnings(k.mma_of_written_operands, *specs, True) == []
    error = _race(k.mma_of_written_operands, a_bits, b_bits, d, False)
    assert error.lineno == _line("# the MMA reads A and B") and "of 'A_s'" in str(error)
    assert _quiet_interpret(k.mma_of_written_operands, a_bits, b_bits, d, True) == []
    np.testing.assert_array_equal(d, (a @ b.T).astype(np.float32))


# ------------------------------------------------- the repository's kernels without their fence
def _without_the_fence(path: Path, fence: str, tmp_path, monkeypatch, name: str):
    """The module at ``path`` with its one line ``fence`` removed, imported as ``name``."""
    source = path.read_text()
    assert source.count(fence) == 1
    (tmp_path / f"{name}.py").write_text(source.replace(fence, ""))
    monkeypatch.syspath_prepend(str(tmp_path))
    return importlib.import_module(name), source


def test_the_gemm_examples_epilogue_needs_its_fence(tmp_path, monkeypatch):
    """The stmatrix + TMA store epilogue of examples/gemm_bf16.py: fenced, it compiles cleanly
    (the suite runs it); without the fence the store warns, naming the stmatrix."""
    from jittile.frontend.lower import lower_kernel
    from jittile.targets import Target

    gemm_unfenced, source = _without_the_fence(
        Path(__file__).parent.parent / "examples" / "gemm_bf16.py",
        "        T.ptx.fence.proxy.async_.shared__cta()  # the staged tile, into the async proxy\n",
        tmp_path, monkeypatch, "gemm_unfenced")
    kernel = gemm_unfenced.gemm_bf16
    specs = (jittile.T.Tensor((None, None), "bfloat16"),) * 3 + (np.int32(1),) * 3
    with pytest.warns(JittileWarning, match=r"reads shared buffer '\w*S_s'") as caught:
        lower_kernel(kernel.source, kernel.specializer.params(specs), Target.parse("sm_90a"))
    (message,) = [str(w.message) for w in caught if "async proxy" in str(w.message)]
    stmatrix = next(i for i, line in enumerate(source.splitlines(), 1)
                    if "T.ptx.stmatrix.sync.aligned.m8n8.x4.shared.b16(" in line)
    assert f"line {stmatrix}" in message and gemm_unfenced.STORE in message


def test_a_tcgen05_cp_source_written_by_threads_needs_the_fence(tmp_path, monkeypatch):
    """The tcgen05.cp interpreter test's kernel (threads write, synchronize, every thread fences,
    one copies), with the fence removed."""
    module, source = _without_the_fence(
        Path(__file__).parent / "test_interpreter_tcgen05.py",
        "        T.ptx.fence.proxy.async_.shared__cta()\n", tmp_path, monkeypatch,
        "tcgen05_unfenced")
    kernel, buffer_rows, width, rows, words = module.form("128x256b", 0, "")
    write = next(i for i, line in enumerate(source.splitlines(), 1)
                 if "shared[tid, j] = A[tid, j]" in line)
    (message,) = _proxy_warnings(kernel, target="sm_100a")
    assert "tcgen05.cp.cta_group::1.128x256b reads shared buffer 'shared'" in message
    assert f"line {write} " in message
    a = np.arange(buffer_rows * width, dtype=np.uint32).reshape(buffer_rows, width)
    error = _race(kernel, a, np.zeros((128, words), dtype=np.uint32))
    assert "race: tcgen05.cp" in str(error) and f"tcgen05_unfenced.py:{write}:" in str(error)


@pytest.mark.parametrize("example, array", [("tma_store", np.zeros((16, 32), np.float32)),
                                            ("tma_reduce_add", np.zeros((24, 32), np.float32))])
def test_the_store_and_reduce_examples_need_their_fence(example, array, tmp_path, monkeypatch):
    module, source = _without_the_fence(
        Path(__file__).parent.parent / "examples" / f"{example}.py",
        "    T.ptx.fence.proxy.async_.shared__cta()\n", tmp_path, monkeypatch,
        f"{example}_unfenced")
    kernel = getattr(module, example)
    write = next(i for i, line in enumerate(source.splitlines(), 1)
                 if "shared[g, r, lane] = " in line)
    (message,) = _proxy_warnings(kernel)
    assert f"line {write} " in message
    assert f"{example}_unfenced.py:{write}:" in str(_race(kernel, array))
