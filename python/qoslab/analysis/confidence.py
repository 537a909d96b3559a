"""Confidence intervals over a study's repetitions (Student t), and whether the best policy's
lead over another is larger than those intervals (docs/metrics.md, "Confidence intervals")."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from scipy import stats

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Interval:
    """The mean of `n` values and its two-sided confidence interval; low and high are NaN when
    n < 2 (one repetition has no spread to estimate)."""

    mean: float
    low: float
    high: float
    n: int

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


def mean_interval(values: Iterable[float], confidence: float = CONFIDENCE) -> Interval:
    """Student-t interval of the mean of the finite `values`: mean ± t(1 - (1 - confidence) / 2,
    n - 1) × s / √n, s the sample standard deviation (n - 1 in the denominator)."""
    finite = np.asarray(list(values), dtype=float)
    finite = finite[np.isfinite(finite)]
    n = int(finite.size)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    mean = float(finite.mean())
    if n < 2:
        return Interval(mean, math.nan, math.nan, n)
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * float(finite.std(ddof=1)) / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n)


def intervals_separate(better: Interval, worse: Interval) -> bool | None:
    """True when `better`'s interval lies wholly below `worse`'s (the lead is more than both
    intervals' spread), False when they overlap, None when either has no interval."""
    if any(math.isnan(x) for x in (better.low, better.high, worse.low, worse.high)):
        return None
    return better.high < worse.low
