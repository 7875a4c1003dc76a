"""The interference bound: is the model compressed by W exact on every input?

The compressed model keeps a d-dimensional stream; every sub-layer reads ``x̂ = s Wᵀ`` and writes
its output through W. Writing ``E`` for the sum of what earlier sub-layers wrote wrongly
(compressed output minus compiled output, in residual coordinates), the read is
``x̂ = x G + E G`` with ``G = W Wᵀ`` and ``x`` the compiled model's residual
(:mod:`compression.analytic.readers`). :func:`walk` goes through the sub-layers in the order they
run and carries, per residual coordinate, intervals that hold ``E`` on every input (apart for
the states where a categorical coordinate is on and off); each sub-layer's output error is
bounded from the compiled weights as they are (merged many-to-one lookup units, fused lookups,
folded Maps, factored comparisons: every reader is a column of the real matrices):

* **ReLU units.** A unit's compiled pre-activation ``p`` and its move ``Δ`` are both functions of
  which values are on (:class:`~compression.analytic.readers.ReaderParts`). For every combination
  ``M`` of the s-ops it reads having one of its values on, ``p_M`` is known and ``Δ`` lies in an
  interval; ``relu`` is 1-Lipschitz and flat below 0, so the unit's output moves up by at most
  ``max(0, min(Δ_hi, p_M + Δ_hi))`` and down by at most ``max(0, min(-Δ_lo, p_M))``: an off unit
  (``p_M <= -m``) stays exactly 0 while ``Δ_hi < m``. The margin ``m`` is the unit's own, read
  off its weights (1 for the compiler's lookups; 0 for a unit that can sit at 0). Units that read
  numbers, or more than :data:`MAX_ENUMERATED` s-ops, or one s-op with several weights, are
  bounded over every state at once (the same formulas with ``p`` in its range). A categorical
  coordinate that only units with positive weights write is off exactly when they all are, so
  its error while off counts their off states only.
* **Attention.** A head's score ``x_q M x_kᵀ`` (``M = W_Q W_Kᵀ``) moves by the query's move
  against ``M x_kᵀ``, plus the key's move against ``x_q M``, plus the product of the two moves.
  The first is a read of the query with the reader ``M x_kᵀ``, a sum of columns of ``M`` (one per
  value on in each key s-op), so it is bounded state by state like any reader, and likewise the
  second; the third by ``Σ_r |Δq_r| |Δk_r|``. With every score within ``σ`` of the compiled one,
  each attention weight changes by a factor within ``e^{±2σ}``, and the weights' total change is
  at most ``e^{2σ} - 1``. What the head writes into a coordinate moves by the value read's move
  (a mixture of the keys' moves stays within their range) plus ``e^{2σ} - 1`` times half the
  range of the compiled values it mixes.
* **The unembedding.** A categorical output is decoded right when, with one of its values on,
  that value's logit stays at or above the threshold 1/2
  (``compiler.model.encoders.EMPTY_THRESHOLD``, below which a position decodes as None) and
  above every other logit, and with none on, every logit stays below 1/2; a numerical output
  when it moves by at most :func:`number_tolerance`.

Float arithmetic enters twice, both derived from the weights: the compiled model's own noise (how
far its float32 values are from the exact one-hots and numbers, :func:`walk` run without a
projection from the rounding of every sub-layer, :mod:`compression.analytic.envelope`) and the
compressed model's rounding (each sub-layer's again, and the reads through W,
:attr:`~compression.analytic.readers.Projection.rounding`).

Coordinates whose values share one direction (classes of alike values,
:attr:`~compression.analytic.structure.ResidualStructure.classes`) are compared, at the layers
that read them, with the compiled model in which those values are one: its output is then on at
up to the class size (the coordinate's amplification), which only the unembedding reads.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy import sparse

from compiler.errors import CompressionError
from compiler.model.agree import AGREE_TOLERANCE
from compression.analytic.readers import FLOAT32_UNIT, Errors, Projection, ReaderParts, projection, reader_parts
from compression.analytic.view import AttentionRounding, HeadView, MLPRounding, MLPView, ModelView, Noise, NumberPiece

# Regular ReLU units reading at most this many s-ops have every combination of them enumerated.
MAX_ENUMERATED = 10
# Protected coordinates must be read back to within this (orthonormal axes give ~1e-7).
PROTECTED_ATOL = 1e-5


def number_tolerance() -> float:
    """How far the bound lets a numerical output move: half the agree rule's tolerance (the other
    half is left to the compiled model's own error, which its compile-time check keeps far below)."""
    return AGREE_TOLERANCE / 2


@dataclasses.dataclass(frozen=True)
class ReadBound:
    """The bound at one sub-layer (or the unembedding).

    ``deviation``: the largest move of anything it writes (or, for the unembedding, of a logit);
    ``load``: how much of the margin that decides exactness is used: for an MLP, the largest
    ``Δ_hi / m`` of a unit that is off (at least 1: it may fire); for attention ``1 - e^{-2σ}``
    (the share of attention weight that may move); for the unembedding the largest share of its
    margins an output may use (below 1: decoded right). Only the unembedding's load decides the
    claim; the others say where the margins are spent.
    """

    layer: int
    kind: str  # "mlp", "attention", "unembed"
    deviation: float
    load: float


@dataclasses.dataclass(frozen=True)
class InterferenceBound:
    """Result of :func:`interference_bound`."""

    protected_error: float  # max |G - I| on rows of protected coordinates (informative)
    reads: tuple[ReadBound, ...]
    claims_exact: bool
    score_shift: float = 0.0  # largest σ of any head
    output_deviation: float = 0.0  # largest move of an output logit or number
    tightest: tuple[int, ...] = ()  # output columns whose margin is most used (OutputBound)

    @property
    def max_load(self) -> float:
        """The unembedding's load: below 1 exactly when the bound claims exactness."""
        return max((r.load for r in self.reads if r.kind == "unembed"), default=0.0)


@dataclasses.dataclass(frozen=True)
class Walk:
    """What :func:`walk` found: the errors after the last sub-layer, per sub-layer its bound, and
    the unembedding's."""

    errors: Errors
    reads: tuple[ReadBound, ...]
    score_shift: float
    before: tuple[Errors, ...] = ()  # the errors where each sub-layer reads


def merge_matrix(classes: tuple[tuple[int, ...], ...], w: np.ndarray, width: int) -> sparse.csr_array | None:
    """``S``: each coordinate summed with its class-mates of equal rows of W (None: no class)."""
    pairs = [(i, j) for members in classes for i in members for j in members
             if i != j and np.array_equal(w[i], w[j])]
    if not pairs:
        return None
    rows, cols = zip(*pairs)
    eye = sparse.identity(width, format="csr")
    return sparse.csr_array(eye + sparse.csr_array((np.ones(len(rows)), (rows, cols)), shape=(width, width)))


def _enumerated(parts: ReaderParts, units: np.ndarray, count: int) -> tuple[np.ndarray, ...]:
    """For regular units each reading ``count`` s-ops: per unit and combination of them on,
    ``p`` (without noise and numbers) and the move's interval, ``[units, 2^count]``."""
    read = parts.read[:, units]
    order = np.argsort(~read, axis=0, kind="stable")[:count]  # the s-ops each unit reads

    def pick(grid: np.ndarray) -> np.ndarray:
        return np.take_along_axis(grid[:, units], order, axis=0)

    alpha, lo, hi = pick(parts.alpha_hi), pick(parts.shift_lo), pick(parts.shift_hi)
    combos = ((np.arange(2 ** count)[:, None] >> np.arange(count)[None, :]) & 1).astype(np.float64)
    p = parts.bias[units][None, :] + combos @ alpha
    move_lo = parts.base_lo[units][None, :] + combos @ lo
    move_hi = parts.base_hi[units][None, :] + combos @ hi
    return p.T, move_lo.T, move_hi.T


@dataclasses.dataclass(frozen=True)
class UnitErrors:
    """Per ReLU unit: how far its output can rise and fall in any state, and in the states where
    its exact pre-activation is at most 0 (off)."""

    up: np.ndarray
    down: np.ndarray
    up_off: np.ndarray
    down_off: np.ndarray
    load: float


def relu_errors(parts: ReaderParts, rounding: np.ndarray | None = None) -> UnitErrors:
    """:class:`UnitErrors` of the units of ``parts`` (module docstring); ``rounding`` widens every
    unit's move by its pre-activation's float rounding."""
    n = parts.bias.size
    extra = np.zeros(n) if rounding is None else rounding
    up, down, up_off, down_off = (np.zeros(n) for _ in range(4))
    load = 0.0
    counts = parts.read.sum(axis=0) if parts.read.size else np.zeros(n, np.int64)
    simple = parts.regular & ~parts.reads_numbers & (counts <= MAX_ENUMERATED)

    def account(units: np.ndarray, p_ideal: np.ndarray, p_hi: np.ndarray, move_lo: np.ndarray,
                move_hi: np.ndarray) -> None:
        nonlocal load
        rise = np.maximum(0.0, np.minimum(move_hi, p_hi + move_hi))
        fall = np.maximum(0.0, np.minimum(-move_lo, np.maximum(p_hi, 0.0)))
        off = p_ideal <= 0
        up[units] = np.maximum(up[units], rise.max(axis=-1))
        down[units] = np.maximum(down[units], fall.max(axis=-1))
        up_off[units] = np.maximum(up_off[units], np.where(off, rise, 0.0).max(axis=-1))
        down_off[units] = np.maximum(down_off[units], np.where(off, fall, 0.0).max(axis=-1))
        margin = -p_hi
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(off & (move_hi > 0), np.where(margin > 0, move_hi / margin, np.inf), 0.0)
        if share.size:
            load = max(load, float(share.max()))

    for count in np.unique(counts[simple]):
        units = np.nonzero(simple & (counts == count))[0]
        p, move_lo, move_hi = _enumerated(parts, units, int(count))
        account(units, p, p + parts.noise[units, None], move_lo - extra[units, None], move_hi + extra[units, None])
    rest = np.nonzero(~simple)[0]
    if rest.size:
        _, p_hi = parts.compiled_range()
        move_lo, move_hi = parts.move_range()
        column = lambda v: v[rest][:, None]
        # every state at once: the unit counts as possibly on (its off share is not known apart)
        account(rest, np.full((rest.size, 1), np.inf), column(p_hi), column(move_lo - extra), column(move_hi + extra))
        up_off[rest], down_off[rest] = up[rest], down[rest]
    return UnitErrors(up, down, up_off, down_off, load)


def rounding_scale(view: ModelView, proj: Projection | None, matrix: sparse.csc_array, errors: Errors) -> np.ndarray:
    """Per reader of ``matrix``, how many times its sub-layer's float rounding counts: once
    against exact arithmetic (no projection); under a projection twice where the reader reads a
    coordinate that may differ from the compiled one (a row of W off its own axis, or an error),
    else not at all (the same float operations on the same numbers as the compiled model)."""
    if proj is None:
        return np.ones(matrix.shape[1])
    moving = proj.mixed.copy()
    moving[errors.erring()] = True
    return 2.0 * (np.asarray(abs(matrix[moving]).sum(axis=0)).ravel() != 0)


# Most (values x outputs) and (points x units) entries a number piece is evaluated on; beyond, its
# units are bounded one by one.
PIECE_ENTRIES = 20_000_000


def _excursions(piece: NumberPiece, low: np.ndarray, high: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Per value and output, how far the piece's output rises above and falls below ``at`` (its
    output at the value) while the number is anywhere in ``[low, high]``: its largest and smallest
    output there is at an end or at a kink inside."""
    up, down = np.zeros_like(at), np.zeros_like(at)
    for ends in (low, high):
        moved = piece(ends) - at
        up, down = np.maximum(up, moved), np.maximum(down, -moved)
    kinks = piece.kinks
    first, last = np.searchsorted(kinks, low, "right"), np.searchsorted(kinks, high, "left")
    counts = np.maximum(last - first, 0)
    total = int(counts.sum())
    if total * max(piece.units.size, piece.writes.size) > PIECE_ENTRIES:
        return None
    if total:
        rows = np.repeat(np.arange(len(low)), counts)
        index = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts) + np.repeat(first, counts)
        moved = piece(kinks[index]) - at[rows]
        np.maximum.at(up, rows, moved)
        np.maximum.at(down, rows, -moved)
    return up, down


def _exact_products(weights: np.ndarray) -> np.ndarray:
    """Where a float32 product by ``weights`` is exact: 0 and powers of two (they only shift the
    exponent), which is what the compiler's discretising MLPs use as slopes."""
    magnitude = np.abs(weights)
    with np.errstate(divide="ignore"):
        exponent = np.log2(np.where(magnitude > 0, magnitude, 1.0))
    return (magnitude == 0) | (exponent == np.round(exponent))


def _piece_rounding(shape: NumberPiece, values: np.ndarray, reach: float, terms: np.ndarray) -> np.ndarray:
    """Per value and output ``[values, writes]``: the float32 rounding the units add with the
    number within ``reach`` of the value: each active unit's pre-activation (the product ``a x``,
    exact for a power-of-two slope, and the sum ``a x + b``: ``u (|a x| + |a x + b|)``, through
    the 1-Lipschitz ReLU), the output's sum of ``terms`` products and its addition into the stream."""
    slope, intercept = np.abs(shape.slope)[None, :], shape.intercept[None, :]
    pre = values[:, None] * shape.slope[None, :] + intercept
    product = np.where(_exact_products(shape.slope)[None, :], 0.0, slope * (np.abs(values)[:, None] + reach))
    unit = FLOAT32_UNIT * (product + np.abs(pre) + slope * reach)
    active = pre + slope * reach + unit > 0
    weights = np.abs(shape.w_out)
    hidden = np.maximum(pre + slope * reach, 0.0)
    return (np.where(active, unit, 0.0) @ weights + FLOAT32_UNIT * (terms + 1)[None, :] * (hidden @ weights)
            + FLOAT32_UNIT)


def _noise(view: ModelView, proj: Projection | None, index: int) -> Noise | None:
    """The compiled model's noise where sub-layer ``index`` reads, against which a projection's
    moves are measured (None without a projection: the walk then measures that noise itself)."""
    return None if proj is None else view.noise_at(index)


def _piece_errors(view: ModelView, proj: Projection | None, index: int, piece: NumberPiece, errors: Errors,
                  scale: float) -> tuple[np.ndarray, ...] | None:
    """(on_lo, on_hi, off_lo, off_hi) over ``piece.writes``, value by value, float rounding
    included ``scale`` times (None: too large, or the BOS position is not provably off)."""
    values = piece.values
    if values.size * max(piece.units.size, piece.writes.size) > PIECE_ENTRIES:
        return None
    reader = sparse.csc_array((np.ones(1), (np.asarray([piece.coordinate]), np.zeros(1, np.int64))),
                              shape=(view.residual_dim, 1))
    x = piece.coordinate
    own_axis = proj is None or not proj.mixed[x]  # then the number's own proportional error stays one
    scale_lo, scale_hi = (float(errors.scale_lo[x]), float(errors.scale_hi[x])) if own_axis else (0.0, 0.0)
    if own_axis:  # its own proportional part is added value by value below
        kept_lo, kept_hi = errors.scale_lo.copy(), errors.scale_hi.copy()
        kept_lo[x] = kept_hi[x] = 0.0
        errors = dataclasses.replace(errors, scale_lo=kept_lo, scale_hi=kept_hi)
    noise_here = _noise(view, proj, index)
    read_lo, read_hi = reader_parts(view, proj, reader, errors, noise=noise_here).move_range()
    lo, hi = float(read_lo[0]), float(read_hi[0])
    zeros = np.zeros(piece.writes.size)
    if lo == hi == scale_lo == scale_hi == 0.0 and scale == 0.0:
        return zeros, zeros, zeros, zeros  # the same number in, the same float operations
    # per value v the number moves within [lo_v, hi_v] = [lo + min(s v), hi + max(s v)] over s in [scale_lo, scale_hi]
    lo_v = lo + np.minimum(scale_lo * values, scale_hi * values)
    hi_v = hi + np.maximum(scale_lo * values, scale_hi * values)
    # the compiled number's own noise at each value (none against exact arithmetic)
    noise = np.zeros(values.size) if noise_here is None else noise_here.fixed[x] + noise_here.scale[x] * np.abs(values)
    drift = float(np.max(noise + np.maximum(-lo_v, hi_v)))  # how far the number can be from a value
    killed = piece.bos != 0
    at_bos = piece.slope[killed] * piece.at_bos + np.abs(piece.slope[killed]) * drift
    if np.any(piece.intercept[killed] + piece.bos[killed] + at_bos >= 0):
        return None  # a unit that reads the BOS marker is not provably off at BOS
    # at BOS the units that read the marker are off; the others compute the same function there
    shapes = [piece]
    if killed.any() and not killed.all():
        keep = ~killed
        shapes.append(dataclasses.replace(piece, units=piece.units[keep], slope=piece.slope[keep],
                                          intercept=piece.intercept[keep], bos=piece.bos[keep], w_out=piece.w_out[keep]))
    up: np.ndarray | None = None
    down: np.ndarray | None = None
    at_values: np.ndarray | None = None
    for shape in shapes:
        at = shape(values)
        wide = _excursions(shape, values - noise + lo_v, values + noise + hi_v, at)
        narrow = _excursions(shape, values - noise, values + noise, at) if noise.any() else (np.zeros_like(at), np.zeros_like(at))
        if wide is None or narrow is None:
            return None
        terms = np.count_nonzero(shape.w_out, axis=0)
        rounded: np.ndarray | float = scale * _piece_rounding(shape, values, drift, terms) if scale else 0.0
        rise, fall = wide[0] + narrow[1] + rounded, wide[1] + narrow[0] + rounded
        if up is None:
            up, down, at_values = rise, fall, at
        else:
            assert down is not None
            up, down = np.maximum(up, rise), np.maximum(down, fall)
    assert up is not None and down is not None and at_values is not None  # `shapes` holds `piece`
    off = np.abs(at_values) < 0.5  # the output's exact value is 0 there
    on_hi, on_lo = up.max(axis=0), -down.max(axis=0)
    off_hi = np.where(off, up, 0.0).max(axis=0)
    off_lo = -np.where(off, down, 0.0).max(axis=0)
    return on_lo, on_hi, off_lo, off_hi


def _mlp_step(view: ModelView, proj: Projection | None, index: int, mlp: MLPView, errors: Errors,
              merge: sparse.csr_array | None) -> tuple[tuple[np.ndarray, ...], float]:
    """The MLP's output errors (on_lo, on_hi, off_lo, off_hi) and its load."""
    width = view.residual_dim
    rounding = view.rounding[index] if view.rounding else None
    assert rounding is None or isinstance(rounding, MLPRounding)  # sub-layer `index` is this MLP
    parts = reader_parts(view, proj, mlp.w_in, errors, merge, noise=_noise(view, proj, index))
    scale = rounding_scale(view, proj, mlp.w_in, errors)
    if mlp.activation == "relu":
        units = relu_errors(parts, None if rounding is None else scale * rounding.units)
    elif mlp.activation == "identity":
        move_lo, move_hi = parts.move_range()
        up, down = np.maximum(move_hi, 0.0), np.maximum(-move_lo, 0.0)
        units = UnitErrors(up, down, up, down, 0.0)
    else:  # no bound for this activation: nothing is claimed
        infinite = np.full(width, np.inf)
        return (-infinite, infinite, -infinite, infinite), np.inf
    positive, negative = mlp.w_out.maximum(0), (-mlp.w_out).maximum(0)
    on_hi = positive.T @ units.up + negative.T @ units.down
    on_lo = -(positive.T @ units.down + negative.T @ units.up)
    # a categorical coordinate written only with positive weights is off when all its writers are
    # (and by no other sub-layer, which could clear it again)
    clean = view.single_writer & (np.asarray(negative.sum(axis=0)).ravel() == 0)
    off_hi = np.where(clean, positive.T @ units.up_off, on_hi)
    off_lo = np.where(clean, -(positive.T @ units.down_off), on_lo)
    handled = np.zeros(width, bool)
    for piece in mlp.pieces:
        piece_scale = 0.0 if rounding is None else float(scale[piece.units].max(initial=0.0))
        found = _piece_errors(view, proj, index, piece, errors, piece_scale)
        if found is not None:
            writes = piece.writes
            exact = view.single_writer[writes]
            on_lo[writes], on_hi[writes] = found[0], found[1]
            off_lo[writes] = np.where(exact, found[2], found[0])
            off_hi[writes] = np.where(exact, found[3], found[1])
            handled[writes] = True  # rounding included
    if rounding is not None:
        # an output's sum is rounded differently once one of the units it adds up is
        written_scale = np.ones(width) if proj is None else 2.0 * (abs(mlp.w_out).T @ scale != 0)
        outputs = np.where(handled, 0.0, rounding.outputs * written_scale)
        on_lo, on_hi = on_lo - outputs, on_hi + outputs
        off_lo = np.where(clean, off_lo, off_lo - outputs)
        off_hi = np.where(clean, off_hi, off_hi + outputs)
    return (on_lo, on_hi, off_lo, off_hi), units.load


def _touched(view: ModelView, proj: Projection | None, matrix: sparse.csc_array, errors: Errors) -> bool:
    """Whether any coordinate ``matrix`` reads can move: a row of W off its own axis, or an error."""
    rows = np.asarray(abs(matrix).sum(axis=1)).ravel() != 0
    moving = np.zeros(view.residual_dim, bool) if proj is None else proj.mixed.copy()
    moving[errors.erring()] = True
    return bool(np.any(rows & moving))


def _score_shift(view: ModelView, proj: Projection | None, head: HeadView, errors: Errors, noise: Noise | None) -> float:
    """σ: the largest move of any score of ``head`` (module docstring)."""
    query_moves = _touched(view, proj, head.w_q, errors)
    key_moves = _touched(view, proj, head.w_k, errors)
    if not (query_moves or key_moves):
        return 0.0
    scores = sparse.csc_array(head.w_q @ head.w_k.T)  # [D queries, D keys]
    total = 0.0
    if query_moves:  # the query read against M x_kᵀ, one column of M per key coordinate
        total += _combined(view, proj, scores, errors, noise)
    if key_moves:
        total += _combined(view, proj, sparse.csc_array(scores.T), errors, noise)
    if query_moves and key_moves:
        total += float(np.sum(reader_parts(view, proj, head.w_q, errors, noise=noise).largest_move()
                              * reader_parts(view, proj, head.w_k, errors, noise=noise).largest_move()))
    # NaN (an unbounded move times a zero noise or weight: inf * 0) is an unbounded shift. Left
    # NaN it read as no shift at all (`nan > 0` is false, `max(0, nan)` is 0): claims fuzz
    # program 810 of seed 0 claimed a model wrong on 75 of its 120 inputs.
    return np.inf if np.isnan(total) else total


def _combined(view: ModelView, proj: Projection | None, scores: sparse.csc_array, errors: Errors,
              noise: Noise | None) -> float:
    """The largest move of a read against ``Σ_j x_j scores[:, j]`` over the states of the other
    side ``x``: per s-op of the other side its largest single-column move (or 0, none on), plus
    its off values' noise, plus its numbers' moves times their magnitude, plus ``one``'s column."""
    used = np.nonzero(np.asarray(abs(scores).sum(axis=0)).ravel())[0]
    if not used.size:
        return 0.0
    moves = np.zeros(view.residual_dim)
    moves[used] = reader_parts(view, proj, scores[:, used], errors, noise=noise).largest_move()
    noise = Noise.zero(view.residual_dim) if noise is None else noise
    total = 0.0
    for coords in view.groups:
        live = coords[~view.dead[coords]]
        if live.size and moves[coords].any():
            total += float((moves[live] * (1.0 + noise.on[live]) * view.amplification[live]).max())
            total += float(np.sum(moves[coords] * noise.off[coords]))
    numeric = view.numeric
    total += float(np.sum(moves[numeric] * (view.magnitude[numeric] + noise.on[numeric])))
    if view.one is not None:
        total += float(moves[view.one])
    return total


def _reads_error(head: HeadView, errors: Errors) -> bool:
    """Whether a query or key coordinate of ``head`` may be off its exact value."""
    rows = np.asarray(abs(head.w_q).sum(axis=1) + abs(head.w_k).sum(axis=1)).ravel() != 0
    return bool(np.any(rows[errors.erring()]))


def _attention_step(view: ModelView, proj: Projection | None, index: int, heads: tuple[HeadView, ...],
                    errors: Errors) -> tuple[tuple[np.ndarray, ...], float]:
    width = view.residual_dim
    lo, hi, off_lo, off_hi = (np.zeros(width) for _ in range(4))
    scale_lo, scale_hi = np.zeros(width), np.zeros(width)
    sigma = 0.0
    rounding = view.rounding[index] if view.rounding else None
    assert rounding is None or isinstance(rounding, AttentionRounding)  # sub-layer `index` is these heads
    noise = _noise(view, proj, index)
    for h, head in enumerate(heads):
        shift = _score_shift(view, proj, head, errors, noise)
        scores_scale = max(rounding_scale(view, proj, head.w_q, errors).max(initial=0.0),
                           rounding_scale(view, proj, head.w_k, errors).max(initial=0.0))
        values_scale = max(scores_scale, rounding_scale(view, proj, head.ov, errors).max(initial=0.0))
        if rounding is not None and not (proj is None and head.integer_scores and not _reads_error(head, errors)):
            # against exact arithmetic a head with integer weights reading exact one-hots rounds nothing
            shift += scores_scale * rounding.scores[h]
        sigma = max(sigma, shift)
        values = reader_parts(view, proj, head.ov, errors, noise=noise)
        move_lo, move_hi = values.move_range()
        value_lo, value_hi = values.compiled_range()
        moved = np.zeros(len(head.writes))
        if head.copies and head.gap > 0:
            # only weight leaking below the highest score moves a copy (HeadView): at most
            # (T - 1) e^{-(gap - 2σ)} in the compressed model and (T - 1) e^{-gap} in the compiled one
            leak = (view.positions - 1) * (np.exp(-(head.gap - 2.0 * shift)) + np.exp(-head.gap))
            moved = min(leak, np.expm1(2.0 * shift) / 2.0 + np.exp(-head.gap)) * (value_hi - value_lo)
        elif shift > 0:
            # a mixture of values of one sign whose weights move by factors within e^{±2σ} moves
            # by the same factors; else by (e^{2σ} - 1) times half the values' range
            one_sign = (value_lo >= 0) | (value_hi <= 0)
            grow, shrink = np.expm1(2.0 * shift), -np.expm1(-2.0 * shift)
            np.add.at(scale_lo, head.writes[one_sign], -shrink)
            np.add.at(scale_hi, head.writes[one_sign], grow)
            # the factor acts on the compiled value: its noise after this head is at most the
            # largest of the values' noises plus the head's own
            jitter = np.zeros(len(head.writes)) if noise is None else values.noise
            moved = np.where(one_sign, grow * jitter, grow * (value_hi - value_lo) / 2.0)
        if rounding is not None:
            moved = moved + values_scale * rounding.outputs[h]
        off_move_lo, off_move_hi = move_lo, move_hi
        if head.copies:
            # a value the head writes is on exactly when the selected keys hold one of the values
            # it is copied from, and off when they hold none: the reads move as in those states
            counts = values.read.sum(axis=0)
            plain = (counts == 1) & values.regular & ~values.reads_numbers & view.single_writer[head.writes]
            off_move_lo = np.where(plain, values.base_lo, move_lo)
            off_move_hi = np.where(plain, values.base_hi, move_hi)
            move_lo = np.where(plain, values.base_lo + values.shift_lo.sum(axis=0), move_lo)
            move_hi = np.where(plain, values.base_hi + values.shift_hi.sum(axis=0), move_hi)
        np.add.at(lo, head.writes, move_lo - moved)
        np.add.at(hi, head.writes, move_hi + moved)
        np.add.at(off_lo, head.writes, off_move_lo - moved)
        np.add.at(off_hi, head.writes, off_move_hi + moved)
    return (lo, hi, off_lo, off_hi, scale_lo, scale_hi), sigma


# An unbounded error is inf (inf - inf, 0 * inf: nan, made unbounded where the readers return
# their parts), never a claim: the overflows on the way are expected, not warnings.
UNBOUNDED = np.errstate(over="ignore", invalid="ignore")


@UNBOUNDED
def walk(view: ModelView, proj: Projection | None, classes: tuple[tuple[int, ...], ...] = (),
         mergers: frozenset[int] = frozenset()) -> Walk:
    """The errors of every sub-layer of ``view``'s model under ``proj`` (None: the compiled model
    against exact arithmetic), in the order they run (module docstring)."""
    width = view.residual_dim
    errors = Errors.zero(width)
    if view.rounding and proj is None:  # under a projection the embedding's sums are the compiled ones
        first = view.embedding_rounding
        assert first is not None  # calibrated with the sub-layers' rounding (envelope)
        errors = errors.plus(-first, first, -first, first)
    reads = []
    before = []
    sigma = 0.0
    for index, sublayer in enumerate(view.sublayers):
        before.append(errors)
        if isinstance(sublayer, MLPView):
            merge = merge_matrix(classes, proj.w, width) if proj is not None and index in mergers else None
            step, load = _mlp_step(view, proj, index, sublayer, errors, merge)
            kind = "mlp"
        else:
            step, shift = _attention_step(view, proj, index, sublayer, errors)
            sigma = max(sigma, shift)
            load, kind = float(-np.expm1(-2.0 * shift)), "attention"
        errors = errors.plus(*step)
        deviation = float(np.max(np.abs(step[:4]), initial=0.0))
        reads.append(ReadBound(index, kind, deviation, float(load)))
    return Walk(errors, tuple(reads), sigma, tuple(before))


@dataclasses.dataclass(frozen=True)
class OutputBound:
    """What :func:`unembedding_load` finds: the load (below 1 exactly when every output decodes
    right in every state), the largest move of a logit or number, and the output columns whose
    margin is most used (their share of it)."""

    load: float
    deviation: float
    tightest: tuple[int, ...]  # output columns, most used margin first


@UNBOUNDED
def unembedding_load(view: ModelView, proj: Projection | None, errors: Errors) -> OutputBound:
    """The output's :class:`OutputBound` (module docstring)."""
    columns = view.unembed.shape[1]
    parts = reader_parts(view, proj, view.unembed, errors, noise=_noise(view, proj, len(view.sublayers)))
    extra = np.zeros(columns)
    if view.rounding:
        extra = view.unembed_rounding * rounding_scale(view, proj, view.unembed, errors)
    numeric = view.numeric_columns
    share = np.zeros(columns)  # per column, the share of its margin used
    deviation = 0.0
    if numeric.any():
        moved = parts.largest_move() + extra
        deviation = float(moved[numeric].max())
        share[numeric] = moved[numeric] / number_tolerance()
    categorical = np.nonzero(~numeric)[0]
    threshold = view.empty_threshold
    counts = parts.read.sum(axis=0)
    single = categorical[(counts[categorical] == 1) & parts.regular[categorical] & ~parts.reads_numbers[categorical]]
    others = np.setdiff1d(categorical, single)
    high_other, high_none = np.full(columns, -np.inf), np.full(columns, -np.inf)
    on_low = np.full(columns, np.inf)
    reference = np.full(columns, np.inf)
    if single.size:
        p, move_lo, move_hi = _enumerated(parts, single, 1)
        noise, slack = parts.noise[single], extra[single]
        reference[single] = p[:, 1]  # its own value on: the logit is its weight
        on_low[single] = p[:, 1] - noise + move_lo[:, 1] - slack
        high_other[single] = p[:, 0] + noise + move_hi[:, 0] + slack  # another value on, or none
        group = np.argmax(parts.read[:, single], axis=0)
        high_none[single] = high_other[single] - parts.off_hi[group, single]  # its s-op has no value on
        deviation = max(deviation, float(np.max(np.maximum(p[:, 1] - on_low[single], move_hi[:, 0] + slack))))
    if others.size:  # a logit that reads several s-ops, or numbers: never known to be the value on
        move_lo, move_hi = parts.move_range()
        _, value_hi = parts.compiled_range()
        high_other[others] = high_none[others] = value_hi[others] + move_hi[others] + extra[others]
        deviation = max(deviation, float(np.max(np.maximum(-move_lo[others], move_hi[others]) + extra[others])))
    if categorical.size:
        lowest = float(on_low[categorical].min())
        with np.errstate(divide="ignore", invalid="ignore"):
            # a value on: at or above the threshold, and above every other logit; none on: all below it
            drop = np.where(reference > threshold, (reference - on_low) / (reference - threshold), np.inf)
            rise = np.maximum(high_other, 0.0) / lowest if lowest > 0 else np.full(columns, np.inf)
        drop = np.where(np.isfinite(on_low), drop, 0.0)
        share[categorical] = np.maximum.reduce([drop, rise, np.maximum(high_none, 0.0) / threshold])[categorical]
    order = np.argsort(-share, kind="stable")
    tightest = tuple(int(c) for c in order[: min(3, columns)] if share[c] > 0)
    return OutputBound(float(share.max(initial=0.0)), deviation, tightest)


def interference_bound(structure, w: np.ndarray) -> InterferenceBound:
    """Bound the model of ``structure`` compressed by ``w`` (module docstring).

    Args:
      structure: the model's :class:`~compression.analytic.structure.ResidualStructure` (its
        ``view`` holds the weights).
      w: the projection ``[D, d]``, any W (analytic, learned, hand-made).
    Returns:
      The :class:`InterferenceBound`: per sub-layer its deviation and load, and whether every
      output is decoded right on every input (``claims_exact``).
    Raises:
      CompressionError: ``w`` does not have one row per residual coordinate.
    """
    view: ModelView = structure.view
    w = np.asarray(w, np.float64)
    if w.ndim != 2 or w.shape[0] != view.residual_dim:
        raise CompressionError(f"the projection has shape {w.shape}; the model's residual stream needs {view.residual_dim} rows")
    proj = projection(view, w)
    protected = list(structure.protected)
    protected_error = 0.0
    if protected:
        rows = w[protected] @ w.T
        rows[np.arange(len(protected)), protected] -= 1.0
        protected_error = float(np.abs(rows).max())
    found = walk(view, proj, structure.classes, frozenset(structure.merger_layers))
    output = unembedding_load(view, proj, found.errors)
    reads = (*found.reads, ReadBound(len(view.sublayers), "unembed", output.deviation, output.load))
    claims = bool(np.isfinite(output.load) and output.load < 1.0)
    return InterferenceBound(protected_error, reads, claims, found.score_shift, output.deviation, output.tightest)
