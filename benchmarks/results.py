"""Measured tables, written by the command that measures them and quoted in docs/ through one renderer.

A benchmark that publishes a table builds a `Table` and hands it to `publish`, which prints it
and, given `--json PATH`, saves a `Result` there: the table, the exact command line, the commit,
the date, the machine and its load, the environment variables that change results, and the
run's wall and CPU seconds. A docs page quotes a result with a block

    <!-- result: circuits/rare_inputs_detect_abc -->
    ...rendered by this module, never typed by hand...
    <!-- /result -->

whose body is `render(result)` of `docs/results/data/circuits/rare_inputs_detect_abc.json`.

    python -m benchmarks.results            # rewrite every block from its JSON file
    python -m benchmarks.results --check    # fail on a block that differs from its JSON, a
                                            # JSON nobody quotes, or a quick result that a
                                            # fresh run does not reproduce

`--check` re-runs each result whose recorded run took at most `QUICK_SECONDS` of wall time (as
many at a time as the machine has CPUs; `--jobs` changes that) and compares every cell except
the columns the table marks as timings (`Table.timings`): those are measurements of this machine
at that moment, shown but not reproducible to the digit. The tests call the check
(tests/test_results.py); `--no-rerun` keeps only the static part.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import datetime
import json
import os
import platform
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from compiler.atomic import atomic_write_text

DOCS = ROOT / "docs"
DATA = DOCS / "results" / "data"
# A result whose recorded run took at most this many wall seconds is re-run by --check.
QUICK_SECONDS = 60.0
# Environment variables that change what a benchmark computes or how fast; recorded with it.
RECORDED_ENV = ("JAX_DISABLE_MOST_OPTIMIZATIONS", "JAX_ENABLE_X64", "XLA_FLAGS", "OMP_NUM_THREADS", "JAX_PLATFORMS")
_BLOCK = re.compile(r"(?P<open><!-- result: (?P<name>[\w./-]+) -->\n)(?P<body>.*?)(?P<close><!-- /result -->)", re.S)

__all__ = ["DATA", "QUICK_SECONDS", "Result", "Table", "add_json_argument", "check", "differences", "load", "publish",
           "quoted_names", "render", "reproduction_problems", "rerun", "static_problems", "write_docs"]


@dataclasses.dataclass(frozen=True)
class Table:
    """One measured table: column names, rows of printed cells, and which columns are timings.

    Cells are strings as they should be printed (the benchmark chooses the digits); `timings`
    names the columns `--check` does not compare; `caption` is printed above the table.
    """

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    timings: tuple[str, ...] = ()
    caption: str = ""

    def __post_init__(self) -> None:
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(f"a row has {len(row)} cells for {len(self.columns)} columns {self.columns}: {row}")
        unknown = set(self.timings) - set(self.columns)
        if unknown:
            raise ValueError(f"timing columns {sorted(unknown)} are not columns of the table {self.columns}")

    def markdown(self) -> str:
        """The table as GitHub markdown (caption, header, separator, rows)."""
        lines = [self.caption, ""] if self.caption else []
        lines += ["| " + " | ".join(self.columns) + " |", "|" + "---|" * len(self.columns)]
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        return "\n".join(lines)

    def compared(self) -> list[tuple[str, ...]]:
        """The rows without their timing columns: what a fresh run must reproduce."""
        keep = [i for i, column in enumerate(self.columns) if column not in self.timings]
        return [tuple(row[i] for i in keep) for row in self.rows]


@dataclasses.dataclass(frozen=True)
class Result:
    """A table with the run that measured it (see the module docstring)."""

    table: Table
    argv: tuple[str, ...]
    env: dict[str, str]
    commit: str
    date: str
    machine: str
    wall_seconds: float
    cpu_seconds: float

    @property
    def command(self) -> str:
        """The command line as a reader types it, environment variables first."""
        prefix = [f"{key}={shlex.quote(value)}" for key, value in sorted(self.env.items())]
        return " ".join([*prefix, "python", *(shlex.quote(arg) for arg in self.argv)])

    @property
    def quick(self) -> bool:
        """Whether `--check` re-runs it."""
        return self.wall_seconds <= QUICK_SECONDS

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        return json.dumps(data, indent=1, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Result:
        data = json.loads(text)
        table = data.pop("table")
        return cls(table=Table(columns=tuple(table["columns"]), rows=tuple(tuple(r) for r in table["rows"]),
                               timings=tuple(table["timings"]), caption=table["caption"]),
                   argv=tuple(data.pop("argv")), **data)


def load(name: str, data: Path = DATA) -> Result:
    """The result `<data>/<name>.json` (default docs/results/data).

    Raises:
      FileNotFoundError: no such result (the message names the file and the command to make it).
    """
    path = data / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(f"{_shown(path)}: no such result; run its benchmark with --json {_shown(path)}")
    return Result.from_json(path.read_text(encoding="utf-8"))


def render(result: Result) -> str:
    """The markdown a docs block quoting `result` holds: the table, then how it was measured."""
    seconds = f"{result.wall_seconds:.0f} s wall, {result.cpu_seconds:.0f} s CPU"
    return (f"{result.table.markdown()}\n\n"
            f"Measured by `{result.command}` at commit {result.commit} on {result.date} "
            f"({result.machine}; {seconds}).\n")


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()


def _commit() -> str:
    """HEAD's short hash, marked when tracked code (anything outside docs/) has uncommitted changes."""
    head = _git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)docs")
    return f"{head} with uncommitted changes" if dirty else head


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


# When, at what cost and from which commit this process began: a result names the code it was
# measured with, even if the checkout moves on while it runs.
_STARTED = (time.perf_counter(), _cpu_seconds(), os.getloadavg()[0])
_STARTED_COMMIT = _commit()


def add_json_argument(parser: argparse.ArgumentParser) -> None:
    """Add the `--json PATH` option every publishing benchmark takes."""
    parser.add_argument("--json", type=Path, metavar="PATH",
                        help="also save the table with its command, commit and machine (docs/results/data/...json)")


def publish(table: Table, json_path: Path | None, argv: Sequence[str] | None = None) -> Result:
    """Print `table` and, when `json_path` is given, save it as a `Result` (atomically).

    Args:
      table: the measured table.
      json_path: where to save the result (None: print only).
      argv: the command line that measured it (default: this process's, script path made
        relative to the repository).

    Returns:
      The result, timed (and its commit read) from the moment this module was imported.
    """
    wall, cpu, load_at_start = _STARTED
    arguments = list(sys.argv if argv is None else argv)
    script = Path(arguments[0]).resolve()
    arguments[0] = str(script.relative_to(ROOT)) if script.is_relative_to(ROOT) else arguments[0]
    result = Result(
        table=table, argv=tuple(arguments),
        env={key: os.environ[key] for key in RECORDED_ENV if key in os.environ},
        commit=_STARTED_COMMIT, date=datetime.date.today().isoformat(),
        machine=f"{os.cpu_count()} CPUs, load {load_at_start:.1f} at start, {platform.system()} {platform.machine()}, "
                f"Python {platform.python_version()}",
        wall_seconds=round(time.perf_counter() - wall, 1), cpu_seconds=round(_cpu_seconds() - cpu, 1))
    print(table.markdown(), flush=True)
    if json_path is not None:
        atomic_write_text(json_path, result.to_json())
        print(f"\nsaved {json_path}", flush=True)
    return result


def _shown(path: Path) -> str:
    """`path` relative to the repository where it lies inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _data(docs: Path) -> Path:
    return docs / "results" / "data"


def _docs_pages(docs: Path) -> list[Path]:
    return sorted(docs.rglob("*.md"))


def quoted_names(docs: Path = DOCS) -> dict[str, list[Path]]:
    """Every result name quoted in the pages under `docs`, with the pages quoting it."""
    names: dict[str, list[Path]] = {}
    for page in _docs_pages(docs):
        for match in _BLOCK.finditer(page.read_text(encoding="utf-8")):
            names.setdefault(match["name"], []).append(page)
    return names


def write_docs(docs: Path = DOCS) -> list[Path]:
    """Rewrite every result block under `docs` from its JSON file; returns the pages changed.

    Raises:
      FileNotFoundError: a block names a result that has no JSON file.
    """
    changed = []
    for page in _docs_pages(docs):
        text = page.read_text(encoding="utf-8")
        new = _BLOCK.sub(lambda m: m["open"] + render(load(m["name"], _data(docs))) + m["close"], text)
        if new != text:
            atomic_write_text(page, new)
            changed.append(page)
    return changed


def static_problems(docs: Path = DOCS) -> list[str]:
    """Blocks that differ from their JSON file or name none, and JSON files no page quotes."""
    problems = []
    quoted = quoted_names(docs)
    for page in _docs_pages(docs):
        for match in _BLOCK.finditer(page.read_text(encoding="utf-8")):
            where = f"{_shown(page)}: block {match['name']}"
            try:
                expected = render(load(match["name"], _data(docs)))
            except FileNotFoundError as error:
                problems.append(f"{where}: {error}")
                continue
            if match["body"] != expected:
                problems.append(f"{where} differs from its JSON file (edited by hand?); `python -m benchmarks.results` rewrites it")
    for path in sorted(_data(docs).rglob("*.json")):
        name = path.relative_to(_data(docs)).with_suffix("").as_posix()
        if name not in quoted:
            problems.append(f"{_shown(path)} is quoted by no docs page; quote it or delete it")
    return problems


def rerun(result: Result, timeout: float = 600.0) -> Result:
    """Run `result`'s command again (same arguments and recorded environment) and load what it saved.

    Raises:
      RuntimeError: the command failed (its last output lines in the message).
    """
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "result.json"
        argv = list(result.argv)
        if "--json" in argv:  # the recorded target is replaced, never overwritten
            del argv[argv.index("--json"):argv.index("--json") + 2]
        argv += ["--json", str(target)]
        env = {**{k: v for k, v in os.environ.items() if k not in RECORDED_ENV}, **result.env}
        done = subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
        # A benchmark may exit non-zero to report what it found (a timeout, a wrong claim) and
        # still save its table: only a missing table is a failed run.
        if not target.is_file():
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
            raise RuntimeError(f"`{result.command}` exited with {done.returncode}:\n{tail}")
        return Result.from_json(target.read_text(encoding="utf-8"))


def differences(recorded: Table, fresh: Table) -> list[str]:
    """The cells (outside timing columns) where a fresh run differs from the recorded table."""
    if recorded.columns != fresh.columns:
        return [f"columns differ: recorded {recorded.columns}, fresh {fresh.columns}"]
    old, new = recorded.compared(), fresh.compared()
    names = [c for c in recorded.columns if c not in recorded.timings]
    problems = [f"{len(old)} rows recorded, {len(new)} rows now"] if len(old) != len(new) else []
    for i, (a, b) in enumerate(zip(old, new)):
        problems += [f"row {i + 1} ({a[0]}), {name}: recorded {x}, now {y}" for name, x, y in zip(names, a, b) if x != y]
    return problems


def reproduction_problems(name: str) -> list[str]:
    """How a fresh run of quoted result `name` differs from its JSON file (empty when it
    reproduces; a result slower than `QUICK_SECONDS` is not re-run and has none).

    Raises:
      FileNotFoundError: `name` has no JSON file.
    """
    result = load(name)
    if not result.quick:
        print(f"  {name}: not re-run ({result.wall_seconds:.0f} s recorded > {QUICK_SECONDS:.0f} s)", flush=True)
        return []
    started = time.perf_counter()
    try:
        fresh = rerun(result)
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        return [f"{name}: {error}"]
    found = differences(result.table, fresh.table)
    print(f"  {name}: re-run in {time.perf_counter() - started:.0f} s, "
          f"{'reproduced' if not found else f'{len(found)} differences'}", flush=True)
    return [f"{name}: {text}" for text in found]


def _reproduction_problems_if_stored(name: str) -> list[str]:
    try:
        return reproduction_problems(name)
    except FileNotFoundError:
        return []  # reported by the static part


def check(rerun_quick: bool = True, only: Sequence[str] = (), jobs: int | None = None) -> list[str]:
    """Every problem with the quoted results (empty when all hold); see the module docstring.

    Args:
      rerun_quick: also re-run the quick results and compare their cells.
      only: re-run just these result names (default: every quick one).
      jobs: re-runs at a time, each its own process (default: the machine's CPU count). Cells
        do not depend on it (timings are not compared).
    """
    problems = static_problems()
    if not rerun_quick:
        return problems
    names = [name for name in sorted(quoted_names()) if not only or name in only]
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        for found in pool.map(_reproduction_problems_if_stored, names):
            problems += found
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="check the blocks and re-run the quick results instead of writing")
    parser.add_argument("--no-rerun", action="store_true", help="with --check: only compare blocks with their JSON files")
    parser.add_argument("--only", nargs="*", default=(), metavar="NAME", help="with --check: re-run only these results")
    parser.add_argument("--jobs", type=int, help="with --check: re-runs at a time (default: the CPU count)")
    args = parser.parse_args(argv)
    if not args.check:
        for page in write_docs():
            print(f"rewrote {page.relative_to(ROOT)}")
        return 0
    problems = check(rerun_quick=not args.no_rerun, only=args.only, jobs=args.jobs)
    for problem in problems:
        print(problem)
    print(f"{len(quoted_names())} quoted results, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
