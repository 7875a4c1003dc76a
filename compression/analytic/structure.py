"""What a compiled model reads and writes, per residual coordinate: the input to analytic projections.

Everything here is read off the compiled weights (``ModelConfig`` sparsity patterns and values)
and the labelled residual space, so it is exactly what the forward pass does:

A coordinate counts as *read* by an MLP only through hidden units that write something: a lookup
unit whose table entry is None (or the number 0) changes nothing whatever it sees.

* **groups**: the coordinates of one categorical s-op (``name:value``); at any position at most
  one of them is on (values are mutually exclusive).
* **protected** coordinates: any coordinate that is not a categorical value (numerical s-ops,
  ``one``, attention-internal directions), ``tokens:BOS``, and every categorical coordinate read
  by something that is not a thresholded lookup: attention queries and keys (the softmax turns any
  interference into a changed pattern), MLPs that write numbers or do not threshold, value reads
  of heads that write numbers. An analytic projection gives these their own orthonormal axes.
  Reading a coordinate back exactly is worth nothing if what was written into it is off, so
  protection also runs backwards (:func:`_needs_exact_values`): a head that copies values into a
  protected coordinate has its value reads protected (a copy passes on any interference it reads),
  and a lookup that writes one keeps its inputs free (its off units write exactly 0, its on units
  read their own unit-norm code vector), but the values it reads must in turn be written without
  interference, which protects the value reads of the copies writing them, and so on.
* **reads**: per sub-layer, the tolerant readers of the remaining categorical coordinates and
  their margin (the ``A`` of :func:`compression.analytic.interference_bound`).
* **written_at**: the sub-layer writing each coordinate (-1 for the embedding); a coordinate is
  *present* from then on, because the residual stream never erases anything.
* **classes**: values of one s-op that no reader can tell apart, so they may share one direction.
  Values i and j are alike for a lookup layer when its units testing i and its units testing j
  read the same other inputs with the same weights and write the same outputs: with i and j on one
  direction, value i fires both sets of units, which write the same output twice. Only a layer whose
  outputs nothing but the unembedding reads can do that (the argmax ignores the factor); every
  other reader keeps values apart. **amplification** is that factor per coordinate: the largest
  on value a written coordinate can reach when every class shares one direction (1 elsewhere).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import numpy as np

from compiler import CompiledModel
from compiler.model import weights
from compiler.model.config import AttentionSpec, NormSpec
from compiler.model.folding import without_norm
from compiler.model.norm import NORM_SPREAD
from compiler.model.tying import untied
from compression.analytic.envelope import calibrated
from compression.analytic.readers import FLOAT32_UNIT
from compression.analytic.view import ModelView, model_view
from craft.bases import ONE_NAME, bos_direction

EMBEDDING = -1
UNEMBED = "unembed"


@dataclasses.dataclass(frozen=True)
class TolerantRead:
    """Sub-layer ``layer`` reads categorical ``coords`` through a reader that tolerates noise.

    ``kind``: ``"lookup"`` (a ReLU unit ``relu(sum a_i x_i - b)`` with exact pre-activation 1 when
    on and <= -1 when off; ``weight`` is the largest ``sum a_i`` over its categorical inputs),
    ``"copy"`` (an attention value read copying categorical values; ``weight`` is its *fan-in*,
    the largest ``sum_i |OV_ic|`` over the values ``c`` it writes: 1 for a plain copy, more when the
    optimiser folded a many-to-one Map into the head, whose output value then sums the reads of
    every input value mapped to it) or ``"unembed"`` (the argmax of the output logits, ``layer`` =
    number of sub-layers). ``writes``: the coordinates the reading head or MLP writes (empty for the
    unembedding).
    """

    layer: int
    kind: str
    coords: tuple[int, ...]
    weight: float
    writes: tuple[int, ...] = ()
    # a lookup unit that weighs several values of one s-op (a merged many-to-one unit): a code
    # with a negative overlap between two of them lowers the unit's read while one is on
    sums_values: bool = False


@dataclasses.dataclass(frozen=True)
class ResidualStructure:
    """Groups, protected and unread coordinates, tolerant reads and write times of one model."""

    labels: tuple[str, ...]
    groups: tuple[tuple[int, ...], ...]  # categorical s-ops, coordinates in residual order
    protected: tuple[int, ...]
    unread: tuple[int, ...]  # read by no sub-layer and not by the unembedding
    reads: tuple[TolerantRead, ...]
    written_at: tuple[int, ...]  # per coordinate: sub-layer index, or -1 for the embedding
    num_sublayers: int
    classes: tuple[tuple[int, ...], ...] = ()  # values of one s-op no reader tells apart (2 or more each)
    amplification: tuple[float, ...] = ()  # per coordinate, 1.0 when empty (see the module docstring)
    # categorical coordinates whose off value the compiled model writes as exactly 0: those of the
    # embedding (one-hot rows) and of thresholded lookups (an off unit's ReLU gives exactly 0), as
    # opposed to softmax tails and discretising MLPs
    exact_off: tuple[int, ...] = ()
    # coordinates read by something that turns them into a number (the values of a head writing
    # numbers, an MLP that is not a thresholded lookup of categorical values, a numerical
    # unembedding): a small error there moves a number, not a margin
    read_as_number: tuple[int, ...] = ()
    # sub-layers whose alike values may share one direction (their outputs only the unembedding reads)
    merger_layers: tuple[int, ...] = ()
    # the compiled weights as the interference bound reads them (compression.analytic.view)
    view: ModelView | None = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def residual_dim(self) -> int:
        return len(self.labels)

    @property
    def free(self) -> tuple[int, ...]:
        """Categorical coordinates that are read, and only by tolerant readers."""
        blocked = set(self.protected) | set(self.unread)
        return tuple(i for group in self.groups for i in group if i not in blocked)

    def group_of(self) -> dict[int, int]:
        """Coordinate -> index of its group (categorical coordinates only)."""
        return {i: g for g, group in enumerate(self.groups) for i in group}

    def class_of(self) -> dict[int, int]:
        """Coordinate -> its class's lowest coordinate (itself when it shares with nothing)."""
        out = {i: i for i in range(self.residual_dim)}
        for members in self.classes:
            for i in members:
                out[i] = min(members)
        return out

    def amplification_of(self) -> np.ndarray:
        """Per coordinate, the largest on value it can reach when classes share directions."""
        return np.asarray(self.amplification or (1.0,) * self.residual_dim, np.float64)


def _nonzero_rows(matrix: np.ndarray) -> set[int]:
    return set(np.nonzero(np.any(matrix != 0, axis=1))[0].tolist())


def _nonzero_cols(matrix: np.ndarray) -> set[int]:
    return set(np.nonzero(np.any(matrix != 0, axis=0))[0].tolist())


@dataclasses.dataclass
class _Scan:
    """What the walk over the sub-layers collects (mutable while :func:`residual_structure` runs)."""

    labels: tuple[str, ...]
    by_name: dict[str, list[int]]  # categorical s-op -> its coordinates
    categorical: set[int]
    protected: set[int]
    written_at: list[int | None]
    read_any: set[int] = dataclasses.field(default_factory=set)
    read_by_layers: set[int] = dataclasses.field(default_factory=set)  # the unembedding not counted
    candidate_reads: list[TolerantRead] = dataclasses.field(default_factory=list)
    signatures: dict[int, dict[int, bytes]] = dataclasses.field(default_factory=dict)  # lookup layer -> coord -> units
    writes: dict[int, set[int]] = dataclasses.field(default_factory=dict)
    exact_off: set[int] = dataclasses.field(default_factory=set)
    read_as_number: set[int] = dataclasses.field(default_factory=set)

    def mark_written(self, coords: set[int], index: int) -> None:
        for i in coords:
            if self.written_at[i] is None:
                self.written_at[i] = index


def _start_scan(compiled: CompiledModel) -> _Scan:
    """Groups of categorical values, the initially protected coordinates and the embedding's writes."""
    labels = tuple(compiled.config.residual_labels)
    by_name: dict[str, list[int]] = {}
    categorical = set()
    for i, direction in enumerate(compiled.residual_space.basis):
        if direction.value is not None and not labels[i].endswith("_hidden_attn"):
            by_name.setdefault(direction.name, []).append(i)
            categorical.add(i)
    bos = {i for i, label in enumerate(labels) if label == str(bos_direction())}
    protected = (set(range(len(labels))) - categorical) | bos
    scan = _Scan(labels, by_name, categorical, protected, [None] * len(labels))
    embedded = _nonzero_cols(weights.token_embedding(compiled)) | _nonzero_cols(weights.position_embedding(compiled))
    scan.mark_written(embedded, EMBEDDING)
    scan.exact_off |= embedded & categorical
    return scan


def _scan_attention(scan: _Scan, compiled: CompiledModel, index: int) -> None:
    """Every head reads its queries and keys exactly (protected); a head copying categorical values
    reads them tolerantly, one writing numbers protects them."""
    for head in weights.layer_heads(compiled, index):
        q, k, v = _nonzero_rows(head.w_q), _nonzero_rows(head.w_k), _nonzero_rows(head.w_v)
        out = _nonzero_cols(head.w_o)
        scan.read_any |= q | k | v
        scan.read_by_layers |= q | k | v
        scan.protected |= q | k
        if out <= scan.categorical:
            values = sorted(v & scan.categorical)
            fan_in = float(np.abs(head.w_v[values] @ head.w_o).sum(axis=0).max()) if values else 0.0
            scan.candidate_reads.append(TolerantRead(index, "copy", tuple(values), fan_in, tuple(sorted(out))))
        else:
            scan.protected |= v
            scan.read_as_number |= v
        scan.mark_written(out, index)


def _scan_mlp(scan: _Scan, compiled: CompiledModel, index: int, basis) -> None:
    """A thresholded ReLU lookup that writes categorical values reads its categorical inputs
    tolerantly; any other MLP protects them."""
    mlp = weights.mlp_weights(compiled, index)
    w_in, w_out = mlp.w_in, mlp.w_out
    out = _nonzero_cols(w_out)
    # A hidden unit that writes nothing (a table entry of None or 0) cannot change the output
    # whatever it reads, so its inputs do not count as read.
    if mlp.activation != "bilinear":
        writing = sorted(_nonzero_rows(w_out))
        w_in, w_out = w_in[:, writing], w_out[writing]
    reads = _nonzero_rows(w_in)
    scan.read_any |= reads
    scan.read_by_layers |= reads
    cat_reads = sorted(reads & scan.categorical - scan.protected)
    weight = _lookup_weight(w_in, cat_reads, scan.labels)
    values = sorted(reads & scan.categorical)
    bias = {scan.labels.index(ONE_NAME)} if ONE_NAME in scan.labels else set()
    if (mlp.activation == "relu" and out <= scan.categorical and values and reads <= scan.categorical | bias
            and _lookup_weight(w_in, values, scan.labels) is not None):
        scan.exact_off |= out  # a thresholded lookup of categorical values: off units write exactly 0
    else:
        scan.read_as_number |= reads
    if cat_reads:
        if mlp.activation != "relu" or not out <= scan.categorical or weight is None:
            scan.protected |= set(cat_reads)
        else:
            scan.candidate_reads.append(TolerantRead(index, "lookup", tuple(cat_reads), weight, tuple(sorted(out)),
                                                     _sums_values(w_in, cat_reads, scan.by_name)))
            scan.signatures[index] = _unit_signatures(w_in, w_out, cat_reads, scan.by_name, basis)
            scan.writes[index] = out
    scan.mark_written(out, index)


def _scan_unembedding(scan: _Scan, compiled: CompiledModel) -> None:
    """The argmax of categorical logits reads tolerantly; a numerical output is read exactly."""
    unembed = _nonzero_rows(weights.unembedding(compiled))
    scan.read_any |= unembed
    if compiled.config.numerical_output:
        scan.protected |= unembed
        scan.read_as_number |= unembed
    else:
        scan.candidate_reads.append(
            TolerantRead(len(compiled.config.layers), UNEMBED, tuple(sorted(unembed & scan.categorical)), 1.0))


def residual_structure(compiled: CompiledModel, never_on: Iterable[int] = ()) -> ResidualStructure:
    """Analyse ``compiled``'s weights (see the module docstring).

    ``never_on``: coordinates known to be 0 on every input (e.g. found by
    :func:`compression.exactness.never_on` over the whole input space): they count as unread, so an
    analytic projection gives them the zero row, which reads them back exactly.

    A compiled loop (``ModelConfig.tied``) is analysed as :func:`~compiler.model.tying.untied`
    writes it out, one sub-layer per step the forward pass runs: the state a loop body writes at
    the end of one iteration is read at the start of the next, so write times and reads must
    follow the order of execution, not the order the tied block is stored in. The residual
    space, and so every W, is the same for both.

    A normalised model (``compile_rasp(..., norm=...)``) is analysed over its compiled coordinates
    as it builds them (:func:`~compiler.model.folding.without_norm`: its saturated lookups, no
    anchor), each read scaled by the norm's factor (:func:`norm_read_factor`); the structure and
    every W made from it are over those D0 coordinates, and
    :func:`~compiler.model.folding.folded_model` turns such a W into the compressed normalised
    model.
    """
    compiled = untied(compiled)
    read_factor = 0.0
    if compiled.config.norm is not None:
        read_factor = norm_read_factor(compiled.config.norm, compiled.config.residual_width)
        compiled = without_norm(compiled)
    scan = _start_scan(compiled)
    basis = compiled.residual_space.basis
    for index, layer in enumerate(compiled.config.layers):
        if isinstance(layer, AttentionSpec):
            _scan_attention(scan, compiled, index)
        else:
            _scan_mlp(scan, compiled, index, basis)
    _scan_unembedding(scan, compiled)

    width = len(scan.labels)
    dead = set(never_on)
    protected = _needs_exact_values(scan.candidate_reads, scan.protected - dead, dead)
    reads = tuple(
        dataclasses.replace(r, coords=tuple(i for i in r.coords if i not in protected and i not in dead))
        for r in scan.candidate_reads
    )
    reads = tuple(r for r in reads if r.coords)
    unread = tuple(i for i in range(width) if (i not in scan.read_any or i in dead) and i not in protected)
    groups = tuple(tuple(coords) for coords in scan.by_name.values())
    stamps = tuple(EMBEDDING if t is None else t for t in scan.written_at)
    # Only a layer whose outputs are read by nothing but the unembedding may see merged values.
    mergers = {layer: sig for layer, sig in scan.signatures.items() if not scan.writes[layer] & scan.read_by_layers}
    classes, amplification = _classes(groups, reads, mergers, scan.writes, width)
    view = calibrated(model_view(compiled, groups, dead, np.asarray(amplification or (1.0,) * width)), compiled,
                      read_factor)
    return ResidualStructure(scan.labels, groups, tuple(sorted(protected)), unread, reads, stamps,
                             len(compiled.config.layers), classes, amplification, tuple(sorted(scan.exact_off)),
                             tuple(sorted(scan.read_as_number)), tuple(sorted(mergers)), view)


def norm_read_factor(norm: NormSpec, width: int) -> float:
    """The ``s`` such that each norm site of a normalised model of ``width`` coordinates, and of
    every model :func:`~compiler.model.folding.folded_model` makes of it, scales what the next
    sub-layer reads by a factor within ``1 ± s``: the larger of the model's spread and the one
    the folded anchor is sized for (``NORM_SPREAD``), plus the float32 rounding of the norm's own
    arithmetic (a sum of ``width`` squares, the root, the division and the gain: ``u (width + 8)``)."""
    return max(norm.spread, NORM_SPREAD) + FLOAT32_UNIT * (width + 8)


def _needs_exact_values(candidates: list[TolerantRead], protected: set[int], dead: set[int]) -> set[int]:
    """``protected`` grown backwards until every protected coordinate is written without interference.

    A coordinate *needs exact values* when it is protected, or when a lookup writing such a
    coordinate reads it. A copy writing a coordinate that needs exact values gets its value reads
    protected (a copy of values in superposition is never exact); a lookup passes the need on to
    its inputs without protecting them (a unit-norm code vector reads its own value back at 1, and
    off units write exactly 0 while the bound's margin holds). Iterated to a fixpoint, since a
    newly protected coordinate may be written by an earlier copy. Never-on coordinates (``dead``)
    are 0 in every compressed model and need nothing.
    """
    protected = set(protected)
    needs = set(protected)
    changed = True
    while changed:
        changed = False
        for read in reversed(candidates):
            if read.kind == UNEMBED or not set(read.writes) & needs:
                continue
            inputs = set(read.coords) - dead
            if read.kind == "copy" and not inputs <= protected:
                protected |= inputs
                changed = True
            if not inputs <= needs:
                needs |= inputs
                changed = True
    return protected


def _unit_signatures(w_in: np.ndarray, w_out: np.ndarray, cat_reads: list[int], by_name: dict[str, list[int]],
                     basis) -> dict[int, bytes]:
    """Per read coordinate i: the sorted units testing i, each as (its weights on every input but
    i's s-op, its weight on i, what it writes). Equal signatures: the layer cannot tell i from j."""
    out = {}
    for i in cat_reads:
        own = by_name[basis[i].name]
        units = np.nonzero(w_in[i])[0]
        rest = np.delete(w_in[:, units], own, axis=0)
        rows = [np.concatenate([rest[:, k], [w_in[i, u]], w_out[u]]) for k, u in enumerate(units)]
        out[i] = b"".join(sorted(np.round(r, 6).astype(np.float64).tobytes() for r in rows))
    return out


def _classes(groups: tuple[tuple[int, ...], ...], reads: tuple[TolerantRead, ...], mergers: dict[int, dict[int, bytes]],
             writes: dict[int, set[int]], width: int) -> tuple[tuple[tuple[int, ...], ...], tuple[float, ...]]:
    """Classes of alike values (every reader of both is a merger that cannot tell them apart) and
    the amplification of the coordinates merger layers write (the product, over the s-ops they
    read, of the largest class read)."""
    readers: dict[int, list[int]] = {}
    for read in reads:
        for i in read.coords:
            readers.setdefault(i, []).append(read.layer)
    classes = []
    class_size = {i: 1 for i in range(width)}
    for coords in groups:
        by_key: dict[tuple, list[int]] = {}
        for i in coords:
            layers = readers.get(i)
            if not layers or any(layer not in mergers for layer in layers):
                continue
            by_key.setdefault(tuple(mergers[layer][i] for layer in layers), []).append(i)
        for members in by_key.values():
            if len(members) > 1:
                classes.append(tuple(members))
                class_size.update({i: len(members) for i in members})
    amplification = [1.0] * width
    group_of = {i: g for g, coords in enumerate(groups) for i in coords}
    for read in reads:
        if read.layer in mergers:
            largest: dict[int, int] = {}
            for i in read.coords:
                largest[group_of[i]] = max(largest.get(group_of[i], 1), class_size[i])
            factor = float(np.prod(list(largest.values())))
            for i in writes[read.layer]:
                amplification[i] = max(amplification[i], factor)
    return tuple(classes), tuple(amplification)


def _sums_values(w_in: np.ndarray, cat_reads: list[int], by_name: dict[str, list[int]]) -> bool:
    """Whether some unit weighs more than one value of one s-op among ``cat_reads``."""
    reads = np.asarray(cat_reads)
    for coords in by_name.values():
        inside = reads[np.isin(reads, coords)]
        if inside.size > 1 and np.any(np.count_nonzero(w_in[inside], axis=0) > 1):
            return True
    return False


def _lookup_weight(w_in: np.ndarray, cat_reads: list[int], labels: tuple[str, ...]) -> float | None:
    """Largest ``sum a_i / m`` over categorical inputs of a thresholded unit, ``m`` its off margin
    (:func:`_off_margin`): the overlap a read may carry per unit of interference; None if not
    thresholded.

    A thresholded lookup unit has non-negative weights on its categorical inputs and a negative
    weight on ``one`` (its threshold). Units that read no free categorical coordinate are ignored.
    """
    if not cat_reads:
        return 0.0
    one = labels.index(ONE_NAME) if ONE_NAME in labels else None
    block = w_in[cat_reads]
    used = np.any(block != 0, axis=0)
    if np.any(block[:, used] < 0):
        return None
    if one is None or np.any(w_in[one, used] >= 0):
        return None
    inputs = w_in[:, used].copy()
    inputs[one] = 0.0
    return float(np.max(np.sum(block[:, used], axis=0) / _off_margins(inputs, w_in[one, used])))


def _off_margins(weights: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """Per unit (column), how far below 0 its pre-activation stays while it is off: with integer
    input weights whose greatest common divisor is ``g``, every pre-activation lies on
    ``bias + g Z``, whose largest point below 0 is the margin (1 for the compiler's lookups, 1/2
    for their saturated low halves, ``craft.chamber.categorical_mlp.saturated``). Where that point
    is 0 or the weights are not integers, the compiler's 1 is assumed: the margin only sizes codes,
    and the interference bound, which reads every unit's states, judges the result."""
    integral = np.all(weights == np.round(weights), axis=0) & np.any(weights != 0, axis=0)
    g = np.gcd.reduce(np.abs(np.where(integral, weights, 0.0)).astype(np.int64), axis=0).astype(np.float64)
    g = np.where(g > 0, g, 1.0)
    top = bias + g * np.floor(-bias / g)
    return np.where(integral & (top < 0), -top, 1.0)
