"""Confidence intervals over a study's repetitions (Student t), and whether the best policy's
lead over another is larger than those intervals (docs/metrics.md, "Confidence intervals")."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

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
    half = student_t_quantile(confidence, n - 1) * float(finite.std(ddof=1)) / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n)


def intervals_separate(better: Interval, worse: Interval) -> bool | None:
    """True when `better`'s interval lies wholly below `worse`'s (the lead is more than both
    intervals' spread), False when they overlap, None when either has no interval."""
    if any(math.isnan(x) for x in (better.low, better.high, worse.low, worse.high)):
        return None
    return better.high < worse.low


def student_t_quantile(confidence: float, dof: int) -> float:
    """t such that P(|T| <= t) = `confidence` for Student's T with `dof` degrees of freedom (the
    two-sided critical value, scipy's t.ppf(0.5 + confidence / 2, dof)).

    Written here rather than imported so that the core install needs no scipy (35 MB for this
    one function): for integer degrees of freedom P(|T| <= t) has a finite closed form
    (Abramowitz & Stegun 26.7.3-4), inverted by bisection to double precision. Tested against
    published tables and, where it is installed, against scipy."""
    if not 0 < confidence < 1 or dof < 1:
        raise ValueError(f"expected 0 < confidence < 1 and dof >= 1, got {confidence} and {dof}")
    low, high = 0.0, 1.0
    while _two_sided_probability(high, dof) < confidence:
        low, high = high, high * 2
    for _ in range(200):
        middle = (low + high) / 2
        if middle in (low, high):
            break
        if _two_sided_probability(middle, dof) < confidence:
            low = middle
        else:
            high = middle
    return high


def _two_sided_probability(t: float, dof: int) -> float:
    """P(|T| <= t), Student's T with integer `dof` (Abramowitz & Stegun 26.7.3 and 26.7.4)."""
    theta = math.atan(t / math.sqrt(dof))
    cos2 = math.cos(theta) ** 2
    if dof % 2:  # odd: (2/pi) (theta + sin cos (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ...))
        term, series = 1.0, 1.0 if dof > 1 else 0.0
        for k in range(1, (dof - 1) // 2):
            term *= cos2 * (2 * k) / (2 * k + 1)
            series += term
        return 2 / math.pi * (theta + math.sin(theta) * math.cos(theta) * series)
    term, series = 1.0, 1.0  # even: sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...)
    for k in range(1, dof // 2):
        term *= cos2 * (2 * k - 1) / (2 * k)
        series += term
    return math.sin(theta) * series
