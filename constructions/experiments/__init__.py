"""Experiment scripts for the constructions package (run with python -m)."""
