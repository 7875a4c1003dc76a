"""The circuit of a network under an ablation, measured by patching and verified.

Definition: over the sampled inputs, an edge is **in the single-edge circuit** if ablating it
alone changes the decoded output at some scored position (not BOS, not PAD) of some input.
Decoded means: the argmax column of a categorical output (or "none" where every logit is below
the model's empty threshold); a numerical output changes when it moves by more than half the
smallest gap of its value set.

Verification: the circuit is **sufficient** if ablating every edge outside it at once leaves
100 % of decoded outputs unchanged, and **necessary** if ablating each edge inside changes some
output: alone (from the full model), or, for edges a repair added, on top of everything outside
(from the circuit). A circuit is also reported **minimal** when every edge passes the second
test; a single-edge circuit need not be (two edges that each matter alone can matter only
together once the rest is gone). When redundancy makes the
single-edge circuit insufficient (two edges that each back the other up), `measure_circuit`
repairs it greedily (add back the outside edge whose restoration leaves the fewest changed
outputs, until none change) and then prunes it (drop an edge while the rest stays sufficient),
and says so in `how_found`. The same holds per token position with `(edge, position)` units, the
position being the one the destination port reads at.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from compiler.lab.circuits import readout
from compiler.lab.circuits.ablation import ABLATIONS, check_ablation, resample_order
from compiler.lab.circuits.components import Network
from compiler.lab.circuits.patching import CHUNK, SWEEP_SHARPNESS, Prepared, Sweep, edge_keeps, prepare, sweep


@dataclasses.dataclass(frozen=True, eq=False)
class PatchingSetup:
    """A network, its sampled inputs, the ablation's reference values and the clean outputs.

    `prepared` holds the same in the network's padded layout (`patching.prepare`), which the
    compiled programs run on; `cache` keeps the single-edge sweeps (`single_edge_sweep`).
    """

    net: Network
    ids: jax.Array  # [B, T]
    reference: jax.Array  # [S, B, T, d]
    clean: jax.Array  # [B, T, n]
    scored: jax.Array  # [B, T] bool: positions whose decoded output counts
    ablation: str
    prepared: Prepared = dataclasses.field(repr=False)
    cache: dict = dataclasses.field(default_factory=dict, repr=False)

    @property
    def length(self) -> int:
        return int(self.ids.shape[-1])


def setup(net: Network, ids: np.ndarray, ablation: str) -> PatchingSetup:
    """Run the unpatched network once and prepare the ablation's reference values.

    Args:
        net: the network (`components.network`).
        ids: the sampled inputs, `[B, T]` token ids (BOS first, PAD after each input's end), e.g.
            `InputDistribution.ids`.
        ablation: "zero", "mean" or "resample" (`ABLATIONS`).
    Returns:
        The `PatchingSetup`: the inputs, what every source's ablated term becomes, the clean
        outputs and the scored positions, also in the padded layout the compiled patching
        programs run on. Its single-edge sweeps are cached on it for the methods to share.
    Raises:
        LabError: `ablation` is not one of `ABLATIONS`.
    """
    ids = np.asarray(ids, np.int32)
    kind = ABLATIONS.index(check_ablation(ablation))
    prepared, ref = prepare(net, ids, kind, resample_order(ids, net.pad_id))
    clean = jnp.asarray(np.asarray(prepared.clean)[: len(ids), : ids.shape[-1], : prepared.layout.outputs])
    scored = jnp.asarray(np.asarray(prepared.scored)[: len(ids), : ids.shape[-1]])
    return PatchingSetup(net, jnp.asarray(ids), ref, clean, scored, ablation, prepared)


def decoded(net: Network, output: readout.Arrays) -> readout.Arrays:
    """Categorical: the argmax column, -1 where no logit reaches the network's empty threshold
    (none: the argmax alone). Numerical: the value itself."""
    return readout.decoded(output, net.numerical, net.empty_threshold)


def changed(s: PatchingSetup, patched: jax.Array) -> jax.Array:
    """`[..., B, T]` bool: scored positions whose decoded output differs from the clean one."""
    return readout.changed(s.clean, patched, s.scored, s.net.numerical, s.net.empty_threshold,
                           s.net.numerical_tolerance)


def run_sweep(s: PatchingSetup, keeps: np.ndarray, sharpness: tuple[float, ...] = SWEEP_SHARPNESS,
              chunk: int = CHUNK) -> Sweep:
    """`patching.sweep` of keep masks `[M, P, S, T]` on `s`."""
    return sweep(s.prepared, keeps, sharpness, chunk)


def changed_counts(s: PatchingSetup, keeps: np.ndarray) -> np.ndarray:
    """Per keep mask `[E, P, S, T]`, how many scored (input, position) outputs change."""
    return run_sweep(s, keeps).changed


def single_edge_sweep(s: PatchingSetup, per_position: bool = False) -> Sweep:
    """Every unit (edge, or `(edge, position)`) ablated alone, once per setup: the changed
    counts define the circuit (`measure_circuit`), the divergences at
    `patching.SWEEP_SHARPNESS` are the patching methods' scores (`methods.edge_patching_scores`)."""
    key = ("single", per_position)
    if key not in s.cache:
        units = len(s.net.edges) * (s.length if per_position else 1)
        s.cache[key] = run_sweep(s, _keeps_for(s, np.eye(units, dtype=bool), per_position))
    return s.cache[key]


@dataclasses.dataclass(frozen=True)
class Measured:
    """A measured and verified circuit over units (edges, or `(edge, position)` pairs).

    `effect[u]`: scored outputs changed by ablating unit u alone. `circuit[u]`: in the returned
    circuit. `single[u]`: in the single-edge circuit (effect > 0). `outside_changes`: outputs
    changed when everything outside `circuit` is ablated (0: sufficient). `in_context[u]` (for
    units in the circuit): ablating u on top of the outside changes some output.
    """

    effect: np.ndarray
    single: np.ndarray
    circuit: np.ndarray
    outside_changes: int
    single_outside_changes: int
    in_context: np.ndarray
    how_found: str

    @property
    def sufficient(self) -> bool:
        return self.outside_changes == 0

    @property
    def necessary(self) -> np.ndarray:
        """Per unit: in the circuit and necessary alone or in context."""
        return self.circuit & (self.single | self.in_context)

    @property
    def all_necessary(self) -> bool:
        return bool(np.array_equal(self.necessary, self.circuit))

    @property
    def minimal(self) -> bool:
        return bool(self.in_context[self.circuit].all())

    @property
    def verified(self) -> bool:
        return self.sufficient and self.all_necessary


def _keeps_for(s: PatchingSetup, ablated_units: np.ndarray, per_position: bool) -> np.ndarray:
    """Keep masks for rows of ablated units (`[R, E]`, or `[R, E * T]` per position)."""
    ablated_units = np.asarray(ablated_units, bool)
    if per_position:
        ablated_units = ablated_units.reshape(len(ablated_units), -1, s.length)
    return edge_keeps(s.net, ablated_units, s.length)


def _count(s: PatchingSetup, rows: np.ndarray, per_position: bool) -> np.ndarray:
    return changed_counts(s, _keeps_for(s, rows, per_position))


def measure_circuit(s: PatchingSetup, per_position: bool = False, max_repair: int = 64) -> Measured:
    """Measure the circuit of `s.net` under `s.ablation` on `s.ids`, then verify it.

    Args:
        s: the patching setup (`setup(net, ids, ablation)`).
        per_position: units are `(edge, destination position)` pairs (row-major: edge, then
            position) instead of whole edges.
        max_repair: at most this many edges are added back when the single-edge circuit is not
            sufficient.
    Returns:
        The `Measured` circuit; `how_found` says whether it is the single-edge circuit or a
        repaired and pruned one.
    """
    units = len(s.net.edges) * (s.length if per_position else 1)
    effect = single_edge_sweep(s, per_position).changed
    single = effect > 0
    single_outside = int(_count(s, ~single[None], per_position)[0])
    circuit = single.copy()
    how = "single-edge ablation: every unit whose ablation alone changes an output; it is sufficient"
    outside = single_outside
    if outside:
        circuit, outside, added = _repair(s, circuit, outside, per_position, max_repair)
        circuit, removed = _prune(s, circuit, per_position) if outside == 0 else (circuit, 0)
        outside = int(_count(s, ~circuit[None], per_position)[0])
        how = (
            f"the single-edge circuit leaves {single_outside} outputs changed (redundant paths); "
            f"greedy repair added {added} units (each time the one whose restoration left the fewest "
            f"changes), then pruning removed {removed} units whose removal kept it sufficient"
        )
    in_context = np.zeros(units, bool)
    members = np.nonzero(circuit)[0]
    if len(members):
        rows = np.repeat(~circuit[None], len(members), axis=0)
        rows[np.arange(len(members)), members] = True
        in_context[members] = _count(s, rows, per_position) > 0
    return Measured(effect, single, circuit, outside, single_outside, in_context, how)


def _repair(s: PatchingSetup, circuit: np.ndarray, outside: int, per_position: bool,
            max_repair: int) -> tuple[np.ndarray, int, int]:
    added = 0
    while outside and added < max_repair:
        candidates = np.nonzero(~circuit)[0]
        if not len(candidates):
            break
        rows = np.repeat(~circuit[None], len(candidates), axis=0)
        rows[np.arange(len(candidates)), candidates] = False  # restore the candidate
        counts = _count(s, rows, per_position)
        best = int(np.argmin(counts))
        circuit = circuit.copy()
        circuit[candidates[best]] = True
        outside, added = int(counts[best]), added + 1
    return circuit, outside, added


def _prune(s: PatchingSetup, circuit: np.ndarray, per_position: bool) -> tuple[np.ndarray, int]:
    removed = 0
    for unit in np.nonzero(circuit)[0]:
        trial = circuit.copy()
        trial[unit] = False
        if _count(s, ~trial[None], per_position)[0] == 0:
            circuit, removed = trial, removed + 1
    return circuit, removed


def outside_changes(s: PatchingSetup, circuit: np.ndarray) -> int:
    """Scored outputs changed when every edge outside `circuit` (`[E]` bool) is ablated."""
    return int(_count(s, ~np.asarray(circuit, bool)[None], False)[0])
