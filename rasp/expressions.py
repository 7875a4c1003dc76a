"""RASP expressions: s-ops, selectors, annotations, encodings and the primitives.

Expressions are immutable: ``named``/``annotated`` return copies. Users import them through
:mod:`rasp.rasp` (Tracr's module name), which adds the evaluation entry points of
:mod:`rasp.evaluator`. The evaluator imports this module; this module imports neither of them.
"""

from __future__ import annotations

import abc
import copy
import enum
import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, Protocol, TypeVar

from rasp import functions
from rasp.comparison import Comparison, Predicate, PredicateAnd, PredicateNot, PredicateOr
from rasp.errors import RaspEvaluationError
from rasp.labels import next_label_number, next_unique_id, reset_label_counter

__all__ = [
    "Aggregate",
    "Annotator",
    "DEFAULT_ANNOTATORS",
    "LengthType",
    "Loop",
    "LoopState",
    "NumericValue",
    "Predicate",
    "RASPExprT",
    "SOpT",
    "SOpValue",
    "SelectorValue",
    "Value",
    "default_encoding",
    "default_name",
    "length",
    "selector_and",
    "selector_not",
    "selector_or",
    "sop_not",
    "Comparison",
    "ConstantSOp",
    "ConstantSelector",
    "Encoding",
    "Full",
    "IndicesType",
    "LinearSequenceMap",
    "Map",
    "RASPExpr",
    "RaspEvaluationError",
    "SOp",
    "Select",
    "Selector",
    "SelectorAnd",
    "SelectorNot",
    "SelectorOr",
    "SelectorWidth",
    "SequenceMap",
    "SumAggregate",
    "TokensType",
    "annotate",
    "categorical",
    "get_encoding",
    "indices",
    "is_categorical",
    "is_numerical",
    "numerical",
    "reset_label_counter",
    "tokens",
]

# The reference evaluation, `(expr, xs, causal) -> value`, that calling an expression runs. Set by
# `rasp.evaluator` when it loads (the `rasp` package loads it), so this module needs no import of
# the evaluator, which imports this module.
REFERENCE_EVALUATOR: Callable[[Any, Sequence[Any], bool], Any] | None = None

RASPExprT = TypeVar("RASPExprT", bound="RASPExpr")  # Tracr's name for this type variable
SOpT = TypeVar("SOpT", bound="SOp")

# Value types, as Tracr names them (for annotations in user programs).
Value = Any  # one element of an s-op's value: any hashable Python value, or None
NumericValue = int | float  # an element of a numerical s-op
SOpValue = list  # an s-op evaluated on one input: one Value per position
SelectorValue = list  # a selector evaluated on one input: rows [query][key] of bools


class Annotator(Protocol):
    """A function giving the default of one annotation key for an expression."""

    def __call__(self, expr: RASPExpr) -> Any: ...


# Defaults for annotation keys an expression was not given, looked up when the key is read
# (``expr.annotations[key]``). Users may register their own keys here, as in Tracr.
DEFAULT_ANNOTATORS: dict[str, Annotator] = {}


class _Annotations(Mapping[str, Any]):
    """Read-only annotations of one expression; keys it lacks come from `DEFAULT_ANNOTATORS`."""

    __slots__ = ("_expr", "_given")

    def __init__(self, expr: RASPExpr, given: Mapping[str, Any]) -> None:
        self._expr = expr
        self._given = dict(given)

    def __getitem__(self, key: str) -> Any:
        if key in self._given:
            return self._given[key]
        annotator = DEFAULT_ANNOTATORS.get(key)
        if annotator is None:
            raise KeyError(key)
        return annotator(self._expr)

    def _defaults(self) -> dict[str, Any]:
        """The default annotations that apply to this expression (an annotator may refuse it,
        as `default_encoding` refuses selectors)."""
        found = {}
        for key, annotator in list(DEFAULT_ANNOTATORS.items()):
            if key not in self._given:
                try:
                    found[key] = annotator(self._expr)
                except (TypeError, ValueError):
                    continue
        return found

    def __contains__(self, key: object) -> bool:
        return key in self._given or key in self._defaults()

    def __iter__(self) -> Iterator[str]:
        return iter({**self._given, **self._defaults()})

    def __len__(self) -> int:
        return len({**self._given, **self._defaults()})

    def __repr__(self) -> str:
        return repr({**self._given, **self._defaults()})


class Encoding(enum.Enum):
    """How an s-op is stored in the residual stream: one-hot over values, or one number."""

    CATEGORICAL = "categorical"
    NUMERICAL = "numerical"


class RASPExpr(abc.ABC):
    """Base of every RASP expression.

    Each expression has a label (``.label`` and ``.name``, the ``"name"`` annotation), a
    read-only ``annotations`` mapping, its direct sub-expressions in ``children`` and a
    process-unique ``unique_id``. Attributes cannot be reassigned after construction.
    """

    default_label_stem: ClassVar[str] = "expr"

    # Set once in __init__ (and on copies by `annotate`) through `_set`.
    _unique_id: int
    _annotations: _Annotations

    def __init__(self) -> None:
        self._set("_unique_id", next_unique_id())
        label = f"{self.default_label_stem}_{next_label_number()}"
        self._set("_annotations", _Annotations(self, self._default_annotations(label)))

    def _default_annotations(self, label: str) -> dict[str, Any]:
        """Annotations every fresh expression of this kind starts with."""
        return {"name": label}

    def _set(self, attribute: str, value: Any) -> None:
        """Assign an attribute during construction (the class blocks ``setattr`` otherwise)."""
        object.__setattr__(self, attribute, value)

    def __setattr__(self, attribute: str, value: Any) -> None:
        raise AttributeError(
            f"RASP expressions are immutable: cannot set {attribute!r} on {self.label!r}; "
            "build a new expression or use .named()/.annotated() for a relabelled copy"
        )

    __hash__ = object.__hash__

    @property
    def annotations(self) -> Mapping[str, Any]:
        """Read-only annotations; always contains ``"name"`` (and ``"encoding"`` for s-ops)."""
        return self._annotations

    @property
    def label(self) -> str:
        """The expression's unique name, used as its node id by the compiler."""
        return self._annotations["name"]

    @property
    def name(self) -> str:
        """Same as ``label`` (Tracr exposes both)."""
        return self.label

    @property
    def unique_id(self) -> int:
        """A number no other expression in this process has (copies get their own)."""
        return self._unique_id

    @property
    @abc.abstractmethod
    def children(self) -> tuple[RASPExpr, ...]:
        """The direct sub-expressions this expression reads."""

    def named(self: RASPExprT, name: str) -> RASPExprT:
        """Return a copy labelled ``name``."""
        return annotate(self, name=name)

    def annotated(self: RASPExprT, **annotations: Any) -> RASPExprT:
        """Return a copy with ``annotations`` added to (or replacing) the existing ones."""
        return annotate(self, **annotations)

    def __call__(self, xs: Sequence[Any], causal: bool = False) -> list[Any]:
        """Evaluate this expression on the input sequence ``xs`` (``rasp.evaluate``)."""
        if REFERENCE_EVALUATOR is None:
            raise RuntimeError("the RASP evaluator is not loaded; import rasp (or rasp.evaluator) first")
        return REFERENCE_EVALUATOR(self, xs, causal)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.label!r})"


def annotate(expr: RASPExprT, **annotations: Any) -> RASPExprT:
    """Return a copy of ``expr`` whose annotations are updated with ``annotations``.

    ``name`` must be a string; ``encoding`` (s-ops only) may be an :class:`Encoding` or its
    string value. The copy keeps the label unless ``name`` is given, and gets its own
    ``unique_id``. The original expression is unchanged.
    """
    if not isinstance(expr, RASPExpr):
        raise TypeError(f"annotate expects a RASP expression, got {type(expr).__name__}")
    updates = dict(annotations)
    if "name" in updates and not isinstance(updates["name"], str):
        raise TypeError(f"name of {expr.label!r} must be a str, got {updates['name']!r}")
    if "encoding" in updates:
        if not isinstance(expr, SOp):
            raise TypeError(f"{expr.label!r} is a selector; only s-ops carry an encoding")
        updates["encoding"] = Encoding(updates["encoding"])
    duplicate = copy.copy(expr)
    duplicate._set("_unique_id", next_unique_id())
    duplicate._set("_annotations", _Annotations(duplicate, {**expr.annotations, **updates}))
    return duplicate


# ---------------------------------------------------------------------------------------------
# S-ops


def _binary(op: Callable[[Any, Any], Any], fst: SOp, other: Any) -> SOp:
    """``op(fst, other)``: a SequenceMap with another s-op, a Map with a constant."""
    if isinstance(other, SOp):
        return SequenceMap(op, fst, other)
    if isinstance(other, RASPExpr):
        return NotImplemented
    return Map(functions.RightOperand(op, other), fst)


def _reflected(op: Callable[[Any, Any], Any], sop: SOp, constant: Any) -> SOp:
    """``op(constant, sop)`` for a constant on the left of the operator."""
    if isinstance(constant, RASPExpr):
        return NotImplemented
    return Map(functions.LeftOperand(op, constant), sop)


class SOp(RASPExpr):
    """A sequence operation: maps an input sequence to a sequence of the same length.

    Python operators build new s-ops: with a constant they give a ``Map``, with another s-op a
    ``SequenceMap``. ``==`` and the other comparisons therefore return s-ops, not booleans.
    """

    __hash__ = RASPExpr.__hash__

    def __eq__(self, other: Any) -> SOp:  # type: ignore[override]
        return _binary(operator.eq, self, other)

    def __ne__(self, other: Any) -> SOp:  # type: ignore[override]
        return _binary(operator.ne, self, other)

    def __lt__(self, other: Any) -> SOp:
        return _binary(operator.lt, self, other)

    def __le__(self, other: Any) -> SOp:
        return _binary(operator.le, self, other)

    def __gt__(self, other: Any) -> SOp:
        return _binary(operator.gt, self, other)

    def __ge__(self, other: Any) -> SOp:
        return _binary(operator.ge, self, other)

    def __add__(self, other: Any) -> SOp:
        return _binary(operator.add, self, other)

    def __radd__(self, other: Any) -> SOp:
        return _reflected(operator.add, self, other)

    def __sub__(self, other: Any) -> SOp:
        return _binary(operator.sub, self, other)

    def __rsub__(self, other: Any) -> SOp:
        return _reflected(operator.sub, self, other)

    def __mul__(self, other: Any) -> SOp:
        return _binary(operator.mul, self, other)

    def __rmul__(self, other: Any) -> SOp:
        return _reflected(operator.mul, self, other)

    def __truediv__(self, other: Any) -> SOp:
        return _binary(operator.truediv, self, other)

    def __rtruediv__(self, other: Any) -> SOp:
        return _reflected(operator.truediv, self, other)

    def __and__(self, other: Any) -> SOp:
        return _binary(functions.logical_and, self, other)

    def __rand__(self, other: Any) -> SOp:
        return _reflected(functions.logical_and, self, other)

    def __or__(self, other: Any) -> SOp:
        return _binary(functions.logical_or, self, other)

    def __ror__(self, other: Any) -> SOp:
        return _reflected(functions.logical_or, self, other)

    def __invert__(self) -> SOp:
        return Map(functions.logical_not, self)


def _require_sop(owner: str, role: str, value: Any) -> None:
    if not isinstance(value, SOp):
        raise TypeError(f"{owner}: {role} must be an SOp, got {type(value).__name__}")


def _require_selector(owner: str, role: str, value: Any) -> None:
    if not isinstance(value, Selector):
        raise TypeError(f"{owner}: {role} must be a Selector, got {type(value).__name__}")


def _require_callable(owner: str, role: str, value: Any) -> None:
    if not callable(value):
        raise TypeError(f"{owner}: {role} must be callable, got {value!r}")


class TokensType(SOp):
    """The input sequence itself (the singleton ``tokens``)."""

    def _default_annotations(self, label: str) -> dict[str, Any]:
        return {"name": "tokens"}

    @property
    def children(self) -> tuple[RASPExpr, ...]:
        return ()


class IndicesType(SOp):
    """The positions ``0 .. len(xs)-1`` (the singleton ``indices``)."""

    def _default_annotations(self, label: str) -> dict[str, Any]:
        return {"name": "indices"}

    @property
    def children(self) -> tuple[RASPExpr, ...]:
        return ()


class LengthType(SOp):
    """The input's length at every position (the singleton ``length``).

    The compiler builds it as the width of an all-true selector; a causal model cannot see the
    whole input at earlier positions, so it is compiled non-causally only.
    """

    def _default_annotations(self, label: str) -> dict[str, Any]:
        return {"name": "length"}

    @property
    def children(self) -> tuple[RASPExpr, ...]:
        return ()


class Map(SOp):
    """Apply ``f`` to every element of ``inner`` (``None`` stays ``None``, ``f`` not called).

    With ``simplify=True`` (the default) a Map of a Map fuses into one Map of the inner Map's
    input, computing ``f(g(x))``; pass ``simplify=False`` to keep both nodes.
    """

    default_label_stem = "map"

    f: Callable[[Any], Any]
    inner: SOp
    simplify: bool

    def __init__(self, f: Callable[[Any], Any], inner: SOp, simplify: bool = True) -> None:
        _require_callable("Map", "f", f)
        _require_sop("Map", "inner", inner)
        super().__init__()
        if simplify and isinstance(inner, Map):
            f = functions.Composed(f, inner.f)
            inner = inner.inner
        self._set("f", f)
        self._set("inner", inner)
        self._set("simplify", simplify)

    @property
    def children(self) -> tuple[RASPExpr, ...]:
        return (self.inner,)


class SequenceMap(SOp):
    """Apply ``f(x, y)`` position-wise to ``fst`` and ``snd``; ``None`` in either gives ``None``."""

    default_label_stem = "sequence_map"

    f: Callable[[Any, Any], Any]
    fst: SOp
    snd: SOp

    def __init__(self, f: Callable[[Any, Any], Any], fst: SOp, snd: SOp) -> None:
        _require_callable(type(self).__name__, "f", f)
        _require_sop(type(self).__name__, "fst", fst)
        _require_sop(type(self).__name__, "snd", snd)
        super().__init__()
        self._set("f", f)
        self._set("fst", fst)
        self._set("snd", snd)

    @property
    def children(self) -> tuple[RASPExpr, ...]:
        return (self.fst, self.snd)


class LinearSequenceMap(SequenceMap):
    """``fst_fac * fst + snd_fac * snd`` position-wise; compiles to a linear layer."""

    default_label_stem = "linear_sequence_map"

    fst_fac: float
    snd_fac: float

    def __init__(self, fst: SOp, snd: SOp, fst_fac: float, snd_fac: float) -> None:
        super().__init__(functions.LinearCombination(fst_fac, snd_fac), fst, snd)
        self._set("fst_fac", fst_fac)
        self._set("snd_fac", snd_fac)


class Full(SOp):
    """The constant sequence ``[fill] * len(xs)``."""

    default_label_stem = "full"

    fill: Any

    def __init__(self, fill: Any) -> None:
        super().__init__()
        self._set("fill", fill)

    @property
    def children(self) -> tuple[RASPExpr, ...]:
        return ()


class ConstantSOp(SOp):
    """A fixed sequence ``value``; with ``check_length`` the input must have the same length."""

    default_label_stem = "constant_sop"

    value: list[Any]
    check_length: bool

    def __init__(self, value: Sequence[Any], check_length: bool = True) -> None:
        super().__init__()
        self._set("value", list(value))
        self._set("check_length", check_length)

    @property
    def children(self) -> tuple[RASPExpr, ...]:
        return ()


class Aggregate(SOp):
    """Read ``sop`` at the keys ``selector`` picks for each query.

    Categorical: the common value of the selected keys (an error if they differ), ``default``
    when none is selected. Numerical: the mean of the selected values, or ``default``.
    """

    default_label_stem = "aggregate"

    selector: Selector
    sop: SOp
    default: Any

    def __init__(self, selector: Selector, sop: SOp, default: Any = None) -> None:
        _require_selector("Aggregate", "selector", selector)
        _require_sop("Aggregate", "sop", sop)
        super().__init__()
        self._set("selector", selector)
        self._set("sop", sop)
        self._set("default", default)

    @property
    def children(self) -> tuple[RASPExpr, ...]:
        return (self.selector, self.sop)


class SumAggregate(SOp):
    """For each query, the sum of ``sop`` over the keys ``selector`` picks (``default`` if none).

    Tracr's ``Aggregate`` averages; this one adds, so counters and running totals need no
    multiplication by a length. It is numerical unless annotated otherwise (a sum is a number):
    ``rasp.SumAggregate(rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ), x)`` is the
    prefix sum of ``x``. With ``causal=True`` the selector is masked like any other, so the sum
    runs over the selected keys at or before the query. Selecting a ``None`` value is an error;
    ``default`` (0 unless given) is the result where nothing is selected.
    """

    default_label_stem = "sum_aggregate"

    selector: Selector
    sop: SOp
    default: Any

    def __init__(self, selector: Selector, sop: SOp, default: Any = 0) -> None:
        _require_selector("SumAggregate", "selector", selector)
        _require_sop("SumAggregate", "sop", sop)
        super().__init__()
        self._set("selector", selector)
        self._set("sop", sop)
        self._set("default", default)

    def _default_annotations(self, label: str) -> dict[str, Any]:
        return {"name": label, "encoding": Encoding.NUMERICAL}

    @property
    def children(self) -> tuple[RASPExpr, ...]:
        return (self.selector, self.sop)


class SelectorWidth(SOp):
    """For each query, the number of keys ``selector`` selects."""

    default_label_stem = "selector_width"

    selector: Selector

    def __init__(self, selector: Selector) -> None:
        _require_selector("SelectorWidth", "selector", selector)
        super().__init__()
        self._set("selector", selector)

    @property
    def children(self) -> tuple[RASPExpr, ...]:
        return (self.selector,)


class LoopState(SOp):
    """The state a `Loop`'s body receives: the s-op holding the current iteration's value.

    It has a value only inside its Loop (the evaluator binds it to `init`, then to each
    iteration's result); evaluating an expression that reads it outside the Loop is an error.
    Its encoding is the encoding of the Loop's `init`.
    """

    default_label_stem = "loop_state"

    _encoding: Encoding

    def __init__(self, encoding: Encoding) -> None:
        self._set("_encoding", Encoding(encoding))
        super().__init__()

    def _default_annotations(self, label: str) -> dict[str, Any]:
        return {"name": label, "encoding": self._encoding}

    @property
    def children(self) -> tuple[RASPExpr, ...]:
        return ()


def _reads(root: RASPExpr, target: RASPExpr) -> frozenset[int]:
    """The ids of the sub-expressions of `root` (itself included) that read `target`."""
    order: list[RASPExpr] = []
    seen: set[int] = set()
    stack: list[tuple[RASPExpr, bool]] = [(root, False)]
    while stack:  # iterative post-order: deep bodies do not hit the recursion limit
        expr, expanded = stack.pop()
        if expanded:
            order.append(expr)
            continue
        if id(expr) in seen:
            continue
        seen.add(id(expr))
        stack.append((expr, True))
        stack.extend((child, False) for child in expr.children)
    dependent: set[int] = {id(target)}
    for expr in order:
        if any(id(child) in dependent for child in expr.children):
            dependent.add(id(expr))
    return frozenset(dependent)


class Loop(SOp):
    """Apply ``body`` to a state ``steps`` times, starting from ``init``: a loop whose every
    iteration is the same computation (compiled as one block of layers with shared weights).

    ``body`` is called once, here, with the loop's `LoopState` (``.state``) and must return the
    next state: an s-op that reads the state and may read any s-op built outside the loop
    (``tokens``, ``indices``, ``init``, ...). The Loop's value is ``body`` applied ``steps``
    times, ``state_0 = init`` and ``state_k = body(state_{k-1})``, each application evaluated
    like any RASP expression (with ``causal=True`` every selector in it is masked). The state
    has ``init``'s encoding; the body's result must have the same one.

    Raises:
      TypeError: ``body`` is not callable, ``init`` or the body's result is not an s-op,
        ``steps`` is not an integer.
      ValueError: ``steps < 1``; the body returns its state unchanged or does not read it; the
        body's result and ``init`` have different encodings.
    """

    default_label_stem = "loop"

    body: Callable[[SOp], SOp]
    init: SOp
    steps: int
    state: LoopState
    next_state: SOp
    state_dependent: frozenset[int]  # ids of the body's expressions that read the state

    def __init__(self, body: Callable[[SOp], SOp], init: SOp, steps: int) -> None:
        _require_callable("Loop", "body", body)
        _require_sop("Loop", "init", init)
        if isinstance(steps, bool) or not isinstance(steps, int):
            raise TypeError(f"Loop: steps must be an int (the number of iterations), got {steps!r}")
        if steps < 1:
            raise ValueError(f"Loop: steps must be at least 1, got {steps}; for no iteration use init itself")
        state = LoopState(get_encoding(init))
        result = body(state)
        if not isinstance(result, SOp):
            raise TypeError(
                f"Loop: body must return an s-op (the next state), got {type(result).__name__}"
            )
        if result is state:
            raise ValueError("Loop: body returns its state unchanged; the loop would compute init")
        dependent = _reads(result, state)
        if id(result) not in dependent:
            raise ValueError(
                f"Loop: body's result {result.label!r} does not read the state it is given; a "
                "loop body must compute the next state from the current one (a body that "
                "ignores it gives the same value every iteration: use the s-op itself)"
            )
        if get_encoding(result) is not get_encoding(init):
            raise ValueError(
                f"Loop: body's result {result.label!r} is {get_encoding(result).value} but init "
                f"{init.label!r} is {get_encoding(init).value}; the state keeps one encoding, "
                "annotate one of them"
            )
        self._set("body", body)
        self._set("init", init)
        self._set("steps", steps)
        self._set("state", state)
        self._set("next_state", result)
        self._set("state_dependent", dependent)  # ids of the body's expressions that read the state
        super().__init__()

    def _default_annotations(self, label: str) -> dict[str, Any]:
        return {"name": label, "encoding": get_encoding(self.init)}

    def unrolled(self) -> SOp:
        """The loop written out without a Loop: ``body`` called ``steps`` more times, on
        ``init`` and then on each result (what a RASP user writes by hand; compiled, each
        iteration gets layers of its own). Evaluates like the Loop."""
        result: SOp = self.init
        for _ in range(self.steps):
            result = self.body(result)
        return annotate(result, name=self.label)

    @property
    def children(self) -> tuple[RASPExpr, ...]:
        return (self.init,)


# ---------------------------------------------------------------------------------------------
# Selectors


class Selector(RASPExpr):
    """A query x key boolean matrix. ``&``, ``|`` and ``~`` combine selectors.

    ``a & b`` / ``a | b`` of two ``Select``s over the very same keys and queries s-ops fuse
    into one ``Select`` whose predicate combines both; otherwise they build
    ``SelectorAnd``/``SelectorOr``. ``~a`` is always ``SelectorNot(a)``.
    """

    def __and__(self, other: Any) -> Selector:
        if not isinstance(other, Selector):
            return NotImplemented
        if isinstance(self, Select) and isinstance(other, Select) and _fusable(self, other):
            return Select(self.keys, self.queries, PredicateAnd(self.predicate, other.predicate))
        return SelectorAnd(self, other)

    def __or__(self, other: Any) -> Selector:
        if not isinstance(other, Selector):
            return NotImplemented
        if isinstance(self, Select) and isinstance(other, Select) and _fusable(self, other):
            return Select(self.keys, self.queries, PredicateOr(self.predicate, other.predicate))
        return SelectorOr(self, other)

    def __invert__(self) -> Selector:
        return SelectorNot(self)


def _fusable(fst: Select, snd: Select) -> bool:
    """Whether two Selects are over identical key and query s-ops."""
    return fst.keys is snd.keys and fst.queries is snd.queries


class Select(Selector):
    """Selects key ``k`` for query ``q`` when ``predicate(k, q)`` holds.

    ``predicate`` is a :class:`Comparison` or any callable ``(key, query) -> bool``. It is never
    called when the key or the query is ``None``; such pairs are not selected.
    """

    default_label_stem = "select"

    keys: SOp
    queries: SOp
    predicate: Predicate

    def __init__(self, keys: SOp, queries: SOp, predicate: Predicate) -> None:
        _require_sop("Select", "keys", keys)
        _require_sop("Select", "queries", queries)
        _require_callable("Select", "predicate", predicate)
        super().__init__()
        self._set("keys", keys)
        self._set("queries", queries)
        self._set("predicate", predicate)

    @property
    def children(self) -> tuple[RASPExpr, ...]:
        return (self.keys, self.queries)


class ConstantSelector(Selector):
    """A fixed selection matrix ``value[q][k]``; with ``check_length`` it must be n x n."""

    default_label_stem = "constant_selector"

    value: list[list[bool]]
    check_length: bool

    def __init__(self, value: Sequence[Sequence[bool]], check_length: bool = True) -> None:
        super().__init__()
        self._set("value", [list(row) for row in value])
        self._set("check_length", check_length)

    @property
    def children(self) -> tuple[RASPExpr, ...]:
        return ()


class _BinarySelector(Selector):
    """Shared shape of ``SelectorAnd`` and ``SelectorOr``: two selector operands."""

    fst: Selector
    snd: Selector

    def __init__(self, fst: Selector, snd: Selector) -> None:
        _require_selector(type(self).__name__, "fst", fst)
        _require_selector(type(self).__name__, "snd", snd)
        super().__init__()
        self._set("fst", fst)
        self._set("snd", snd)

    @property
    def children(self) -> tuple[RASPExpr, ...]:
        return (self.fst, self.snd)


class SelectorAnd(_BinarySelector):
    """Selected where both ``fst`` and ``snd`` select."""

    default_label_stem = "selector_and"


class SelectorOr(_BinarySelector):
    """Selected where ``fst`` or ``snd`` selects."""

    default_label_stem = "selector_or"


class SelectorNot(Selector):
    """Selected exactly where ``inner`` does not select (then causally masked if causal)."""

    default_label_stem = "selector_not"

    inner: Selector

    def __init__(self, inner: Selector) -> None:
        _require_selector("SelectorNot", "inner", inner)
        super().__init__()
        self._set("inner", inner)

    @property
    def children(self) -> tuple[RASPExpr, ...]:
        return (self.inner,)


def selector_and(fst: Selector, snd: Selector, simplify: bool = True) -> Selector:
    """Selected where both select; with ``simplify`` two Selects over the same s-ops fuse."""
    _require_selector("selector_and", "fst", fst)
    _require_selector("selector_and", "snd", snd)
    return fst & snd if simplify else SelectorAnd(fst, snd)


def selector_or(fst: Selector, snd: Selector, simplify: bool = True) -> Selector:
    """Selected where either selects; with ``simplify`` two Selects over the same s-ops fuse."""
    _require_selector("selector_or", "fst", fst)
    _require_selector("selector_or", "snd", snd)
    return fst | snd if simplify else SelectorOr(fst, snd)


def selector_not(sel: Selector, simplify: bool = True) -> Selector:
    """Selected where ``sel`` does not select; with ``simplify`` a Select negates its predicate."""
    _require_selector("selector_not", "sel", sel)
    if simplify and isinstance(sel, Select):
        return Select(sel.keys, sel.queries, PredicateNot(sel.predicate))
    return SelectorNot(sel)


def sop_not(sop: SOp) -> SOp:
    """The logical negation of every element: ``Map(not x)``."""
    _require_sop("sop_not", "sop", sop)
    return Map(functions.logical_not, sop)


# ---------------------------------------------------------------------------------------------
# Encodings


def numerical(sop: SOpT) -> SOpT:
    """Return a copy of ``sop`` annotated with the numerical encoding (one number per position)."""
    return annotate(sop, encoding=Encoding.NUMERICAL)


def categorical(sop: SOpT) -> SOpT:
    """Return a copy of ``sop`` annotated with the categorical encoding (the default)."""
    return annotate(sop, encoding=Encoding.CATEGORICAL)


def get_encoding(sop: SOp) -> Encoding:
    """The encoding annotation of ``sop``."""
    if not isinstance(sop, SOp):
        raise TypeError(f"only s-ops have an encoding, got {type(sop).__name__}")
    return sop.annotations["encoding"]


def is_numerical(sop: SOp) -> bool:
    """Whether ``sop`` is annotated numerical."""
    return get_encoding(sop) is Encoding.NUMERICAL


def is_categorical(sop: SOp) -> bool:
    """Whether ``sop`` is annotated categorical."""
    return get_encoding(sop) is Encoding.CATEGORICAL


def default_name(expr: RASPExpr) -> str:
    """The name stem an expression of this type gets when not named (``"map"``, ``"tokens"``)."""
    if not isinstance(expr, RASPExpr):
        raise TypeError(f"default_name expects a RASP expression, got {type(expr).__name__}")
    for cls, name in ((TokensType, "tokens"), (IndicesType, "indices"), (LengthType, "length")):
        if isinstance(expr, cls):
            return name
    return type(expr).default_label_stem


def default_encoding(expr: RASPExpr) -> Encoding:
    """The encoding an s-op has unless annotated: categorical. Selectors have none."""
    if not isinstance(expr, SOp):
        raise TypeError(f"{expr!r} is not an s-op; only s-ops have an encoding")
    return Encoding.CATEGORICAL


DEFAULT_ANNOTATORS["encoding"] = default_encoding


# ---------------------------------------------------------------------------------------------
# Primitives

tokens = TokensType()
indices = IndicesType()
length = LengthType()
