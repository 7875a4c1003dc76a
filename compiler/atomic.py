"""Atomic file writes: a reader sees the old file or the whole new one, never a partial one.

Every file the project writes (model files, checkpoints, tables, pictures) goes through
`atomic_write`: the content is written to a temporary file in the target's folder, flushed to
disk (fsync), then moved over the target with one `os.replace`. On any error the temporary file
is removed and the target is left as it was. New files get the usual permissions (0666 minus
the umask), unlike `tempfile.mkstemp`'s 0600.

Targets are checked first (`check_target`): only a new path or an existing regular file is
written (a symbolic link is followed to its file); a folder, a device, a pipe, a path under a
file, an empty path or a place the process cannot write to is refused with a `ModelFileError`
that names the path and what to do, before any content is produced.

Temporary files are named `.<name>.<host>-<pid>-<random>.partial<suffix>` (the suffix kept, so
writers that choose a format from it, such as matplotlib, still work). A write killed before
its rename (SIGKILL, a power cut) leaves its temporary file behind; the next write into the
same folder removes such files when they were made on this host by a process that no longer
exists.
"""

from __future__ import annotations

import errno
import os
import pathlib
import re
import secrets
import socket
import stat
from collections.abc import Callable

from compiler.errors import ModelFileError

_PARTIAL = re.compile(r"^\..+\.(?P<host>[A-Za-z0-9_]+)-(?P<pid>\d+)-[0-9a-f]{16}\.partial")


def _host() -> str:
    """This machine's name reduced to `[A-Za-z0-9_]` (it sits between dots and dashes)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname()) or "host"


def _fsync_path(path: pathlib.Path) -> None:
    handle = os.open(path, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def check_target(path: str | os.PathLike) -> pathlib.Path:
    """The path to write: `path` itself, or the file a symbolic link at `path` points to.

    Raises:
      ModelFileError: `path` is empty, a folder, a special file (device, pipe, socket), or lies
        under an existing file; the message names the path and what to give instead.
    """
    if not str(os.fspath(path)).strip():
        raise ModelFileError("the path is empty; give a file name such as model.safetensors")
    path = pathlib.Path(path)
    if path.is_symlink():
        path = path.resolve()
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        mode = None
    except NotADirectoryError:
        mode = None  # reported below, with the file that is used as a folder
    except OSError as error:
        raise ModelFileError(f"{path}: cannot inspect the target ({error.strerror or error})") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise ModelFileError(
            f"{path} is a folder; give a file path, e.g. {path / 'model.safetensors'}"
        )
    if mode is not None and not stat.S_ISREG(mode):
        raise ModelFileError(
            f"{path} is {_kind(mode)}; writing would replace it, so it is refused; give the path "
            "of a regular file or a new one"
        )
    for parent in path.parents:
        if parent.exists() or parent.is_symlink():
            if not parent.is_dir():
                raise ModelFileError(
                    f"{path}: {parent} is a file, not a folder, so nothing can be written under "
                    f"it; choose another folder (or remove or rename {parent})"
                )
            break
    return path


def remove_stale_partials(folder: pathlib.Path) -> list[pathlib.Path]:
    """Remove temporary files that killed writes on this host left in `folder`; returns them.

    Only files named like this module's temporary files, made on this host by a process id that
    no longer exists, are removed; files of running writers (and of other hosts sharing the
    folder) are left alone.
    """
    host = _host()
    removed: list[pathlib.Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        match = _PARTIAL.match(entry.name)
        if match is None or match["host"] != host or int(match["pid"]) == os.getpid():
            continue
        if _alive(int(match["pid"])) or not entry.is_file(follow_symlinks=False):
            continue
        try:
            os.unlink(entry.path)
            removed.append(pathlib.Path(entry.path))
        except OSError:
            pass  # another writer removed it first, or the folder is read-only
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    except OverflowError:
        return False
    return True


def _refusal(path: pathlib.Path, error: OSError) -> ModelFileError:
    """A `ModelFileError` for an OS error while writing `path`, naming the path and the fix."""
    reason = error.strerror or str(error)
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return ModelFileError(
            f"{path}: cannot write in {path.parent} ({reason}); choose a folder you can write to, "
            "or change its permissions"
        )
    if error.errno == errno.ENOSPC:
        return ModelFileError(f"{path}: the disk is full ({reason}); free space or choose another disk")
    if error.errno in (errno.ENOTDIR, errno.EEXIST):
        return ModelFileError(f"{path}: part of the path is a file, not a folder ({reason}); choose another folder")
    return ModelFileError(
        f"{path}: cannot write ({reason}); check that {path.parent} is a folder this process can write to"
    )


def atomic_write(path: str | os.PathLike, write: Callable[[pathlib.Path], object]) -> pathlib.Path:
    """Call `write(temporary_path)` to produce the content, then move it onto `path` atomically.

    `write` receives a path in the same folder (same file system, so the rename is atomic) with
    the target's suffix, so writers that pick a format from the suffix (e.g. matplotlib) work.
    Missing parent folders are created; stale temporary files of killed writes are removed.

    Returns:
      `path` as a `pathlib.Path` (the link's target where `path` is a symbolic link).

    Raises:
      ModelFileError: the target is refused (`check_target`) or the folder cannot be written
        (permissions, a read-only file system, a full disk); the target is left as it was.
    """
    path = check_target(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise _refusal(path, error) from None
    remove_stale_partials(path.parent)
    token = f"{_host()}-{os.getpid()}-{secrets.token_hex(8)}"
    temporary = path.parent / f".{path.name}.{token}.partial{path.suffix}"
    try:
        # os.open applies the umask to 0o666 itself, as for any new file.
        os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    except OSError as error:
        raise _refusal(path, error) from None
    try:
        write(temporary)
        _fsync_path(temporary)
        os.replace(temporary, path)
    except BaseException as error:
        temporary.unlink(missing_ok=True)
        if isinstance(error, OSError) and error.filename in (str(temporary), str(path), temporary, path):
            raise _refusal(path, error) from None
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
