"""Per-position value inference: bracket programs compile exactly at 50/50 and 100/100."""

import random

import pytest
from support import outputs_match, random_inputs

from compiler import compile_rasp
from compiler.examples import EXAMPLES
from compiler.passes import graph as g
from compiler.passes import nodes
from compiler.passes.values import infer_values
from rasp import lib, rasp


def _balanced(rng: random.Random, pairs: list[str], length: int) -> list[str]:
    """A random shuffle of balanced brackets (length rounded down to even), then maybe cut."""
    out, open_ = [], {p: 0 for p in pairs}
    while len(out) < length:
        pair = rng.choice(pairs)
        remaining = length - len(out)
        if open_[pair] and (rng.random() < 0.5 or sum(open_.values()) >= remaining):
            out.append(pair[1])
            open_[pair] -= 1
        elif sum(open_.values()) < remaining:
            out.append(pair[0])
            open_[pair] += 1
        else:
            break
    return out


@pytest.mark.parametrize("size", [50, 100])
@pytest.mark.parametrize("name", ["pair_balance", "dyck1", "shuffle_dyck2"])
def test_bracket_programs_compile_and_match_at_large_sizes(name, size):
    example = EXAMPLES[name]
    vocab = example.scaled_vocab(size)
    program = example.build(size)
    model = compile_rasp(program, vocab, size)
    rng = random.Random(size)
    pairs = ["()", "{}"] if name == "shuffle_dyck2" else ["()"]
    inputs = random_inputs(list(vocab), size, 60, seed=size)
    inputs += [_balanced(rng, pairs, rng.randint(1, size)) for _ in range(60)]
    outputs = model.apply_batch([["BOS"] + x for x in inputs])
    accepted = 0
    for tokens, out in zip(inputs, outputs):
        expected = rasp.evaluate(program, tokens)
        accepted += expected[-1] is True
        assert outputs_match(out[1:], expected), (tokens, out[1:], expected)
    if name != "pair_balance":
        assert accepted >= 5  # the balanced inputs exercise the accepting path


def test_difference_of_prefix_fractions_shares_denominators():
    balance = lib.make_pair_balance(rasp.tokens, "(", ")")
    graph = g.trace(balance)
    infer_values(graph, {"(", ")"}, 50)
    values = graph.nodes[balance.label][nodes.VALUE_SET]
    by_position = graph.nodes[balance.label][nodes.BY_POSITION]
    assert len(values) < 10_000  # was 384,089 combining every denominator with every other
    assert by_position[0] == {-1.0, 0.0, 1.0}
    expected_q3 = {o / 4 - c / 4 for o in range(5) for c in range(5)}
    assert by_position[3] == expected_q3


def test_selector_over_later_positions_keeps_every_input_length():
    # At query q the keys k > q that exist depend on the input length: every length counts.
    later = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.GT)
    ones = rasp.numerical(rasp.Map(lambda t: 1 if t == "x" else 0, rasp.tokens))
    mean = rasp.numerical(rasp.Aggregate(later, ones, default=0)).named("mean_after")
    graph = g.trace(mean)
    infer_values(graph, {"x", "y"}, 4)
    assert graph.nodes["mean_after"][nodes.BY_POSITION][1] == {0, 0.5, 1}
    assert graph.nodes["mean_after"][nodes.BY_POSITION][3] == {0}  # nothing after the last position
    model = compile_rasp(mean, {"x", "y"}, 4)
    for tokens in random_inputs(["x", "y"], 4, 50, seed=3):
        assert outputs_match(model.apply(["BOS"] + tokens).decoded[1:], mean(tokens))
