"""Summary statistics the benchmarks share."""

from __future__ import annotations

import statistics


def percentile(values: list[float], q: int) -> float:
    """The q-th percentile (1-99), inclusive method; 0 for no values."""
    if not values:
        return 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]
