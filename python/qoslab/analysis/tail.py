"""Long-tailed collective latency (Salimi Beni & Cosenza; docs: science.md section 5): tail
summaries, histograms and ECDFs, bimodality (adaptive routing), the correlation of a
background-traffic estimate b with latency, how well a threshold on b predicts the runs that land
in the tail, and per-group (locality x routing) comparisons.

Pure functions on numpy arrays and pandas frames; deterministic (no randomness anywhere).
Percentiles are numpy's default linear interpolation, as in `qoslab.analysis.latency`."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from itertools import pairwise

import numpy as np
import pandas as pd

from qoslab.analysis.latency import sample_stats
from qoslab.extras import require

BC_THRESHOLD = 5.0 / 9.0  # Sarle's bimodality coefficient of a uniform distribution
F1_TIE_TOLERANCE = 1e-12


def _scipy_stats():
    """scipy.stats, from the [tail] extra (the statistics of the Dragonfly+ tail study)."""
    return require("scipy.stats", "the tail analysis (skewness, KDE modes, correlations)")


def _finite(samples) -> np.ndarray:
    values = np.asarray(samples, dtype=float).ravel()
    return values[np.isfinite(values)]


def _skewness(values: np.ndarray) -> float:
    """Adjusted Fisher-Pearson sample skewness G1 (scipy, bias=False); NaN below 3 samples or for
    a constant sample (undefined)."""
    if values.size < 3 or np.ptp(values) == 0:
        return float("nan")
    return float(_scipy_stats().skew(values, bias=False))


def tail_summary(samples) -> dict[str, float]:
    """`sample_stats` (count, mean, p50, p90, p99, p999, max, std, cv, p99_over_p50) plus
    p999_over_p50 and skewness (adjusted sample skewness G1, NaN below 3 samples or when every
    sample is equal). NaN samples are ignored, as in `sample_stats`."""
    values = np.asarray(samples, dtype=float).ravel()
    values = values[~np.isnan(values)]
    out = sample_stats(values)
    p50 = out["p50"]
    out["p999_over_p50"] = out["p999"] / p50 if p50 and not np.isnan(p50) else float("nan")
    out["skewness"] = _skewness(values[np.isfinite(values)])
    return out


def histogram(samples, bins="auto") -> pd.DataFrame:
    """Histogram of the finite samples, one row per bin: left, right (edges; the last bin is
    closed on the right, as in numpy), count, fraction (count / samples) and density (fraction /
    bin width). `bins` is anything numpy.histogram takes (a count, a rule name, or edges)."""
    values = _finite(samples)
    if values.size == 0:
        return pd.DataFrame({"left": [], "right": [], "count": [], "fraction": [], "density": []})
    counts, edges = np.histogram(values, bins=bins)
    fraction = counts / values.size
    width = np.diff(edges)
    with np.errstate(divide="ignore", invalid="ignore"):
        density = np.where(width > 0, fraction / width, np.nan)
    return pd.DataFrame({"left": edges[:-1], "right": edges[1:], "count": counts, "fraction": fraction, "density": density})


def ecdf(samples) -> tuple[np.ndarray, np.ndarray]:
    """Empirical CDF of the finite samples: (sorted values, i / n for i = 1..n), the fraction of
    samples <= each value (ties repeat the value, the last of them reaching its full fraction)."""
    values = np.sort(_finite(samples))
    return values, np.arange(1, values.size + 1) / max(values.size, 1)


# --- bimodality -------------------------------------------------------------------------------


def bimodality_coefficient(samples) -> float:
    """Sarle's bimodality coefficient BC = (G1^2 + 1) / (G2 + 3 (n-1)^2 / ((n-2)(n-3))), with G1
    the adjusted sample skewness and G2 the adjusted sample excess kurtosis (scipy, bias=False);
    the second term of the denominator is the small-sample correction and tends to 3. BC of a
    normal is 1/3, of a uniform 5/9, of a two-point distribution 1; BC > 5/9 suggests bimodality
    (it is also high for strongly skewed unimodal samples: an exponential sits at 5/9). NaN below
    4 finite samples or for a constant sample."""
    values = _finite(samples)
    n = values.size
    if n < 4 or np.ptp(values) == 0:
        return float("nan")
    stats = _scipy_stats()
    g1 = stats.skew(values, bias=False)
    g2 = stats.kurtosis(values, fisher=True, bias=False)
    return float((g1**2 + 1.0) / (g2 + 3.0 * (n - 1) ** 2 / ((n - 2) * (n - 3))))


@dataclass(frozen=True)
class Bimodality:
    """Result of `bimodality`; `as_dict()` for a table row."""

    n: int
    coefficient: float  # Sarle's BC
    modes: int  # KDE modes that pass the mass and dip tests
    mode_locations: tuple[float, ...]  # ascending
    mode_masses: tuple[float, ...]  # probability mass of each mode's basin, summing to ~1
    bimodal: bool
    bandwidth: float  # KDE kernel standard deviation, in the samples' unit
    min_mass: float
    dip_ratio: float

    def as_dict(self) -> dict:
        return asdict(self)


def _kde_modes(values: np.ndarray, bandwidth: str | float, min_mass: float, dip_ratio: float,
               grid_points: int, max_points: int) -> tuple[list[float], list[float], float]:
    """Modes of a Gaussian KDE that each hold >= min_mass and are separated from their neighbours
    by a valley below dip_ratio x the smaller peak. Returns (locations, masses, bandwidth)."""
    n = values.size
    if n > max_points:  # evenly spaced order statistics: the same shape, deterministic
        values = np.sort(values)[np.linspace(0, n - 1, max_points).round().astype(int)]
        n = values.size
    if bandwidth == "scott":
        factor = n ** (-1.0 / 5.0)
    elif bandwidth == "silverman":
        factor = (n * 3.0 / 4.0) ** (-1.0 / 5.0)
    else:
        factor = float(bandwidth)
        if not factor > 0:
            raise ValueError(f"bandwidth must be 'scott', 'silverman' or a positive factor, not {bandwidth!r}")
    kde = _scipy_stats().gaussian_kde(values, bw_method=factor)
    h = float(np.sqrt(kde.covariance[0, 0]))
    lo, hi = values.min() - 4.0 * h, values.max() + 4.0 * h
    # A uniform grid plus the samples' quantiles: resolution also where the data is dense when a
    # long tail stretches the range.
    grid = np.union1d(np.linspace(lo, hi, grid_points), np.quantile(values, np.linspace(0.0, 1.0, grid_points)))
    f = kde(grid)

    peaks = [int(p) for p in np.flatnonzero((f[1:-1] > f[:-2]) & (f[1:-1] >= f[2:])) + 1]
    if not peaks:
        peaks = [int(np.argmax(f))]
    # Segments (basins) between valleys: bounds[k]..bounds[k+1] holds peak k.
    valleys = [p + int(np.argmin(f[p:q + 1])) for p, q in pairwise(peaks)]
    bounds = [0, *valleys, grid.size - 1]
    trapezoid = require("scipy.integrate", "the tail analysis's KDE modes").trapezoid
    total = float(trapezoid(f, grid))

    def mass(k: int) -> float:
        a, b = bounds[k], bounds[k + 1]
        return float(trapezoid(f[a:b + 1], grid[a:b + 1])) / total

    def merge(k: int) -> None:  # segments k and k + 1 become one; the higher peak stays
        peaks[k] = peaks[k] if f[peaks[k]] >= f[peaks[k + 1]] else peaks[k + 1]
        del peaks[k + 1]
        del bounds[k + 1]

    while len(peaks) > 1:
        masses = [mass(k) for k in range(len(peaks))]
        # valley k lies between peaks k and k + 1
        dips = [f[bounds[k + 1]] / min(f[peaks[k]], f[peaks[k + 1]]) for k in range(len(peaks) - 1)]
        light = int(np.argmin(masses))
        if masses[light] < min_mass:
            # into the neighbour across the shallower valley (the higher dip density)
            if light == 0:
                merge(0)
            elif light == len(peaks) - 1:
                merge(light - 1)
            else:
                merge(light - 1 if f[bounds[light]] >= f[bounds[light + 1]] else light)
            continue
        shallow = int(np.argmax(dips))
        if dips[shallow] >= dip_ratio:
            merge(shallow)
            continue
        break
    return [float(grid[p]) for p in peaks], [mass(k) for k in range(len(peaks))], h


def bimodality(samples, min_mass: float = 0.05, dip_ratio: float = 0.5, bandwidth: str | float = "scott",
               grid_points: int = 1024, max_points: int = 20000) -> Bimodality:
    """Is the (finite part of the) sample bimodal? Two criteria, both reported:

    - Sarle's bimodality coefficient (`bimodality_coefficient`), BC > 5/9;
    - modes of a Gaussian KDE (scipy.stats.gaussian_kde; `bandwidth` "scott" (default),
      "silverman" or a factor times the sample standard deviation), evaluated on a grid of
      `grid_points` uniform points over the range +- 4 bandwidths plus `grid_points` sample
      quantiles. Every local maximum starts a mode whose basin reaches the density minima on
      either side. Then, repeatedly: the lightest basin, if it holds less than `min_mass` (5%)
      of the probability, joins the neighbour across the shallower valley; otherwise the pair of
      neighbouring modes with the shallowest valley joins if the valley's density is at least
      `dip_ratio` x the smaller of the two peaks. The default 0.5 asks the valley to be deeper
      than half the smaller peak: for two equal normal components of the same sigma (before the
      KDE's smoothing) that needs the means about 3.3 sigma apart, where the mixture itself
      turns bimodal at 2 sigma; so shoulders and small bumps of a long tail are not modes.
      A mode's location is its peak on the grid.

    Rule: `bimodal` = BC > 5/9 AND at least two KDE modes (more than two also counts). BC alone
    is fooled by heavy one-sided tails (high skewness), the KDE alone by bandwidth; asking both
    is conservative. For two equal normal components BC crosses 5/9 at about 3.7 sigma apart.

    A constant sample has one mode at its value, BC NaN and is not bimodal. Samples beyond
    `max_points` are thinned, for the KDE only, to that many evenly spaced order statistics
    (deterministic); the bandwidth then follows the thinned size. Raises ValueError for fewer
    than 4 finite samples."""
    values = _finite(samples)
    if values.size < 4:
        raise ValueError(f"bimodality needs at least 4 finite samples, got {values.size}")
    if not 0.0 <= min_mass < 0.5:
        raise ValueError(f"min_mass must be in [0, 0.5), not {min_mass}")
    if not 0.0 < dip_ratio <= 1.0:
        raise ValueError(f"dip_ratio must be in (0, 1], not {dip_ratio}")
    if np.ptp(values) == 0:
        return Bimodality(int(values.size), float("nan"), 1, (float(values[0]),), (1.0,), False, 0.0, min_mass, dip_ratio)
    bc = bimodality_coefficient(values)
    locations, masses, h = _kde_modes(values, bandwidth, min_mass, dip_ratio, grid_points, max_points)
    bimodal = bool(bc > BC_THRESHOLD and len(locations) >= 2)
    return Bimodality(int(values.size), bc, len(locations), tuple(locations), tuple(masses), bimodal, h, min_mass, dip_ratio)


# --- background traffic b versus latency --------------------------------------------------------


def _pairs(b, latency) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(b, dtype=float).ravel()
    y = np.asarray(latency, dtype=float).ravel()
    if x.size != y.size:
        raise ValueError(f"b and latency differ in length ({x.size} vs {y.size})")
    keep = np.isfinite(x) & np.isfinite(y)
    return x[keep], y[keep]


@dataclass(frozen=True)
class Correlation:
    """Result of `correlation`; `as_dict()` for a table row."""

    n: int  # pairs used (both finite)
    pearson_r: float
    pearson_p: float
    spearman_rho: float
    spearman_p: float

    def as_dict(self) -> dict:
        return asdict(self)


def correlation(b, latency) -> Correlation:
    """Pearson r and Spearman rho (with their two-sided p-values, scipy.stats) between a
    background-traffic estimate b and a latency per run (its median or p99, say). Pairs where
    either value is NaN or infinite are left out; n counts the pairs used. Raises ValueError for
    inputs of different length, fewer than 3 pairs, or a constant b or latency (no correlation
    is defined)."""
    x, y = _pairs(b, latency)
    if x.size < 3:
        raise ValueError(f"correlation needs at least 3 (b, latency) pairs with finite values, got {x.size}")
    for name, v in (("b", x), ("latency", y)):
        if np.ptp(v) == 0:
            raise ValueError(f"correlation is undefined: {name} is constant ({v[0]!r}) over the {v.size} pairs")
    stats = _scipy_stats()
    pearson = stats.pearsonr(x, y)
    spearman = stats.spearmanr(x, y)
    return Correlation(int(x.size), float(pearson.statistic), float(pearson.pvalue), float(spearman.statistic), float(spearman.pvalue))


@dataclass(frozen=True)
class TailPrediction:
    """Result of `tail_prediction`; `as_dict()` for a table row."""

    threshold: float
    threshold_rule: str  # "given" or "max F1 over observed b (ties: highest)"
    tail_quantile: float
    latency_cutoff: float  # runs with latency above it are in the tail
    n: int
    tail: int  # runs in the tail
    flagged: int  # runs with b >= threshold
    true_positives: int  # flagged runs in the tail
    precision: float  # true_positives / flagged (NaN if nothing is flagged)
    recall: float  # true_positives / tail (NaN if the tail is empty)
    f1: float  # 2 tp / (flagged + tail)

    def as_dict(self) -> dict:
        return asdict(self)


CHOSEN_RULE = "max F1 over observed b (ties: highest)"


def tail_prediction(b, latency, tail_quantile: float = 0.9, threshold: float | None = None) -> TailPrediction:
    """How well does "b >= threshold" (at submission time) flag the runs that land in the
    latency tail? Runs in the tail: latency > the `tail_quantile` quantile of latency (linear
    interpolation). Returns precision, recall and F1 of the flags, with the counts.

    With threshold None the threshold is the observed b value that maximises F1 (ties, within
    1e-12: the highest threshold), and `threshold_rule` says so. That choice is fit on the same
    runs it is scored on, so its F1 is optimistic; for an honest figure pick the threshold on one
    set of snapshots and pass it here for another.

    Pairs where either value is NaN or infinite are left out. Raises ValueError for inputs of
    different length, no pairs, a tail_quantile outside [0, 1), or (threshold None) an empty tail."""
    if not 0.0 <= tail_quantile < 1.0:
        raise ValueError(f"tail_quantile must be in [0, 1), not {tail_quantile}")
    x, y = _pairs(b, latency)
    if x.size == 0:
        raise ValueError("tail_prediction needs at least one (b, latency) pair with finite values")
    cutoff = float(np.quantile(y, tail_quantile))
    in_tail = y > cutoff
    tail = int(in_tail.sum())
    if threshold is None:
        if tail == 0:
            raise ValueError(f"no run lies above the {tail_quantile} latency quantile ({cutoff!r}): no threshold to choose")
        candidates = np.unique(x)  # ascending
        flagged_at = x.size - np.searchsorted(np.sort(x), candidates, side="left")
        tp_at = tail - np.searchsorted(np.sort(x[in_tail]), candidates, side="left")
        f1_at = 2.0 * tp_at / (flagged_at + tail)
        best = np.flatnonzero(f1_at >= f1_at.max() - F1_TIE_TOLERANCE)[-1]
        threshold, rule = float(candidates[best]), CHOSEN_RULE
    else:
        threshold, rule = float(threshold), "given"
    flags = x >= threshold
    flagged = int(flags.sum())
    tp = int((flags & in_tail).sum())
    precision = tp / flagged if flagged else float("nan")
    recall = tp / tail if tail else float("nan")
    f1 = 2.0 * tp / (flagged + tail) if flagged + tail else float("nan")
    return TailPrediction(threshold, rule, float(tail_quantile), cutoff, int(x.size), tail, flagged, tp, precision, recall, f1)


# --- groups -------------------------------------------------------------------------------------


def _by_list(frame: pd.DataFrame, by, value: str) -> list[str]:
    by = [by] if isinstance(by, str) else list(by)
    missing = [c for c in (*by, value) if c not in frame.columns]
    if missing:
        raise ValueError(f"columns {missing} are not in the frame (it has {list(frame.columns)})")
    return by


def compare_groups(frame: pd.DataFrame, value: str = "latency_ns", by=("locality", "routing"), **bimodality_options) -> pd.DataFrame:
    """One row per group of `by` (in the order groups first appear; NaN keys kept), with the
    group's keys, `tail_summary` of `value` (count, mean, p50, p90, p99, p999, max, std, cv,
    p99_over_p50, p999_over_p50, skewness), and bimodality_coefficient, modes and bimodal from
    `bimodality` (options passed through). Groups with fewer than 4 finite samples get NaN BC and
    modes and a missing (NA) bimodal."""
    by = _by_list(frame, by, value)
    rows = []
    for keys, group in frame.groupby(by, sort=False, dropna=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        row = dict(zip(by, keys))
        if "snapshot" in group.columns:  # which background runs the figures rest on (see common_snapshots)
            row["snapshots"] = int(group["snapshot"].nunique())
        row.update(tail_summary(group[value]))
        if _finite(group[value]).size >= 4:
            result = bimodality(group[value], **bimodality_options)
            row.update(bimodality_coefficient=result.coefficient, modes=float(result.modes), bimodal=result.bimodal)
        else:
            row.update(bimodality_coefficient=float("nan"), modes=float("nan"), bimodal=pd.NA)
        rows.append(row)
    out = pd.DataFrame(rows)
    if len(out):
        out["bimodal"] = out["bimodal"].astype("boolean")
    return out


def common_snapshots(frame: pd.DataFrame, across: str = "locality") -> pd.DataFrame:
    """The rows of `frame` whose background snapshot every value of `across` ran, for each target
    and routing: a job that could not be placed in one group (no group had room: the busiest
    snapshots) has no same-group run there, while its spread run does, so pooled figures compare
    the two localities over different backgrounds. Runs without background (snapshot < 0) are kept."""
    keys = [k for k in ("target", "routing") if k in frame.columns]
    kept = []
    for _, group in frame.groupby(keys, sort=False, dropna=False) if keys else [(None, frame)]:
        sets = [set(g["snapshot"]) for _, g in group.groupby(across, sort=False)]
        shared = set.intersection(*sets) if sets else set()
        kept.append(group[group["snapshot"].isin(shared) | (group["snapshot"] < 0)])
    return pd.concat(kept) if kept else frame.iloc[0:0]


# --- a study's runs: b against each run's median --------------------------------------------------

RUN_KEYS = ("target", "locality", "routing")  # what one correlation is taken over the snapshots of


def run_medians(iterations: pd.DataFrame) -> pd.DataFrame:
    """Per background run of a tail-latency study's `tail_iterations` (snapshot >= 0): its keys
    (target when the table has one, snapshot, locality, routing), b, and the median, mean and p99
    of its iteration latencies."""
    keys = [k for k in ("target", "snapshot", "locality", "routing") if k in iterations.columns]
    runs = iterations[iterations["snapshot"] >= 0]
    grouped = runs.groupby(keys, sort=False)
    return grouped.agg(b=("b", "first"), p50_ns=("latency_ns", "median"), mean_ns=("latency_ns", "mean"),
                       p99_ns=("latency_ns", lambda v: float(np.percentile(v, 99)))).reset_index()


def b_correlations(iterations: pd.DataFrame, tail_quantile: float = 0.9) -> pd.DataFrame:
    """One row per target x locality x routing (in the order they first appear): over its
    background snapshots, Pearson r and Spearman rho (with p-values) of b against each run's
    median latency, and the threshold on b with the best F1 at flagging the runs whose median lies
    above the `tail_quantile` quantile (fitted on the runs it is scored on: optimistic). A group
    whose figures are undefined (fewer than 3 runs, b or latency constant) gets NaN and a `note`
    saying why, so one such group never hides the others. `pearson_r_mean` and `spearman_rho_mean`
    correlate b with each run's mean latency instead, the statistic Salimi Beni & Cosenza
    correlate ("the average communication time"); the median is the default, as a long tail
    pulls a mean about."""
    medians = run_medians(iterations)
    keys = [k for k in RUN_KEYS if k in medians.columns]
    columns = [*keys, "runs", "b_min", "b_max", "pearson_r", "pearson_p", "spearman_rho", "spearman_p",
               "pearson_r_mean", "spearman_rho_mean", "threshold_b", "precision", "recall", "f1", "note"]
    rows = []
    for group_keys, runs in medians.groupby(keys, sort=False):
        row: dict = dict(zip(keys, group_keys if isinstance(group_keys, tuple) else (group_keys,)))
        row.update(runs=len(runs), b_min=float(runs["b"].min()), b_max=float(runs["b"].max()), note=None)
        try:
            c = correlation(runs["b"], runs["p50_ns"])
            row.update(pearson_r=c.pearson_r, pearson_p=c.pearson_p, spearman_rho=c.spearman_rho,
                       spearman_p=c.spearman_p)
            mean = correlation(runs["b"], runs["mean_ns"])
            row.update(pearson_r_mean=mean.pearson_r, spearman_rho_mean=mean.spearman_rho)
            p = tail_prediction(runs["b"], runs["p50_ns"], tail_quantile=tail_quantile)
            row.update(threshold_b=p.threshold, precision=p.precision, recall=p.recall, f1=p.f1)
        except ValueError as error:  # too few runs, or b constant: said in the row
            row["note"] = str(error)
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


# --- congestion control off against on (a study with congestion_control = [false, true]) ---------

CC_SUFFIX = "+cc"  # what the tail study adds to a routing's label for its runs with congestion control on


def congestion_control_effect(iterations: pd.DataFrame) -> pd.DataFrame:
    """One row per target x locality x routing that ran with congestion control both off
    (routing label "R") and on ("R+cc"), over the background snapshots that have both runs: the
    pooled p50 and p99 of the iteration latencies off and on, p99_ratio (on / off), the geometric
    mean over snapshots of each pair's median ratio (on / off), and in how many snapshots the run
    with congestion control on had the lower median. Empty without such pairs."""
    columns = [*RUN_KEYS, "snapshots", "p50_off_ns", "p50_on_ns", "p99_off_ns", "p99_on_ns", "p99_ratio",
               "median_ratio", "faster_with_cc"]
    if "routing" not in iterations.columns or iterations.empty:
        return pd.DataFrame(columns=columns)
    runs = iterations[iterations["snapshot"] >= 0].copy()
    routing = runs["routing"].astype(str)
    runs["cc"] = routing.str.endswith(CC_SUFFIX)
    runs["routing"] = routing.str.removesuffix(CC_SUFFIX)
    keys = [k for k in RUN_KEYS if k in runs.columns]
    rows = []
    for group_keys, group in runs.groupby(keys, sort=False):
        medians = group.groupby(["snapshot", "cc"])["latency_ns"].median().unstack("cc")
        if True not in medians.columns or False not in medians.columns:
            continue
        medians = medians.dropna()
        if medians.empty:
            continue
        both = group[group["snapshot"].isin(medians.index)]
        off, on = both.loc[~both["cc"], "latency_ns"], both.loc[both["cc"], "latency_ns"]
        row: dict = dict(zip(keys, group_keys if isinstance(group_keys, tuple) else (group_keys,)))
        p99_off, p99_on = float(np.percentile(off, 99)), float(np.percentile(on, 99))
        row.update(snapshots=len(medians), p50_off_ns=float(np.median(off)), p50_on_ns=float(np.median(on)),
                   p99_off_ns=p99_off, p99_on_ns=p99_on, p99_ratio=p99_on / p99_off,
                   median_ratio=float(np.exp(np.log(medians[True] / medians[False]).mean())),
                   faster_with_cc=int((medians[True] < medians[False]).sum()))
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)
