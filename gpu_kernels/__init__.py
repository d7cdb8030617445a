"""GPU cold starts: the array algorithm of exact full tokenization, and its NumPy twin.

``TwinEncoder`` runs the stages (class lookup, piece-start predicate, compaction, BPE rounds)
with NumPy; CuPy kernels replace stages one at a time where ``is_available()``.  CuPy is
imported lazily, never by importing this package.
"""

from gpu_kernels.device import is_available, unavailable_reason
from gpu_kernels.twin import TwinEncoder, UnsupportedTokenizer

__all__ = ["TwinEncoder", "UnsupportedTokenizer", "is_available", "unavailable_reason"]
