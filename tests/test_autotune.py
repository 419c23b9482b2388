"""``@jittile.autotune`` on the CPU: declaration checks, pruning, compile_all (also in worker
processes), key handling, the memory and disk tuning caches, and interpret. Timing and launches
go through stand-ins of the driver; the H200 tunes for real in bench/gemm.py."""

from __future__ import annotations

import json
import re
import types

import autotune_kernels
import numpy as np
import pytest
from autotune_kernels import tiled_fill

import jittile
from bench.launch_host_cpu import CupyLike, driver_stand_ins
from jittile import JittileError, LaunchError, T, tuning
from jittile.cache import tunings
from jittile.runtime import driver

WIDE = jittile.Config({"WIDTH": 4096})


@pytest.fixture
def disk(tmp_path, monkeypatch):
    monkeypatch.setenv("JITTILE_CACHE", "1")
    monkeypatch.setenv("JITTILE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def gpu(monkeypatch):
    """Launches recorded (with the WIDTH each one used), timings from ``speed``."""
    launches = []
    for name, value in driver_stand_ins(lambda *a: launches.append(a)).items():
        monkeypatch.setattr(driver, name, value)
    monkeypatch.setattr(driver, "device_name", lambda device: f"Stand-in GPU {device}")
    for kernel in (tiled_fill.kernel,):
        kernel._memory, kernel.prepared = {}, {}
        kernel.fast_paths.table.clear()
    tiled_fill.reset()
    return launches


def test_a_config_must_set_constexpr_parameters():
    with pytest.raises(JittileError, match="sets 'n', which is not a T.constexpr parameter"):
        jittile.autotune(configs=[jittile.Config({"n": 3})], key=["n"])(tiled_fill.kernel)
    with pytest.raises(JittileError, match="'m' is not a parameter of the kernel"):
        jittile.autotune(configs=[jittile.Config({"WIDTH": 32})], key=["m"])(tiled_fill.kernel)
    with pytest.raises(JittileError, match="decorates a @jittile.kernel"):
        jittile.autotune(configs=[jittile.Config({"WIDTH": 32})], key=["n"])(lambda: None)


def test_compile_all_maps_each_config_to_its_kernel_or_the_error_that_drops_it():
    result = tiled_fill.compile_all(T.Tensor((64,), "float32"), T.int32(0), target="sm_90a")
    assert set(result) == set(tiled_fill.configs)
    assert [type(result[c]).__name__ for c in tiled_fill.configs[:2]] == ["CompiledKernel"] * 2
    assert isinstance(result[WIDE], JittileError) and "shared" in str(result[WIDE])
    assert tiled_fill.dropped == {WIDE: result[WIDE]}
    assert result[tiled_fill.configs[0]].metadata["static_params"] == {"WIDTH": "32"}


def test_compile_all_in_worker_processes_fills_the_disk_cache(disk, monkeypatch):
    monkeypatch.setenv("JITTILE_AUTOTUNE_JOBS", "2")
    tiled_fill.kernel._memory = {}
    result = tiled_fill.compile_all(T.Tensor((64,), "float32"), T.int32(0), target="sm_90a")
    hits = [result[c].metadata["cache"] for c in tiled_fill.configs[:2]]
    assert hits == ["hit", "hit"]  # compiled by the workers, loaded here from their entries
    assert isinstance(result[WIDE], JittileError)


def _timed(monkeypatch, speeds: dict):
    """Tuning timings ``speeds[WIDTH]`` ms: which config a timing ran is read from the launch."""
    timed = []

    widths = []  # the WIDTH of every launch, timed or not
    real = tiled_fill._launch

    def launch(config, *args):
        widths.append(config.kwargs["WIDTH"])
        return real(config, *args)

    def do_bench(fn):
        fn()
        timed.append(widths[-1])
        return speeds[widths[-1]]

    monkeypatch.setattr(tiled_fill, "_launch", launch)
    monkeypatch.setattr(tiled_fill, "do_bench", do_bench)
    return timed, widths


def test_the_fastest_config_is_chosen_per_key_and_kept(gpu, disk, monkeypatch):
    timed, widths = _timed(monkeypatch, {32: 2.0, 64: 1.0})
    out = CupyLike(0x10000, (64,))
    tiled_fill(out, 10)
    assert sorted(timed) == [32, 64]  # the config that does not compile is never timed
    assert tiled_fill.best_config == jittile.Config({"WIDTH": 64}) and widths[-1] == 64
    tiled_fill(out, 10)  # same key: no new tuning
    assert sorted(timed) == [32, 64] and widths[-1] == 64
    tiled_fill(out, 20)  # a new key value: tuned again
    assert len(timed) == 4
    (record,) = [r for r in tunings.records() if r["identity"]["key_values"] == [10]]
    assert record["identity"]["device"] == "Stand-in GPU 0"
    assert record["dropped"] == {repr(WIDE): tiled_fill.dropped[WIDE].message}


def test_a_tuning_says_where_its_time_went(gpu, disk, monkeypatch, capsys):
    """The record and the printed line split a tuning into compiling (and its worker count)
    and the host seconds each config's timing took: what a slow first launch spent."""
    _timed(monkeypatch, {32: 2.0, 64: 1.0})
    monkeypatch.setenv("JITTILE_PRINT_AUTOTUNING", "1")
    tiled_fill(CupyLike(0x10000, (64,)), 11)
    (record,) = [r for r in tunings.records() if r["identity"]["key_values"] == [11]]
    seconds = record["seconds"]
    assert seconds["compiling"] >= 0 and seconds["compile_workers"] == tiled_fill.compile_workers
    assert sorted(seconds["timing"]) == sorted(record["timings_ms"])  # one per timed config
    assert all(t >= 0 for t in seconds["timing"].values())
    assert seconds["compiled_here"] == tiled_fill.compiled_here
    assert seconds["worker_failures"] == []
    compiled = {**record["timings_ms"], **record["dropped"]}  # each candidate's compile time
    assert sorted(seconds["compile"]) == sorted(compiled)
    line = capsys.readouterr().err
    assert re.search(
        r"compiling [0-9.]+ s \(\d+ worker processes, \d+ configs compiled here, "
        r"longest [0-9.]+ s\), "
        r"timing [0-9.]+ s",
        line,
    )
    assert "longest" in line and "WIDTH=" in line


def test_compile_workers_run_at_the_same_time(gpu, disk, monkeypatch, tmp_path):
    """Every worker gets its configs before the tuning process waits for any: the second worker
    starts compiling before the first has finished (each used to get its share only once the
    one before had exited, so the compiles ran one after another: run 64, 11 configs in 56.6 s
    where the longest took 7.5)."""
    _timed(monkeypatch, {32: 2.0, 64: 1.0})
    monkeypatch.setenv("JITTILE_AUTOTUNE_JOBS", "2")
    spans_dir = tmp_path / "spans"
    spans_dir.mkdir()
    monkeypatch.setenv("JT_TEST_SPANS", str(spans_dir))
    monkeypatch.setattr(
        tuning,
        "_WORKER_MAIN",
        "import os, pickle, sys, time; pickle.load(sys.stdin.buffer); "
        "span = os.path.join(os.environ['JT_TEST_SPANS'], str(os.getpid())); "
        "open(span, 'w').write(f'{time.time()} '); time.sleep(1.0); "
        "open(span, 'a').write(f'{time.time()}')",
    )
    tiled_fill(CupyLike(0x10000, (64,)), 13)
    spans = [tuple(map(float, p.read_text().split())) for p in spans_dir.iterdir()]
    assert len(spans) == 2
    assert max(start for start, _ in spans) < min(end for _, end in spans)


def test_a_worker_that_dies_is_reported_and_its_configs_compile_here(gpu, disk, monkeypatch):
    """A compile worker that cannot even start (here: exits at once) leaves its configs to the
    tuning process, which compiles them all and records what the worker wrote last."""
    _timed(monkeypatch, {32: 2.0, 64: 1.0})
    monkeypatch.setenv("JITTILE_AUTOTUNE_JOBS", "2")
    monkeypatch.setattr(tuning, "_WORKER_MAIN", "import sys; sys.exit('no compiler here')")
    tiled_fill(CupyLike(0x10000, (64,)), 12)
    (record,) = [r for r in tunings.records() if r["identity"]["key_values"] == [12]]
    assert record["seconds"]["compile_workers"] == 2
    assert record["seconds"]["worker_failures"] == ["no compiler here"] * 2
    assert record["seconds"]["compiled_here"] == len(record["timings_ms"]) == 2


def test_a_first_tuning_inside_a_graph_capture_is_a_launch_error_and_a_tuned_key_launches(
    gpu, disk, monkeypatch
):
    """Timing configs needs synchronizing, which a capturing stream refuses: the first launch of
    a key during a capture says to launch once before it; a key tuned before captures fine."""
    timed, widths = _timed(monkeypatch, {32: 2.0, 64: 1.0})
    out = CupyLike(0x10000, (64,))
    tiled_fill(out, 10)  # tuned outside the capture
    monkeypatch.setattr(driver, "stream_capturing", lambda stream: True)
    tiled_fill(out, 10)
    assert widths[-1] == 64 and len(timed) == 2
    with pytest.raises(
        LaunchError,
        match=r"captured into a CUDA graph.*launch once with these "
        r"key values before the capture",
    ):
        tiled_fill(out, 30)
    assert len(timed) == 2


def test_a_later_process_reuses_the_tuning_from_disk(gpu, disk, monkeypatch):
    timed, widths = _timed(monkeypatch, {32: 1.0, 64: 3.0})
    out = CupyLike(0x10000, (64,))
    tiled_fill(out, 7)
    tiled_fill.reset()  # what a new process starts with
    monkeypatch.setattr(tiled_fill, "do_bench", lambda fn: pytest.fail("timed again"))
    monkeypatch.setenv("JITTILE_PRINT_AUTOTUNING", "1")
    tiled_fill(out, 7)
    assert widths[-1] == 32 and tiled_fill.best_config.kwargs == {"WIDTH": 32}


def test_an_edited_record_is_ignored(gpu, disk, monkeypatch):
    timed, _ = _timed(monkeypatch, {32: 1.0, 64: 3.0})
    out = CupyLike(0x10000, (64,))
    tiled_fill(out, 5)
    (path,) = (disk / "tunings").glob("*.json")
    record = json.loads(path.read_text())
    record["best"] = 99
    path.write_text(json.dumps(record))
    tiled_fill.reset()
    tiled_fill(out, 5)
    assert len(timed) == 4  # tuned again, not an index error


def test_early_config_prune_and_reset_to_zero(gpu, disk, monkeypatch):
    pruned = jittile.autotune(
        configs=tiled_fill.configs,
        key=["n"],
        reset_to_zero=["Out"],
        prune_configs_by={
            "early_config_prune": lambda configs, named: [
                c for c in configs if c.kwargs["WIDTH"] <= named["n"]
            ]
        },
        do_bench=lambda fn: (fn(), 1.0)[1],
    )(autotune_kernels.tiled_fill.kernel)
    zeroed = []
    monkeypatch.setattr("jittile.tuning._zero", lambda value, stream: zeroed.append(value))
    out = CupyLike(0x10000, (64,))
    pruned(out, 40)
    assert pruned.best_config.kwargs == {"WIDTH": 32} and zeroed == [out]
    with pytest.raises(LaunchError, match="early_config_prune left no config"):
        pruned(out, 8)


def test_no_config_that_compiles_is_a_launch_error_with_the_reasons(gpu):
    only_wide = jittile.autotune(configs=[WIDE], key=["n"])(tiled_fill.kernel)
    with pytest.raises(LaunchError, match=r"no config compiles.*WIDTH=4096.*shared"):
        only_wide(CupyLike(0x10000, (64,)), 1)


def test_interpret_runs_the_first_config_that_compiles():
    first_wide = jittile.autotune(configs=[WIDE, jittile.Config({"WIDTH": 64})], key=["n"])(
        tiled_fill.kernel
    )
    out = np.zeros(64, np.float32)
    first_wide.interpret(out, 40)
    np.testing.assert_array_equal(out, np.where(np.arange(64) < 32, 64.0, 0.0).astype(np.float32))
    assert first_wide.best_config.kwargs == {"WIDTH": 64}


def test_positional_arguments_fill_the_parameters_no_config_sets():
    with pytest.raises(LaunchError, match="takes 2 positional arguments besides its tuned ones"):
        tiled_fill.compile_all(T.Tensor((64,), "float32"), T.int32(0), 32)
    assert "WIDTH=32" in repr(tiled_fill.configs[0]) and "3 configs" in repr(tiled_fill)


def test_jittile_cache_lists_the_tunings(gpu, disk, monkeypatch, capsys):
    from jittile import cli

    _timed(monkeypatch, {32: 2.0, 64: 1.0})
    tiled_fill(CupyLike(0x10000, (64,)), 12)
    assert cli.main(["cache", "tunings"]) == 0
    text = capsys.readouterr().out
    assert "tiled_fill" in text and "n=12" in text and "WIDTH=64" in text
    assert "Stand-in GPU 0" in text and "2/3" in text  # two timed of three configs
    assert re.search(r"\d+\.\d s \(\d+\.\d compiling\)", text)  # where the tuning's time went
    assert cli.main(["cache", "tunings", "other_kernel", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tunings"] == []


def test_a_repeated_signature_launches_its_choice_without_keying_again(gpu, disk, monkeypatch):
    """A call whose arguments fingerprint as a tuned call's did (pointers aside) launches that
    call's config through the tuned fast path: no naming, converting or keying again."""
    _timed(monkeypatch, {32: 2.0, 64: 1.0})
    tiled_fill(CupyLike(0x10000, (64,)), 10)
    before = len(gpu)
    monkeypatch.setattr(tiled_fill, "_key_values", lambda named: pytest.fail("keyed again"))
    tiled_fill.best_config = None
    tiled_fill(CupyLike(0x20000, (64,)), 10)  # another array of the same shape
    assert len(gpu) == before + 1 and tiled_fill.best_config.kwargs == {"WIDTH": 64}


def test_a_new_shape_value_type_or_device_is_a_new_signature(gpu, disk, monkeypatch):
    fast = tiled_fill._fast
    base, prints = fast.signature((CupyLike(0x10000, (64,)), 10))
    assert prints[0][0] == 0x10000  # the fingerprints read, handed to the kernel's fast path
    assert base == fast.signature((CupyLike(0x90000, (64,)), 10))[0]  # the pointer does not count
    on_device_1 = CupyLike(0x10000, (64,))
    on_device_1.data.device_id = 1
    for other in (
        (CupyLike(0x10000, (65,)), 10),
        (CupyLike(0x10000, (64,), np.float64), 10),
        (CupyLike(0x10000, (64,)), 11),
        (CupyLike(0x10000, (64,)), np.int64(10)),
        (on_device_1, 10),
    ):
        assert fast.signature(other)[0] != base
    assert fast.signature((np.zeros(64, np.float32), 10)) is None  # host arrays: the full path


def test_kept_launches_run_the_configs_hooks_and_follow_a_reset(gpu, disk, monkeypatch):
    ran = []
    hooked = jittile.autotune(
        configs=[
            jittile.Config(
                {"WIDTH": 32},
                pre_hook=lambda meta: ran.append(("pre", meta["n"], meta["WIDTH"])),
                post_hook=lambda meta: ran.append(("post", meta["n"], meta["WIDTH"])),
            )
        ],
        key=["n"],
        do_bench=lambda fn: (fn(), 1.0)[1],
    )(tiled_fill.kernel)
    out = CupyLike(0x10000, (64,))
    hooked(out, 3)
    ran.clear()
    hooked(out, 3)  # kept
    assert ran == [("pre", 3, 32), ("post", 3, 32)]
    keyed = []
    real = hooked._key_values
    monkeypatch.setattr(hooked, "_key_values", lambda named: keyed.append(1) or real(named))
    hooked.reset()
    hooked(out, 3)  # forgotten: keyed (and found in the disk cache) again
    assert keyed and hooked.best_config.kwargs == {"WIDTH": 32}


def test_without_a_device_in_the_fingerprint_several_gpus_take_the_full_path(
    gpu, disk, monkeypatch
):
    """A Numba array's fingerprint does not say its device: with two GPUs the current device
    decides, so those calls are keyed every time."""
    from jittile.tuned_launch import TunedFastPaths

    class NumbaLike:  # what the fingerprint reads of a Numba device array
        __module__ = "numba.cuda.cudadrv.devicearray"
        __cuda_array_interface__ = property(lambda self: {})
        device_ctypes_pointer = property(lambda self: types.SimpleNamespace(value=0x10000))
        shape, strides, dtype = (64,), (4,), np.dtype(np.float32)

    fast = TunedFastPaths(frozenset())
    monkeypatch.setattr(driver, "device_count", lambda: 2)
    fast.keep(tiled_fill, tiled_fill.configs[0], (NumbaLike(), 3))
    assert fast.table == {}
    fast.several_devices = False
    fast.keep(tiled_fill, tiled_fill.configs[0], (NumbaLike(), 3))
    assert len(fast.table) == 1


def test_a_grid_lambda_made_on_every_call_keeps_the_fast_path_and_is_evaluated_anew(
    gpu, disk, monkeypatch
):
    """``tuned[lambda meta: ..., 256](...)`` inside a function makes a new lambda per call: the
    choice is kept per signature alone (no entry per lambda), and each call's lambda decides
    its launch."""
    tuner = jittile.autotune(
        configs=[jittile.Config({"PER_THREAD": 1})],
        key=["n"],
        do_bench=lambda fn: (fn(), 1.0)[1],
    )(autotune_kernels.strided_scale.kernel)
    x, out = CupyLike(0x10000, (1024,)), CupyLike(0x20000, (1024,))
    for blocks in (4, 2, 3):
        tuner[lambda meta, blocks=blocks: (blocks,), 256](x, out, 1024)
        assert gpu[-1][0] == (blocks, 1, 1)
    assert len(tuner._fast.table) == 1
    monkeypatch.setattr(tuner, "_key_values", lambda named: pytest.fail("keyed again"))
    tuner[lambda meta: (5,), 256](x, out, 1024)
    assert gpu[-1][0] == (5, 1, 1)


@jittile.kernel
def scale_between(
    X: T.Tensor((None,), "float32"),
    FACTOR: T.constexpr,
    Out: T.Tensor((None,), "float32"),
    n: T.int32,
):
    """A T.constexpr parameter between the arrays: the kept launch must rearrange."""
    i = T.cuda.block_idx("x") * 64 + T.cuda.thread_idx("x")
    if i < n:
        Out[i] = X[i] * FACTOR


def test_a_kept_launch_packs_what_the_full_path_packs_whatever_the_parameter_order(
    gpu, disk, monkeypatch
):
    """The tuned fast path puts the config's values where the kernel's parameters are (here
    between the arrays, and after them in tiled_fill): the buffer a kept launch packs, with
    moved arrays, is the full path's for the same arguments."""
    tuner = jittile.autotune(
        configs=[jittile.Config({"FACTOR": 3})], key=["n"], do_bench=lambda fn: (fn(), 1.0)[1]
    )(scale_between)

    def packed(x_ptr, out_ptr, n):
        tuner[(2,), 64](CupyLike(x_ptr, (128,)), CupyLike(out_ptr, (128,)), n)
        fast = scale_between.fast_paths.table[(T.cuda.LaunchConfig((2,), 64), None)]
        return bytes(fast.launcher.params.view)

    packed(0x10000, 0x20000, 100)
    full_path = tuner._key_values
    tuner._key_values = lambda named: pytest.fail("keyed again")
    kept = packed(0x30000, 0x40000, 100)  # the kept launch, its arrays moved
    tuner._key_values = full_path
    tuner.reset()
    scale_between.fast_paths.table.clear()
    assert packed(0x30000, 0x40000, 100) == kept  # the full path, from nothing
