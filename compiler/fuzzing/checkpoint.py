"""Save and resume a fuzz run: its per-program results in one JSON file, written atomically.

A run of 10,000 programs takes hours on a shared machine; a killed run must not lose what it
has checked. The driver rewrites the file every few programs with one atomic write
(`compiler.atomic`), so a reader (or a resumed run) always sees a complete earlier version. A resumed run keeps the
stored results of the same settings and checks only the programs that are missing; `redo`
drops stored results whose reason matches, so a fix can be re-checked on exactly the programs
it affects.

Another fuzz (`benchmarks/claims.py`) keeps its own records in the same file format: its options
define `settings_key()` (the options deciding what it checks) and `resume_hint` (the flags to
repeat), and its result type `from_row(row)` (one stored row back) and `mentions(text)` (what
`redo` matches); the driver's `Options` and `ProgramResult` define none of them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import json
import signal
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from compiler.atomic import atomic_write_bytes, atomic_write_text
from compiler.errors import CompilerError
from compiler.fuzzing.differential import Outcome

FORMAT = 1


@contextlib.contextmanager
def interrupt_on_terminate() -> Iterator[None]:
    """Within the block, SIGTERM (what `kill` and job schedulers send) raises KeyboardInterrupt as
    Ctrl-C does, so a long run's `finally` saves its results before it exits; a run started in
    the background by a shell ignores SIGINT, so SIGTERM is how it is stopped. The previous
    handler is restored after; a no-op off the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def settings_key(options: Any) -> dict[str, Any]:
    """The options that decide which programs and inputs a run checks (JSON-ready): the
    options' own `settings_key()` when they define one, else the driver's fields."""
    own = getattr(options, "settings_key", None)
    if callable(own):
        return {"format": FORMAT, **own()}
    return {
        "format": FORMAT,
        "seed": options.seed,
        "inputs": options.inputs,
        "jax_every": options.jax_every,
        "norm_every": options.norm_every,
        "settings": [[[repr(token) for token in vocab], length] for vocab, length in options.settings],
    }


def save(path: Path, options: Any, results: Iterable[Any]) -> None:
    """Write every result (a `driver.ProgramResult`) to `path` in one atomic write, in
    program order; gzip-compressed when the name ends in `.gz` (a 10,000-program claims run is
    about 8 MB of JSON, 0.5 MB compressed, small enough to keep in the repository)."""
    rows = [dataclasses.asdict(result) for result in sorted(results, key=lambda r: r.index)]
    text = json.dumps({"settings": settings_key(options), "results": rows}, separators=(",", ":")) + "\n"
    if _compressed(path):
        atomic_write_bytes(path, gzip.compress(text.encode("utf-8"), mtime=0))
    else:
        atomic_write_text(path, text)


def _compressed(path: Path) -> bool:
    return path.suffix == ".gz"


def _read(path: Path) -> str:
    """The text of a results file (gunzipped when its name ends in `.gz`)."""
    return gzip.decompress(path.read_bytes()).decode("utf-8") if _compressed(path) else path.read_text(encoding="utf-8")


def load(path: Path, options: Any, result_type: type, redo: Sequence[str] = ()) -> dict[int, Any]:
    """Stored results of `path` by program index, minus those whose outcome matches `redo`.

    Args:
      path: the results file; a missing file gives no results.
      options: the run's `driver.Options`; the file must have been written with the same seed,
        inputs, JAX share, norm share and settings.
      result_type: `driver.ProgramResult` (passed in: this module sits below the driver), or a
        type with `from_row` and `mentions` (module docstring).
      redo: substrings; a stored program with an outcome whose status or reason contains one
        of them (or, for a type with `mentions`, that mentions one) is dropped, so the run
        checks it again.

    Raises:
      CompilerError: the file is not a results file, or was written with other settings.
    """
    if not path.exists():
        return {}
    try:
        data = json.loads(_read(path))
        stored_settings, rows = data["settings"], data["results"]
    except (OSError, ValueError, KeyError, TypeError, EOFError) as error:  # gzip: BadGzipFile is an OSError
        raise CompilerError(
            f"{path}: not a fuzz results file ({error}); give another --results path or remove it"
        ) from None
    if stored_settings != settings_key(options):
        raise CompilerError(
            f"{path} holds a run with other settings ({stored_settings}); resume it with the same "
            f"{getattr(options, 'resume_hint', '--seed, --inputs, --jax-every, --norm-every and --settings')}, "
            "or give another --results path"
        )
    from_row = getattr(result_type, "from_row", None)
    if callable(from_row):
        return _own_rows(rows, result_type.__name__, from_row, redo)
    results = {}
    for row in rows:
        outcomes = tuple(Outcome(**outcome) for outcome in row["outcomes"])
        if any(text in outcome.status or text in outcome.reason for text in redo for outcome in outcomes):
            continue
        results[row["index"]] = result_type(
            row["index"], row["size"], row["setting"], outcomes, tuple(row["failure_files"])
        )
    return results


def _own_rows(
    rows: Sequence[dict[str, Any]], type_name: str, from_row: Callable[[dict[str, Any]], Any], redo: Sequence[str]
) -> dict[int, Any]:
    """Rows read back by `from_row` (of the result type `type_name`), minus those that mention a
    `redo` text.

    Raises:
      CompilerError: a row that `from_row` cannot read.
    """
    results = {}
    for row in rows:
        try:
            result = from_row(row)
        except (KeyError, TypeError, ValueError) as error:
            raise CompilerError(f"a stored row is not a {type_name} ({error!r}); give another "
                                "--results path or remove the file") from None
        if not any(result.mentions(text) for text in redo):
            results[result.index] = result
    return results
