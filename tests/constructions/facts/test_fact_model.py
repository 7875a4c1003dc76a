"""A fact table compiled into a one-layer attention model (Craft and Haiku)."""

import numpy as np
import pytest

from constructions.facts.database import Database, random_database
from constructions.facts.layer_tensor import layer_tensors
from constructions.facts.metrics import fact_rows, recall_scores
from constructions.facts.model import compile_facts
from craft.numerics import softmax


def _min_correct_probability(model):
    rows, targets = model.fact_logits()
    return softmax(rows)[np.arange(len(targets)), targets].min(), recall_scores(rows, targets)


def test_example_database_with_c_10_and_5(example_db):
    model = compile_facts(example_db, c=10.0, c_out=10.0)
    assert len(model.heads) == 3 and model.direct is None
    assert [np.linalg.matrix_rank(h.w_ov.matrix) for h in model.heads] == [2, 2, 2]
    assert [h.w_v.shape[1] for h in model.heads] == [2, 2, 2]  # d_vo = |V_q|
    p_min, scores = _min_correct_probability(model)
    assert p_min == pytest.approx(0.99959, abs=2e-5)
    assert scores.at(0.99) == 1.0
    p_min, scores = _min_correct_probability(compile_facts(example_db, c=5.0, c_out=5.0))
    assert p_min == pytest.approx(0.941, abs=2e-3)
    assert scores.at(0.99) == 0.0 and scores.argmax == 1.0


def test_layer_tensor_of_compiled_model_matches_forward_and_database(example_db, example_fact_model):
    db, model = example_db, example_fact_model
    ids = {t: i for i, t in enumerate(db.tokens)}
    subjects = np.array([ids[k] for k in db.subjects])
    predicates = np.array([ids[q] for q in db.predicates])
    objects = np.array([ids[v] for v in db.objects])
    circuits = model.token_circuits()
    total = layer_tensors(circuits, subjects, predicates).total
    for i, k in enumerate(db.subjects):
        for j, q in enumerate(db.predicates):
            assert np.abs(total[i, j] - model.logits(k, q)).max() < 1e-9
    on_objects = layer_tensors(circuits, subjects, predicates, objects).total
    rows, targets = fact_rows(on_objects, db)
    assert recall_scores(rows, targets).argmax == 1.0
    # The per-head token QK table attends from q to exactly q's subjects.
    for h, q in enumerate(model.head_predicates):
        row = circuits.w_qk[h][ids[q]]
        assert {db.tokens[t] for t in np.flatnonzero(row > 0)} == {
            k for k, qq, _ in db.facts if qq == q}


def test_direct_path_for_single_object_predicates_and_random_db():
    db = Database.from_triples([("a", "is", "x"), ("b", "is", "x"), ("a", "likes", "y"),
                                ("b", "likes", "z")])
    model = compile_facts(db)
    assert model.head_predicates == ("likes",) and model.direct is not None
    assert model.token_circuits().w_eu[db.tokens.index("is"), db.tokens.index("x")] == 10.0
    assert _min_correct_probability(model)[1].at(0.99) == 1.0
    big = random_database(20, 5, 10, 0.6, seed=0)
    _, scores = _min_correct_probability(compile_facts(big))
    assert scores.at(0.99) == 1.0


def test_fact_model_runs_through_haiku(example_db, example_fact_model):
    pytest.importorskip("compiler.model.assemble")
    from constructions.facts.haiku_model import assemble_fact_model

    db, model = example_db, example_fact_model
    haiku = assemble_fact_model(model)
    rows, targets = model.fact_logits()
    logits = haiku.logits(db.domain())
    assert np.abs(logits - rows).max() < 1e-4
    assert recall_scores(logits, targets).at(0.99) == 1.0
    assert [h.w_v.shape[1] for h in haiku.config.layers[0].heads] == [2, 2, 2]
