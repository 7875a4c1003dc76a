"""Experiment scripts reproducing the Tracr paper's compression results (section 5, appendix E).

Run them as modules, e.g. ``python -m compression.experiments.frac_prevs --quick``.
"""

__all__: list[str] = []
