"""GPU cold starts: the array algorithm of exact full tokenization, and its NumPy twin.

``TwinEncoder`` runs the stages (added-token split, UTF-8 decode, class lookup, piece-start
predicate, compaction, BPE) with NumPy; ``DeviceEncoder`` runs the same stages as CUDA kernels
where ``is_available()``.  CuPy is imported lazily, never by importing this package.
"""

from gpu_kernels.device import is_available, unavailable_reason
from gpu_kernels.plan import UnsupportedTokenizer
from gpu_kernels.twin import TwinEncoder

__all__ = ["TwinEncoder", "UnsupportedTokenizer", "is_available", "unavailable_reason"]
