"""The program library on hand-checked inputs, non-causal and causal."""

import doctest

import pytest

import rasp
from rasp import lib


def test_docstring_examples_hold():
    result = doctest.testmod(lib, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 15
    assert result.failed == 0


def test_library_importable_both_ways():
    import rasp.lib as direct

    assert rasp.lib is lib is direct


def test_length():
    length = lib.make_length()
    assert length.label == "length"
    assert length("hello") == [5] * 5
    assert length("hello", causal=True) == [1, 2, 3, 4, 5]
    assert length([]) == []
    assert isinstance(length, rasp.SelectorWidth)
    assert length.selector.predicate is rasp.Comparison.TRUE
    assert lib.length("ab") == [2, 2]


def test_reverse():
    reverse = lib.make_reverse(rasp.tokens)
    assert reverse("hello") == list("olleh")
    assert reverse([1]) == [1]
    assert reverse([]) == []
    assert lib.make_reverse(rasp.indices)("abcd") == [3, 2, 1, 0]
    # Causally the length is the prefix length, so every query reads position 0.
    assert reverse("abc", causal=True) == ["a", "a", "a"]
    assert reverse.selector.keys is rasp.indices
    assert reverse.selector.predicate is rasp.Comparison.EQ


def test_frac_prevs():
    frac = lib.make_frac_prevs(rasp.tokens == "l")
    assert frac("hello") == [0, 0, 1 / 3, 2 / 4, 2 / 5]
    assert frac("hello", causal=True) == frac("hello")
    assert rasp.is_numerical(frac) and rasp.is_numerical(frac.sop)
    assert frac.default == 0
    assert frac.selector.predicate is rasp.Comparison.LEQ


def test_pair_balance():
    balance = lib.make_pair_balance(rasp.tokens, "(", ")")
    assert balance("(()))") == pytest.approx([1, 1, 1 / 3, 0, -1 / 5])
    assert balance("ab") == [0, 0]
    assert rasp.is_numerical(balance)
    assert isinstance(balance, rasp.LinearSequenceMap)
    assert (balance.fst_fac, balance.snd_fac) == (1, -1)


@pytest.mark.parametrize(
    "text, accepted",
    [
        ("", None),
        ("()", True),
        ("(())()", True),
        ("(()", False),
        ("())(", False),
        (")(", False),
        ("a(b)c", True),
    ],
)
def test_shuffle_dyck_one_pair(text, accepted):
    out = lib.make_shuffle_dyck(["()"])(text)
    assert out == [accepted] * len(text)


@pytest.mark.parametrize(
    "text, accepted",
    [
        ("({)}", True),
        ("({})", True),
        ("(}", False),
        ("{(})", True),
        ("{{)(}}", False),
        ("{}()", True),
        ("{", False),
    ],
)
def test_shuffle_dyck2(text, accepted):
    assert lib.make_shuffle_dyck2()(text) == [accepted] * len(text)
    assert lib.make_shuffle_dyck2().label == "shuffle_dyck2"


def test_shuffle_dyck_any_pairs():
    program = lib.make_shuffle_dyck(["ab", "xy", "<>"])
    assert program("axb<y>") == [True] * 6
    assert program("ayxb") == [False] * 4  # y closes an x that was not opened yet
    assert program("axyb<>") == [True] * 6
    assert program("a<b") == [False] * 3


def test_shuffle_dyck_causal_answers_each_prefix():
    program = lib.make_shuffle_dyck2()
    assert program("(){)", causal=True) == [False, True, False, False]
    assert program("({})", causal=True) == [False, False, False, True]


def test_shuffle_dyck_rejects_bad_pairs():
    with pytest.raises(ValueError):
        lib.make_shuffle_dyck([])
    with pytest.raises(ValueError):
        lib.make_shuffle_dyck(["(]]"])


def test_hist():
    hist = lib.make_hist()
    assert hist("hello") == [1, 1, 2, 2, 1]
    assert hist("hello", causal=True) == [1, 1, 1, 2, 1]


def test_sort_unique():
    sort = lib.make_sort_unique(rasp.tokens, rasp.tokens)
    assert sort([5, 2, 9, 1]) == [1, 2, 5, 9]
    by_key = lib.make_sort_unique(rasp.tokens, rasp.indices * -1)
    assert by_key("abc") == ["c", "b", "a"]


def test_sort_with_duplicates_is_stable():
    keys = rasp.Map(lambda ch: {"a": 2, "b": 1, "c": 2, "d": 0}[ch], rasp.tokens)
    sort = lib.make_sort(rasp.tokens, keys, max_seq_len=6, min_key=1)
    assert sort("abcd") == ["d", "b", "a", "c"]
    numbers = lib.make_sort(rasp.tokens, rasp.tokens, max_seq_len=6, min_key=1)
    assert numbers([3, 1, 3, 1, 2, 0]) == [0, 1, 1, 2, 3, 3]


def test_sort_freq():
    program = lib.make_sort_freq(max_seq_len=7)
    assert program("abbccca") == ["c", "c", "c", "a", "b", "b", "a"]
    assert program.label == "sort_freq"


def test_count():
    count = lib.make_count(rasp.tokens, "a")
    assert count("banana") == [3] * 6
    assert count("xyz") == [0, 0, 0]
    assert count("banana", causal=True) == [0, 1, 1, 2, 2, 3]
    assert count.label == "count_a"


def test_count_less_freq():
    program = lib.make_count_less_freq(2)
    assert program("aaabbc") == [3] * 6
    assert program("aabbcc") == [6] * 6
    assert lib.make_count_less_freq(1)("aaabbc") == [1] * 6


def test_shift_by():
    assert lib.shift_by(2, rasp.tokens)("abcd") == [None, None, "a", "b"]
    assert lib.shift_by(2, rasp.tokens)("abcd", causal=True) == [None, None, "a", "b"]
    assert lib.shift_by(0, rasp.tokens)("ab") == ["a", "b"]
    assert lib.shift_by(1, rasp.tokens).label == "shift_by(1)"


def test_detect_pattern():
    program = lib.detect_pattern(rasp.tokens, "aba")
    assert program("ababa") == [None, None, True, False, True]
    assert program("ababa", causal=True) == program("ababa")
    assert lib.detect_pattern(rasp.tokens, "a")("bab") == [False, True, False]
    with pytest.raises(ValueError):
        lib.detect_pattern(rasp.tokens, "")


def test_nary_sequencemap():
    program = lib.make_nary_sequencemap(
        lambda a, b, c: f"{a}{b}{c}", rasp.tokens, rasp.indices, rasp.tokens == "x"
    )
    assert program("xy") == ["x0True", "y1False"]
    single = lib.make_nary_sequencemap(lambda a: a * 2, rasp.tokens)
    assert single([1, 2]) == [2, 4]
    with pytest.raises(ValueError):
        lib.make_nary_sequencemap(max)
