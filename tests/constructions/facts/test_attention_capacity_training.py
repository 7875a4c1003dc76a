"""Section 9.4 acceptance: train small attention-only layers on random databases (slow)."""

import pytest

from constructions.experiments.attention_capacity import main
from constructions.facts.capacity_training import LayerShape, TrainConfig, train_on_database
from constructions.facts.database import random_database


@pytest.mark.slow
def test_attention_capacity():
    results = {}
    for db_cfg in [(8, 3, 6, 0.8), (20, 5, 10, 0.6)]:
        db = random_database(*db_cfg, seed=0)
        for shape in [(2, 1, 1, 1), (4, 2, 2, 2), (6, 4, 6, 6)]:
            result = train_on_database(db, LayerShape(*shape), TrainConfig(seed=0))
            assert result.scores.is_ordered()
            assert result.prop_3_1_error <= 1e-4
            results[db_cfg, shape] = result
    big, tiny = results[(20, 5, 10, 0.6), (6, 4, 6, 6)], results[(20, 5, 10, 0.6), (2, 1, 1, 1)]
    assert big.scores.at(0.95) == 1.0
    assert tiny.scores.at(0.95) <= 0.3
    assert big.n_facts / big.db_bound > 1.2


@pytest.mark.slow
def test_experiment_script_short_run(capsys):
    rows = main(["--steps", "50"])
    out = capsys.readouterr().out
    assert "paper" in out and "about 1.8" in out and len(rows) == 14
