"""Python 3.14's standard library has a `compression` package (PEP 784); ours shares the name.

No 3.14 interpreter is available here, so the test simulates one: a fake standard library whose
`compression` folder holds a `zstd` module. With our package imported (as from a clone, where
its folder comes first on `sys.path`), `from compression import zstd` must reach the standard
library's module while `compression.learned.config` stays ours; the wheel declares
`requires-python <3.14` because an installed copy would be shadowed instead (README).
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import textwrap

REPO = pathlib.Path(__file__).resolve().parents[1]

_SIMULATION = textwrap.dedent(
    """
    import sys, sysconfig
    fake = sys.argv[1]
    real = sysconfig.get_path
    sysconfig.get_path = lambda name, *args, **kwargs: fake if name == "stdlib" else real(name, *args, **kwargs)

    import compression
    from compression import zstd
    import compression.learned.config

    assert zstd.__file__.startswith(fake), zstd.__file__
    assert zstd.compress(b"abc") == b"zstd:abc"
    assert compression.learned.config.__file__.startswith(sys.argv[2]), compression.learned.config.__file__
    assert compression.__path__[0].startswith(sys.argv[2]) and compression.__path__[-1].startswith(fake)
    print("ok")
    """
)


def test_standard_library_compression_modules_resolve_next_to_ours(tmp_path) -> None:
    stdlib = tmp_path / "stdlib"
    (stdlib / "compression").mkdir(parents=True)
    (stdlib / "compression" / "__init__.py").write_text("")
    (stdlib / "compression" / "zstd.py").write_text("def compress(data):\n    return b'zstd:' + data\n")
    done = subprocess.run(
        [sys.executable, "-c", _SIMULATION, str(stdlib), str(REPO / "compression")],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ok"


def test_before_python_314_the_package_path_is_only_ours() -> None:
    import sysconfig

    import compression

    has_stdlib_package = (pathlib.Path(sysconfig.get_path("stdlib")) / "compression").is_dir()
    assert len(compression.__path__) == 1 + has_stdlib_package
    assert compression.standard_library_parts(None) == []
    assert compression.standard_library_parts(str(REPO)) == []  # our own folder is never added
