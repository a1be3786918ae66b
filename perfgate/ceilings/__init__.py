"""Measured ceilings (``perfgate doctor --peak``): what this machine really does.

``bench`` holds the microbenchmarks (dense matmul per dtype, memory and host→device copy
bandwidth), ``store`` the per-environment JSON file runs read them from. A run then reports,
next to MFU against the vendor peak, the fraction of the *measured* ceiling: "how far from the
datasheet" and "how far from what this machine really does" are different questions.
"""

from __future__ import annotations

from perfgate.ceilings.bench import Ceilings, Measurement, measure_ceilings
from perfgate.ceilings.store import (
    StoredCeilings,
    ceilings_path,
    lookup_ceilings,
    save_ceilings,
)

__all__ = [
    "Ceilings",
    "Measurement",
    "StoredCeilings",
    "ceilings_path",
    "lookup_ceilings",
    "measure_ceilings",
    "save_ceilings",
]
