"""Classic RASP programs (from the RASP and Tracr papers), written for this project.

Every later differential test compiles these, so each one documents an example input and
output; the examples are doctests that the test suite runs.

Naming: a function names its result plainly (``"reverse"``, ``"hist"``); rename it with
``.named(...)`` if one program uses the same library function twice. Intermediate nodes get a
descriptive stem plus a number from the label counter (``opp_idx_12``), so they never collide
with each other and stay deterministic after ``rasp.reset_label_counter()``. All programs share
the single ``length`` node below.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from rasp import rasp
from rasp.labels import next_label_number

ExprT = TypeVar("ExprT", bound=rasp.RASPExpr)


def _tag(expr: ExprT, stem: str) -> ExprT:
    """Name an intermediate node ``<stem>_<n>`` with a fresh counter number ``n``."""
    return expr.named(f"{stem}_{next_label_number()}")


def make_length() -> rasp.SOp:
    """The input length at every position.

    Counts the keys of an all-true selector. Causally, position ``i`` sees ``i + 1`` keys.

    >>> make_length()("abcd")
    [4, 4, 4, 4]
    >>> make_length()("abcd", causal=True)
    [1, 2, 3, 4]
    """
    everything = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.TRUE).named("all_true")
    return rasp.SelectorWidth(everything).named("length")


length = make_length()
"""The shared ``length`` s-op every library program uses (one node per program)."""


def make_reverse(sop: rasp.SOp) -> rasp.SOp:
    """``sop`` in reverse order.

    Position ``i`` reads position ``length - 1 - i``; exactly one key is selected per query,
    so the aggregate is categorical-safe.

    >>> make_reverse(rasp.tokens)("abc")
    ['c', 'b', 'a']
    """
    opposite = _tag(length - rasp.indices, "opp_idx")
    opposite = _tag(opposite - 1, "opp_idx_minus_1")
    flip = _tag(rasp.Select(rasp.indices, opposite, rasp.Comparison.EQ), "reverse_selector")
    return rasp.Aggregate(flip, sop).named("reverse")


def make_frac_prevs(bools: rasp.SOp) -> rasp.SOp:
    """The fraction of positions up to and including this one where ``bools`` is true.

    ``bools`` is annotated numerical; the result is a numerical mean over a prefix selector.

    >>> make_frac_prevs(rasp.tokens == "x")("xyxx")
    [1.0, 0.5, 0.6666666666666666, 0.75]
    """
    bools = rasp.numerical(bools)
    prefix = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ)
    return rasp.numerical(rasp.Aggregate(prefix, bools, default=0)).named("frac_prevs")


def make_prefix_sum(sop: rasp.SOp) -> rasp.SOp:
    """The running total of ``sop``: the sum of its values up to and including each position.

    A ``SumAggregate`` over the prefix selector ``key index <= query index`` (it reads only
    earlier positions, so the causal result is the same).

    >>> make_prefix_sum(rasp.numerical(rasp.Map(lambda t: t, rasp.tokens)))([3, 1, 2])
    [3, 4, 6]
    """
    prefix = _tag(rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ), "prefix")
    return rasp.numerical(rasp.SumAggregate(prefix, sop, default=0)).named("prefix_sum")


def make_count_so_far(sop: rasp.SOp, token: Any) -> rasp.SOp:
    """How many positions up to and including this one hold ``token`` (an exact counter).

    >>> make_count_so_far(rasp.tokens, "a")("abaa")
    [1, 1, 2, 3]
    """
    is_token = _tag(rasp.numerical(rasp.Map(lambda x: 1 if x == token else 0, sop)), "is_token")
    return make_prefix_sum(is_token).named("count_so_far")


def make_nesting_depth(sop: rasp.SOp, open_token: Any, close_token: Any) -> rasp.SOp:
    """The stack depth after each position: #open - #close so far (negative once unbalanced).

    Unlike ``make_pair_balance`` (the same difference divided by the prefix length) this is an
    integer, so a categorical Map of it compares depths exactly at any length.

    >>> make_nesting_depth(rasp.tokens, "(", ")")("(()))")
    [1, 2, 1, 0, -1]
    """
    step = _tag(
        rasp.numerical(rasp.Map(lambda x: 1 if x == open_token else (-1 if x == close_token else 0), sop)),
        "depth_step",
    )
    return make_prefix_sum(step).named("nesting_depth")


def make_pair_balance(sop: rasp.SOp, open_token: Any, close_token: Any) -> rasp.SOp:
    """Running ``(#open - #close) / (position + 1)`` for one kind of bracket.

    Negative exactly where the prefix has more closing than opening brackets.

    >>> make_pair_balance(rasp.tokens, "(", ")")("(()")
    [1.0, 1.0, 0.3333333333333333]
    """
    is_open = _tag(rasp.numerical(sop == open_token), "is_open")
    is_close = _tag(rasp.numerical(sop == close_token), "is_close")
    opens = _tag(rasp.numerical(make_frac_prevs(is_open)), "frac_open")
    closes = _tag(rasp.numerical(make_frac_prevs(is_close)), "frac_close")
    balance = rasp.LinearSequenceMap(opens, closes, 1, -1)
    return rasp.numerical(balance).named("pair_balance")


def _any_of(sops: Sequence[rasp.SOp]) -> rasp.SOp:
    """Position-wise ``or`` of boolean s-ops."""
    result = sops[0]
    for sop in sops[1:]:
        result = result | sop
    return result


def _all_of(sops: Sequence[rasp.SOp]) -> rasp.SOp:
    """Position-wise ``and`` of boolean s-ops."""
    result = sops[0]
    for sop in sops[1:]:
        result = result & sop
    return result


def make_shuffle_dyck(pairs: Sequence[Sequence[Any]]) -> rasp.SOp:
    """Whether the input is a shuffle of balanced bracket languages, one per pair.

    ``pairs`` lists (open, close) brackets, e.g. ``["()", "{}"]``. The input is accepted when
    no prefix closes more brackets of a kind than it opened, and every kind is balanced at the
    end. The answer is written at every position. Causally, position ``i`` answers for the
    prefix ending at ``i``.

    >>> make_shuffle_dyck(["()"])("(())")
    [True, True, True, True]
    >>> make_shuffle_dyck(["()"])("())(")
    [False, False, False, False]
    >>> make_shuffle_dyck(["()", "{}"])("({)}", causal=True)
    [False, False, False, True]
    """
    if not pairs:
        raise ValueError("make_shuffle_dyck needs at least one bracket pair")
    balances = []
    for pair in pairs:
        if len(pair) != 2:
            raise ValueError(f"bracket pair {pair!r} must have exactly two elements")
        open_token, close_token = pair
        balance = make_pair_balance(rasp.tokens, open_token, close_token)
        balances.append(_tag(balance, f"balance_{open_token}{close_token}"))

    went_negative = _any_of([balance < 0 for balance in balances])
    went_negative = _tag(rasp.numerical(rasp.Map(lambda x: x, went_negative)), "any_negative")
    everywhere = _tag(rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.TRUE), "all_pos")
    ever_negative = rasp.numerical(rasp.Aggregate(everywhere, went_negative, default=0))
    ever_negative = _tag(ever_negative, "has_neg")

    closed = _all_of([balance == 0 for balance in balances])
    last = _tag(length - 1, "last_index")
    at_last = _tag(rasp.Select(rasp.indices, last, rasp.Comparison.EQ), "select_last")
    closed_at_end = _tag(rasp.Aggregate(at_last, closed), "all_closed")

    never_negative = _tag(~ever_negative, "never_negative")
    return (closed_at_end & never_negative).named("shuffle_dyck")


def make_shuffle_dyck2() -> rasp.SOp:
    """Shuffle-Dyck over the two pairs ``()`` and ``{}``.

    >>> make_shuffle_dyck2()("({)}")
    [True, True, True, True]
    >>> make_shuffle_dyck2()("({)")
    [False, False, False]
    """
    return make_shuffle_dyck(["()", "{}"]).named("shuffle_dyck2")


def make_hist() -> rasp.SOp:
    """How often each position's token occurs in the input.

    >>> make_hist()("abac")
    [2, 1, 2, 1]
    >>> make_hist()("abac", causal=True)
    [1, 1, 2, 1]
    """
    same_token = _tag(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ), "same_tok")
    return rasp.SelectorWidth(same_token).named("hist")


def make_sort_unique(vals: rasp.SOp, keys: rasp.SOp) -> rasp.SOp:
    """``vals`` reordered by ascending ``keys``; the keys must be distinct.

    Each position's target is the number of smaller keys; position ``i`` then reads the value
    whose target is ``i``.

    >>> make_sort_unique(rasp.tokens, rasp.tokens)([3, 1, 2])
    [1, 2, 3]
    """
    smaller = _tag(rasp.Select(keys, keys, rasp.Comparison.LT), "smaller")
    target = _tag(rasp.SelectorWidth(smaller), "target_pos")
    move = _tag(rasp.Select(target, rasp.indices, rasp.Comparison.EQ), "sel_new")
    return rasp.Aggregate(move, vals).named("sort")


def make_sort(vals: rasp.SOp, keys: rasp.SOp, *, max_seq_len: int, min_key: float) -> rasp.SOp:
    """``vals`` reordered by ascending ``keys``, duplicates allowed (a stable sort).

    Ties are broken by adding ``min_key * index / max_seq_len`` to each key, which stays below
    ``min_key``, the smallest gap between distinct keys, so the order of distinct keys is
    kept. Then :func:`make_sort_unique` applies.

    >>> make_sort(rasp.tokens, rasp.tokens, max_seq_len=5, min_key=1)([2, 1, 2, 0])
    [0, 1, 2, 2]
    """
    unique_keys = rasp.SequenceMap(
        lambda key, index: key + min_key * index / max_seq_len, keys, rasp.indices
    )
    return make_sort_unique(vals, _tag(unique_keys, "unique_keys")).named("sort")


def make_sort_freq(max_seq_len: int) -> rasp.SOp:
    """The tokens ordered by descending frequency (ties keep input order).

    >>> make_sort_freq(max_seq_len=6)("abbccc")
    ['c', 'c', 'c', 'b', 'b', 'a']
    """
    negative_hist = _tag(-1 * _tag(make_hist(), "hist"), "neg_hist")
    ordered = make_sort(rasp.tokens, negative_hist, max_seq_len=max_seq_len, min_key=1)
    return ordered.named("sort_freq")


def make_count(sop: rasp.SOp, token: Any) -> rasp.SOp:
    """How many positions of ``sop`` equal ``token``, at every position.

    >>> make_count(rasp.tokens, "a")("abcab")
    [2, 2, 2, 2, 2]
    """
    matches = rasp.Select(sop, sop, lambda key, query: key == token)
    return rasp.SelectorWidth(_tag(matches, f"is_{token}")).named(f"count_{token}")


def make_count_less_freq(n: int) -> rasp.SOp:
    """How many positions hold a token that occurs at most ``n`` times, at every position.

    >>> make_count_less_freq(2)("aaabbc")
    [3, 3, 3, 3, 3, 3]
    """
    hist = _tag(make_hist(), "hist")
    rare = _tag(rasp.Select(hist, hist, lambda key, query: key <= n), "select_less")
    return rasp.SelectorWidth(rare).named("count_less_freq")


def shift_by(offset: int, /, sop: rasp.SOp) -> rasp.SOp:
    """``sop`` moved ``offset`` positions to the right; the first ``offset`` are ``None``.

    >>> shift_by(1, rasp.tokens)("abc")
    [None, 'a', 'b']
    """
    earlier = rasp.Select(rasp.indices, rasp.indices, lambda key, query: query == key + offset)
    shifted = rasp.Aggregate(_tag(earlier, f"select_off_by_{offset}"), sop, default=None)
    return shifted.named(f"shift_by({offset})")


def detect_pattern(sop: rasp.SOp, pattern: Sequence[Any]) -> rasp.SOp:
    """True where ``pattern`` ends at this position in ``sop``.

    The first ``len(pattern) - 1`` positions are ``None`` (no full window fits there).

    >>> detect_pattern(rasp.tokens, "abc")("abcabc")
    [None, None, True, False, False, True]
    """
    if len(pattern) < 1:
        raise ValueError("detect_pattern needs a non-empty pattern")
    matches = []
    for distance, element in enumerate(reversed(pattern)):
        match = _tag(sop == element, f"is_{element}")
        if distance:
            match = _tag(shift_by(distance, match), f"shift_by({distance})")
        matches.append(match)
    return _all_of(matches).named(f"detect_pattern({pattern})")


def make_nary_sequencemap(f: Callable[..., Any], *sops: rasp.SOp) -> rasp.SOp:
    """``f(x1, ..., xn)`` position-wise over ``n`` s-ops, built from binary SequenceMaps.

    The arguments are packed into tuples one s-op at a time, then a Map unpacks them. The
    tuple-valued intermediates can have many distinct values.

    >>> make_nary_sequencemap(lambda a, b, c: a + b * c, rasp.tokens, rasp.indices,
    ...                       rasp.indices)([10, 20, 30])
    [10, 21, 34]
    """
    if not sops:
        raise ValueError("make_nary_sequencemap needs at least one s-op")
    packed: rasp.SOp = _tag(rasp.Map(lambda x: (x,), sops[0]), "args_1")
    for position, sop in enumerate(sops[1:], start=2):
        packed = _tag(rasp.SequenceMap(lambda xs, y: (*xs, y), packed, sop), f"args_{position}")
    return rasp.Map(lambda args: f(*args), packed).named("nary_sequence_map")


def _previous_or_first(key: int, query: int) -> bool:
    """Selects the position before the query; position 0 selects itself (its value is unused)."""
    return key == query - 1 or key == query == 0


def make_parity_loop(steps: int) -> rasp.Loop:
    """The parity of the 0/1 tokens up to each position, by a loop (ALTA's style).

    The state starts as the tokens; each iteration sets position ``i`` to ``token[i] XOR
    state[i - 1]`` (position 0 keeps its token), so after ``k`` iterations position ``i`` holds
    the parity of ``tokens[max(0, i - k) .. i]``: exact at every position once ``steps >=
    length - 1``. Compiled, every iteration runs the same layer (one head, one MLP). It reads
    only earlier positions, so the causal result is the same.

    >>> make_parity_loop(3)([1, 1, 0, 1])
    [1, 0, 0, 1]
    """
    previous = _tag(rasp.Select(rasp.indices, rasp.indices, _previous_or_first), "previous")
    first_token = _tag(rasp.SequenceMap(lambda t, i: (t, i == 0), rasp.tokens, rasp.indices), "token_is_first")

    def xor_previous(state: rasp.SOp) -> rasp.SOp:
        before = _tag(rasp.Aggregate(previous, state), "parity_before")
        return _tag(rasp.SequenceMap(lambda tf, p: tf[0] if tf[1] else tf[0] ^ p, first_token, before), "parity_step")

    start = _tag(rasp.Map(lambda t: t, rasp.tokens), "parity_start")
    return rasp.Loop(xor_previous, start, steps).named("parity")


def _column_status(previous: Any, index: int) -> str:
    """What the column before this one does to the carry: generate, propagate or kill it."""
    if index == 0:
        return "first"
    total = previous[0] + previous[1]
    return "generate" if total >= 10 else ("propagate" if total == 9 else "kill")


def _next_digit(column: tuple[int, str], before: int) -> int:
    """This position's sum digit given the digit before it (which tells a propagated carry)."""
    digit_sum, status = column
    carry = status == "generate" or (status == "propagate" and before == 0)
    return (digit_sum + carry) % 10


def make_addition_loop(steps: int) -> rasp.Loop:
    """Digits of the sum of two numbers, by propagating the carry one position per iteration.

    Tokens are digit pairs ``(a_i, b_i)``, least significant first; the output is the sum's
    digit at each position (the carry out of the last column is dropped: append ``(0, 0)`` to
    keep it). The state is the output digit: it starts as ``(a_i + b_i + generated carry) %
    10`` and each iteration redoes position ``i`` from its column and the digit before it
    (where column ``i - 1`` sums to 9 the carry passes through, and the digit before is 0
    exactly when a carry came in). A carry travels one position per iteration, so the result is
    exact once ``steps >= length - 1`` (ALTA's addition, as a RASP loop).

    >>> make_addition_loop(3)([(9, 1), (9, 0), (9, 0), (0, 0)])
    [0, 0, 0, 1]
    """
    previous = _tag(rasp.Select(rasp.indices, rasp.indices, _previous_or_first), "previous")
    previous_column = _tag(rasp.Aggregate(previous, rasp.tokens), "previous_column")
    status = _tag(rasp.SequenceMap(_column_status, previous_column, rasp.indices), "carry_status")
    digit_sum = _tag(rasp.Map(lambda ab: (ab[0] + ab[1]) % 10, rasp.tokens), "digit_sum")
    column = _tag(rasp.SequenceMap(lambda d, s: (d, s), digit_sum, status), "column")

    def carry_once(state: rasp.SOp) -> rasp.SOp:
        before = _tag(rasp.Aggregate(previous, state), "digit_before")
        return _tag(rasp.SequenceMap(_next_digit, column, before), "sum_digit_step")

    start = _tag(rasp.Map(lambda c: (c[0] + (c[1] == "generate")) % 10, column), "sum_digit_start")
    return rasp.Loop(carry_once, start, steps).named("sum_digits")
