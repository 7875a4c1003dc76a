"""The RASP language: expressions, encodings, the reference evaluator and a program library.

Everything public in :mod:`rasp.rasp` is re-exported here, so both Tracr's import style
(``from rasp import rasp; rasp.Map(...)``) and ``import rasp; rasp.Map(...)`` work.
The classic programs are in :mod:`rasp.lib` (``from rasp import lib``).
"""

from rasp import lib, rasp
from rasp.rasp import *  # the public API, listed in rasp.rasp.__all__
from rasp.rasp import __all__ as _public_names

__all__ = [*_public_names, "lib", "rasp"]
