"""Staged benchmark models: many programs side by side, large vocabularies, compressed analytically.

One family of programs, scaled by a few numbers (vocabulary ``V``, branches ``N``, ...), compiled
into one model with ``compile_rasp([...])`` and compressed with
``compression.analytic.packed_projection`` at its full-margin width, where the interference bound
claims exactness:

* ``mix{i} = (a_i * token + b_i) mod V`` for ``i < N`` (``a_i`` odd, so a bijection: every value
  occurs): N outputs of V values each, computed by one MLP from the tokens. These hold almost all
  features: a code of many exclusive values packs densely (512 values in about 15 dimensions).
* ``low{j} = mix{j} mod K`` for ``j < M``: outputs of K values computed by a second MLP.
* ``same{j}``: how many positions hold the same ``low{j}`` as this one (an attention head whose
  query and key read ``low{j}``, then an MLP), for ``j < shifts``.

Every s-op is an output (read by the unembedding) or read by a later sub-layer, so every
categorical coordinate gets a direction in the packed projection: the features. Feature
frequencies follow the input distribution: :func:`sample_ids` draws tokens uniformly or from a
Zipf law (``zipf`` > 0), which, through the bijections, gives every branch a power-law profile.
The stages ``1k``, ``4k`` and ``16k`` are the three sizes.

In those stages every feature at a position is a function of that position's token (or, for
``same{j}``, of a few tokens), so features *co-fire*: ``mix3:17`` is on exactly when the token
and every other ``mix`` hold their matching values. The sum of a co-firing class is a sparser
exact dictionary than the true one, and no method that sees only activations can prefer the true
one (:func:`compiler.lab.features.metrics.cofiring` measures it). The *copy* stages
(:class:`CopySpec`, ``1k-copy``, ``4k-copy``, ``16k-copy``) have features that fire
independently: ``tok{s}`` is the token ``s`` positions back (``rasp.lib.shift_by``, one attention
head each), and tokens are drawn independently, so no feature implies another and the true
dictionary is the sparsest one. ``16k-copy`` holds 16,640 such features in 768 dimensions.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

import rasp
from compiler import CompiledModel, compile_rasp
from compiler.errors import LabError
from compression.analytic import interference_bound, packed_projection, packed_width, residual_structure
from compression.analytic.bound import InterferenceBound
from compression.analytic.structure import ResidualStructure
from compression.claims import ENUMERATE_LIMIT, SAMPLES, TIGHTEST_POOL, Check, Claim
from compression.learned.sampling import distinct_inputs, enumerate_inputs, sample_inputs
from compression.task import input_space_of
from craft.bases import TOKENS_NAME
from rasp import lib


@dataclasses.dataclass(frozen=True)
class StageSpec:
    """Sizes of one benchmark model (module docstring)."""

    name: str
    vocab_size: int  # V: tokens are 0..V-1
    branches: int  # N mix outputs
    lows: int = 4  # M low outputs
    output_values: int = 16  # K
    shifts: int = 2  # same{j} programs (attention)
    max_seq_len: int = 4
    width: int | None = None  # d of the stage's model; None: the packed projection's full-margin width

    def programs(self) -> list[rasp.SOp]:
        """The outputs of the stage's model (:func:`stage_programs`)."""
        return stage_programs(self)

    def __post_init__(self) -> None:
        if self.vocab_size < 2 or self.vocab_size & (self.vocab_size - 1):
            raise LabError(f"{self.name}: vocab_size must be a power of two >= 2 (odd multipliers are then "
                             f"bijections), got {self.vocab_size}")
        if not 1 <= self.output_values <= self.vocab_size:
            raise LabError(f"{self.name}: output_values must be in 1..vocab_size, got {self.output_values}")
        if self.branches < 1 or not 0 <= self.shifts <= self.lows <= self.branches:
            raise LabError(f"{self.name}: need branches >= 1 and 0 <= shifts <= lows <= branches")


@dataclasses.dataclass(frozen=True)
class CopySpec:
    """A stage whose features fire independently (module docstring): ``tok{s}``, the token ``s``
    positions back, for ``s = 1 .. offsets``; inputs are ``offsets + 1`` tokens long at most.
    ``width`` is d (None: the packed projection's full-margin width)."""

    name: str
    vocab_size: int
    offsets: int
    width: int | None = None

    @property
    def max_seq_len(self) -> int:
        return self.offsets + 1

    def programs(self) -> list[rasp.SOp]:
        """``tok1 .. tok{offsets}``: one attention head each, read by the unembedding."""
        return [rasp.categorical(lib.shift_by(s, rasp.tokens)).named(f"tok{s}") for s in range(1, self.offsets + 1)]

    def __post_init__(self) -> None:
        if self.vocab_size < 2 or self.offsets < 1:
            raise LabError(f"{self.name}: need vocab_size >= 2 and offsets >= 1, got {self.vocab_size}, "
                             f"{self.offsets}")


# The benchmark's stages by name (module docstring): `build_stage(STAGES[name])` builds one.
STAGES: dict[str, StageSpec | CopySpec] = {
    "1k": StageSpec("1k", 64, 15),
    "4k": StageSpec("4k", 128, 31),
    "16k": StageSpec("16k", 512, 31),
    "1k-copy": CopySpec("1k-copy", 64, 16),
    "4k-copy": CopySpec("4k-copy", 128, 32),
    # SynthSAEBench's width. The full-margin width is 1,091; the interference bound still claims
    # exactness at 768 (largest load 0.75), and no longer at 576.
    "16k-copy": CopySpec("16k-copy", 256, 64, width=768),
}


def stage_programs(spec: StageSpec) -> list[rasp.SOp]:
    """The outputs of the stage's model, in order: mix, low, same."""
    v, k = spec.vocab_size, spec.output_values
    mixes: list[rasp.SOp] = []
    for i in range(spec.branches):
        mixes.append(rasp.categorical(rasp.Map(_affine((2 * i + 1) % v, (37 * i + 11) % v, v), rasp.tokens)).named(f"mix{i}"))
    lows: list[rasp.SOp] = [rasp.categorical(rasp.Map(lambda x: x % k, mixes[j], simplify=False)).named(f"low{j}")
                            for j in range(spec.lows)]
    counts: list[rasp.SOp] = [rasp.categorical(rasp.SelectorWidth(rasp.Select(lows[j], lows[j], rasp.Comparison.EQ)))
                              .named(f"same{j}") for j in range(spec.shifts)]
    return mixes + lows + counts


def _affine(a: int, b: int, v: int) -> Callable[[int], int]:
    """`x -> (a x + b) mod v`."""
    return lambda x: (a * x + b) % v


@dataclasses.dataclass(frozen=True, eq=False)
class Stage:
    """A compiled, analytically compressed benchmark model."""

    spec: StageSpec | CopySpec
    programs: tuple[rasp.SOp, ...]
    compiled: CompiledModel
    projection: np.ndarray  # W, [D, d]
    structure: ResidualStructure  # what the projection was built from (narrower widths: packed_projection)
    claim: Claim  # the interference bound's proof with its check on the model (compression.claims)
    seconds: dict[str, float]  # compile, structure, projection, check

    @property
    def d(self) -> int:
        return int(self.projection.shape[1])

    @property
    def claims_exact(self) -> bool:
        """Published as exact: the bound proves it and the check finds no wrong input."""
        return self.claim.exact

    @property
    def max_load(self) -> float:
        return self.claim.max_load


def build_stage(spec: StageSpec | CopySpec, d: int | None = None, seed: int = 0, samples: int = SAMPLES) -> Stage:
    """Compile ``spec``'s programs into one model and compress it with the packed projection.

    Args:
        spec: the stage sizes.
        d: the compressed width; None for the stage's own ``width``, or when that is None too, the
            packed projection's full-margin width (where its bound is meant to hold). Smaller
            widths narrow the widest code blocks.
        seed: seed of the codes and of the check's inputs.
        samples: random inputs of the claim's check (every input where there are at most 10^5).

    Returns:
        The :class:`Stage`, with its claim (:func:`stage_claim`).
    """
    seconds = {}
    start = time.perf_counter()
    programs = tuple(spec.programs())
    # Within compile_rasp's default weight guard at every stage: the unembedding is built sparse
    # and the token embedding is (V + 2) x D floats (34 MB at 16k).
    compiled = compile_rasp(list(programs), set(range(spec.vocab_size)), spec.max_seq_len, optimize=False)
    seconds["compile"] = time.perf_counter() - start
    start = time.perf_counter()
    structure = residual_structure(compiled)
    if isinstance(spec, CopySpec):
        structure = tokens_protected(compiled, structure)
    seconds["structure"] = time.perf_counter() - start
    start = time.perf_counter()
    width = d if d is not None else spec.width if spec.width is not None else packed_width(structure, seed)
    w = packed_projection(structure, width, seed)
    bound = interference_bound(structure, w)
    seconds["projection"] = time.perf_counter() - start
    start = time.perf_counter()
    claim = stage_claim(compiled, programs, structure, w, bound, samples, seed)
    seconds["check"] = time.perf_counter() - start
    return Stage(spec, programs, compiled, w, structure, claim, seconds)


def stage_claim(compiled: CompiledModel, programs: tuple[rasp.SOp, ...], structure: ResidualStructure,
                w: np.ndarray, bound: InterferenceBound, samples: int = SAMPLES, seed: int = 0) -> Claim:
    """The stage's exactness claim: the bound's proof and its check (``compression.claims``): every
    input where there are at most 10^5, else ``samples`` distinct random inputs plus up to as many
    from a pool on which the compiled model outputs a value the bound names tightest. The pool
    shrinks as the output widens (20,000 inputs at 256 output columns, 320 at the 16k-copy
    stage's 16,384), so searching it costs about the same at every stage.
    """
    from compiler.lab.features.evaluation import accuracy_of, rasp_references
    from compiler.lab.features.sites import SiteRunner

    space = input_space_of(compiled)
    size = space.size()
    if size <= ENUMERATE_LIMIT:
        ids, kind, tightest = np.asarray(enumerate_inputs(space)), "exhaustive", 0
    else:
        drawn = distinct_inputs(space, samples, seed)
        ids, kind = np.unique(np.concatenate([drawn, _tightest(compiled, bound, samples, seed)]), axis=0), "sampled"
        tightest = len(ids) - len(drawn)
    refs = rasp_references(compiled, programs, ids)
    batch = _batch(compiled)
    accuracy = accuracy_of(compiled, refs, _fixed_batches(SiteRunner(compiled, w).output, batch, compiled.config.pad_id),
                           batch_inputs=batch)
    wrong = int(round((1.0 - accuracy.sequence) * accuracy.inputs))
    check = Check(kind, accuracy.inputs, size, wrong, tightest, None if kind == "exhaustive" else seed)
    return Claim(structure.residual_dim, int(w.shape[1]), bound.claims_exact, bound.max_load, check)


def _fixed_batches(run, batch: int, pad: int):
    """``run`` on a batch padded with PAD rows to ``batch`` rows (one compilation for every call)."""
    def padded(ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(ids)
        filler = np.full((batch - len(ids), ids.shape[1]), pad, ids.dtype)
        return np.asarray(run(np.concatenate([ids, filler])))[: len(ids)]

    return padded


def _batch(compiled: CompiledModel) -> int:
    """Inputs per forward pass that keep the logits near 64 MB."""
    columns = max(1, int(compiled.config.unembed.shape[1]))
    return max(1, min(500, 2 ** 24 // (columns * (compiled.config.max_seq_len + 1))))


def _tightest(compiled: CompiledModel, bound: InterferenceBound, count: int, seed: int) -> np.ndarray:
    """Up to ``count`` pool inputs whose compiled output puts a column of ``bound.tightest`` on."""
    columns = int(compiled.config.unembed.shape[1])
    if not bound.tightest:
        return np.zeros((0, compiled.config.max_seq_len + 1), np.int32)
    pool = sample_ids(compiled, max(count, TIGHTEST_POOL * 256 // max(256, columns)), seed + 1)
    batch = _batch(compiled)
    run = _fixed_batches(lambda ids: compiled.forward(compiled.params, jnp.asarray(ids), outputs_only=True).output,
                         batch, compiled.config.pad_id)
    hits = []
    for start in range(0, len(pool), batch):
        part = pool[start:start + batch]
        out = run(part)
        if out.ndim == 2:
            hits.append(np.ones(len(part), bool))
            continue
        on = np.zeros(out.shape[:2], bool)
        for program in compiled.output_parts:  # each program's value as the model's decoder reads it
            own = np.arange(columns)[program.columns]
            if program.numerical:  # a number is read at every position
                on |= bool(np.isin(own, bound.tightest).any())
                continue
            index = program.encoder.value_indices(out[..., program.columns])
            on |= np.isin(own[np.maximum(index, 0)], bound.tightest) & (index >= 0) if own.size else False
        real = part != compiled.config.pad_id
        real[:, 0] = False
        hits.append(np.any(on & real, axis=1))
    return pool[np.concatenate(hits)][:count]


def tokens_protected(compiled: CompiledModel, structure: ResidualStructure) -> ResidualStructure:
    """``structure`` with the token values on their own axes. A copy head writes the token's code
    as it reads it, overlaps included, so copies of superposed tokens are not clean codes of the
    copied s-op (measured: 7.8 % of inputs right at the copy stage's packed width); with the tokens
    orthonormal every copy is exact and only the copies are packed."""
    tokens = [i for i, label in enumerate(compiled.residual_labels)
              if label.startswith(f"{TOKENS_NAME}:") and label not in (f"{TOKENS_NAME}:BOS", f"{TOKENS_NAME}:PAD")]
    return dataclasses.replace(structure, protected=tuple(sorted(set(structure.protected) | set(tokens))))


def sample_ids(compiled: CompiledModel, count: int, seed: int = 0, zipf: float = 0.0) -> np.ndarray:
    """``[count, max_seq_len + 1]`` random inputs: uniform length 1..max_seq_len, tokens uniform
    (``zipf`` 0) or with probability proportional to ``1 / rank ** zipf`` (ranks in vocabulary order).

    Args:
        compiled: the model whose input space (vocabulary, ``max_seq_len``, BOS and PAD ids) the
            inputs are drawn from.
        count: how many inputs.
        seed: seed of the JAX random key; the same seed gives the same inputs.
        zipf: the Zipf exponent of the token distribution; 0 (or less) for uniform tokens.

    Returns:
        ``[count, max_seq_len + 1]`` int32 token ids: BOS, the tokens, PAD after each input's end.
    """
    return np.asarray(sample_inputs(jax.random.key(seed), input_space_of(compiled), count, zipf=max(zipf, 0.0)))
