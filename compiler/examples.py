"""Library programs the CLI can compile by name, with a vocabulary, length and input for each.

Each example is one expression over `lib`, `rasp` and `max_seq_len` (a few programs depend on
the length); `Example.build(max_seq_len)` evaluates it and `Example.source(max_seq_len)` is the
text kept in saved model files.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Hashable

from rasp import lib, rasp


@dataclasses.dataclass(frozen=True)
class Example:
    """A library program with sensible defaults for compiling and running it."""

    name: str
    call: str  # a Python expression over lib, rasp and max_seq_len
    function: Callable  # the library function the expression calls
    vocab: tuple[Hashable, ...]
    max_seq_len: int
    example_input: tuple[Hashable, ...]  # without BOS
    description: str
    # A vocabulary of (about) the given size holding the tokens the program needs, for
    # benchmarks and differential tests at growing sizes.
    scaled_vocab: Callable[[int], tuple[Hashable, ...]]
    # Whether the program reads only earlier positions: its causal compilation computes the plain
    # result (no CausalSemanticsWarning). Every program compiles with causal=True.
    causal: bool = False

    def build(self, max_seq_len: int) -> rasp.SOp:
        """The program's s-op for inputs of up to `max_seq_len` tokens."""
        code = compile(self.call, f"<example {self.name}>", "eval")
        return eval(code, {"lib": lib, "rasp": rasp, "max_seq_len": max_seq_len})

    def source(self, max_seq_len: int) -> str:
        """Python text that builds the program, followed by the library function's source."""
        return (
            f"from rasp import lib, rasp\n\nmax_seq_len = {max_seq_len}\nprogram = {self.call}\n\n"
            f"# {self.function.__name__} in rasp/lib.py:\n" + inspect.getsource(self.function)
        )


_LETTERS = ("a", "b", "c")
_BRACKETS = ("(", ")", "{", "}")
_DIGIT_PAIRS = tuple((a, b) for a in range(10) for b in range(10))


def _letters(first: tuple[str, ...]) -> Callable[[int], tuple[str, ...]]:
    """Vocabularies of a given size: the tokens `first`, then filler tokens t0, t1, ..."""
    return lambda size: first + tuple(f"t{i}" for i in range(max(0, size - len(first))))


def _ints(start: int) -> Callable[[int], tuple[int, ...]]:
    return lambda size: tuple(range(start, start + size))


def _fixed(vocab: tuple[Hashable, ...]) -> Callable[[int], tuple[Hashable, ...]]:
    return lambda size: vocab


_ALL = (
    Example("frac_prevs", 'lib.make_frac_prevs((rasp.tokens == "x").named("is_x"))', lib.make_frac_prevs,
            ("a", "b", "c", "x"), 5, ("x", "a", "c", "x"), "fraction of positions so far holding 'x' (numerical)",
            _letters(("x",)), causal=True),
    Example("length", "lib.make_length()", lib.make_length, _LETTERS, 5, ("a", "b", "c"), "input length",
            _letters(())),
    Example("reverse", "lib.make_reverse(rasp.tokens)", lib.make_reverse,
            ("a", "b", "c", "d"), 5, ("a", "b", "c", "d"), "the tokens in reverse order", _letters(())),
    Example("pair_balance", 'lib.make_pair_balance(rasp.tokens, "(", ")")', lib.make_pair_balance,
            ("(", ")", "a"), 6, ("(", "(", ")", "a"), "running (#open - #close) / length of the prefix (numerical)",
            _fixed(("(", ")", "a")), causal=True),
    Example("hist", "lib.make_hist()", lib.make_hist, _LETTERS, 5, ("a", "b", "a", "c"), "occurrences of each token",
            _letters(())),
    Example("sort_unique", "lib.make_sort_unique(rasp.tokens, rasp.tokens)", lib.make_sort_unique,
            (1, 2, 3, 4, 5), 5, (3, 1, 4, 2), "distinct integer tokens in ascending order", _ints(1)),
    Example("sort", "lib.make_sort(rasp.tokens, rasp.tokens, max_seq_len=max_seq_len, min_key=1)", lib.make_sort,
            (1, 2, 3, 4), 5, (3, 2, 3, 1), "integer tokens in ascending order, duplicates allowed", _ints(1)),
    Example("sort_freq", "lib.make_sort_freq(max_seq_len)", lib.make_sort_freq,
            _LETTERS, 5, ("a", "b", "b", "c", "b"), "tokens by descending frequency", _letters(())),
    Example("count_a", 'lib.make_count(rasp.tokens, "a")', lib.make_count,
            _LETTERS, 5, ("a", "b", "a"), "how many tokens are 'a'", _letters(("a",))),
    Example("count_so_far", 'lib.make_count_so_far(rasp.tokens, "a")', lib.make_count_so_far,
            _LETTERS, 5, ("a", "b", "a", "a"), "running count of 'a' (a SumAggregate prefix sum)",
            _letters(("a",)), causal=True),
    Example("nesting_depth", 'lib.make_nesting_depth(rasp.tokens, "(", ")")', lib.make_nesting_depth,
            ("(", ")", "a"), 6, ("(", "(", ")", "a"), "stack depth #open - #close so far (a SumAggregate)",
            _fixed(("(", ")", "a")), causal=True),
    Example("count_less_freq", "lib.make_count_less_freq(1)", lib.make_count_less_freq,
            _LETTERS, 5, ("a", "b", "a", "c"), "how many tokens occur at most once", _letters(())),
    Example("shift_by_1", "lib.shift_by(1, rasp.tokens)", lib.shift_by,
            _LETTERS, 5, ("a", "b", "c"), "the tokens moved one position right", _letters(()), causal=True),
    Example("detect_abc", 'lib.detect_pattern(rasp.tokens, "abc")', lib.detect_pattern,
            _LETTERS, 6, ("a", "b", "c", "a", "b"), "where the pattern a b c ends", _letters(_LETTERS), causal=True),
    Example("dyck1", 'lib.make_shuffle_dyck(["()"]).named("dyck1")', lib.make_shuffle_dyck,
            ("(", ")"), 6, ("(", "(", ")", ")"), "balanced parentheses", _fixed(("(", ")", "a"))),
    Example("shuffle_dyck2", "lib.make_shuffle_dyck2()", lib.make_shuffle_dyck2,
            _BRACKETS, 6, ("(", "{", ")", "}"), "shuffle of balanced () and {}", _fixed(_BRACKETS + ("a",))),
    Example("nary_sum_mod_4",
            "lib.make_nary_sequencemap(lambda a, b, i: (a + b + i) % 4, rasp.tokens, rasp.tokens, rasp.indices)",
            lib.make_nary_sequencemap, (0, 1, 2, 3), 5, (3, 1, 2), "(token + token + index) mod 4 at each position",
            _ints(0), causal=True),
)

# Loops (`rasp.Loop`): one block of layers with shared weights, run max_seq_len - 1 times. Kept
# out of EXAMPLES, which the straight-line tests, sweeps and circuit tools iterate; their
# differential tests are in tests/compiler/test_loops.py. The command line offers both.
_LOOPS = (
    Example("parity_loop", "lib.make_parity_loop(max(1, max_seq_len - 1))", lib.make_parity_loop,
            (0, 1), 8, (1, 1, 0, 1), "parity of the tokens so far, by a loop (one tied layer, ALTA-style)",
            _fixed((0, 1)), causal=True),
    Example("addition_loop", "lib.make_addition_loop(max(1, max_seq_len - 1))", lib.make_addition_loop,
            _DIGIT_PAIRS, 6, ((9, 1), (9, 0), (4, 5)),
            "digits of a + b from digit pairs (a_i, b_i), least significant first, by a carry loop",
            _fixed(_DIGIT_PAIRS), causal=True),
)

EXAMPLES: dict[str, Example] = {example.name: example for example in _ALL}
LOOP_EXAMPLES: dict[str, Example] = {example.name: example for example in _LOOPS}
CATALOGUE: dict[str, Example] = {**EXAMPLES, **LOOP_EXAMPLES}  # what `tracr-compile --example` offers
