"""Analytic residual projections: compile a model into superposition without training.

Two constructions of ``W`` (D x d) from a model's :class:`~compression.analytic.structure.ResidualStructure`,
and the interference bound that says when the compressed model is exact (docs/compression.md,
"Analytic projections"):

* :func:`random_projection`: protected coordinates on their own axes, every other categorical
  coordinate on a random unit direction in the remaining ``d - p`` dimensions.
* :func:`packed_projection`: protected axes as above; coordinates nothing reads get the zero
  column; each categorical s-op gets its own block holding an exclusive-value code
  (:mod:`compression.analytic.codes`) whose overlap its readers tolerate.

:func:`interference_bound` follows the forward pass sub-layer by sub-layer: with ``G = W Wᵀ`` the
model reads ``x G`` instead of ``x``, and the bound tracks how far any categorical read can move
(given one on value per s-op and what earlier noisy writes left behind) and checks each tolerant
reader's margin. It holds for any ``W``, learned ones included; it claims exactness only when
protected coordinates are read exactly, no value written into a protected coordinate can move
further than in the compiled model (to within ``PROTECTED_WRITE_ATOL``), and every margin holds.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Literal

import numpy as np

from compression.analytic.codes import exclusive_code, smallest_code
from compression.analytic.structure import UNEMBED, ResidualStructure
from constructions.superposition.features import random_unit_features
from craft.numerics import gram as inner_products

Method = Literal["random", "packed"]

# Float noise the compiled model itself leaves on one-hots (discretising MLPs, softmax tails),
# counted as an initial deviation of every categorical value.
FLOAT_SLACK = 1e-4
# Protected coordinates must be read back to within this (orthonormal axes give ~1e-7).
PROTECTED_ATOL = 1e-5
# How much further than in the compiled model (both as worst-case envelopes built on FLOAT_SLACK)
# a tolerant reader may move a value it writes into a protected coordinate (interference_bound):
# chosen margins, not derived ones. Read as a number (the value of a head writing numbers, a
# numerical MLP, a numerical output) the error moves the number itself, so the margin is the
# float slack. Read only as a query or key (or by a lookup), the error shifts attention scores;
# the exact library models need up to 3.3e-3 there (sort_freq at 10/10), hence 100 float slacks.
# The wrong models of the seed-0 zoo needed 2.6e-3 read as a number (program 7,071) and 0.088.
PROTECTED_WRITE_ATOL = 1e-2
NUMBER_WRITE_ATOL = FLOAT_SLACK
# A code for a reader of margin weight A targets overlap SAFETY / A (the exact limit is 1 / A).
SAFETY = 0.9
# Two-sided overlap targeted for s-ops whose values an attention head copies.
COPY_OVERLAP = 0.2


@dataclasses.dataclass(frozen=True)
class ReadBound:
    """The bound at one tolerant read: worst deviation of a read value and the margin used."""

    layer: int
    kind: str
    deviation: float  # |x̂_i - x_i| is at most this for every read coordinate, every input
    load: float  # must stay below 1 (lookup: A * worst one-sided move; unembed: on drop + off rise)


@dataclasses.dataclass(frozen=True)
class InterferenceBound:
    """Result of :func:`interference_bound`."""

    protected_error: float  # max |G - I| on rows of protected coordinates
    reads: tuple[ReadBound, ...]
    claims_exact: bool
    # how much further than in the compiled model a tolerant reader can move a value it writes into
    # a protected coordinate (see :func:`interference_bound`); must stay within PROTECTED_WRITE_ATOL
    protected_write_error: float = 0.0
    # the same over protected coordinates read as numbers; must stay within NUMBER_WRITE_ATOL
    number_write_error: float = 0.0

    @property
    def max_load(self) -> float:
        return max((r.load for r in self.reads), default=0.0)


@dataclasses.dataclass(frozen=True)
class AnalyticReport:
    """What an analytic projection promises and what it achieved."""

    method: str
    residual_dim: int
    d: int
    protected: int  # coordinates on their own axes
    bound: InterferenceBound
    claimed_exact: bool
    measured_exact: bool | None = None  # every evaluated input equals RASP (None: not measured)
    sequence_accuracy: float | None = None
    inputs_checked: int = 0
    inputs_enumerated: bool = False


def interference_bound(structure: ResidualStructure, projection: np.ndarray) -> InterferenceBound:
    """Bound the read deviations of the model compressed by ``projection`` (W) (see the module docstring).

    State carried through the sub-layers: ``rho`` bounds how far an on value has drifted from 1
    and ``nu`` how far an off value has drifted from 0 (both start at ``FLOAT_SLACK``). At a read
    of categorical coordinate ``i`` of s-op ``g`` at sub-layer ``l``, with ``G = w wᵀ``:

    * another s-op ``h`` present at ``l`` adds at most ``(1+rho) max_k |G_ik| + nu sum_k |G_ik|``
      (one value of ``h`` on, the others off);
    * ``g`` itself adds ``max_{j!=i} G_ij (1+rho)`` upwards when ``i`` is off and another value is
      on (one-sided: a negative overlap only lowers an off read), and ``nu sum_{j!=i} |G_ij|``;
    * an on ``i`` reads ``G_ii x_i`` with ``x_i`` in ``[1-rho, 1+rho]``.

    Values of one class (:attr:`ResidualStructure.classes`) with equal rows of ``w`` act as one
    value: the reference for a read of ``i`` is then the sum of the compiled values of ``i`` and
    those class-mates, and a coordinate written by a layer reading such values may be on at up to its
    ``amplification`` instead of 1 (which only the unembedding reads, and its argmax ignores).

    A lookup unit ``relu(sum a_j x_j - b)`` (exact pre-activation 1 on, <= -1 off, ``sum a_j <= A``)
    stays exact when ``A * (largest move) < 1``: off units then write exactly 0, and an on unit (all
    its inputs on) drifts by at most ``A`` times the largest move of an on value. A
    value copy of fan-in ``f`` (:class:`~compression.analytic.structure.TolerantRead`) writes each
    value as the sum of the reads of up to ``f`` values, so it moves an off value by up to ``f``
    times the largest off move and an on value by its own move plus ``f - 1`` off moves. The
    unembedding's argmax is right when the largest drop of an on logit plus the largest rise of an
    off logit is below 1.

    Protected coordinates are read back exactly (``G`` is the identity on their rows), which only
    helps if the value written into them is the compiled one: a softmax or a numerical MLP reading
    it tolerates no margin. So the bound also follows, per coordinate, the deviation caused by
    ``W`` (:func:`_interference_writes`: the recursion with the drift carried per coordinate,
    against the same recursion for the compiled model) and claims exactness only if no tolerant
    reader that writes a protected coordinate can move it more than the compiled model's own float
    noise does, give or take ``PROTECTED_WRITE_ATOL``. A copy of values in superposition
    never does (its off reads pass through); a lookup of unit-norm codes does (off units write 0,
    on units read their own vector). Other writers of protected coordinates (attention with
    protected queries, keys and values, numerical MLPs) read only protected coordinates, so by
    induction over the sub-layers they write exact values too.
    """
    w = np.asarray(projection, np.float64)
    gram = inner_products(w)
    protected = list(structure.protected)
    protected_error = 0.0
    if protected:  # the protected rows of G against the identity's (no D x D identity: 2 GB at D = 16k)
        rows = gram[protected]
        rows[np.arange(len(protected)), protected] -= 1.0
        protected_error = float(np.abs(rows).max())
    group_of = structure.group_of()
    members = [np.asarray(g, dtype=np.int64) for g in structure.groups]
    sharing = _sharing(structure, w)
    amp = structure.amplification_of()
    written = np.asarray(structure.written_at)
    rho = nu = FLOAT_SLACK
    reads: list[ReadBound] = []
    ok = protected_error <= PROTECTED_ATOL
    for layer in sorted({r.layer for r in structure.reads}):
        new_rho, new_nu = rho, nu
        for read in (r for r in structure.reads if r.layer == layer):
            off_up = off_down = on_up = on_down = 0.0
            for i in read.coords:
                own = group_of[i]
                cross = 0.0
                for h, coords in enumerate(members):
                    if h == own:
                        continue
                    present = coords[written[coords] < layer]
                    if present.size:
                        row = np.abs(gram[i, present])
                        cross += (1 + rho) * (row * amp[present]).max() + nu * row.sum()
                others = members[own][~np.isin(members[own], sharing[i])]
                within = gram[i, others] * amp[others]
                spread = nu * (np.abs(gram[i, members[own]]).sum()) + cross
                top = max(float(within.max()), 0.0) if within.size else 0.0
                bottom = max(float(-within.min()), 0.0) if within.size else 0.0
                off_up = max(off_up, top * (1 + rho) + spread)
                off_down = max(off_down, bottom * (1 + rho) + spread)
                on_up = max(on_up, max(gram[i, i] * amp[i] * (1 + rho) - 1, 0.0) + spread)
                on_down = max(on_down, max(1 - gram[i, i] * (1 - rho), 0.0) + spread)
            deviation = max(off_up, off_down, on_up, on_down)
            if read.kind == "lookup":
                load = read.weight * max(off_up, on_up, on_down)
                new_rho = max(new_rho, read.weight * max(on_up, on_down))  # only on units write
            elif read.kind == "copy":
                load = 0.0
                off_move = max(off_up, off_down)
                new_rho = max(new_rho, max(on_up, on_down) + (read.weight - 1) * off_move)
                new_nu = max(new_nu, read.weight * off_move)
            elif read.kind == UNEMBED:
                load = on_down + off_up
            else:
                raise ValueError(f"unknown read kind {read.kind!r}")
            ok = ok and load < 1.0
            reads.append(ReadBound(layer, read.kind, float(deviation), float(load)))
        rho, nu = new_rho, new_nu
    write_error, number_error = _interference_writes(structure, gram, sharing, amp)
    ok = ok and write_error <= PROTECTED_WRITE_ATOL and number_error <= NUMBER_WRITE_ATOL
    return InterferenceBound(protected_error, tuple(reads), bool(ok), float(write_error), float(number_error))


def _interference_writes(structure: ResidualStructure, gram: np.ndarray, sharing: dict[int, np.ndarray],
                         amp: np.ndarray) -> tuple[float, float]:
    """How much further ``W`` can move a value that a tolerant reader writes into a protected
    coordinate than the compiled model's own float noise moves it: the largest excess over all
    such coordinates, and over those read as numbers (:attr:`ResidualStructure.read_as_number`);
    0 when none is written.

    The recursion of :func:`interference_bound` with its drifts carried per coordinate: ``on[k]``
    bounds how far coordinate ``k`` is from its ideal value (1, times the amplification) when it
    is on, ``off[k]`` how far from 0 when it is off; both start at ``FLOAT_SLACK`` for every
    categorical coordinate (the noise the bound grants the compiled model, which a coordinate
    written by anything but a tolerant reader keeps), except that off values the compiled model
    writes as exactly 0 (:attr:`ResidualStructure.exact_off`: the embedding's, a lookup's) start
    at 0; a tolerant reader's writes get the drifts computed here. At a read of ``i``: its own
    value's drift (``|G_ii|`` times it, plus ``|G_ii - 1|`` for an on value), each other value of its group
    (the largest overlap with an on one, its largest positive one for a lookup's off units, and
    ``|G_ij|`` times the drift of each off one: the compiled noise of off values leaks into ``i``
    through ``W``) and each other group present (one value on, the others off, likewise). A copy
    of fan-in ``f`` writes an on value that moves by its on move plus ``f - 1`` off moves and off
    values that move by ``f`` off moves; a lookup whose margin holds writes on values that move
    by ``A`` times its on move and off values that are exactly 0, else it is unbounded. The same
    recursion with ``W = I`` (the compiled model: only a value's own drift) gives the compiled
    model's envelope. The result is the largest excess of the first over the second at a protected
    coordinate a tolerant reader writes.
    """
    protected = set(structure.protected)
    if not any(set(r.writes) & protected for r in structure.reads):
        return 0.0, 0.0
    as_number = set(structure.read_as_number)
    group_of = structure.group_of()
    members = [np.asarray(g, dtype=np.int64) for g in structure.groups]
    categorical = np.zeros(structure.residual_dim, bool)
    categorical[[i for g in structure.groups for i in g]] = True
    written = np.asarray(structure.written_at)
    on = np.where(categorical, FLOAT_SLACK, 0.0)
    off = on.copy()
    off[list(structure.exact_off)] = 0.0
    on_1, off_1 = on.copy(), off.copy()  # the compiled model's envelopes
    worst = worst_number = 0.0

    def group_load(i: int, coords: np.ndarray) -> tuple[float, float, float]:
        """(largest signed overlap with an on value, largest |overlap| with one, summed off drift)."""
        row = gram[i, coords]
        touched = row != 0  # no 0 * inf
        with_on = np.zeros(len(coords))
        with_on[touched] = np.abs(row[touched]) * on[coords][touched]
        leak = np.abs(row[touched]) @ off[coords][touched]
        return float((row * amp[coords] + with_on).max()), float((np.abs(row) * amp[coords] + with_on).max()), float(leak)

    for layer in sorted({r.layer for r in structure.reads}):
        updates = []
        for read in (r for r in structure.reads if r.layer == layer and r.kind != UNEMBED):
            off_up = off_move = on_move = on_plain = off_plain = 0.0
            for i in read.coords:
                own = group_of[i]
                cross = 0.0
                for h, coords in enumerate(members):
                    if h != own and (here := coords[written[coords] < layer]).size:
                        _, largest, leak = group_load(i, here)
                        cross += largest + leak
                others = members[own][~np.isin(members[own], sharing[i])]
                top, largest, leak = group_load(i, others) if others.size else (0.0, 0.0, 0.0)
                g_ii = abs(gram[i, i])
                off_up = max(off_up, g_ii * off[i] + max(top, 0.0) + leak + cross)
                off_move = max(off_move, g_ii * off[i] + largest + leak + cross)
                on_move = max(on_move, abs(gram[i, i] - 1.0) * amp[i] + g_ii * on[i] + leak + cross)
                on_plain, off_plain = max(on_plain, float(on_1[i])), max(off_plain, float(off_1[i]))
            f = read.weight
            if read.kind == "copy":  # passes moves either way on, summed over the f values sent to one
                moved = (on_move + (f - 1) * off_move, f * off_move)
                moved_1 = (on_plain + (f - 1) * off_plain, f * off_plain)
            elif f * max(off_up, on_move) < 1.0:  # a lookup whose margin holds: off units write 0
                moved, moved_1 = (f * on_move, 0.0), (f * on_plain, 0.0)
            else:
                moved, moved_1 = (np.inf, np.inf), (f * on_plain, 0.0)
            updates.append((read.writes, moved, moved_1))
        fresh = {k for writes, _, _ in updates for k in writes}
        on[list(fresh)] = off[list(fresh)] = on_1[list(fresh)] = off_1[list(fresh)] = 0.0  # what the writer leaves
        for writes, (m_on, m_off), (p_on, p_off) in updates:
            for k in writes:
                on[k], off[k] = max(on[k], m_on), max(off[k], m_off)
                on_1[k], off_1[k] = max(on_1[k], p_on), max(off_1[k], p_off)
                if k in protected:
                    excess = max(float(on[k] - on_1[k]), float(off[k] - off_1[k]))
                    worst = max(worst, excess)
                    if k in as_number:
                        worst_number = max(worst_number, excess)
    return worst, worst_number


def _sharing(structure: ResidualStructure, w: np.ndarray) -> dict[int, np.ndarray]:
    """Per categorical coordinate: the coordinates that act as the same value in ``w``: itself and
    the members of its class (:attr:`ResidualStructure.classes`) whose row of ``w`` equals its own.
    Reading i while one of them is on is reading i on."""
    out = {i: np.asarray([i]) for g in structure.groups for i in g}
    for members in structure.classes:
        for i in members:
            out[i] = np.asarray([j for j in members if np.array_equal(w[j], w[i])])
    return out


def _check_width(structure: ResidualStructure, d: int) -> int:
    p = len(structure.protected)
    if d < p:
        raise ValueError(f"d={d} is below the {p} protected coordinates of this model (numerical s-ops, one, BOS, "
                         f"attention query/key reads); choose d >= {p}")
    return p


def random_projection(structure: ResidualStructure, d: int, seed: int = 0) -> np.ndarray:
    """Protected coordinates on axes ``0..p-1``; every other categorical coordinate on a random unit
    vector in the last ``d - p`` dimensions (``constructions.superposition.features.random_unit_features``)."""
    p = _check_width(structure, d)
    w = np.zeros((structure.residual_dim, d), np.float64)
    w[list(structure.protected), np.arange(p)] = 1.0
    rest = [i for g in structure.groups for i in g if i not in set(structure.protected)]
    if rest:
        if d == p:
            raise ValueError(f"d={d} leaves no dimension for the {len(rest)} categorical coordinates; use d > {p}")
        features = random_unit_features("residual", len(rest), d - p, seed)
        w[rest, p:] = features.write
    return w.astype(np.float32)


@dataclasses.dataclass(frozen=True)
class GroupNeed:
    """One s-op's free coordinates, grouped into the values its code must tell apart (a class of
    alike values shares one code vector), and the overlap its readers tolerate."""

    values: tuple[tuple[int, ...], ...]
    limit: float
    one_sided: bool

    @property
    def coords(self) -> tuple[int, ...]:
        return tuple(i for value in self.values for i in value)


def group_needs(structure: ResidualStructure) -> list[GroupNeed]:
    """Per categorical s-op with free coordinates: the overlap its code may have."""
    group_of = structure.group_of()
    free = set(structure.free)
    limits: dict[int, float] = {}
    one_sided: dict[int, bool] = {}
    for read in structure.reads:
        weight = read.weight if read.kind == "lookup" else 2.0
        for i in read.coords:
            g = group_of[i]
            limits[g] = min(limits.get(g, 1.0), SAFETY / weight)
            if read.kind == "copy":  # the reads of up to `fan-in` values add up in one written value
                limits[g] = min(limits[g], COPY_OVERLAP / max(read.weight, 1.0))
                one_sided[g] = False
            one_sided.setdefault(g, True)
    class_of = structure.class_of()
    needs = []
    for g, coords in enumerate(structure.groups):
        values: dict[int, list[int]] = {}
        for i in coords:
            if i in free:
                values.setdefault(class_of[i], []).append(i)
        if values:
            needs.append(GroupNeed(tuple(tuple(v) for v in values.values()), limits.get(g, SAFETY / 2),
                                   one_sided.get(g, True)))
    return needs


def packed_width(structure: ResidualStructure, seed: int = 0) -> int:
    """The d at which :func:`packed_projection` gives every s-op its full-margin code."""
    needs = group_needs(structure)
    return len(structure.protected) + sum(_code(len(n.values), n.limit, n.one_sided, seed).shape[1] for n in needs)


def packed_projection(structure: ResidualStructure, d: int, seed: int = 0) -> np.ndarray:
    """Protected axes, zero columns for unread coordinates, and one code block per s-op.

    Each s-op gets the fewest dimensions whose code meets its readers' overlap limit; when ``d``
    is too small for all of them, the widest blocks are narrowed one dimension at a time (codes
    with a larger overlap, which the bound then judges). (Narrowing instead the block whose
    narrowing keeps the bound's largest load smallest was tried: it follows the conservative bound
    and is measured exact 1-3 dimensions later on reverse, sort, shift_by_1 and detect_abc.)
    """
    p = _check_width(structure, d)
    needs = group_needs(structure)
    widths = [_code(len(n.values), n.limit, n.one_sided, seed).shape[1] for n in needs]
    budget = d - p
    if needs and budget < len(needs):
        raise ValueError(f"d={d} leaves {budget} dimensions for {len(needs)} categorical s-ops; "
                         f"the packed projection needs d >= {p + len(needs)}")
    while sum(widths) > budget:
        widths[int(np.argmax(widths))] -= 1
    w = np.zeros((structure.residual_dim, d), np.float64)
    w[list(structure.protected), np.arange(p)] = 1.0
    column = p
    for need, width in zip(needs, widths):
        code = _code(len(need.values), need.limit, need.one_sided, seed)
        if width != code.shape[1]:
            code = _code(len(need.values), need.limit, need.one_sided, seed, width)
        for value, vector in zip(need.values, code):
            w[list(value), column:column + width] = vector
        column += width
    return w.astype(np.float32)


@functools.lru_cache(maxsize=512)
def _code(n: int, limit: float, one_sided: bool, seed: int, k: int | None = None) -> np.ndarray:
    """The full-margin code (``k`` None) or the best code in ``k`` dimensions; cached (the width
    searches rebuild the same codes at every d), read-only."""
    code = smallest_code(n, limit, one_sided, seed) if k is None else exclusive_code(n, k, one_sided, seed)
    code.setflags(write=False)
    return code


def make_projection(structure: ResidualStructure, method: Method, d: int, seed: int = 0) -> np.ndarray:
    """The ``method`` projection at width ``d``."""
    if method == "random":
        return random_projection(structure, d, seed)
    if method == "packed":
        return packed_projection(structure, d, seed)
    raise ValueError(f"unknown analytic method {method!r}; use 'random' or 'packed'")


def min_width(structure: ResidualStructure, method: Method) -> int:
    """The smallest d the construction accepts."""
    p = len(structure.protected)
    if method == "packed":
        return p + len(group_needs(structure))
    has_rest = any(i not in set(structure.protected) for g in structure.groups for i in g)
    return p + (1 if has_rest else 0)

