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
one (:func:`compiler.lab.features.metrics.cofiring_classes` measures it). The *copy* stages
(:class:`CopySpec`, ``1k-copy``, ``4k-copy``, ``16k-copy``) have features that fire
independently: ``tok{s}`` is the token ``s`` positions back (``rasp.lib.shift_by``, one attention
head each), and tokens are drawn independently, so no feature implies another and the true
dictionary is the sparsest one. ``16k-copy`` holds 16,640 such features in 768 dimensions.
"""

from __future__ import annotations

import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np

import rasp
from compiler import CompiledModel, compile_rasp
from compression.analytic import interference_bound, packed_projection, packed_width, residual_structure
from compression.analytic.structure import ResidualStructure
from compression.learned.sampling import sample_inputs
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
            raise ValueError(f"{self.name}: vocab_size must be a power of two >= 2 (odd multipliers are then "
                             f"bijections), got {self.vocab_size}")
        if not 1 <= self.output_values <= self.vocab_size:
            raise ValueError(f"{self.name}: output_values must be in 1..vocab_size, got {self.output_values}")
        if self.branches < 1 or not 0 <= self.shifts <= self.lows <= self.branches:
            raise ValueError(f"{self.name}: need branches >= 1 and 0 <= shifts <= lows <= branches")


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
            raise ValueError(f"{self.name}: need vocab_size >= 2 and offsets >= 1, got {self.vocab_size}, "
                             f"{self.offsets}")


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
    mixes = []
    for i in range(spec.branches):
        a, b = (2 * i + 1) % v, (37 * i + 11) % v
        mixes.append(rasp.categorical(rasp.Map(lambda x, a=a, b=b: (a * x + b) % v, rasp.tokens)).named(f"mix{i}"))
    lows = [rasp.categorical(rasp.Map(lambda x: x % k, mixes[j], simplify=False)).named(f"low{j}")
            for j in range(spec.lows)]
    counts = [rasp.categorical(rasp.SelectorWidth(rasp.Select(lows[j], lows[j], rasp.Comparison.EQ)))
              .named(f"same{j}") for j in range(spec.shifts)]
    return mixes + lows + counts


@dataclasses.dataclass(frozen=True, eq=False)
class Stage:
    """A compiled, analytically compressed benchmark model."""

    spec: StageSpec | CopySpec
    programs: tuple[rasp.SOp, ...]
    compiled: CompiledModel
    projection: np.ndarray  # W, [D, d]
    structure: ResidualStructure  # what the projection was built from (narrower widths: packed_projection)
    claims_exact: bool  # the interference bound's verdict (compression.analytic)
    max_load: float
    seconds: dict[str, float]  # compile, structure, projection

    @property
    def d(self) -> int:
        return int(self.projection.shape[1])


def build_stage(spec: StageSpec | CopySpec, d: int | None = None, seed: int = 0) -> Stage:
    """Compile ``spec``'s programs into one model and compress it with the packed projection.

    Args:
        spec: the stage sizes.
        d: the compressed width; None for the stage's own ``width``, or when that is None too, the
            packed projection's full-margin width (where its bound is meant to hold). Smaller
            widths narrow the widest code blocks.
        seed: seed of the codes.

    Returns:
        The :class:`Stage`.
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
    return Stage(spec, programs, compiled, w, structure, bound.claims_exact, bound.max_load, seconds)


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
    (``zipf`` 0) or with probability proportional to ``1 / rank ** zipf`` (ranks in vocabulary order)."""
    space = input_space_of(compiled)
    key = jax.random.key(seed)
    if zipf <= 0:
        return np.asarray(sample_inputs(key, space, count))
    k_len, k_tok = jax.random.split(key)
    weights = 1.0 / np.arange(1, len(space.vocab) + 1, dtype=np.float64) ** zipf
    choice = jax.random.choice(k_tok, len(space.vocab), (count, space.max_seq_len), p=jnp.asarray(weights / weights.sum()))
    lengths = jax.random.randint(k_len, (count, 1), space.min_length, space.max_seq_len + 1)
    body = jnp.where(jnp.arange(space.max_seq_len)[None] < lengths, jnp.asarray(space.token_ids)[choice], space.pad_id)
    bos = jnp.full((count, 1), space.bos_id, jnp.int32)
    return np.asarray(jnp.concatenate([bos, body.astype(jnp.int32)], axis=1))
