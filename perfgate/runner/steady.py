"""Steady-state check on measured step times.

The fixed warm-up removes the known one-off costs (first-step compilation, cuDNN autotuning,
allocator growth). Some workloads settle later than that — lazy compilation of a second shape,
caches warming. Rather than trusting a fixed count, the first measured steps that are still far
slower than the settled behaviour are excluded, judged on the data itself.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

# A leading step is "still warming up" when it exceeds the settled median by more than this many
# robust standard deviations (1.4826·MAD) *and* by more than MIN_RELATIVE_EXCESS of the median:
# the second condition keeps near-constant series (MAD ≈ 0) from trimming on tiny jitter.
ROBUST_SIGMAS = 5.0
MIN_RELATIVE_EXCESS = 0.10


def steady_start(times: Sequence[float]) -> int:
    """Index of the first steady step: leading steps above the settled level are excluded.

    The settled level is the median and MAD of the second half of the series (assumed
    steady). At most half of the steps are ever excluded, so a workload that never settles
    keeps its data and shows its noise instead of hiding it.
    """
    n = len(times)
    if n < 4:
        return 0
    tail = list(times[n // 2 :])
    median = statistics.median(tail)
    mad = statistics.median(abs(t - median) for t in tail)
    limit = median + max(ROBUST_SIGMAS * 1.4826 * mad, MIN_RELATIVE_EXCESS * median)
    start = 0
    while start < n // 2 and times[start] > limit:
        start += 1
    return start
