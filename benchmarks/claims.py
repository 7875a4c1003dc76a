"""The claims fuzz: is every exactness claim of the interference bound true?

For random RASP programs (those of the differential fuzz, `compiler.fuzzing.driver.program_spec`)
and, with `--library`, the library programs (`compiler.examples.CATALOGUE`) at a few sizes, each
compiled optimised and not, causal and not (all four, or `--configs K` of them chosen per program
with a seeded draw), this builds the residual structure and asks `compression.claims.claim_exactness`
whether the model compressed by W is exact, for:

* `identity`: W = I, the compiled model itself; its check compares the compiled model with RASP;
* `packed-full`, `packed-mid`, `packed-min`: the packed projection at its full-margin width
  `min(packed_width, D)`, at the narrowest width it accepts (`min_width(structure, "packed")`)
  and half-way between (a width equal to a wider one is left out);
* `random`: a random projection at the full-margin width.

It counts the programs compiled, refused (`CompilerError`, bucketed as the fuzz driver does) and
untested (RASP rejects every checked input, or the output has no values), the claims the bound
makes, the **wrong claims** (the bound claims exactness and the check finds a wrong input: a
defect of the bound) and the **silent mismatches** (the compiled model, W = I, disagrees with
RASP on a checked input although the compiler did not refuse). A wrong claim or mismatch is
stored with the program's source and a witness input. Input spaces up to 10^5 are checked on
every input, larger ones on 2,000 random inputs plus those where the bound's margin is tightest
(`claim_exactness`).

    python benchmarks/claims.py -n 10000 --seed 0 --jobs 2 --results claims.json
    python benchmarks/claims.py -n 0 --library --library-sizes 3,5,10

A program's configurations share `--program-timeout` equally (one past its share is recorded
as a timeout, as is a crash, and the others still run); with
`--results` every program's records are saved atomically every few programs in the fuzz
driver's results format (`compiler.fuzzing.checkpoint`) and a rerun computes only the missing
ones. Workers are the driver's recycled process pool (`--jobs`; with one job and more than 40
programs, one recycled worker), and each program clears JAX's caches when done, so a long run's
memory stays bounded. Random program `i` has index `i`;
library program `name` at size `s` has the negative index `-(1000 * position + s)` (its position
in the catalogue), so runs with and without `--library` share one results file. Exits 1 when a
wrong claim, a silent mismatch, a crash or a timeout was found.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import random
import signal
import statistics
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Hashable, Iterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax
import jax.numpy as jnp
import numpy as np
from tqdm import tqdm

from benchmarks.results import Table, add_json_argument, publish
from compiler import compile_rasp
from compiler.atomic import check_target
from compiler.errors import CausalSemanticsWarning, CompilerError
from compiler.examples import CATALOGUE
from compiler.fuzzing import checkpoint, driver
from compiler.fuzzing.buckets import refusal_bucket
from compiler.fuzzing.program_spec import build, to_source
from compiler.model.encoders import EMPTY_THRESHOLD
from compression import evaluation
from compression.analytic import (
    min_width,
    packed_projection,
    packed_width,
    random_projection,
    residual_structure,
)
from compression.analytic.bound import interference_bound
from compression.analytic.structure import ResidualStructure
from compression.claims import (
    ENUMERATE_LIMIT,
    EXACT,
    NOT_CLAIMED,
    SAMPLES,
    WRONG_CLAIM,
    Claim,
    ClaimInputs,
    claim_exactness,
    claim_inputs,
)
from compression.experiments.sweep import UNIQUE_TOKENS
from compression.task import CompressionTask, frozen_from_compiled, input_space_of
from rasp import rasp

# (optimize, causal) of the four compilations of a program.
CONFIGS: tuple[tuple[bool, bool], ...] = ((True, False), (True, True), (False, False), (False, True))
LIBRARY_SIZES = (3, 5, 10)
PROGRAM_TIMEOUT = 600.0  # seconds one program (all its configurations) may take
POOL_MARGIN = 300.0  # extra seconds a worker process gets past the program's time before it is killed
CHECKPOINT_EVERY = 20  # programs between two saves of the results file
LIBRARY_STRIDE = 1000  # library index = -(LIBRARY_STRIDE * catalogue position + size)
# What a configuration can end as.
COMPILED, REFUSED, UNTESTED, CRASH, TIMEOUT = "compiled", "refused", "untested", "CRASH", "TIMEOUT"
ROLES = ("identity", "packed-full", "packed-mid", "packed-min", "random")


@dataclasses.dataclass(frozen=True)
class ClaimsOptions:
    """What a claims run checks (`settings_key`: what a resumed run must share)."""

    programs: int = 100
    seed: int = 0
    configs: int = len(CONFIGS)  # configurations per program (all, or a seeded choice of this many)
    samples: int = SAMPLES  # random inputs of a sampled check
    settings: tuple[tuple[tuple[Hashable, ...], int], ...] = driver.SETTINGS
    library_sizes: tuple[int, ...] = ()  # sizes of the library programs (empty: none)
    timeout: float = PROGRAM_TIMEOUT

    resume_hint = "--seed, --configs, --samples and --settings"

    def settings_key(self) -> dict[str, Any]:
        """The options deciding every stored record (not `programs`, the library or the timeout)."""
        return {"fuzz": "claims", "seed": self.seed, "configs": self.configs, "samples": self.samples,
                "settings": [[[repr(token) for token in vocab], length] for vocab, length in self.settings]}


@dataclasses.dataclass(frozen=True)
class WidthClaim:
    """One projection's claim: the bound's verdict and what its check found."""

    role: str  # one of ROLES
    d: int
    status: str  # compression.claims: "exact" | "not claimed" | "wrong claim"
    load: float | None  # the bound's output load (below 1: it claims exactness; None: infinite)
    inputs: int  # inputs checked (RASP accepts them)
    wrong: int  # of which the model gets wrong
    tightest: int  # of which the bound named tightest (sampled checks)
    seconds: float
    witness: str = ""  # a wrong input, for a wrong claim or a wrong identity
    warnings: str = ""  # what the bound or the check warned (e.g. an overflow), distinct messages


@dataclasses.dataclass(frozen=True)
class ConfigResult:
    """One compilation of a program and its claims."""

    optimize: bool
    causal: bool
    status: str  # COMPILED, REFUSED, UNTESTED, CRASH or TIMEOUT
    reason: str = ""
    residual_dim: int = 0
    check: str = ""  # "exhaustive" | "sampled"
    space: int = 0  # inputs in the program's input space
    claims: tuple[WidthClaim, ...] = ()
    seconds: float = 0.0

    @property
    def name(self) -> str:
        return config_name(self.optimize, self.causal)

    @property
    def mismatch(self) -> bool:
        """The compiled model (W = I) is wrong on a checked input it did not refuse."""
        return any(c.role == "identity" and c.wrong > 0 for c in self.claims)

    @property
    def wrong_claims(self) -> tuple[WidthClaim, ...]:
        return tuple(c for c in self.claims if c.status == WRONG_CLAIM)


@dataclasses.dataclass(frozen=True)
class ProgramClaims:
    """Every configuration of one program (the results file's row)."""

    index: int
    name: str  # "random" or the library program's name
    size: int  # random: operations; library: vocabulary size and length
    setting: int  # random: the (vocab, max_seq_len) setting; library: -1
    configs: tuple[ConfigResult, ...]
    seconds: float = 0.0
    source: str = ""  # kept only when a configuration failed (wrong claim, mismatch, crash)

    @property
    def label(self) -> str:
        """`program 12` (random) or `sort@5` (library, at its size)."""
        return f"program {self.index}" if self.index >= 0 else f"{self.name}@{self.size}"

    @property
    def failed(self) -> bool:
        return any(c.mismatch or c.wrong_claims or c.status in (CRASH, TIMEOUT) for c in self.configs)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ProgramClaims:
        """A row of the results file read back (`compiler.fuzzing.checkpoint.load`)."""
        configs = tuple(ConfigResult(**{**c, "claims": tuple(WidthClaim(**w) for w in c["claims"])})
                        for c in row["configs"])
        return cls(**{**row, "configs": configs})

    def mentions(self, text: str) -> bool:
        """Whether a configuration's status or reason, or a claim's status or witness, contains
        `text` (`--redo`)."""
        return any(text in c.status or text in c.reason or any(text in w.status or text in w.witness for w in c.claims)
                   for c in self.configs)


def config_name(optimize: bool, causal: bool) -> str:
    return f"{'opt' if optimize else 'unopt'}/{'causal' if causal else 'non-causal'}"


# -- the programs ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Case:
    """A program to compile: how to build it, its vocabulary and length, and its source."""

    name: str
    size: int
    setting: int
    program: Callable[[], rasp.SOp]
    vocab: tuple[Hashable, ...]
    max_seq_len: int
    unique_tokens: bool
    source: Callable[[], str]


def library_index(name: str, size: int) -> int:
    """The results-file index of library program `name` at `size` (module docstring)."""
    return -(LIBRARY_STRIDE * list(CATALOGUE).index(name) + size)


def library_indices(sizes: Sequence[int]) -> list[int]:
    """Every library program at every size, in catalogue order."""
    return [library_index(name, size) for name in CATALOGUE for size in sizes]


def case_of(options: ClaimsOptions, index: int) -> Case:
    """The program of `index`: random program `index`, or a library program (negative)."""
    if index < 0:
        position, size = divmod(-index, LIBRARY_STRIDE)
        example = list(CATALOGUE.values())[position]
        return Case(example.name, size, -1, lambda: example.build(size), tuple(example.scaled_vocab(size)), size,
                    example.name in UNIQUE_TOKENS, lambda: example.source(size))
    spec, vocab, max_seq_len = driver.program_spec(options, index)
    return Case("random", spec.size, index % len(options.settings), lambda: build(spec), tuple(vocab),
                max_seq_len, False, lambda: to_source(spec))


def chosen_configs(options: ClaimsOptions, index: int) -> tuple[tuple[bool, bool], ...]:
    """All four configurations, or `options.configs` of them drawn with the program's seed."""
    if options.configs >= len(CONFIGS):
        return CONFIGS
    picked = random.Random(f"claims:{options.seed}:{index}").sample(range(len(CONFIGS)), options.configs)
    return tuple(CONFIGS[i] for i in sorted(picked))


def program_seed(options: ClaimsOptions, index: int) -> int:
    """The seed of a program's random projection and sampled checks."""
    return (options.seed * 1_000_003 + index) % 2**31


# -- one configuration -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class MemoTask(CompressionTask):
    """A task whose RASP references are computed once per input: the checks of a configuration's
    widths share most of their inputs, and RASP is the slow part of a check."""

    memo: dict[tuple[Hashable, ...], Any] = dataclasses.field(default_factory=dict, repr=False)

    def reference(self, tokens: list[Hashable]) -> list[Any]:
        """As `CompressionTask.reference` (a rejection raised again), remembered."""
        key = tuple(tokens)
        if key not in self.memo:
            try:
                self.memo[key] = super().reference(tokens)
            except rasp.RaspEvaluationError as error:
                self.memo[key] = error
        found = self.memo[key]
        if isinstance(found, rasp.RaspEvaluationError):
            raise rasp.RaspEvaluationError(str(found))
        return found


def projections(structure: ResidualStructure, seed: int) -> list[tuple[str, np.ndarray]]:
    """The projections each configuration is claimed at (module docstring), identity first."""
    dim = structure.residual_dim
    full, narrow = min(packed_width(structure), dim), min_width(structure, "packed")
    widths = {"packed-full": full, "packed-mid": (full + narrow) // 2, "packed-min": narrow}
    found = [("identity", np.eye(dim, dtype=np.float32))]
    seen: set[int] = set()
    for role, d in widths.items():
        if d not in seen and d <= dim:
            seen.add(d)
            found.append((role, packed_projection(structure, d)))
    for d in (full, len(structure.protected) + 1):
        if d <= dim:
            try:
                found.append(("random", random_projection(structure, d, seed)))
                break
            except ValueError:  # no room beside the protected axes; try one more column
                continue
    return found


def _model_output(task: CompressionTask, w: np.ndarray, row: np.ndarray) -> list[Any]:
    """What the model compressed by `w` decodes at the real positions of input `row`."""
    model = task.model
    out = np.asarray(model.forward(model.params, jnp.asarray(row[None]), projection=jnp.asarray(w)).output)[0]
    real = [p for p in range(1, len(row)) if row[p] != model.pad_id]
    if model.output_kind == "numerical":
        return [float(out[p]) for p in real]
    values = task.compiled.output_encoder.values
    return [values[int(np.argmax(out[p]))] if out[p].size and out[p].max() >= EMPTY_THRESHOLD else None
            for p in real]


def witness(task: CompressionTask, structure: ResidualStructure, w: np.ndarray, claim: Claim,
            inputs: ClaimInputs) -> str:
    """One input the model compressed by `w` gets wrong, with RASP's output and the model's: the
    check's inputs rebuilt (every input, or random ones plus the bound's tightest)."""
    check, _, _ = inputs.check_for(interference_bound(structure, w))  # the claim's very inputs
    wrong = check.wrong_inputs(w, shared_shape=False)  # W at its own width, as claim_exactness runs it
    if not len(wrong):
        return "(no wrong input found again)"
    row = np.asarray(check.refs.ids[wrong[0]])
    tokens = task.space.decode(row)
    return (f"input {tokens!r}: rasp {task.reference(tokens)!r}, model {_model_output(task, w, row)!r} "
            f"(tolerance {check.atol:g})")


def _width_claim(task: CompressionTask, structure: ResidualStructure, role: str, w: np.ndarray,
                 inputs: ClaimInputs) -> WidthClaim:
    """One projection's claim on the configuration's shared `inputs`, with the warnings it raised
    (recorded instead of printed)."""
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        claim = claim_exactness(task, w, structure, samples=inputs.samples, seed=inputs.seed, shared_shape=True,
                                inputs=inputs)
    load = float(f"{claim.max_load:.4g}") if np.isfinite(claim.max_load) else None  # 4 digits: a small file
    found = ""
    if claim.check.wrong and (claim.status == WRONG_CLAIM or role == "identity"):
        found = witness(task, structure, w, claim, inputs)
    return WidthClaim(role, claim.d, claim.status, load, claim.check.inputs, claim.check.wrong,
                      claim.check.tightest, round(time.perf_counter() - started, 3), found, _warned(caught))


def _warned(caught: Sequence[warnings.WarningMessage]) -> str:
    """The distinct warnings of a claim, one `Category at file:line: message` each, `; `-joined."""
    seen = dict.fromkeys(f"{m.category.__name__} at {Path(m.filename).name}:{m.lineno}: {str(m.message)[:100]}"
                         for m in caught)
    return "; ".join(seen)


def _compiled(case: Case, optimize: bool, causal: bool) -> CompressionTask:
    program = case.program()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CausalSemanticsWarning)
        compiled = compile_rasp(program, set(case.vocab), case.max_seq_len, causal=causal, optimize=optimize)
    return MemoTask(case.name, program, compiled, frozen_from_compiled(compiled),
                    input_space_of(compiled, unique_tokens=case.unique_tokens), causal)


def _config_result(optimize: bool, causal: bool, started: float, status: str, reason: str = "",
                   task: CompressionTask | None = None, claims: Sequence[WidthClaim] = ()) -> ConfigResult:
    """A configuration's record, stamped with the seconds since `started`."""
    space = task.space.size() if task is not None else 0
    kind = "" if task is None else ("exhaustive" if space <= ENUMERATE_LIMIT else "sampled")
    dim = task.model.residual_dim if task is not None else 0
    return ConfigResult(optimize, causal, status, reason, dim, kind, space, tuple(claims),
                        round(time.perf_counter() - started, 3))


def check_config(case: Case, optimize: bool, causal: bool, seed: int, samples: int) -> ConfigResult:
    """Compile `case` one way and claim each projection (identity first; a configuration whose
    identity check has no input RASP accepts is untested and claims nothing more)."""
    started = time.perf_counter()
    try:
        task = _compiled(case, optimize, causal)
    except CompilerError as error:
        return _config_result(optimize, causal, started, REFUSED, refusal_bucket(str(error)))
    except ValueError as error:  # CompressionTask refuses an output with no values
        if "has no values" not in str(error):
            raise
        return _config_result(optimize, causal, started, UNTESTED, "the output has no values")
    structure = residual_structure(task.compiled)
    inputs = claim_inputs(task, samples, seed)  # every width's check starts from the same inputs
    claims: list[WidthClaim] = []
    for role, w in projections(structure, seed):
        claims.append(_width_claim(task, structure, role, w, inputs))
        if role == "identity" and claims[0].inputs == 0:
            return _config_result(optimize, causal, started, UNTESTED, "the evaluator rejects every checked input",
                                  task, claims)
    return _config_result(optimize, causal, started, COMPILED, "", task, claims)


def _crash(optimize: bool, causal: bool, stage: str, error: BaseException, started: float) -> ConfigResult:
    """A configuration that raised: the error and where (its innermost frame)."""
    frame = traceback.extract_tb(error.__traceback__)[-1] if error.__traceback__ else None
    where = f" at {Path(frame.filename).name}:{frame.lineno}" if frame else ""
    message = str(error).splitlines()[0][:200] if str(error) else ""
    return _config_result(optimize, causal, started, CRASH, f"{stage}: {type(error).__name__}: {message}{where}")


# -- one program -------------------------------------------------------------------------------


class ProgramTimeout(BaseException):
    """A configuration ran past its share of the program's time limit (a BaseException, so no
    `except Exception` on the way swallows it)."""


# Packages whose Python code is never interrupted: an exception raised inside JAX's dispatch
# left a later `np.asarray` of a JAX array waiting forever (seen in a run); Haiku keeps global
# frame state while a model is applied.
UNSAFE_PACKAGES = ("jax", "jaxlib", "haiku")
RETRY_SECONDS = 0.25  # how soon an expired limit looks again for a safe point


def _unsafe(frame: Any) -> bool:
    """Whether `frame` or a caller of it runs code of `UNSAFE_PACKAGES`."""
    while frame is not None:
        parts = Path(frame.f_code.co_filename).parts
        if any(package in parts for package in UNSAFE_PACKAGES):
            return True
        frame = frame.f_back
    return False


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise `ProgramTimeout` in this (main) thread once `seconds` have passed and it runs none of
    `UNSAFE_PACKAGES` (until then the limit looks again every `RETRY_SECONDS`); a no-op off the
    main thread or without SIGALRM."""
    if not hasattr(signal, "SIGALRM") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        if _unsafe(frame):
            signal.setitimer(signal.ITIMER_REAL, RETRY_SECONDS)
            return
        raise ProgramTimeout(f"over {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def clear_caches() -> None:
    """Drop the compiled executables of the program just checked (each program's models are new,
    so nothing is lost): the jitted scoring functions `compression.evaluation` keeps per model and
    JAX's own caches. Without this a long run's memory grows with every program."""
    evaluation._SCORES_CACHE.clear()
    jax.clear_caches()


def claims_of_program(options: ClaimsOptions, index: int) -> ProgramClaims:
    """Every chosen configuration of program `index` with its claims (the benchmark's unit of
    work). The configurations share `options.timeout` equally; one past its share, or one that
    crashes, is recorded as such and the others still run.

    Args:
      options: the run's options.
      index: a random program (`>= 0`) or a library program (`library_index`).
    Returns:
      The program's `ProgramClaims` (with its source when a configuration failed).
    """
    started = time.perf_counter()
    configs = chosen_configs(options, index)
    seed, share = program_seed(options, index), options.timeout / len(configs)
    case: Case | None = None
    try:
        case = case_of(options, index)
        done = [_limited(case, o, c, seed, options.samples, share) for o, c in configs]
    except Exception as error:
        done = [_crash(o, c, "build", error, started) for o, c in configs]
    finally:
        clear_caches()
    result = ProgramClaims(index, case.name if case else "?", case.size if case else 0, case.setting if case else -1,
                           tuple(done), round(time.perf_counter() - started, 3))
    return dataclasses.replace(result, source=_source(case)) if result.failed and case else result


def _limited(case: Case, optimize: bool, causal: bool, seed: int, samples: int, seconds: float) -> ConfigResult:
    """`check_config` within `seconds` (a TIMEOUT record past them), a crash recorded."""
    started = time.perf_counter()
    try:
        with time_limit(seconds):
            return check_config(case, optimize, causal, seed, samples)
    except ProgramTimeout as error:
        return _config_result(optimize, causal, started, TIMEOUT, str(error))
    except Exception as error:
        return _crash(optimize, causal, "claims", error, started)


def _source(case: Case) -> str:
    try:
        return f"# vocab {list(case.vocab)!r}, max_seq_len {case.max_seq_len}\n{case.source()}"
    except Exception as error:
        return f"(no source: {type(error).__name__}: {error})"


def claims_worker(task: tuple[ClaimsOptions, int]) -> ProgramClaims:
    """`claims_of_program` for `compiler.fuzzing.driver.run`'s pool (a module-level function)."""
    return claims_of_program(*task)


def lost_claims(task: tuple[ClaimsOptions, int], reason: str) -> ProgramClaims:
    """The record of a program whose worker process was killed past its time (every configuration
    a TIMEOUT) or died (a CRASH), for `compiler.fuzzing.driver.run`."""
    options, index = task
    status = CRASH if "died" in reason else TIMEOUT
    configs = tuple(_config_result(o, c, time.perf_counter(), status, f"worker: {reason}")
                    for o, c in chosen_configs(options, index))
    try:
        case: Case | None = case_of(options, index)
    except Exception:
        case = None
    return ProgramClaims(index, case.name if case else "?", case.size if case else 0,
                         case.setting if case else -1, configs, 0.0, _source(case) if case else "")


# -- the table ---------------------------------------------------------------------------------


CONFIG_COLUMNS = ("configuration", "configs", "compiled", "refused", "untested", "crash", "timeout", "claims", "wrong", "mismatch")


def _row(configs: Sequence[ConfigResult]) -> tuple[int, ...]:
    counts = collections.Counter(c.status for c in configs)
    claims = [w for c in configs if c.status == COMPILED for w in c.claims]
    made = sum(w.status != NOT_CLAIMED for w in claims)
    wrong = sum(w.status == WRONG_CLAIM for w in claims)
    mismatches = sum(c.mismatch for c in configs)
    return (len(configs), counts[COMPILED], counts[REFUSED], counts[UNTESTED], counts[CRASH], counts[TIMEOUT],
            made, wrong, mismatches)


def config_rows(results: Sequence[ProgramClaims]) -> list[tuple[str, tuple[int, ...]]]:
    """Per configuration and in all (the columns of `CONFIG_COLUMNS`): how the compilations
    ended, the claims made, the wrong claims and the silent mismatches."""
    configs = [c for r in results for c in r.configs]
    names = [config_name(optimize, causal) for optimize, causal in CONFIGS]
    return [(name, _row([c for c in configs if c.name == name])) for name in names] + [("all", _row(configs))]


def config_table(results: Sequence[ProgramClaims]) -> list[str]:
    """`config_rows` as aligned text."""
    widths = [22] + [max(7, len(c)) for c in CONFIG_COLUMNS[1:]]
    lines = ["  " + " ".join(f"{c:{w}s}" if i == 0 else f"{c:>{w}s}" for i, (c, w) in enumerate(zip(CONFIG_COLUMNS, widths)))]
    for label, counts in config_rows(results):
        lines.append("  " + f"{label:22s} " + " ".join(f"{n:{w}d}" for n, w in zip(counts, widths[1:])))
    return lines


def config_markdown(results: Sequence[ProgramClaims], title: str) -> Table:
    """`config_rows` as a table for docs (thousands separated), captioned with `title`."""
    rows = tuple((label, *(f"{n:,}" for n in counts)) for label, counts in config_rows(results))
    return Table(CONFIG_COLUMNS, rows, caption=title)


def projection_table(results: Sequence[ProgramClaims]) -> list[str]:
    """Per projection (compiled configurations only): claims checked, made, confirmed, wrong,
    how they were checked, and how often an unclaimed width was right anyway."""
    compiled = [c for r in results for c in r.configs if c.status == COMPILED]
    lines = [f"  {'projection':12s} {'checked':>7s} {'claimed':>7s} {'exact':>6s} {'wrong':>6s} "
             f"{'exhaustive':>10s} {'sampled':>7s} {'unclaimed but right':>19s}"]
    for role in ROLES:
        pairs = [(c, w) for c in compiled for w in c.claims if w.role == role]
        status = collections.Counter(w.status for _, w in pairs)
        exhaustive = sum(c.check == "exhaustive" for c, _ in pairs)
        right = sum(w.status == NOT_CLAIMED and w.wrong == 0 for _, w in pairs)
        lines.append(f"  {role:12s} {len(pairs):7d} {status[EXACT] + status[WRONG_CLAIM]:7d} {status[EXACT]:6d} "
                     f"{status[WRONG_CLAIM]:6d} {exhaustive:10d} {len(pairs) - exhaustive:7d} {right:19d}")
    return lines


def _failures(results: Sequence[ProgramClaims], limit: int = 30) -> list[str]:
    """Every wrong claim, silent mismatch, crash and timeout (the first `limit`), with witnesses,
    then the sources of the programs involved."""
    lines, sources = [], {}
    for result in results:
        for config in result.configs:
            dim = f" D={config.residual_dim}" if config.residual_dim else ""
            where = f"{result.label} (size {result.size}) {config.name}{dim}"
            for claim in config.claims:
                if claim.status == WRONG_CLAIM or (claim.role == "identity" and claim.wrong):
                    kind = "WRONG CLAIM" if claim.status == WRONG_CLAIM else "SILENT MISMATCH"
                    lines.append(f"  {kind}: {where} {claim.role} d={claim.d} load {claim.load}: wrong on "
                                 f"{claim.wrong} of {claim.inputs} ({config.check}); {claim.witness}")
                    sources[result.label] = result.source
            if config.status in (CRASH, TIMEOUT):
                lines.append(f"  {config.status}: {where}: {config.reason}")
                sources[result.label] = result.source
    shown = lines[:limit] + ([f"  ... and {len(lines) - limit} more"] if len(lines) > limit else [])
    for label, source in list(sources.items())[:5]:
        shown.append(f"\n  source of {label}:\n" + "\n".join("    " + line for line in source.splitlines()))
    return shown


def _refusals(results: Sequence[ProgramClaims], limit: int = 12) -> list[str]:
    reasons = collections.Counter(c.reason for r in results for c in r.configs if c.status in (REFUSED, UNTESTED))
    return [f"  {count:6d}  {reason}" for reason, count in reasons.most_common(limit)]


def _timing(results: Sequence[ProgramClaims]) -> str:
    seconds = [r.seconds for r in results]
    if not seconds:
        return "no programs"
    return (f"{len(results)} programs, {statistics.fmean(seconds):.1f} s per program (median "
            f"{statistics.median(seconds):.1f}, max {max(seconds):.1f}), {sum(seconds):.0f} s of work")


def summary(results: Sequence[ProgramClaims], seconds: float, computed: int) -> str:
    """The tables of a run: per group (random, library) the configuration and projection tables,
    refusal reasons and timing, then every failure."""
    lines = [f"claims fuzz: {len(results)} programs ({computed} computed in {seconds:.0f} s, "
             f"{len(results) - computed} resumed)"]
    groups = (("random programs", [r for r in results if r.index >= 0]),
              ("library programs", [r for r in results if r.index < 0]))
    for title, group in groups:
        if not group:
            continue
        lines += [f"\n{title}: {_timing(group)}", *config_table(group), "", *projection_table(group)]
        refusals = _refusals(group)
        if refusals:
            lines += ["  refused / untested, by reason:", *refusals]
    totals = [c for r in results for c in r.configs]
    wrong = sum(len(c.wrong_claims) for c in totals if c.status == COMPILED)
    crashes, timeouts = sum(c.status == CRASH for c in totals), sum(c.status == TIMEOUT for c in totals)
    lines.append(f"\nwrong claims: {wrong}   silent mismatches: {sum(c.mismatch for c in totals)}   "
                 f"crashes: {crashes}   timeouts: {timeouts}")
    return "\n".join(lines + _warnings(results) + _failures(results))


def _warnings(results: Sequence[ProgramClaims], limit: int = 8) -> list[str]:
    """How many claims raised each distinct warning, with the first program and width that did."""
    counts: collections.Counter[str] = collections.Counter()
    first: dict[str, str] = {}
    for result in results:
        for config in result.configs:
            for claim in config.claims:
                for text in filter(None, claim.warnings.split("; ")):
                    counts[text] += 1
                    first.setdefault(text, f"{result.label} {config.name} {claim.role} d={claim.d}")
    if not counts:
        return []
    return ["claims that raised a warning (count, first seen, warning):",
            *(f"  {count:6d}  {first[text]}: {text}" for text, count in counts.most_common(limit))]


# -- the command line --------------------------------------------------------------------------


def _sizes(text: str) -> tuple[int, ...]:
    """`"3,5,10"` -> (3, 5, 10), each in 1 .. LIBRARY_STRIDE - 1."""
    try:
        sizes = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of sizes, e.g. 3,5,10") from None
    if not sizes or any(not 1 <= size < LIBRARY_STRIDE for size in sizes):
        raise argparse.ArgumentTypeError(f"library sizes must be between 1 and {LIBRARY_STRIDE - 1}, got {text!r}")
    return sizes


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--programs", type=int, default=100, help="random programs (0: none)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--configs", type=int, default=len(CONFIGS),
                        help="configurations per program: 4 (all) or a seeded choice of 1-3")
    parser.add_argument("--samples", type=int, default=SAMPLES, help="random inputs of a sampled check")
    parser.add_argument("--settings", nargs="*", help='random programs\' vocab:max_seq_len settings, e.g. "1,2,3:4"')
    parser.add_argument("--library", action="store_true", help="also the library programs (compiler.examples)")
    parser.add_argument("--library-sizes", type=_sizes, default=LIBRARY_SIZES, metavar="SIZES",
                        help="sizes (vocabulary and length) of the library programs (default 3,5,10)")
    parser.add_argument("--program-timeout", type=float, default=PROGRAM_TIMEOUT, metavar="SECONDS",
                        help="time of one program, shared equally by its configurations; a "
                             "configuration past its share is recorded as a timeout")
    parser.add_argument("--results", type=Path, help="JSON results file, saved atomically; an existing one is resumed")
    parser.add_argument("--redo", action="append", default=[], metavar="TEXT",
                        help="with --results: compute again the stored programs that mention TEXT (status, reason or witness)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_json_argument(parser)
    return parser


def _options(args: argparse.Namespace) -> ClaimsOptions:
    """The run's options from the parsed flags.

    Raises:
      ValueError: a flag out of range (named in the message).
    """
    if args.programs < 0:
        raise ValueError(f"-n must be 0 or more, got {args.programs}")
    if args.jobs < 1:
        raise ValueError(f"--jobs must be at least 1, got {args.jobs}")
    if not 1 <= args.configs <= len(CONFIGS):
        raise ValueError(f"--configs must be between 1 and {len(CONFIGS)}, got {args.configs}")
    if args.samples < 1:
        raise ValueError(f"--samples must be positive, got {args.samples}")
    if not args.program_timeout > 0:
        raise ValueError(f"--program-timeout must be positive, got {args.program_timeout:g}")
    if args.programs == 0 and not args.library:
        raise ValueError("nothing to run: give -n N (random programs) or --library")
    settings = driver.parse_settings(args.settings) if args.settings else driver.SETTINGS
    return ClaimsOptions(args.programs, args.seed, args.configs, args.samples, settings,
                         tuple(args.library_sizes) if args.library else (), args.program_timeout)


def run_claims(options: ClaimsOptions, indices: Sequence[int], jobs: int = 1) -> Iterator[ProgramClaims]:
    """Each program of `indices` in order, computed by `jobs` processes (the fuzz driver's pool,
    whose workers are replaced every `driver.WORKER_TASKS` programs). One job runs in this process
    when there are no more programs than a worker's lifetime (no worker to start; memory grows
    no further than a worker's would), else in one recycled worker: JAX's memory creeps up over
    hundreds of programs even with its caches cleared."""
    in_process = jobs == 1 and len(indices) <= driver.WORKER_TASKS
    yield from driver.run(options, jobs, indices, options.timeout + POOL_MARGIN, worker=claims_worker,
                          in_process=in_process, lost=lost_claims)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (`--help`).

    Args:
      argv: the arguments (default: `sys.argv[1:]`).
    Returns:
      0, or 1 when a wrong claim, a silent mismatch, a crash or a timeout was found, or 2 for bad
      arguments or a results file that cannot be resumed (refused before any work).
    """
    args = _parser().parse_args(argv)
    try:
        options = _options(args)
        if args.results:
            check_target(args.results)  # a folder, or a path under a file, is refused now, not at the first save
        stored = checkpoint.load(args.results, options, ProgramClaims, args.redo) if args.results else {}
    except (ValueError, CompilerError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    indices = list(range(options.programs)) + library_indices(options.library_sizes)
    results = {i: stored[i] for i in indices if i in stored}
    todo = [i for i in indices if i not in results]
    if results:
        print(f"resuming {args.results}: {len(results)} programs stored, {len(todo)} to compute", flush=True)
    started = time.perf_counter()
    with checkpoint.interrupt_on_terminate():  # SIGTERM saves what was computed, as Ctrl-C does
        _compute(options, todo, args, results)
    ordered = [results[i] for i in indices]
    print(summary(ordered, time.perf_counter() - started, len(todo)))
    if args.json:
        runs = [f"{options.programs:,} random programs (seed {options.seed})"] if options.programs else []
        runs += [f"the library at sizes {', '.join(map(str, options.library_sizes))}"] if options.library_sizes else []
        publish(config_markdown(ordered, f"Claims fuzz, {' and '.join(runs)}: configurations and claims."), args.json)
    return 1 if any(r.failed for r in ordered) else 0


def failure_line(result: ProgramClaims) -> str:
    """One line naming a failed program's failing configurations (printed as the run goes)."""
    parts = []
    for config in result.configs:
        if config.status in (CRASH, TIMEOUT):
            parts.append(f"{config.name} {config.status} {config.reason}")
        bad = [f"{w.role} d={w.d} wrong on {w.wrong}" for w in config.claims
               if w.status == WRONG_CLAIM or (w.role == "identity" and w.wrong)]
        if bad:
            parts.append(f"{config.name} " + ", ".join(bad))
    return f"{result.label}: " + "; ".join(parts)


def _compute(options: ClaimsOptions, todo: Sequence[int], args: argparse.Namespace,
             results: dict[int, ProgramClaims]) -> None:
    """Fill `results` with the programs of `todo`, saving the results file as it goes (and when
    interrupted)."""
    bar = tqdm(total=len(todo), unit="program", desc="claims", disable=args.quiet, file=sys.stderr, mininterval=5)
    unsaved = 0
    try:
        for result in run_claims(options, todo, args.jobs):
            results[result.index] = result
            unsaved += 1
            bar.update()
            if result.failed:
                bar.write(failure_line(result))
            if args.results and unsaved >= CHECKPOINT_EVERY:
                checkpoint.save(args.results, options, results.values())
                unsaved = 0
    finally:
        bar.close()
        if args.results and unsaved:
            checkpoint.save(args.results, options, results.values())


if __name__ == "__main__":
    from benchmarks.claims import main as _main  # the pool's workers load the functions from there

    sys.exit(_main())
