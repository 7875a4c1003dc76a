"""The RASP language as Tracr's Python API spells it: ``from rasp import rasp``, then
``rasp.Map(...)``, ``rasp.Select(...)``, ``rasp.evaluate(program, xs)`` and so on run Tracr
programs unchanged (same public names and argument order).

A public face over two modules that never import each other in a circle: the expressions
(:mod:`rasp.expressions`) and the reference evaluator (:mod:`rasp.evaluator`, which reads the
expressions). The semantics are described in ``docs/rasp.md``.
"""

from rasp.evaluator import DefaultRASPEvaluator, RASPEvaluator, evaluate
from rasp.expressions import *  # every public expression name, listed in rasp.expressions.__all__
from rasp.expressions import __all__ as _expression_names

__all__ = [*_expression_names, "DefaultRASPEvaluator", "RASPEvaluator", "evaluate"]
