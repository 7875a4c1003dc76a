"""JAX's persistent compilation cache, switched on by the user (opt-in).

The first forward call of a compiled model is mostly XLA compilation. JAX can keep compiled
executables on disk, keyed by the lowered program, the backend and the compiler options, so a
later process that runs the same model (same weights' shapes and forms, same batch size) loads
the executable instead of compiling it. It is off by default because it writes to the user's
disk; `enable_compilation_cache` turns it on for the whole process.
"""

from __future__ import annotations

import os
import pathlib

import jax

# Where executables go unless a folder is given: the user's cache folder.
DEFAULT_FOLDER = pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache")) / "tracr-compile" / "jax"


def enable_compilation_cache(folder: str | os.PathLike | None = None) -> pathlib.Path:
    """Keep every XLA executable this process compiles in `folder`, and reuse those found there.

    Every executable is kept, however quick its compilation was (JAX's default keeps only those
    that took a second or more), since a compiled model's forward pass is the one being reused.

    Args:
      folder: the cache folder (created if missing); default `DEFAULT_FOLDER`.

    Returns:
      The folder used.
    """
    path = pathlib.Path(folder) if folder is not None else DEFAULT_FOLDER
    path.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return path


__all__ = ["DEFAULT_FOLDER", "enable_compilation_cache"]
