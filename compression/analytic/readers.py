"""How far a projection can move what a reader reads, state by state.

A *reader* is a column ``a`` of a matrix over the residual coordinates (a hidden unit's input
weights, a query or key dimension, a head's value for one written coordinate, an output logit;
:mod:`compression.analytic.view`). The compiled model reads ``x · a``; the model compressed by
``W`` reads ``x̂ · a`` with

    x̂ = x G + E G,   G = W Wᵀ,

where ``E`` is what earlier sub-layers wrote wrongly (compressed minus compiled output, summed).
So the read moves by ``Δ = x · c + E · b`` with ``b = G a`` and ``c = b - a`` (``c = b - S a``
at a layer whose alike values share a direction, where the compiled reference is ``x S`` with
``S`` summing each value's class-mates of equal rows of W: :mod:`compression.analytic.bound`).
Without a projection (``W = I``) ``c = 0`` and ``b = a``: what is left is how ``E`` alone moves
the read, which is how the compiled model's own float noise is followed.

The compiled ``x`` is not arbitrary: each categorical s-op holds at most one value, on (at 1
give or take its noise ``η_on``), every other of its coordinates off (within ``η_off`` of 0). So
per s-op the move takes one of a few values: value j on, or none on. ``E`` is known per
categorical coordinate separately for the states where that coordinate is on and where it is
off (a lookup's off units write an exact 0, so its outputs are often wrong only when on). Per
s-op, with ``t_j`` what coordinate j adds to the move while on and ``o_j`` while off,

    value j on: Σ_{j' in s-op} o_j' + (t_j - o_j),   none on: Σ o_j'.

:func:`reader_parts` reduces every reader to, per s-op: the weight it gives the s-op's values
(when it is the same for every value it reads: a *regular* reader), how far the move can go
while one of those values is on against while none of them is (``shift``, with ``off`` the
latter), and a *base* interval that holds in every state: the s-ops' off moves, numbers
(``±|x_i| |c_i|`` and their ``E``), ``one`` (exactly ``c_one``) and the float rounding of the
compressed read (:attr:`Projection.rounding`). Every bound here holds for every input; nothing
is sampled.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy import sparse

from compression.analytic.view import ModelView, Noise

# Unit round-off of float32.
FLOAT32_UNIT = 2.0 ** -24
# Most (coordinates x readers) entries one chunk of reader_parts holds in one array.
CHUNK_ENTRIES = 4_000_000


@dataclasses.dataclass(frozen=True)
class Errors:
    """Intervals holding ``E`` per residual coordinate, apart for the states where a categorical
    coordinate is on and where it is off (the same interval twice for numbers), plus a part
    proportional to the coordinate's exact value, ``x [scale_lo, scale_hi]`` (a mixture of
    non-negative values whose weights move by a factor: its error scales with its value)."""

    on_lo: np.ndarray
    on_hi: np.ndarray
    off_lo: np.ndarray
    off_hi: np.ndarray
    scale_lo: np.ndarray
    scale_hi: np.ndarray

    def __post_init__(self) -> None:
        # An end that came out NaN (``inf - inf`` where an error is unbounded on both sides) is
        # unbounded; left NaN it would vanish in a later comparison and let a claim through.
        for name in ("on_lo", "on_hi", "off_lo", "off_hi", "scale_lo", "scale_hi"):
            object.__setattr__(self, name, _unbounded_where_undefined(name, np.asarray(getattr(self, name))))

    @staticmethod
    def zero(width: int) -> Errors:
        z = np.zeros(width)
        return Errors(z, z, z, z, z, z)

    def plus(self, on_lo: np.ndarray, on_hi: np.ndarray, off_lo: np.ndarray, off_hi: np.ndarray,
             scale_lo: np.ndarray | None = None, scale_hi: np.ndarray | None = None) -> Errors:
        """These errors followed by more (scales compose: ``(1 + a)(1 + b) - 1``)."""
        def compose(a: np.ndarray, b: np.ndarray | None, pick) -> np.ndarray:
            if b is None:
                return a
            with np.errstate(invalid="ignore"):  # inf * 0: no product where either is 0
                product = np.where((a == 0) | (b == 0), 0.0, a * b)
            return a + b + pick(product, 0.0)

        lo, hi = compose(self.scale_lo, scale_lo, np.minimum), compose(self.scale_hi, scale_hi, np.maximum)
        return Errors(self.on_lo + on_lo, self.on_hi + on_hi, self.off_lo + off_lo, self.off_hi + off_hi, lo, hi)

    def absolute(self, magnitude: np.ndarray, keep: np.ndarray | None = None) -> Errors:
        """The proportional parts folded into the intervals with ``|x| <= magnitude`` (except at
        the coordinates ``keep``)."""
        folded = magnitude * np.maximum(np.abs(self.scale_lo), np.abs(self.scale_hi))
        fold = np.ones(len(folded), bool) if keep is None else ~np.isin(np.arange(len(folded)), keep)
        folded = np.where(fold, folded, 0.0)
        return Errors(self.on_lo - folded, self.on_hi + folded, self.off_lo - folded, self.off_hi + folded,
                      np.where(fold, 0.0, self.scale_lo), np.where(fold, 0.0, self.scale_hi))

    def largest(self) -> np.ndarray:
        """Per coordinate, the largest ``|E|`` in any state (proportional parts left out)."""
        return np.max(np.abs([self.on_lo, self.on_hi, self.off_lo, self.off_hi]), axis=0)

    def erring(self) -> np.ndarray:
        """Coordinates whose ``E`` may be non-zero."""
        return np.nonzero((self.on_lo != 0) | (self.on_hi != 0) | (self.off_lo != 0) | (self.off_hi != 0)
                          | (self.scale_lo != 0) | (self.scale_hi != 0))[0]


@dataclasses.dataclass(frozen=True, eq=False)
class Projection:
    """A projection W ``[D, d]`` with what every reader needs of it.

    ``mixed``: coordinates whose row of W is not a unit vector on an axis of their own (only those
    rows of ``G - I`` can be non-zero). ``rounding``: per coordinate, a bound on the float32
    rounding of the compressed read ``x̂_i`` beyond the compiled model's own. It is 0 on an axis of
    its own (the same sums as the compiled model). Elsewhere, with ``S_k`` what stream column k
    can hold (per s-op its largest ``|W_jk|``, since one value is on, plus numbers at their
    magnitude), a sum rounds by at most ``u`` times its absolute terms for every term past the
    first that is not 0 (adding an exact 0 is exact): writing a sub-layer's output through W adds
    the s-ops sharing column k (``g_k``), the stream adds the sub-layers writing them (``w_k``),
    and the read adds the ``m_i`` columns of row i:
    ``u Σ_k |W_ik| S_k (g_k - 1 + w_k - 1) + u (m_i - 1) Σ_k |W_ik| S_k``.
    """

    w: np.ndarray
    mixed: np.ndarray
    rounding: np.ndarray

    @property
    def d(self) -> int:
        return self.w.shape[1]


def projection(view: ModelView, w: np.ndarray) -> Projection:
    """The :class:`Projection` of ``w`` for the model of ``view``."""
    w = np.asarray(w, np.float64)
    nonzero = w != 0
    column_rows = nonzero.sum(axis=0)
    row_entries = nonzero.sum(axis=1)
    own_axis = (row_entries == 1) & (np.abs(w).max(axis=1) == 1.0)
    own_axis &= column_rows[np.argmax(nonzero, axis=1)] == 1
    mixed = ~own_axis
    holds = np.zeros(w.shape[1])  # S_k
    sharing = np.zeros(w.shape[1])  # s-ops and numbers per column
    writers = np.zeros(w.shape[1])  # sub-layers writing into each column
    for coords in view.groups:
        part = np.abs(w[coords])
        holds += (part * view.high[coords, None]).max(axis=0)
        sharing += part.any(axis=0)
        writers += (nonzero[coords] * view.writers[coords, None]).max(axis=0)
    rest = ~view.categorical
    holds += view.magnitude[rest] @ np.abs(w[rest])
    sharing += nonzero[rest].sum(axis=0)
    writers += (nonzero[rest] * view.writers[rest, None]).sum(axis=0)
    per_column = holds * (np.maximum(sharing - 1, 0) + np.maximum(writers - 1, 0))
    rounding = FLOAT32_UNIT * (np.abs(w) @ per_column + np.maximum(row_entries - 1, 0) * (np.abs(w) @ holds))
    rounding[~mixed] = 0.0
    return Projection(w, mixed, rounding)


@dataclasses.dataclass(frozen=True)
class ReaderParts:
    """Every reader of one matrix reduced per s-op (module docstring); arrays over readers ``[n]``
    and over s-ops and readers ``[G, n]``.

    The compiled value of a regular reader with the s-ops ``M`` on is
    ``bias + Σ_{g in M} alpha_g`` plus a number in ``[numbers_lo, numbers_hi]`` and noise within
    ``± noise``; its move is within ``[base_lo + Σ_{g in M} shift_lo_g, base_hi + Σ_{g in M} shift_hi_g]``.
    ``off_lo``/``off_hi`` is s-op g's share of the base (its values the reader does not weigh on,
    or none on); for an s-op the reader does not read at all it is the whole s-op's.
    An irregular reader (several weights on one s-op's values) has ``alpha_lo``/``alpha_hi``,
    the smallest and largest weight, instead of one ``alpha``.
    """

    bias: np.ndarray
    numbers_lo: np.ndarray
    numbers_hi: np.ndarray
    reads_numbers: np.ndarray  # bool
    noise: np.ndarray
    read: np.ndarray  # [G, n] bool: the reader gives some value of s-op g a non-zero weight
    alpha_lo: np.ndarray  # [G, n] (0 where not read)
    alpha_hi: np.ndarray
    shift_lo: np.ndarray  # [G, n]
    shift_hi: np.ndarray
    off_lo: np.ndarray  # [G, n]
    off_hi: np.ndarray
    base_lo: np.ndarray
    base_hi: np.ndarray

    @property
    def regular(self) -> np.ndarray:
        """[n] bool: every s-op read gets one weight."""
        return ~np.any(self.read & (self.alpha_lo != self.alpha_hi), axis=0)

    def compiled_range(self) -> tuple[np.ndarray, np.ndarray]:
        """The compiled value's range over every state ``[n]``."""
        lo = self.bias + np.minimum(self.alpha_lo, 0.0).sum(axis=0) + self.numbers_lo - self.noise
        hi = self.bias + np.maximum(self.alpha_hi, 0.0).sum(axis=0) + self.numbers_hi + self.noise
        return lo, hi

    def move_range(self) -> tuple[np.ndarray, np.ndarray]:
        """The move's range over every state ``[n]``."""
        return (self.base_lo + np.minimum(self.shift_lo, 0.0).sum(axis=0),
                self.base_hi + np.maximum(self.shift_hi, 0.0).sum(axis=0))

    def largest_move(self) -> np.ndarray:
        lo, hi = self.move_range()
        return np.maximum(np.abs(lo), np.abs(hi))


def _reduce(values: np.ndarray, mask: np.ndarray, starts: np.ndarray, fn: np.ufunc, empty: float) -> np.ndarray:
    return fn.reduceat(np.where(mask, values, empty), starts, axis=0)


def _interval(scale: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``[lo, hi] * scale`` elementwise (``scale`` of any sign), broadcasting ``lo``/``hi`` over columns."""
    with np.errstate(invalid="ignore"):
        a, b = lo[:, None] * scale, hi[:, None] * scale
    # an unbounded value times a zero weight contributes nothing (not NaN)
    a, b = np.where(scale == 0, 0.0, a), np.where(scale == 0, 0.0, b)
    return np.minimum(a, b), np.maximum(a, b)


def compiled_ranges(view: ModelView, low: np.ndarray, high: np.ndarray, matrix: sparse.csc_array) -> tuple[np.ndarray, np.ndarray]:
    """The range of each reader's compiled value over every input, with ``low <= x <= high``
    (per s-op one value on, or none; numbers anywhere within their range)."""
    return reader_parts(view, None, matrix, ranges=(low, high)).compiled_range()


def reader_parts(view: ModelView, proj: Projection | None, matrix: sparse.csc_array, errors: Errors | None = None,
                 merge: sparse.csr_array | None = None, ranges: tuple[np.ndarray, np.ndarray] | None = None,
                 noise: Noise | None = None) -> ReaderParts:
    """:class:`ReaderParts` of every column of ``matrix`` ``[D, n]`` under ``proj`` (None: the
    compiled model, ``W = I``), with ``E`` within ``errors`` (None: 0), the class-sharing
    reference ``merge`` (``S``; None: the identity) and the compiled model's ``noise`` where the
    reading happens (None: exact values)."""
    width, n = matrix.shape
    low, high = (view.low, view.high) if ranges is None else ranges
    magnitude = np.maximum(np.abs(low), np.abs(high))
    errors = None if errors is None else errors.absolute(view.magnitude)
    rows = np.concatenate(view.groups) if view.groups else np.zeros(0, np.int64)
    starts = np.cumsum([0] + [len(g) for g in view.groups[:-1]]).astype(np.int64) if view.groups else np.zeros(0, np.int64)
    groups = len(view.groups)
    live = ~view.dead[rows]
    noise = Noise.zero(width) if noise is None else noise
    noise_on, noise_off = noise.on[rows], noise.off[rows]
    numeric = np.nonzero(view.numeric)[0]
    erring = np.zeros(0, np.int64) if errors is None else errors.erring()
    erring_numbers = erring[view.numeric[erring]]
    position = np.full(width, -1)
    position[rows] = np.arange(len(rows))
    erring_rows = position[erring[view.categorical[erring]]]  # rows (into `rows`) of erring categorical coordinates
    chunk = max(1, CHUNK_ENTRIES // max(1, width))
    out: dict[str, list[np.ndarray]] = {}

    for start in range(0, n, chunk):
        a = matrix[:, start:start + chunk].toarray()
        ref = a if merge is None else np.asarray(merge @ a)
        m = a.shape[1]
        bias = ref[view.one] if view.one is not None else np.zeros(m)
        weights = ref[numeric]
        numbers_lo = np.sum(np.minimum(weights * low[numeric, None], weights * high[numeric, None]), axis=0)
        numbers_hi = np.sum(np.maximum(weights * low[numeric, None], weights * high[numeric, None]), axis=0)
        c = np.zeros((width, m))
        wta = None
        extra_lo, extra_hi = np.zeros(m), np.zeros(m)
        if proj is not None:
            wta = proj.w.T @ a  # [d, m]
            c[proj.mixed] = proj.w[proj.mixed] @ wta - ref[proj.mixed]
            fixed = np.zeros(m) if view.one is None else c[view.one]
            spread = (magnitude[numeric] + noise.on[numeric]) @ np.abs(c[numeric]) if numeric.size else np.zeros(m)
            rounding = proj.rounding @ np.abs(a)
            extra_lo += fixed - spread - rounding
            extra_hi += fixed + spread + rounding
        if erring.size:  # E · b with b = G a (a without a projection)
            assert errors is not None  # nothing errs without errors
            b = a[erring] if proj is None else proj.w[erring] @ wta
            if erring_numbers.size:
                lo, hi = _interval(b[view.numeric[erring]], errors.on_lo[erring_numbers], errors.on_hi[erring_numbers])
                extra_lo += lo.sum(axis=0)
                extra_hi += hi.sum(axis=0)
        if groups:
            a_rows, c_rows = ref[rows], c[rows]
            spread_on, spread_off = noise_on[:, None] * np.abs(c_rows), noise_off[:, None] * np.abs(c_rows)
            on_lo, on_hi = c_rows - spread_on, c_rows + spread_on  # t_j: coordinate j on
            off_lo, off_hi = -spread_off, spread_off.copy()  # o_j: coordinate j off
            if erring_rows.size:
                assert errors is not None  # erring rows are among `erring`
                cat = view.categorical[erring]
                coords = erring[cat]
                b_cat = b[cat]
                lo, hi = _interval(b_cat, errors.on_lo[coords], errors.on_hi[coords])
                on_lo[erring_rows] += lo
                on_hi[erring_rows] += hi
                lo, hi = _interval(b_cat, errors.off_lo[coords], errors.off_hi[coords])
                off_lo[erring_rows] += lo
                off_hi[erring_rows] += hi
            total_lo = np.add.reduceat(off_lo, starts, axis=0)  # Σ o_j' per s-op
            total_hi = np.add.reduceat(off_hi, starts, axis=0)
            with np.errstate(invalid="ignore"):
                step_lo, step_hi = on_lo - off_lo, on_hi - off_hi  # t_j - o_j
            weighed = (a_rows != 0) & live[:, None]
            unweighed = ~weighed & live[:, None]
            alpha_hi = _reduce(a_rows, weighed, starts, np.maximum, -np.inf)
            alpha_lo = _reduce(a_rows, weighed, starts, np.minimum, np.inf)
            read = np.isfinite(alpha_hi)
            alpha_hi, alpha_lo = np.where(read, alpha_hi, 0.0), np.where(read, alpha_lo, 0.0)
            group_off_hi = total_hi + np.maximum(_reduce(step_hi, unweighed, starts, np.maximum, -np.inf), 0.0)
            group_off_lo = total_lo + np.minimum(_reduce(step_lo, unweighed, starts, np.minimum, np.inf), 0.0)
            group_on_hi = total_hi + _reduce(step_hi, weighed, starts, np.maximum, -np.inf)
            group_on_lo = total_lo + _reduce(step_lo, weighed, starts, np.minimum, np.inf)
            shift_hi = np.where(read, group_on_hi - group_off_hi, 0.0)
            shift_lo = np.where(read, group_on_lo - group_off_lo, 0.0)
            base_lo, base_hi = group_off_lo.sum(axis=0) + extra_lo, group_off_hi.sum(axis=0) + extra_hi
            jitter = np.maximum(noise_on, noise_off) @ np.abs(a_rows)
        else:
            read = np.zeros((0, m), bool)
            alpha_lo = alpha_hi = shift_lo = shift_hi = group_off_lo = group_off_hi = np.zeros((0, m))
            base_lo, base_hi, jitter = extra_lo, extra_hi, np.zeros(m)
        if numeric.size:
            jitter = jitter + noise.on[numeric] @ np.abs(ref[numeric])
        for name, value in (("bias", bias), ("numbers_lo", numbers_lo), ("numbers_hi", numbers_hi),
                            ("reads_numbers", np.any(ref[numeric] != 0, axis=0)), ("noise", jitter), ("read", read),
                            ("alpha_lo", alpha_lo), ("alpha_hi", alpha_hi), ("shift_lo", shift_lo),
                            ("shift_hi", shift_hi), ("off_lo", group_off_lo), ("off_hi", group_off_hi),
                            ("base_lo", base_lo), ("base_hi", base_hi)):
            out.setdefault(name, []).append(value)
    if n == 0:
        empty, grid = np.zeros(0), np.zeros((groups, 0))
        return ReaderParts(empty, empty, empty, np.zeros(0, bool), empty, grid.astype(bool), grid, grid, grid, grid,
                           grid, grid, empty, empty)
    return ReaderParts(**{name: _unbounded_where_undefined(name, np.concatenate(parts, axis=-1))
                          for name, parts in out.items()})


def _unbounded_where_undefined(name: str, values: np.ndarray) -> np.ndarray:
    """An end of an interval that came out NaN (an unbounded error on both sides of a
    difference, ``inf - inf``) is unbounded: ``-inf`` for a low end, ``inf`` for a high end. Left
    NaN, it would vanish in a later comparison (``nan > margin`` is false) and let a claim through."""
    if values.dtype.kind != "f" or not np.isnan(values).any():
        return values
    if name.endswith("_lo"):
        return np.where(np.isnan(values), -np.inf, values)
    if name.endswith("_hi") or name == "noise":
        return np.where(np.isnan(values), np.inf, values)
    return values
