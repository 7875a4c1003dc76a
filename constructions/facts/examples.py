"""Hand-built circuits from the attention-capacity paper's worked examples."""

from __future__ import annotations

import numpy as np

from constructions.facts.attention_layer import TokenCircuits
from constructions.facts.database import Database, example_database


def single_head_example() -> tuple[Database, TokenCircuits]:
    """One head whose rank-2 value circuit stores both person slices of the example database.

    Over ``example_database().tokens``: ``W_QK`` is all ones on the born_in / lives_in rows (so
    the last position splits its attention evenly), ``W_VO`` maps Bernard to 4 * Singapore,
    Colin to 4 * Malaysia, born_in to 2 * Singapore and lives_in to 2 * Malaysia; ``W_EU = 0``.
    """
    db = example_database()
    tokens = db.tokens
    idx = {t: i for i, t in enumerate(tokens)}
    n = len(tokens)
    qk = np.zeros((n, n))
    for q in ("born_in", "lives_in"):
        for k in ("Astrid", "Bernard", "Colin", "born_in", "lives_in"):
            qk[idx[q], idx[k]] = 1.0
    vo = np.zeros((n, n))
    vo[idx["Bernard"], idx["Singapore"]] = 4.0
    vo[idx["Colin"], idx["Malaysia"]] = 4.0
    vo[idx["born_in"], idx["Singapore"]] = 2.0
    vo[idx["lives_in"], idx["Malaysia"]] = 2.0
    return db, TokenCircuits(w_eu=np.zeros((n, n)), w_qk=qk[None], w_vo=vo[None])
