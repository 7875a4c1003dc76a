"""Default labels are unique and reproducible after ``reset_label_counter``."""

import rasp
from rasp import lib


def _all_labels(expr):
    """Labels of every node reachable from ``expr``, in a deterministic walk order."""
    seen, order, stack = set(), [], [expr]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        order.append(node.label)
        stack.extend(reversed(node.children))
    return order


def _program():
    shifted = lib.shift_by(1, rasp.tokens)
    mixed = rasp.Map(str, rasp.tokens) + rasp.Map(lambda x: x, shifted)
    return lib.make_sort(mixed, rasp.indices, max_seq_len=5, min_key=1)


def test_same_program_twice_after_reset_has_identical_labels():
    rasp.reset_label_counter()
    first = _all_labels(_program())
    rasp.reset_label_counter()
    second = _all_labels(_program())
    assert first == second
    assert len(first) > 5


def test_labels_of_one_program_are_unique():
    labels = _all_labels(lib.make_shuffle_dyck(["()", "[]", "{}"]))
    assert len(labels) == len(set(labels))
    labels = _all_labels(lib.detect_pattern(rasp.tokens, "abab"))
    assert len(labels) == len(set(labels))


def test_reset_restarts_numbering():
    rasp.reset_label_counter()
    assert rasp.Map(abs, rasp.tokens).label == "map_1"
    assert rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ).label == "select_2"
    rasp.reset_label_counter(100)
    assert rasp.Full(1).label == "full_100"


def test_labels_keep_increasing_without_reset():
    a = rasp.Map(abs, rasp.tokens)
    b = rasp.Map(abs, rasp.tokens)
    assert a.label != b.label


def test_library_programs_reachable_twice_need_renaming_only_at_the_top():
    rasp.reset_label_counter()
    twice = rasp.SequenceMap(
        lambda x, y: (x, y),
        lib.make_reverse(rasp.tokens).named("rev_a"),
        lib.make_reverse(rasp.indices).named("rev_b"),
    )
    labels = _all_labels(twice)
    assert len(labels) == len(set(labels))
    assert labels.count("length") == 1
    assert twice("ab") == [("b", 1), ("a", 0)]
