"""What ``pip install`` gives a new user: the demo runs from an installed wheel, outside the
repository, and ``ck.sass`` needs nothing beyond the package's own requirements."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _requirements(section: str, key: str) -> list[str]:
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    return [line.strip() for line in config[section][key].splitlines() if line.strip()]


def test_nvdisasm_is_installed_with_jittile():
    # ck.sass after `pip install -e .` alone: nvdisasm comes from its pip wheel, never /usr/local/cuda.
    assert "nvidia-cuda-nvdisasm>=13.5,<14" in _requirements("options", "install_requires")


def test_ml_dtypes_is_installed_with_jittile():
    # NumPy arrays of bfloat16 and float8 elements are ml_dtypes arrays, at launch and interpreted.
    assert "ml_dtypes>=0.5" in _requirements("options", "install_requires")


@pytest.fixture(scope="module")
def installed_wheel(tmp_path_factory) -> Path:
    """The package as a wheel installs it: built from a copy of the sources, then unpacked."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    source.mkdir()
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(
        REPO / "jittile", source / "jittile", ignore=shutil.ignore_patterns("__pycache__")
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(work / "dist"),
            str(source),
        ],
        check=True,
        timeout=300,
    )
    (wheel,) = (work / "dist").glob("jittile-*.whl")
    site = work / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    return site


def test_the_wheel_holds_the_demo_kernel_and_no_repository_paths(installed_wheel):
    demo = (installed_wheel / "jittile" / "demo.py").read_text()
    assert "@jittile.kernel" in demo and "examples" not in demo.split('"""', 2)[2]


def test_the_demo_runs_from_an_installed_wheel_outside_the_repository(installed_wheel, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = dict(os.environ, PYTHONPATH=str(installed_wheel), JITTILE_CACHE="0")
    result = subprocess.run(
        [sys.executable, "-m", "jittile.demo"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert f"{installed_wheel / 'jittile' / 'demo.py'}:" in result.stdout  # the plan's site
    assert "compiled tma_load for sm_90a" in result.stdout and "SASS:" in result.stdout


def test_ci_runs_the_wheel_demo_after_the_readme_lines():
    script = (REPO / ".ci" / "run").read_text().splitlines()
    readme = [line.strip() for line in (REPO / "README.md").read_text().splitlines()]
    setup = [line for line in readme if line.startswith("pip install -e ")]
    assert len(setup) == 2 and [line for line in script if line in setup] == setup
    after = "\n".join(script[script.index(setup[-1]) + 1 :])
    assert 'pip wheel --no-deps -q -w "$elsewhere/dist" .' in after
    assert 'python -m venv "$elsewhere/venv"' in after
    assert '(cd "$elsewhere" && "$elsewhere/venv/bin/python" -m jittile.demo)' in after
    assert subprocess.run(["bash", "-n", str(REPO / ".ci" / "run")]).returncode == 0
