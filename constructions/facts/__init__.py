"""Fact storage: (subject, predicate, object) databases written into attention layers."""
