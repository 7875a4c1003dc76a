"""Shared fixtures of the fact-storage tests: the paper's example database and its compiled model.

Both are frozen dataclasses the tests only read, so one instance serves the whole session.
"""

from __future__ import annotations

import pytest

from constructions.facts.database import Database, example_database
from constructions.facts.model import FactModel, compile_facts


@pytest.fixture(scope="session")
def example_db() -> Database:
    """The worked example's database (5 subjects, 3 predicates, 8 facts)."""
    return example_database()


@pytest.fixture(scope="session")
def example_fact_model(example_db: Database) -> FactModel:
    """`compile_facts` of the example database with the default scales (c = c' = 10)."""
    return compile_facts(example_db)
