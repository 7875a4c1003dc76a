"""Compile a `rasp.Loop` into one block of layers that every iteration runs with the same weights.

The loop becomes an ordinary program over three kinds of s-ops:

* the *state*, a copy of `init` (`Map(identity, init)`, labelled with the loop's label) whose
  residual subspace every iteration reads and rewrites;
* the *body*: every s-op that reads the state (the body's result, the next state, among them);
* the *prefix*: everything else (`init` and the s-ops the body reads from outside the loop).

The prefix is allocated first; the body's blocks start at the next whole layer, so the layers
from there on form the tied block. The block's last MLP *commits* the iteration with ReLU pairs
that compute the identity exactly (`relu(x) - relu(-x) = x`): it adds `next - state` to the
state directions and subtracts every direction the body wrote, so after each iteration the
residual stream holds the new state, the prefix unchanged and zeros everywhere else: the same
stream the block started from, one iteration on. When the next state's own last block is a ReLU
MLP it writes straight into the state directions and the commit runs beside it (no extra
layer); otherwise (an attention head, or another activation) the commit is an MLP sub-layer of
its own.

Exactness needs the state's subspace to hold every value the state takes. `loop_values` infers
it as a fixed point: start from `init`'s values, add the next state's values inferred from the
current set, and stop when nothing changes or after `steps` rounds (the state takes no value
after `steps` iterations that round `steps` has not found), refusing sets over the size limit
and loops whose set is still growing after `MAX_VALUE_ROUNDS` rounds. The values keep their
Python types: a value the state takes with a new type (`init` gives the int 0, the body the
float 0.0) is a change too, so the body's functions are checked on it
(`compiler.passes.variants`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

import networkx as nx
import numpy as np

from compiler.errors import UnsupportedProgramError, ValueInferenceError
from compiler.passes import graph as g
from compiler.passes import nodes
from compiler.passes.allocate import Allocator, longest_path, place_blocks
from compiler.passes.discretise import as_sop, rebuild, walk
from compiler.passes.outputs import Outputs
from compiler.passes.values import MAX_VALUE_SET_SIZE, infer_values
from compiler.passes.variants import merged, signature
from craft.bases import BasisDirection, VectorSpaceWithBasis
from craft.blocks import MLP, Block, MultiAttentionHead, combine_in_parallel
from craft.maps import LinearMap
from rasp import rasp

# Most rounds of the state's fixed-point value inference: a loop with more steps whose values
# have not closed by then is refused (each round re-infers the whole graph).
MAX_VALUE_ROUNDS = 256


def initial_state(x: Any) -> Any:
    """The state's first value: `init`'s (the function of the state's copy of `init`)."""
    return x


@dataclasses.dataclass(frozen=True)
class LoopProgram:
    """A loop as a plain program: `Outputs(state, next_state)`, and the two labels."""

    program: Outputs
    state: str
    next_state: str
    steps: int


def loop_program(loop: rasp.Loop) -> LoopProgram:
    """`loop`'s body with its `LoopState` replaced by a copy of `init` named after the loop.

    Raises:
      UnsupportedProgramError: the body or `init` holds another Loop (nested loops are not
        compiled), or reads another loop's state.
    """
    state = rasp.annotate(
        rasp.Map(initial_state, loop.init, simplify=False), name=loop.label, encoding=rasp.get_encoding(loop)
    )
    replaced: dict[int, rasp.RASPExpr] = {id(loop.state): state}

    def current(expr: rasp.RASPExpr) -> rasp.RASPExpr:
        return replaced.get(id(expr), expr)

    for expr in walk(loop.next_state):
        if isinstance(expr, rasp.Loop):
            raise UnsupportedProgramError(
                [f"{loop.label}: its body holds the loop {expr.label!r}; nested loops are not compiled, "
                 "unroll the inner one in Python or merge both states into one tuple-valued state"]
            )
        if isinstance(expr, rasp.LoopState) and expr is not loop.state:
            raise UnsupportedProgramError(
                [f"{loop.label}: its body reads {expr.label!r}, the state of another loop; a body "
                 "may read only its own state and s-ops built outside every loop"]
            )
        if id(expr) not in replaced and any(id(c) in replaced for c in expr.children):
            replaced[id(expr)] = rebuild(expr, current)
    for expr in walk(loop.init):
        if isinstance(expr, (rasp.Loop, rasp.LoopState)):
            raise UnsupportedProgramError(
                [f"{loop.label}: its init reads {expr.label!r}, a loop or a loop's state; nested loops "
                 "are not compiled"]
            )
    next_state = as_sop(current(loop.next_state))
    return LoopProgram(Outputs((state, next_state)), state.label, next_state.label, loop.steps)


@dataclasses.dataclass(frozen=True)
class LoopValues:
    """The state's inferred values: the set, whether it can be None, the rounds taken and
    whether the set closed (is mapped into itself by the body) before the `steps` cap."""

    value_set: frozenset
    nullable: bool
    rounds: int
    closed: bool


def loop_values(graph: nx.DiGraph, loop: LoopProgram, vocab: Iterable[Any], max_seq_len: int) -> LoopValues:
    """Infer every node's values with the state's set a fixed point of the body (module doc).

    Leaves the graph annotated for the final set. Raises `ValueInferenceError` when the state
    would take more than `MAX_VALUE_SET_SIZE` values, and `UnsupportedProgramError` for a
    numerical state that can be None (its none flag is not carried across iterations).
    """
    vocab = tuple(vocab)
    infer_values(graph, vocab, max_seq_len)
    state = graph.nodes[loop.state]
    values, nullable = frozenset(state[nodes.VALUE_SET]), bool(state[nodes.NULLABLE])
    variants = dict(state.get(nodes.VARIANTS) or {})
    rounds, closed = 0, False
    while rounds < loop.steps:
        rounds += 1
        infer_values(graph, vocab, max_seq_len, fixed={loop.state: (values, nullable, variants)})
        out = graph.nodes[loop.next_state]
        grown, grown_variants = merged(values, variants, out[nodes.VALUE_SET], out.get(nodes.VARIANTS) or {})
        grown_nullable = nullable or bool(out[nodes.NULLABLE])
        if grown == values and grown_nullable == nullable and signature(grown_variants) == signature(variants):
            closed = True
            break
        if len(grown) > MAX_VALUE_SET_SIZE:
            raise ValueInferenceError(
                f"{loop.state}: the loop's state takes more than {MAX_VALUE_SET_SIZE} values after "
                f"{rounds} iterations (its value set does not close under the body); bound the "
                "state (e.g. a Map that clips or takes it modulo n) or use fewer steps"
            )
        values, nullable, variants = grown, grown_nullable, grown_variants
        if rounds == MAX_VALUE_ROUNDS and loop.steps > rounds:
            raise ValueInferenceError(
                f"{loop.state}: the loop's state still takes new values after {rounds} rounds of "
                f"value inference ({len(grown)} so far) and the loop runs {loop.steps} steps; the "
                "compiler needs every value the state can take: bound the state (e.g. clip it "
                f"or take it modulo n) so its values close, or use at most {MAX_VALUE_ROUNDS} steps"
            )
    if not closed:
        infer_values(graph, vocab, max_seq_len, fixed={loop.state: (values, nullable, variants)})
    if nullable and g.is_numerical(graph, loop.state):
        raise UnsupportedProgramError(
            [f"{loop.state}: a numerical loop state that can be None is not compiled (its none flag "
             "is not carried across iterations); make the body give a number at every position "
             "(e.g. numerical Aggregates with default=0, Maps that never return None)"]
        )
    return LoopValues(values, nullable, rounds, closed)


def body_labels(graph: nx.DiGraph, state: str) -> frozenset[str]:
    """The s-op nodes that read the state, directly or not: the body."""
    sops = set(g.sop_nodes(graph))
    return frozenset(label for label in nx.descendants(graph, state) if label in sops)


def loop_schedule(graph: nx.DiGraph, state: str, allocator: Allocator = longest_path) -> tuple[dict[str, int], int]:
    """`({label: sub-layer of its last block}, first sub-layer of the body)`.

    The prefix is scheduled by `allocator` alone; the body starts at the first attention
    sub-layer after the prefix's last block and is scheduled as early as its inputs allow.
    """
    body = body_labels(graph, state)
    prefix = [label for label in g.sop_nodes(graph) if label not in body]
    schedule = dict(allocator(graph.subgraph(prefix)))
    last = max((schedule[label] for label in prefix if graph.nodes[label].get(nodes.BLOCKS)), default=-1)
    start = last + 1 if (last + 1) % 2 == 0 else last + 2
    within = longest_path(graph, ready={label: start - 1 for label in prefix})
    schedule.update({label: within[label] for label in body})
    return schedule, start


def commit_mlp(moves: Sequence[tuple[BasisDirection, BasisDirection | None]], hidden_name: str) -> MLP:
    """An MLP that, for every `(source, target)`, removes the source's value from the stream
    and adds it to the target (`None`: only removes), exactly: two ReLU units per source,
    `relu(x)` and `relu(-x)`, whose difference is `x`. Zero in, zero out (BOS-safe)."""
    sources = [source for source, _ in moves]
    outputs = list(dict.fromkeys([*sources, *(t for _, t in moves if t is not None)]))
    input_space = VectorSpaceWithBasis(tuple(sources))
    output_space = VectorSpaceWithBasis(tuple(outputs))
    hidden = VectorSpaceWithBasis(
        tuple(BasisDirection(hidden_name, (i, sign)) for i in range(len(moves)) for sign in (1, -1))
    )
    first = np.zeros((len(sources), hidden.num_dims))
    second = np.zeros((hidden.num_dims, len(outputs)))
    for i, (source, target) in enumerate(moves):
        for offset, sign in enumerate((1.0, -1.0)):
            unit = 2 * i + offset
            first[i, unit] = sign
            second[unit, output_space.index(source)] -= sign
            if target is not None:
                second[unit, output_space.index(target)] += sign
    return MLP(LinearMap(input_space, hidden, first), LinearMap(hidden, output_space, second))


def _state_direction(graph: nx.DiGraph, state: str, direction: BasisDirection) -> BasisDirection | None:
    """Where a direction of the next state goes in the state's subspace (None: a value the state
    never takes, possible only when the value set was capped at `steps` rounds)."""
    if g.is_numerical(graph, state):
        return BasisDirection(state)
    target = BasisDirection(state, direction.value)
    return target if target in graph.nodes[state][nodes.OUTPUT_SPACE] else None


def _written(blocks: Iterable[Block | None]) -> list[BasisDirection]:
    found: dict[BasisDirection, None] = {}
    for block in blocks:
        if block is not None:
            found.update(dict.fromkeys(block.output_space.basis))
    return list(found)


def _retarget(mlp: MLP, targets: dict[BasisDirection, BasisDirection | None]) -> MLP:
    """`mlp` writing each of its outputs to `targets[d]` instead (kept where None)."""
    basis = tuple(targets.get(d) or d for d in mlp.output_space.basis)
    second = mlp.second
    return MLP(mlp.first, LinearMap(second.input_space, VectorSpaceWithBasis(basis), second.matrix), mlp.activation)


@dataclasses.dataclass(frozen=True)
class LoopLayout:
    """The sub-layers (one copy of the tied block) and the block's span `[start, stop)`."""

    sublayers: tuple[MLP | MultiAttentionHead | None, ...]
    start: int
    stop: int
    fused_commit: bool


def place_loop(graph: nx.DiGraph, loop: LoopProgram, allocator: Allocator = longest_path) -> LoopLayout:
    """Place the lowered graph's blocks (`loop_schedule`) and add the commit (module doc)."""
    schedule, start = loop_schedule(graph, loop.state, allocator)
    sublayers = list(place_blocks(graph, lambda _: schedule))
    end = schedule[loop.next_state]
    state_dirs = [(d, None) for d in graph.nodes[loop.state][nodes.OUTPUT_SPACE].basis]
    out_dirs = graph.nodes[loop.next_state][nodes.OUTPUT_SPACE].basis
    body = body_labels(graph, loop.state)
    prefix_dirs = {
        d for label in g.sop_nodes(graph) if label not in body for d in graph.nodes[label][nodes.OUTPUT_SPACE].basis
    }
    last_kind, last_block = graph.nodes[loop.next_state][nodes.BLOCKS][-1]
    fused = last_kind == 1 and isinstance(last_block, MLP) and last_block.activation == "relu"
    if fused:  # the next state's MLP writes into the state; the commit runs beside it
        scratch = _written(sublayers[start:end])
        targets = {d: _state_direction(graph, loop.state, d) for d in out_dirs}
        commit = commit_mlp(state_dirs + [(d, None) for d in scratch], f"{loop.state}_commit_hidden")
        sublayers[end] = combine_in_parallel([_retarget(last_block, targets), commit])
        last = end
    else:  # a commit MLP of its own right after the body's last block
        scratch = [d for d in _written(sublayers[start : end + 1]) if d not in out_dirs]
        moves = state_dirs + [(d, _state_direction(graph, loop.state, d)) for d in out_dirs]
        commit = commit_mlp(moves + [(d, None) for d in scratch], f"{loop.state}_commit_hidden")
        last = end + 1 if end % 2 == 0 else end + 2
        sublayers += [None] * (last + 1 - len(sublayers))
        sublayers[last] = commit
    clash = sorted(str(d) for d in set(scratch) & prefix_dirs)
    if clash:  # pragma: no cover - body nodes write only their own subspaces
        raise AssertionError(f"{loop.state}: the loop body writes prefix directions {clash[:3]}")
    return LoopLayout(tuple(sublayers), start, last + 1, fused)
