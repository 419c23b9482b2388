"""Shared test setup.

GPU tests (``@pytest.mark.gpu``) run on the H200. Where no CUDA device exists, those that only
pass NumPy arrays run on the CPU interpreter instead (``JITTILE_INTERPRET=1``) against the same
exact NumPy expectations; the rest skip with the reason. On the GPU, ``JITTILE_DIFFERENTIAL=1``
runs every launch of those tests twice, on the device and on the interpreter, and compares the
arrays bit for bit.
"""

import os

import numpy as np
import pytest

os.environ.setdefault("JITTILE_CACHE", "0")

# GPU tests about the device itself, not about what a kernel computes.
DEVICE_ONLY = {
    "test_tma_launch_errors_then_valid_launch": "launch errors of the device path",
    "test_target_newer_than_the_device_is_a_launch_error": "the device's compute capability",
    "test_a_disk_hit_launches_from_the_recorded_ir": "cubins from the disk cache",
    "test_a_new_array_re_encodes_its_tensormap": "driver TensorMap encodings",
    "test_benchmark_copy_kernels_are_exact": "1 GiB benchmark copies (minutes on the CPU)",
    "test_the_driver_encodes_every_descriptor_the_contract_accepts": "the driver's encoder",
}
# Parameters whose runs need device arrays.
DEVICE_ARRAYS = ("cupy", "torch", "numba", "dlpack", "cuda")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "gpu: needs a CUDA device (interpreted or skipped without one)"
    )


def interpretable(item) -> bool:
    """A GPU test the interpreter can run: NumPy arrays only, about what kernels compute."""
    name = item.originalname if hasattr(item, "originalname") else item.name
    params = getattr(getattr(item, "callspec", None), "params", {})
    device_params = any(any(tag in str(v) for tag in DEVICE_ARRAYS) for v in params.values())
    return (
        name not in DEVICE_ONLY
        and not device_params
        and item.module.__name__
        not in (
            "test_gpu_torch_dtypes",
            "test_gpu_interpreter",
            "test_gpu_runtime",
            "test_gpu_autotune",
            "test_gpu_gemm",
            "test_gpu_attention",
        )
    )  # torch tensors


def pytest_collection_modifyitems(config, items):
    from jittile.runtime import driver

    if driver.available():
        return
    skip = pytest.mark.skip(reason="no CUDA device: GPU tests run on the H200 (see DEVICE.md)")
    for item in items:
        if "gpu" in item.keywords and not interpretable(item):
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _interpreted_or_differential(request, monkeypatch):
    """No device: interpret. On the device with JITTILE_DIFFERENTIAL=1: both, compared."""
    if "gpu" not in request.keywords or not interpretable(request.node):
        yield
        return
    from jittile.runtime import driver

    if not driver.available():
        import sys

        monkeypatch.setattr(sys.modules["jittile.launch"], "INTERPRET", True)
    elif os.environ.get("JITTILE_DIFFERENTIAL") == "1":
        _compare_every_launch(monkeypatch)
    yield


def _compare_every_launch(monkeypatch):
    """Wrap the launch: run on the GPU, then interpret the same inputs, compare every array."""
    import sys

    from jittile.interpreter import interpret

    kernel_module, launch_module = sys.modules["jittile.kernel"], sys.modules["jittile.launch"]
    device_launch = launch_module.launch_kernel

    def both(kernel, args, kwargs, config, stream, cluster, shared_bytes):
        copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        device_launch(kernel, args, kwargs, config, stream, cluster, shared_bytes)
        interpret(kernel, tuple(copies), dict(kwargs), config, cluster, shared_bytes)
        for index, (gpu, cpu) in enumerate(zip(args, copies)):
            if isinstance(gpu, np.ndarray):
                assert gpu.tobytes() == cpu.tobytes(), (
                    f"{kernel.__name__} argument {index}: the interpreter differs from the GPU "
                    f"at {np.flatnonzero(gpu.view(np.uint8) != cpu.view(np.uint8))[:8]} (bytes)"
                )
        DIFFERENTIAL_LAUNCHES.append(kernel.__name__)

    monkeypatch.setattr(launch_module, "launch_kernel", both)
    monkeypatch.setattr(kernel_module, "launch_kernel", both)


DIFFERENTIAL_LAUNCHES: list = []


def pytest_terminal_summary(terminalreporter):
    if DIFFERENTIAL_LAUNCHES:
        terminalreporter.write_line(
            f"differential: {len(DIFFERENTIAL_LAUNCHES)} launches "
            f"compared bit for bit, GPU vs interpreter "
            f"({len(set(DIFFERENTIAL_LAUNCHES))} kernels)"
        )
