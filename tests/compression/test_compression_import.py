"""The `compression` package must not break importing JAX (Python 3.14 has a stdlib `compression`)."""

import subprocess
import sys


def test_jax_imports_cleanly_with_our_compression_package_on_the_path():
    # JAX probes `from compression import zstd` during its own import; our package must let that
    # probe fail with ImportError rather than import JAX recursively.
    code = "import jax, compression; print(compression.compress.__name__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "compress"
