"""Inputs for compression: a program's valid input space, enumerated or sampled in JAX.

An input is a row of ids ``[BOS, t_1, ..., t_n, PAD, ..., PAD]`` of width ``max_seq_len + 1``,
with ``min_length <= n <= max_seq_len`` and each ``t_i`` a vocabulary token (pairwise different
when ``unique_tokens``). Random batches are drawn inside jitted code from a ``jax.random`` key, so
the data of step ``s`` depends only on ``(seed, s)``.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Hashable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from compiler.errors import CompressionError
from compression.learned.config import SamplingConfig


@dataclasses.dataclass(frozen=True)
class InputSpace:
    """The valid inputs of a compiled program, expressed in model ids."""

    vocab: tuple[Hashable, ...]  # tokens, in the order of ``token_ids``
    token_ids: tuple[int, ...]
    max_seq_len: int
    bos_id: int
    pad_id: int
    min_length: int = 1
    unique_tokens: bool = False

    def __post_init__(self) -> None:
        if len(self.vocab) != len(self.token_ids) or not self.vocab:
            raise CompressionError("vocab and token_ids must be non-empty and of equal length")
        if not 1 <= self.min_length <= self.max_seq_len:
            raise CompressionError(f"need 1 <= min_length <= max_seq_len, got {self.min_length}, {self.max_seq_len}")
        if self.unique_tokens and len(self.vocab) < self.max_seq_len:
            raise CompressionError(
                f"unique_tokens needs at least max_seq_len={self.max_seq_len} tokens, vocab has {len(self.vocab)}"
            )

    @property
    def width(self) -> int:
        """Number of model positions per input (BOS included)."""
        return self.max_seq_len + 1

    def size(self) -> int:
        """How many distinct inputs the space holds."""
        v = len(self.vocab)
        lengths = range(self.min_length, self.max_seq_len + 1)
        if self.unique_tokens:
            return sum(math.perm(v, n) for n in lengths)
        return sum(v**n for n in lengths)

    def decode(self, row: Sequence[int]) -> list[Hashable]:
        """The token list (BOS and PAD dropped) of one id row."""
        by_id = dict(zip(self.token_ids, self.vocab))
        return [by_id[int(i)] for i in row[1:] if int(i) != self.pad_id]


def enumerate_inputs(space: InputSpace) -> np.ndarray:
    """Every input of the space as an ``[N, max_seq_len + 1]`` int32 array (shortest first)."""
    rows = []
    for n in range(space.min_length, space.max_seq_len + 1):
        combos = (itertools.permutations(space.token_ids, n) if space.unique_tokens
                  else itertools.product(space.token_ids, repeat=n))
        for body in combos:
            rows.append((space.bos_id, *body) + (space.pad_id,) * (space.max_seq_len - n))
    return np.asarray(rows, dtype=np.int32)


def sample_inputs(key: jax.Array, space: InputSpace, batch_size: int, zipf: float = 0.0) -> jax.Array:
    """``[batch_size, width]`` random inputs (jittable): uniform length, then tokens uniform
    (``zipf`` 0) or with probability proportional to ``1 / rank ** zipf`` (ranks in the order of
    ``space.vocab``; not with ``unique_tokens``)."""
    k_len, k_tok = jax.random.split(key)
    n_vocab, length = len(space.vocab), space.max_seq_len
    lengths = jax.random.randint(k_len, (batch_size, 1), space.min_length, length + 1)
    if zipf > 0:
        if space.unique_tokens:
            raise CompressionError("Zipf-distributed tokens are drawn with repeats; use unique_tokens=False")
        weights = 1.0 / np.arange(1, n_vocab + 1, dtype=np.float64) ** zipf
        choice = jax.random.choice(k_tok, n_vocab, (batch_size, length), p=jnp.asarray(weights / weights.sum()))
    elif space.unique_tokens:
        order = jnp.argsort(jax.random.uniform(k_tok, (batch_size, n_vocab)), axis=-1)
        choice = order[:, :length]
    else:
        choice = jax.random.randint(k_tok, (batch_size, length), 0, n_vocab)
    body = jnp.asarray(space.token_ids, jnp.int32)[choice]
    body = jnp.where(jnp.arange(length)[None, :] < lengths, body, space.pad_id)
    bos = jnp.full((batch_size, 1), space.bos_id, jnp.int32)
    return jnp.concatenate([bos, body.astype(jnp.int32)], axis=1)


def distinct_inputs(space: InputSpace, count: int, seed: int) -> np.ndarray:
    """``min(count, space.size())`` distinct random inputs, in the order they were drawn.

    Short lengths repeat, so batches are drawn until enough distinct rows are found; keeping
    the draw order (not a sorted order) makes the kept rows a uniform choice among the distinct
    ones drawn.

    Raises:
      CompressionError: not enough distinct rows after 100 batches.
    """
    target = min(count, space.size())
    ids = np.zeros((0, space.width), np.int32)
    for round_ in range(100):
        ids = np.concatenate([ids, np.asarray(sample_inputs(jax.random.fold_in(jax.random.key(seed), round_), space,
                                                            max(count, 1)))])
        _, first = np.unique(ids, axis=0, return_index=True)
        ids = ids[np.sort(first)]
        if len(ids) >= target:
            return ids[:target]
    raise CompressionError(f"could not draw {target} distinct inputs from a space of {space.size()}")


def use_enumeration(space: InputSpace, config: SamplingConfig) -> bool:
    """Whether ``config.mode`` picks the enumerated pool for this space."""
    if config.mode == "enumerate":
        return True
    if config.mode == "random":
        return False
    if config.mode == "auto":
        return space.size() <= config.enumerate_limit
    raise CompressionError(f"unknown sampling mode {config.mode!r}; use auto, random or enumerate")


@dataclasses.dataclass(frozen=True)
class Pool:
    """The enumerated inputs and the probability of drawing each row."""

    ids: np.ndarray  # [N, width] int32
    probs: np.ndarray  # [N] float32, sums to 1


def input_lengths(ids: np.ndarray, pad_id: int) -> np.ndarray:
    """Number of real tokens in each row (BOS and PAD excluded)."""
    return np.sum(np.asarray(ids)[:, 1:] != pad_id, axis=1)


def training_pool(space: InputSpace, config: SamplingConfig) -> Pool | None:
    """The enumerated inputs when ``config`` asks for enumeration, else None (sample instead).

    With ``balance_lengths`` each length gets the same total probability, spread evenly over the
    sequences of that length; otherwise every sequence is equally likely.
    """
    if not use_enumeration(space, config):
        return None
    ids = enumerate_inputs(space)
    if not config.balance_lengths:
        return Pool(ids, np.full(len(ids), 1.0 / len(ids), np.float32))
    lengths = input_lengths(ids, space.pad_id)
    values, counts = np.unique(lengths, return_counts=True)
    per_length = dict(zip(values.tolist(), counts.tolist()))
    probs = np.asarray([1.0 / (len(values) * per_length[n]) for n in lengths.tolist()], np.float64)
    return Pool(ids, (probs / probs.sum()).astype(np.float32))


def draw_batch(
    key: jax.Array, space: InputSpace, batch_size: int, pool_ids: jax.Array | None = None,
    pool_probs: jax.Array | None = None,
) -> jax.Array:
    """One training batch: rows of the pool drawn with ``pool_probs`` (with replacement), or
    fresh samples when there is no pool (jittable)."""
    if pool_ids is None:
        return sample_inputs(key, space, batch_size)
    rows = jax.random.choice(key, pool_ids.shape[0], (batch_size,), replace=True, p=pool_probs)
    return pool_ids[rows]
