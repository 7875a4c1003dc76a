"""The package as a user gets it: a wheel built through pyproject.toml (PEP 517), installed into
a fresh virtual environment, its `tracr-compile` command run from a folder outside the clone.

The fresh environment borrows the already installed dependencies (JAX, Haiku, ...) through a
path entry instead of downloading them again; entries added that way do not run their `.pth`
files, so the clone's editable install stays invisible and the test checks that the imported
`compiler` is the wheel's copy.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile

import pytest
from support import REPO

PACKAGES = ("rasp", "craft", "compiler", "constructions", "compression")
SOURCES = ("pyproject.toml", "setup.py", "README.md", *PACKAGES)


def _run(command: list[str], cwd: pathlib.Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{command} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> pathlib.Path:
    """A wheel built from a copy of the sources (the build leaves no files in the clone)."""
    source = tmp_path_factory.mktemp("source")
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(REPO / name, source / name)
    out = tmp_path_factory.mktemp("dist")
    # pip builds in an isolated environment with the backend pyproject.toml names (PEP 517).
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(source)], cwd=out)
    (built,) = out.glob("tracr_compile-*.whl")
    return built


def test_wheel_holds_every_package_and_the_command(wheel) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = next(name for name in names if name.endswith("entry_points.txt"))
        metadata = archive.read(next(name for name in names if name.endswith("METADATA"))).decode()
        commands = archive.read(entry_points).decode()
    tops = {name.split("/", 1)[0] for name in names if "/" in name and not name.split("/", 1)[0].endswith(".dist-info")}
    assert tops == set(PACKAGES)
    assert "compiler/fuzzing/__init__.py" in names and "compression/experiments/__init__.py" in names
    assert not any(name.startswith("tests/") for name in names)
    assert "tracr-compile = compiler.cli:main" in commands
    assert "Requires-Python: <3.14,>=3.10" in metadata
    assert "Provides-Extra: export" in metadata and "Provides-Extra: dev" in metadata


def test_installed_wheel_runs_the_cli_outside_the_clone(wheel, tmp_path) -> None:
    environment = tmp_path / "venv"
    venv.create(environment, with_pip=False)
    python = environment / "bin" / "python"
    site = pathlib.Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], tmp_path).strip())
    # Dependencies from the running interpreter's site-packages, after the fresh environment's own.
    (site / "borrowed_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n", encoding="utf-8")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)], tmp_path)

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["JAX_PLATFORMS"] = "cpu"
    where = _run([str(python), "-c", "import compiler, compression; print(compiler.__file__); print(compression.__file__)"], outside, env)
    assert all(pathlib.Path(line).is_relative_to(environment) for line in where.split()), where
    output = _run(
        [str(environment / "bin" / "tracr-compile"), "--example", "frac_prevs", "--input", "BOS x a c x", "--out", "frac.safetensors"],
        outside,
        env,
    )
    assert "output: BOS 1 0.5 0.333333 0.5" in output  # fraction of x so far in "x a c x"
    assert (outside / "frac.safetensors").is_file()
