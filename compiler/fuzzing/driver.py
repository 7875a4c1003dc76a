"""The fuzz driver: generate N programs, check each non-causally and causally, summarise.

Program `i` uses generator seed `seed * 1_000_003 + i`, the vocabulary / length setting
`i % len(settings)` and size `3 + (seed + i) % 13`, so any single program can be regenerated.
Failures (MISMATCH, CRASH) are shrunk and written as pytest files into `--out`. With
`--results FILE` the per-program results are saved atomically every few programs and a rerun
resumes from them (`compiler.fuzzing.checkpoint`); `--redo TEXT` re-checks the stored programs
whose outcome mentions TEXT (e.g. a refusal bucket after a fix).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import sys
import tempfile
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from compiler.errors import CompilerError
from compiler.fuzzing import checkpoint, random_programs, regression, workers
from compiler.fuzzing.differential import (
    CRASH,
    EXACT,
    FAILURES,
    MISMATCH,
    REFUSED,
    UNTESTED,
    Outcome,
    check_program,
    sample_inputs,
)
from compiler.fuzzing.program_spec import ProgramSpec, build
from compiler.fuzzing.shrink import Case, shrink
from compiler.model.config import NORMS

# (vocabulary, max_seq_len) settings cycled over the programs.
SETTINGS: tuple[tuple[tuple[Hashable, ...], int], ...] = (
    ((1, 2, 3), 4),
    (("a", "b", "c"), 5),
    ((0, 1, 2, 3, 4), 5),
    ((-1, 0, 1, 2), 3),
    (("a", "b", "c", "d"), 6),
    ((1, 2, 3, 4, 5, 6, 7, 8), 8),
)
MODES = (False, True)  # causal
WORKER_TASKS = 40  # programs per worker process before it is replaced
PROGRAM_TIMEOUT = 900  # seconds one program may take in a worker process before it is killed
CHECKPOINT_EVERY = 50  # programs between two saves of the results file
NORM_EVERY = 3  # every third program is compiled with a norm (LayerNorm, RMSNorm in turn)


@dataclasses.dataclass(frozen=True)
class Options:
    programs: int = 100
    seed: int = 0
    inputs: int = 96
    jax_every: int = 25
    out: Path | None = None
    shrink: bool = True
    settings: tuple[tuple[tuple[Hashable, ...], int], ...] = SETTINGS
    norm_every: int = NORM_EVERY  # every K-th program compiled with a norm (`norm_of`); 0: never


def norm_of(options: Options, index: int) -> str | None:
    """The norm program `index` is compiled with: every `norm_every`-th program a norm,
    LayerNorm and RMSNorm in turn, the others none."""
    if not options.norm_every or index % options.norm_every:
        return None
    return NORMS[(index // options.norm_every) % len(NORMS)]


@dataclasses.dataclass(frozen=True)
class ProgramResult:
    index: int
    size: int
    setting: int
    outcomes: tuple[Outcome, ...]  # one per mode
    failure_files: tuple[str, ...] = ()


def program_spec(options: Options, index: int) -> tuple[ProgramSpec, tuple[Hashable, ...], int]:
    """The `index`-th program of a run and its setting."""
    vocab, max_seq_len = options.settings[index % len(options.settings)]
    size = 3 + (options.seed + index) % 13
    spec = random_programs.generate(options.seed * 1_000_003 + index, size, vocab, max_seq_len)
    return spec, vocab, max_seq_len


def _check(spec: ProgramSpec, case: Case, inputs_budget: int, seed: int, engine: str) -> Outcome:
    program = build(spec)
    inputs = sample_inputs(case.vocab, case.max_seq_len, inputs_budget, seed)
    return check_program(program, case.vocab, case.max_seq_len, case.causal, inputs, engine=engine, norm=case.norm)


def _same_failure(first: Outcome, second: Outcome) -> bool:
    if first.status != second.status:
        return False
    return first.status == MISMATCH or first.reason.split(":")[:2] == second.reason.split(":")[:2]


def run_one(options: Options, index: int) -> ProgramResult:
    """Check program `index` in every mode; shrink and write out failures."""
    spec, vocab, max_seq_len = program_spec(options, index)
    engine = "jax" if options.jax_every and index % options.jax_every == 0 else "numpy"
    outcomes, files = [], []
    for causal in MODES:
        case = Case(tuple(vocab), max_seq_len, causal, norm_of(options, index))
        try:
            outcome = _check(spec, case, options.inputs, index, engine)
        except Exception as error:
            outcome = Outcome(CRASH, f"build: {type(error).__name__}: {error}")
        outcomes.append(outcome)
        if outcome.status in FAILURES and options.out is not None:
            files.append(str(_record_failure(options, index, spec, case, outcome, engine)))
    return ProgramResult(index, spec.size, index % len(options.settings), tuple(outcomes), tuple(files))


def _record_failure(options: Options, index: int, spec: ProgramSpec, case: Case, outcome: Outcome, engine: str) -> Path:
    def still_fails(candidate: ProgramSpec, smaller: Case) -> bool:
        try:
            again = _check(candidate, smaller, max(options.inputs, 256), index, engine)
        except Exception:
            return False
        return _same_failure(outcome, again)

    small_spec, small_case = shrink(spec, case, still_fails) if options.shrink else (spec, case)
    final = _check(small_spec, small_case, max(options.inputs, 256), index, engine)
    assert options.out is not None  # run_one records a failure only when there is a folder for it
    name = f"fuzz_s{options.seed}_p{index}_{'causal' if case.causal else 'noncausal'}"
    origin = (f"seed {options.seed}, program {index}, vocab {list(case.vocab)}, max_seq_len {case.max_seq_len}"
              + ("" if case.norm is None else f", norm {case.norm}"))
    return regression.write_test(options.out, name, small_spec, small_case, final, origin)


def _worker(args: tuple[Options, int]) -> ProgramResult:
    return run_one(*args)


def run(
    options: Options, jobs: int = 1, indices: Sequence[int] | None = None, timeout: float = PROGRAM_TIMEOUT,
    worker: Callable[[tuple[Any, int]], Any] = _worker, in_process: bool | None = None,
    lost: Callable[[tuple[Any, int], str], Any] | None = None,
) -> Iterable[ProgramResult]:
    """Results as they finish, computed by `jobs` processes (in program order with one job, in
    this process); each result's `index` says which program it is.

    `indices` selects the programs to check (default: all `options.programs`). With worker
    processes, a program running past `timeout` seconds (an XLA compile no signal interrupts) has
    its process killed and replaced, and `lost(task, reason)` stands for its result (default:
    `lost_program`, both modes a CRASH naming the reason), as it does for a process that died;
    the other programs go on. `worker` computes one result from `(options, index)` (default:
    `run_one`); another fuzz (`benchmarks/claims.py`) passes its own, a module-level function so
    the workers can load it. `in_process` (default: `jobs <= 1`) runs the tasks in this process;
    False with one job gives one recycled worker, whose memory cannot grow over a long run.
    """
    tasks = [(options, i) for i in (range(options.programs) if indices is None else indices)]
    if jobs <= 1 if in_process is None else in_process:
        yield from map(worker, tasks)
        return
    yield from workers.run_tasks(tasks, jobs, worker, timeout, lost or lost_program, WORKER_TASKS)


def lost_program(task: tuple[Options, int], reason: str) -> ProgramResult:
    """The result of a program whose worker process was killed or died: a CRASH in both modes."""
    options, index = task
    spec, _, _ = program_spec(options, index)
    outcome = Outcome(CRASH, f"worker: {reason}")
    return ProgramResult(index, spec.size, index % len(options.settings), (outcome,) * len(MODES))


def _percent(count: int, total: int) -> str:
    return f"{count:6d} {100.0 * count / max(total, 1):6.2f}%"


def summary(results: Sequence[ProgramResult], seconds: float, checked: int | None = None) -> str:
    """The summary table: classes per mode, refusal reasons, failures, throughput.

    `checked` is how many of `results` this invocation computed (the rest were resumed); the
    throughput is over those.
    """
    lines = []
    n = len(results)
    checked = n if checked is None else checked
    sizes = [r.size for r in results]
    resumed = f", {n - checked} resumed" if checked != n else ""
    lines.append(f"programs: {n}  ({checked / max(seconds, 1e-9):.1f} programs/s checked, {seconds:.0f} s{resumed}); "
                 f"size min/mean/max {min(sizes, default=0)}/{sum(sizes) / max(n, 1):.1f}/{max(sizes, default=0)}")
    for m, causal in enumerate(MODES):
        outs = [r.outcomes[m] for r in results]
        counts = collections.Counter(o.status for o in outs)
        compared = [o.compared for o in outs if o.status == EXACT]
        lines.append(f"\n{'causal' if causal else 'non-causal'} ({n} checks)")
        for status in (EXACT, REFUSED, UNTESTED, MISMATCH, CRASH):
            lines.append(f"  {status:10s} {_percent(counts[status], n)}")
        lines.append(f"  inputs compared per exact program: mean {sum(compared) / max(len(compared), 1):.0f}")
        reasons = collections.Counter(o.reason for o in outs if o.status == REFUSED)
        if reasons:
            lines.append("  refusal reasons (first problem; % of all checks in this mode):")
            for reason, count in reasons.most_common():
                lines.append(f"    {_percent(count, n)}  {reason}")
    failures = [(r, m, o) for r in results for m, o in enumerate(r.outcomes) if o.status in FAILURES]
    lines.append(f"\nMISMATCH + CRASH: {len(failures)}")
    for result, m, outcome in failures[:50]:
        lines.append(f"  program {result.index} ({'causal' if MODES[m] else 'non-causal'}): "
                     f"{outcome.status} {outcome.reason}")
    files = [f for r in results for f in r.failure_files]
    if files:
        lines.append("shrunk reproductions:\n" + "\n".join(f"  {f}" for f in files))
    return "\n".join(lines)


def parse_settings(texts: Sequence[str]) -> tuple[tuple[tuple[Hashable, ...], int], ...]:
    """`"1,2,3:4"` -> ((1, 2, 3), 4); tokens that parse as ints become ints."""
    settings = []
    for text in texts:
        tokens, _, length = text.rpartition(":")
        vocab = tuple(int(t) if t.lstrip("-").isdigit() else t for t in tokens.split(","))
        settings.append((vocab, int(length)))
    return tuple(settings)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The fuzz flags (`python benchmarks/fuzz.py --help`, `tracr-compile fuzz --help`)."""
    parser.add_argument("-n", "--programs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--inputs", type=int, default=96, help="inputs per program (all when fewer exist)")
    parser.add_argument("--jax-every", type=int, default=25,
                        help="run every K-th program through the real JAX model (others: numpy forward); 0: never")
    parser.add_argument("--norm-every", type=int, default=NORM_EVERY,
                        help="compile every K-th program with a norm, LayerNorm and RMSNorm in turn; 0: never")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "tracr_fuzz_failures",
                        help="where shrunk failing tests go")
    parser.add_argument("--no-shrink", action="store_true")
    parser.add_argument("--settings", nargs="*", help='vocab:max_seq_len settings, e.g. "1,2,3:4" "a,b:5"')
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--program-timeout", type=float, default=PROGRAM_TIMEOUT, metavar="SECONDS",
                        help="with --jobs > 1: longest wait for the next program's result before the "
                             "run stops (a killed worker never answers); raise it on a loaded machine")
    parser.add_argument("--results", type=Path,
                        help="JSON file of per-program results, saved atomically as the run goes; "
                             "an existing one (same settings) is resumed")
    parser.add_argument("--redo", action="append", default=[], metavar="TEXT",
                        help="with --results: check again the stored programs whose status or "
                             "refusal reason contains TEXT (repeatable)")


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (`--help`)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run_arguments(parser.parse_args(argv))


def run_arguments(args: argparse.Namespace) -> int:
    """Run the fuzz the parsed flags describe, print the summary; returns the exit code (1: a
    mismatch or crash was found, 2: a bad flag)."""
    if args.program_timeout <= 0:
        print(f"error: --program-timeout must be positive, got {args.program_timeout:g}", file=sys.stderr)
        return 2
    if args.norm_every < 0:
        print(f"error: --norm-every must be 0 or more, got {args.norm_every}", file=sys.stderr)
        return 2
    options = Options(
        programs=args.programs, seed=args.seed, inputs=args.inputs, jax_every=args.jax_every,
        out=args.out, shrink=not args.no_shrink, norm_every=args.norm_every,
        settings=parse_settings(args.settings) if args.settings else SETTINGS,
    )
    try:
        stored = checkpoint.load(args.results, options, ProgramResult, args.redo) if args.results else {}
    except CompilerError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    stored = {i: r for i, r in stored.items() if i < options.programs}
    todo = [i for i in range(options.programs) if i not in stored]
    if stored:
        print(f"resuming {args.results}: {len(stored)} programs stored, {len(todo)} to check", flush=True)
    started = time.perf_counter()
    results = dict(stored)
    bar = tqdm(total=len(todo), unit="program", desc="fuzz", disable=args.quiet, file=sys.stderr, mininterval=5)
    unsaved = 0
    try:
        with checkpoint.interrupt_on_terminate():
            for result in run(options, args.jobs, todo, args.program_timeout):
                results[result.index] = result
                unsaved += 1
                bar.update()
                for outcome in result.outcomes:
                    if outcome.status in FAILURES:
                        bar.write(f"program {result.index}: {outcome.status} {outcome.reason}")
                if args.results and unsaved >= CHECKPOINT_EVERY:
                    checkpoint.save(args.results, options, results.values())
                    unsaved = 0
    finally:  # also when interrupted (Ctrl-C, or SIGTERM): what was computed is kept
        bar.close()
        if args.results and unsaved:
            checkpoint.save(args.results, options, results.values())
    ordered = [results[i] for i in sorted(results)]
    print(summary(ordered, time.perf_counter() - started, checked=len(todo)))
    failed = any(o.status in FAILURES for r in ordered for o in r.outcomes)
    return 1 if failed else 0
