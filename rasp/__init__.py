"""The RASP language: expressions, encodings, the reference evaluator and a program library.

Everything public in :mod:`rasp.rasp` is re-exported here, so both Tracr's import style
(``from rasp import rasp; rasp.Map(...)``) and ``import rasp; rasp.Map(...)`` work.
The classic programs are in :mod:`rasp.lib` (``from rasp import lib``).
"""

from rasp import lib, rasp
from rasp.rasp import *  # the public API, listed in rasp.rasp.__all__

# Imported under its own name so that type checkers (mypy) see rasp.rasp's names as exports of
# this package too; the list below is a new one (rasp.rasp.__all__ is unchanged).
from rasp.rasp import __all__

__all__ = [*__all__, "lib", "rasp"]
