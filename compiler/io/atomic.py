"""Atomic file writes: a reader sees the old file or the whole new one, never a partial one.

Every file the project writes (model files, checkpoints, tables, pictures) goes through
`atomic_write`: the content is written to a temporary file in the target's folder, flushed to
disk (fsync), then moved over the target with one `os.replace`. On any error the temporary file
is removed and the target is left as it was. New files get the usual permissions (0666 minus
the umask), unlike `tempfile.mkstemp`'s 0600.
"""

from __future__ import annotations

import os
import pathlib
import secrets
from collections.abc import Callable


def _fsync_path(path: pathlib.Path) -> None:
    handle = os.open(path, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def atomic_write(path: str | os.PathLike, write: Callable[[pathlib.Path], object]) -> pathlib.Path:
    """Call `write(temporary_path)` to produce the content, then move it onto `path` atomically.

    `write` receives a path in the same folder (same file system, so the rename is atomic) with
    the target's suffix, so writers that pick a format from the suffix (e.g. matplotlib) work.
    Missing parent folders are created. Returns `path` as a `pathlib.Path`.
    """
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.parent / f".{path.stem}.{secrets.token_hex(8)}.tmp{path.suffix}"
    # os.open applies the umask to 0o666 itself, as for any new file.
    os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        write(temporary)
        _fsync_path(temporary)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    try:  # make the rename itself durable; not every platform can open a folder
        _fsync_path(path.parent)
    except OSError:
        pass
    return path


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> pathlib.Path:
    """Write `data` to `path` atomically (see `atomic_write`)."""
    return atomic_write(path, lambda temporary: temporary.write_bytes(data))


def atomic_write_text(path: str | os.PathLike, text: str) -> pathlib.Path:
    """Write `text` (UTF-8) to `path` atomically (see `atomic_write`)."""
    return atomic_write(path, lambda temporary: temporary.write_text(text, encoding="utf-8"))
