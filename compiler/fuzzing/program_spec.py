"""A RASP program as plain data that prints as runnable Python.

`ProgramSpec` is a straight-line program: a tuple of `Op`s, each reading earlier ops by index
(`ops[0]` is `tokens`, `ops[1]` is `indices`, the last op is the output). `to_source` prints it as
Python source building the program with `rasp` and `lib`; `build` executes exactly that source, so
the printed text and the object that was tested can never disagree. Functions and predicates are
source strings (see `compiler.fuzzing.function_menu`), which is what makes the program printable.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rasp import rasp

SELECTOR_KINDS = frozenset({"select", "and", "or", "not"})


@dataclasses.dataclass(frozen=True)
class Op:
    """One statement: `kind` applied to earlier ops `args` with constant `params`.

    params by kind: map/seqmap `(function source,)` (map: plus `simplify`); linmap `(fst_fac,
    snd_fac)`; full `(fill,)`; select `(predicate source or "Comparison.NAME",)`; and/or/not
    `(style,)` with style "op" (`&`, `|`, `~`) or "cls" (`SelectorAnd(...)`); aggregate
    `(default,)`; shift `(offset,)`; lib `(name, *constants)`. `numerical` annotates an s-op.
    """

    kind: str
    args: tuple[int, ...] = ()
    params: tuple[Any, ...] = ()
    numerical: bool = False

    @property
    def is_selector(self) -> bool:
        return self.kind in SELECTOR_KINDS


@dataclasses.dataclass(frozen=True)
class ProgramSpec:
    """A straight-line RASP program; `ops[-1]` is its output s-op."""

    ops: tuple[Op, ...]

    @property
    def size(self) -> int:
        """Number of operations, not counting `tokens` and `indices`."""
        return len(self.ops) - 2


BASE_OPS = (Op("tokens"), Op("indices"))


def _name(index: int) -> str:
    if index == 0:
        return "rasp.tokens"
    if index == 1:
        return "rasp.indices"
    return f"v{index}"


def _lib_call(op: Op, a: list[str], index: int) -> str:
    name, *consts = op.params
    if name == "length":
        return "lib.length"
    if name == "hist":
        return "lib.make_hist()"
    if name == "reverse":
        return f"lib.make_reverse({a[0]})"
    if name == "frac_prevs":  # make_frac_prevs re-annotates its input: give the copy its own label
        return f'lib.make_frac_prevs({a[0]}.named("v{index}_bools"))'
    if name == "sort_unique":
        return f"lib.make_sort_unique({a[0]}, {a[1]})"
    if name == "sort":
        return f"lib.make_sort({a[0]}, {a[1]}, max_seq_len={consts[0]!r}, min_key={consts[1]!r})"
    if name == "count":
        return f"lib.make_count({a[0]}, {consts[0]!r})"
    if name == "detect_pattern":
        return f"lib.detect_pattern({a[0]}, {consts[0]!r})"
    if name == "pair_balance":
        return f"lib.make_pair_balance({a[0]}, {consts[0]!r}, {consts[1]!r})"
    if name == "nary":
        return f"lib.make_nary_sequencemap({consts[0]}, {a[0]}, {a[1]}, {a[2]})"
    if name == "count_less_freq":
        return f"lib.make_count_less_freq({consts[0]!r})"
    if name == "sort_freq":
        return f"lib.make_sort_freq({consts[0]!r})"
    raise ValueError(f"unknown library program {name!r}")


def expression_source(op: Op, index: int) -> str:
    """The Python expression building `op` (without its name), reading earlier ops `v<i>`."""
    a = [_name(i) for i in op.args]
    kind, params = op.kind, op.params
    if kind == "map":
        simplify = "" if len(params) < 2 or params[1] else ", simplify=False"
        text = f"rasp.Map({params[0]}, {a[0]}{simplify})"
    elif kind == "seqmap":
        text = f"rasp.SequenceMap({params[0]}, {a[0]}, {a[1]})"
    elif kind == "linmap":
        text = f"rasp.LinearSequenceMap({a[0]}, {a[1]}, {params[0]!r}, {params[1]!r})"
    elif kind == "full":
        text = f"rasp.Full({params[0]!r})"
    elif kind == "aggregate":
        text = f"rasp.Aggregate({a[0]}, {a[1]}, default={params[0]!r})"
    elif kind == "width":
        text = f"rasp.SelectorWidth({a[0]})"
    elif kind == "shift":
        text = f"lib.shift_by({params[0]!r}, {a[0]})"
    elif kind == "lib":
        text = _lib_call(op, a, index)
    elif kind == "select":
        predicate = params[0]
        if predicate.startswith("Comparison."):
            predicate = "rasp." + predicate
        text = f"rasp.Select({a[0]}, {a[1]}, {predicate})"
    elif kind in ("and", "or"):
        if params and params[0] == "op":
            text = f"({a[0]} {'&' if kind == 'and' else '|'} {a[1]})"
        else:
            text = f"rasp.{'SelectorAnd' if kind == 'and' else 'SelectorOr'}({a[0]}, {a[1]})"
    elif kind == "not":
        text = f"(~{a[0]})" if params and params[0] == "op" else f"rasp.SelectorNot({a[0]})"
    else:
        raise ValueError(f"op {index}: unknown kind {kind!r}")
    if op.numerical and not op.is_selector:
        text = f"rasp.numerical({text})"
    return text


def to_source(spec: ProgramSpec, result_name: str = "program") -> str:
    """Runnable Python building the program; it binds the output s-op to `result_name`."""
    lines = []
    for index, op in enumerate(spec.ops):
        if index < 2:
            continue
        lines.append(f'v{index} = {expression_source(op, index)}.named("v{index}")')
    lines.append(f"{result_name} = {_name(len(spec.ops) - 1)}")
    return "\n".join(lines) + "\n"


def build(spec: ProgramSpec) -> rasp.SOp:
    """Execute `to_source(spec)` and return the program it builds."""
    from rasp import lib

    namespace: dict[str, Any] = {"rasp": rasp, "lib": lib}
    exec(to_source(spec), namespace)
    return namespace["program"]


def prune(spec: ProgramSpec) -> ProgramSpec:
    """Drop ops the output does not read and renumber the rest (tokens, indices stay 0, 1)."""
    ops = spec.ops
    needed = {len(ops) - 1}
    for index in range(len(ops) - 1, 1, -1):
        if index in needed:
            needed.update(ops[index].args)
    keep = [0, 1] + [i for i in range(2, len(ops)) if i in needed]
    new_index = {old: new for new, old in enumerate(keep)}
    renamed = []
    for old in keep:
        op = ops[old]
        renamed.append(dataclasses.replace(op, args=tuple(new_index[a] for a in op.args)))
    return ProgramSpec(tuple(renamed))
