"""The compiled model as the interference bound reads it: readers over residual coordinates.

:func:`model_view` turns a compiled model (a loop written out by
:func:`~compiler.model.tying.untied`, so that sub-layers are listed in the order they run) into
matrices over the residual coordinates, each column one *reader*: a hidden unit's input weights
(an MLP's ``W_in``), one dimension of a head's queries or keys (``W_Q``, ``W_K``), the value a
head writes into one coordinate (a column of ``W_V W_O``), an output logit (a column of the
unembedding). It also records what the compiled model holds in every coordinate, which the
bound needs to know which states the stream can be in:

* **groups**: the coordinates of one categorical s-op, of which at most one is on at any
  position (a value of the s-op), at 1 give or take the compiled model's float noise;
* **range**: the smallest and largest value of every coordinate over every input (0 and 1 for
  categorical values, 1 being the class size where alike values share a direction; for numbers
  propagated through the compiled weights and clipped to their value sets);
* **noise**: how far the compiled model's float32 values can be from the exact ones (a one-hot
  value's 1 and 0, a number), apart for a categorical coordinate on and off;
* **rounding**: per sub-layer, how much float32 rounding its own computation can add;
* **dead**: coordinates known to be 0 on every input (``never_on``).

:func:`model_view` reads the matrices; ranges, rounding and noise are derived from them by
:func:`compression.analytic.envelope.calibrated`. Nothing here depends on the projection W;
:mod:`compression.analytic.bound` combines a view with a W.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import numpy as np
from scipy import sparse

from compiler import CompiledModel
from compiler.model import weights
from compiler.model.config import AttentionSpec
from compiler.model.encoders import EMPTY_THRESHOLD, OutputsEncoder
from compiler.model.tying import untied
from compiler.passes import nodes
from compiler.passes.graph import NodeKind, hidden_name
from craft.bases import ONE_NAME, bos_direction


@dataclasses.dataclass(frozen=True, eq=False)
class HeadView:
    """One head: query and key readers ``[D, r]``, and one value reader per coordinate it writes.

    ``copies``: the head writes categorical values (a categorical Aggregate), so on every input the
    program is defined on, the keys at the highest score present carry one value (the selected
    keys, which a categorical Aggregate requires to agree, or the BOS key alone, whose score the
    compiler puts between the selected level and the rest); moving weight among them changes
    nothing. ``gap``: the smallest difference between two distinct scores one query can give its
    keys (0 where queries or keys read numbers, or there are too many states to list): every key
    below the highest score present is at least ``gap`` below it.
    """

    w_q: sparse.csc_array
    w_k: sparse.csc_array
    ov: sparse.csc_array  # [D, len(writes)]: column j is what the head writes into writes[j] per unit of attention
    writes: np.ndarray
    copies: bool = False
    gap: float = 0.0
    # its queries and keys read only categorical values and `one` with integer weights: on exact
    # one-hot inputs every score is an exact float32 sum of integers (no rounding)
    integer_scores: bool = False


@dataclasses.dataclass(frozen=True, eq=False)
class NumberPiece:
    """Hidden units of one ReLU MLP that read one number (besides ``one`` and the BOS marker) and
    are the only writers of what they write: at a real position they compute a piecewise-linear
    function of that number, which the bound follows value by value (a discretising MLP is flat
    around every value its input takes, and steep only between them)."""

    coordinate: int
    units: np.ndarray
    slope: np.ndarray  # [units] weight on the number
    intercept: np.ndarray  # [units] weight on `one`
    bos: np.ndarray  # [units] weight on the BOS marker
    writes: np.ndarray  # residual coordinates written
    w_out: np.ndarray  # [units, writes]
    values: np.ndarray  # every value the number takes at a real position, sorted
    at_bos: float = 0.0  # the number at the BOS position (0 for an s-op, 1 for a selector width's scratch)

    def __call__(self, points: np.ndarray) -> np.ndarray:
        """What the units write ``[len(points), len(writes)]`` with the number at ``points``."""
        hidden = np.maximum(np.asarray(points, np.float64)[:, None] * self.slope[None, :] + self.intercept[None, :], 0.0)
        return hidden @ self.w_out

    @property
    def kinks(self) -> np.ndarray:
        """The numbers at which a unit's ReLU bends, sorted (constant units have none)."""
        bends = self.slope != 0
        return np.sort(-self.intercept[bends] / self.slope[bends])


@dataclasses.dataclass(frozen=True, eq=False)
class MLPView:
    """One MLP: hidden units' input weights ``[D, H]`` and output weights ``[H, D]``."""

    w_in: sparse.csc_array
    w_out: sparse.csr_array
    activation: str
    pieces: tuple[NumberPiece, ...] = ()


Sublayer = tuple[HeadView, ...] | MLPView


@dataclasses.dataclass(frozen=True, eq=False)
class Noise:
    """How far the compiled float32 values are from the exact ones at one point of the forward
    pass, per coordinate: ``on`` bounds ``|x - 1|`` where a categorical value is on, ``off``
    bounds ``|x|`` where it is off (numbers: both their whole noise); a number's noise also in
    two parts, ``fixed + scale |x|``, for readers that see its value (number pieces)."""

    on: np.ndarray
    off: np.ndarray
    fixed: np.ndarray
    scale: np.ndarray

    @staticmethod
    def zero(width: int) -> Noise:
        z = np.zeros(width)
        return Noise(z, z, z, z)


@dataclasses.dataclass(frozen=True, eq=False)
class MLPRounding:
    """Float32 rounding one MLP can add: per hidden unit to its pre-activation, per residual
    coordinate to what it writes (the addition into the stream included)."""

    units: np.ndarray
    outputs: np.ndarray


@dataclasses.dataclass(frozen=True, eq=False)
class AttentionRounding:
    """Float32 rounding one attention sub-layer can add: per head to its scores, and per head
    to what it writes into each coordinate of ``HeadView.writes``."""

    scores: np.ndarray
    outputs: tuple[np.ndarray, ...]


@dataclasses.dataclass(frozen=True, eq=False)
class ModelView:
    """A compiled model's readers and what each residual coordinate can hold (module docstring)."""

    labels: tuple[str, ...]
    sublayers: tuple[Sublayer, ...]
    unembed: sparse.csc_array  # [D, n_out]
    numeric_columns: np.ndarray  # [n_out] bool: a numerical output's column (else a categorical logit)
    groups: tuple[np.ndarray, ...]  # categorical s-ops' coordinates
    group_of: np.ndarray  # [D] int: index into groups, -1 for coordinates that are not categorical values
    one: int | None  # the `one` coordinate (always 1)
    low: np.ndarray  # [D] the smallest value x_i takes (0 for categorical values)
    high: np.ndarray  # [D] the largest (the amplification for categorical values)
    dead: np.ndarray  # [D] bool: 0 on every input
    amplification: np.ndarray  # [D] largest on value when classes share directions (1 elsewhere)
    single_writer: np.ndarray  # [D] bool: categorical, written by exactly one sub-layer and not embedded
    writers: np.ndarray  # [D] int: how many sub-layers (the embedding counted as one) write the coordinate
    rounding: tuple[MLPRounding | AttentionRounding, ...] = ()  # per sub-layer (empty: not calibrated)
    embedding_rounding: np.ndarray | None = None  # [D]
    unembed_rounding: np.ndarray | None = None  # [n_out]
    positions: int = 1  # most keys a query sees (max_seq_len + 1, BOS included)
    noise: tuple[Noise, ...] = ()  # per sub-layer, what it reads; last, what the unembedding reads
    values: dict[int, np.ndarray] = dataclasses.field(default_factory=dict)  # numbers' value sets, where known

    def noise_at(self, layer: int) -> Noise:
        """The compiled model's noise where sub-layer ``layer`` reads (``len(sublayers)``: the
        unembedding); none before calibration."""
        return self.noise[layer] if self.noise else Noise.zero(len(self.labels))
    empty_threshold: float = EMPTY_THRESHOLD  # a categorical output below this everywhere decodes as None

    @property
    def residual_dim(self) -> int:
        return len(self.labels)

    @property
    def magnitude(self) -> np.ndarray:
        """[D] a bound on ``|x_i|``."""
        return np.maximum(np.abs(self.low), np.abs(self.high))

    @property
    def categorical(self) -> np.ndarray:
        """[D] bool: coordinates that are values of a categorical s-op."""
        return self.group_of >= 0

    @property
    def numeric(self) -> np.ndarray:
        """[D] bool: coordinates that hold numbers (numerical s-ops, attention-internal directions)."""
        out = self.group_of < 0
        if self.one is not None:
            out[self.one] = False
        return out


def _csc(matrix: np.ndarray) -> sparse.csc_array:
    return sparse.csc_array(np.asarray(matrix, np.float64))


# The label ending of a selector width's scratch direction, which holds 1 at BOS (the BOS-zero
# invariant, docs/architecture.md, keeps every s-op's coordinates at 0 there).
SCRATCH_SUFFIX = "_hidden_attn"


def number_values(compiled: CompiledModel) -> dict[str, np.ndarray]:
    """Per numerical residual label, every value it takes at a real position, where the compiled
    model's graph says (0 added: a None or not yet written number holds 0). A numerical s-op
    holds its value set; a selector width's scratch direction ``<label>_hidden_attn`` holds
    ``1 / (w + 1)`` for w = 0 .. max_seq_len (``craft.chamber.selector_width``)."""
    graph = compiled.graph
    if graph is None:
        return {}
    out = {}
    for label, data in graph.nodes(data=True):
        values = data.get(nodes.VALUE_SET)
        if values is None:
            continue
        if data.get(nodes.KIND) is NodeKind.SELECTOR_WIDTH:
            width = compiled.config.max_seq_len
            out[hidden_name(label) + SCRATCH_SUFFIX.removeprefix("_hidden")] = 1.0 / (np.arange(width + 1) + 1.0)
        if all(isinstance(v, (bool, int, float, np.integer, np.floating)) for v in values):
            out[label] = np.asarray(sorted({float(v) for v in values} | {0.0}), np.float64)
    return out


def _pieces(w_in: np.ndarray, w_out: np.ndarray, labels: tuple[str, ...], values: dict[str, np.ndarray],
            numeric: np.ndarray, one: int | None, bos: int | None) -> tuple[NumberPiece, ...]:
    """The :class:`NumberPiece` of an MLP, for every number with known values read alone."""
    out = []
    reads = w_in != 0
    fixed = [i for i in (one, bos) if i is not None]
    constant = ~np.any(np.delete(reads, fixed, axis=0), axis=0)  # units that read only `one` and BOS
    for x in np.nonzero(numeric & reads.any(axis=1))[0]:
        if labels[x] not in values:
            continue
        units = np.nonzero(reads[x])[0]
        if np.any(np.delete(reads, [int(x), *fixed], axis=0)[:, units]):
            continue  # the units read something else too
        writes = np.nonzero(np.any(w_out[units] != 0, axis=0))[0]
        # constant units writing the same outputs belong to the piece (e.g. a step that is always 1)
        units = np.union1d(units, np.nonzero(constant & np.any(w_out[:, writes] != 0, axis=1))[0])
        writes = np.nonzero(np.any(w_out[units] != 0, axis=0))[0]
        others = np.setdiff1d(np.arange(w_in.shape[1]), units)
        if not writes.size or np.any(w_out[np.ix_(others, writes)] != 0):
            continue
        out.append(NumberPiece(int(x), units, w_in[x, units].astype(np.float64),
                               w_in[one, units].astype(np.float64) if one is not None else np.zeros(units.size),
                               w_in[bos, units].astype(np.float64) if bos is not None else np.zeros(units.size),
                               writes, w_out[np.ix_(units, writes)].astype(np.float64), values[labels[x]],
                               1.0 if labels[x].endswith(SCRATCH_SUFFIX) else 0.0))
    return tuple(out)


# Most query states, and key score levels per query state, score_gap lists.
MAX_STATES = 10_000


def _states(rows: np.ndarray, group_of: np.ndarray) -> list[np.ndarray] | None:
    """Every choice of at most one row per s-op among ``rows`` (indices into ``rows``; None when
    there are more than MAX_STATES)."""
    by_group: dict[int, list[int]] = {}
    for position, row in enumerate(rows):
        by_group.setdefault(int(group_of[row]), []).append(position)
    states = [np.zeros(0, np.int64)]
    for members in by_group.values():
        if len(states) * (len(members) + 1) > MAX_STATES:
            return None
        states = [state for state in states for state in ([state] + [np.append(state, m) for m in members])]
    return states


def score_gap(w_q: np.ndarray, w_k: np.ndarray, group_of: np.ndarray, one: int | None) -> float:
    """The smallest difference between two distinct scores a query can give keys (see
    :class:`HeadView`), over every state of the categorical values the head reads; 0 when it
    reads numbers or has too many states."""
    rows_q = np.nonzero(np.any(w_q != 0, axis=1))[0]
    rows_k = np.nonzero(np.any(w_k != 0, axis=1))[0]
    fixed_q, fixed_k = rows_q[rows_q == one], rows_k[rows_k == one]
    rows_q, rows_k = rows_q[rows_q != one], rows_k[rows_k != one]
    if np.any(group_of[rows_q] < 0) or np.any(group_of[rows_k] < 0):
        return 0.0
    scores = (w_q[np.concatenate([fixed_q, rows_q])] @ w_k[np.concatenate([fixed_k, rows_k])].T).astype(np.float64)
    query_states = _states(rows_q, group_of)
    key_groups: dict[int, list[int]] = {}
    for position, row in enumerate(rows_k):
        key_groups.setdefault(int(group_of[row]), []).append(position + len(fixed_k))
    if query_states is None:
        return 0.0
    gap = np.inf
    for state in query_states:
        row = scores[: len(fixed_q)].sum(axis=0) + scores[state + len(fixed_q)].sum(axis=0)
        levels = np.asarray([row[: len(fixed_k)].sum()])
        for members in key_groups.values():
            levels = np.unique(np.round((levels[:, None] + np.append(row[members], 0.0)[None, :]).ravel(), 9))
            if levels.size > MAX_STATES:
                return 0.0
        if levels.size > 1:
            gap = min(gap, float(np.diff(levels).min()))
    return float(gap)


# Integer weights up to this size keep every score of a head an exact float32 integer.
INTEGER_LIMIT = 2 ** 12


def _integer_scores(w_q: np.ndarray, w_k: np.ndarray, group_of: np.ndarray, one: int | None) -> bool:
    """Whether a head's scores are exact on exact inputs (see :class:`HeadView`)."""
    weights = np.concatenate([w_q.ravel(), w_k.ravel()])
    rows = np.nonzero(np.any(w_q != 0, axis=1) | np.any(w_k != 0, axis=1))[0]
    readable = np.all((group_of[rows] >= 0) | (rows == one))
    whole = np.all(weights == np.round(weights)) and np.abs(weights).max(initial=0.0) <= INTEGER_LIMIT
    terms = max(w_q.shape[1], 1) * INTEGER_LIMIT ** 2
    return bool(readable and whole and terms < 2 ** 24 * INTEGER_LIMIT)


def _sublayers(compiled: CompiledModel, values: dict[str, np.ndarray], numeric: np.ndarray,
               one: int | None, bos: int | None, group_of: np.ndarray) -> tuple[Sublayer, ...]:
    labels = tuple(compiled.config.residual_labels)
    out: list[Sublayer] = []
    for index, layer in enumerate(compiled.config.layers):
        if isinstance(layer, AttentionSpec):
            heads = []
            for head in weights.layer_heads(compiled, index):
                writes = np.nonzero(np.any(head.w_o != 0, axis=0))[0]
                copies = bool(writes.size) and bool(np.all(group_of[writes] >= 0))
                gap = score_gap(head.w_q, head.w_k, group_of, one) if copies else 0.0
                heads.append(HeadView(_csc(head.w_q), _csc(head.w_k), _csc(head.w_v @ head.w_o[:, writes]), writes,
                                      copies, gap, _integer_scores(head.w_q, head.w_k, group_of, one)))
            out.append(tuple(heads))
        else:
            mlp = weights.mlp_weights(compiled, index)
            pieces = _pieces(mlp.w_in, mlp.w_out, labels, values, numeric, one, bos) if mlp.activation == "relu" else ()
            out.append(MLPView(_csc(mlp.w_in), sparse.csr_array(np.asarray(mlp.w_out, np.float64)), mlp.activation, pieces))
    return tuple(out)


def _numeric_columns(compiled: CompiledModel, width: int) -> np.ndarray:
    encoder = compiled.output_encoder
    out = np.zeros(width, bool)
    if isinstance(encoder, OutputsEncoder):
        for columns, part in zip(encoder.columns.values(), encoder.encoders):
            out[columns] = part.numerical
    else:
        out[:] = encoder.numerical
    return out


def model_view(compiled: CompiledModel, groups: Iterable[Iterable[int]], never_on: Iterable[int] = (),
               amplification: np.ndarray | None = None) -> ModelView:
    """The matrices of ``compiled`` (untied first) with the categorical ``groups`` of its
    :class:`~compression.analytic.structure.ResidualStructure`; ranges, rounding and noise
    are left for :func:`compression.analytic.envelope.calibrated` (range [0, 1], noise 0).

    Args:
      compiled: the compiled model.
      groups: coordinates of each categorical s-op.
      never_on: coordinates that are 0 on every input.
      amplification: per coordinate, the largest on value when alike values share a direction.
    Returns:
      The :class:`ModelView`.
    """
    compiled = untied(compiled)
    labels = tuple(compiled.config.residual_labels)
    width = len(labels)
    group_list = tuple(np.asarray(sorted(g), np.int64) for g in groups)
    group_of = np.full(width, -1, np.int64)
    for g, coords in enumerate(group_list):
        group_of[coords] = g
    one = labels.index(ONE_NAME) if ONE_NAME in labels else None
    amp = np.ones(width) if amplification is None else np.asarray(amplification, np.float64)
    dead = np.zeros(width, bool)
    dead[list(never_on)] = True
    unembed = weights.unembedding(compiled)
    bos = labels.index(str(bos_direction())) if str(bos_direction()) in labels else None
    numeric = group_of < 0
    if one is not None:
        numeric[one] = False
    known = number_values(compiled)
    sublayers = _sublayers(compiled, known, numeric, one, bos, group_of)
    writers = np.zeros(width, np.int64)
    for sublayer in sublayers:
        written = np.zeros(width, bool)
        if isinstance(sublayer, MLPView):
            written[np.nonzero(np.asarray(abs(sublayer.w_out).sum(axis=0)).ravel())[0]] = True
        else:
            for head in sublayer:
                written[head.writes] = True
        writers += written
    embedded = np.any(weights.token_embedding(compiled) != 0, axis=0) | np.any(weights.position_embedding(compiled) != 0, axis=0)
    single_writer = (group_of >= 0) & (writers == 1) & ~embedded
    writers = writers + embedded
    return ModelView(labels, sublayers, _csc(unembed), _numeric_columns(compiled, unembed.shape[1]), group_list,
                     group_of, one, np.zeros(width), np.ones(width), dead, amp, single_writer, writers,
                     positions=compiled.config.max_seq_len + 1,
                     values={i: known[label] for i, label in enumerate(labels) if label in known and numeric[i]})
