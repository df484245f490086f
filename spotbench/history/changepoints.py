"""Change points in a series of per-run values: E-Divisive means with a t-test, as in
Apache Otava (Fleming et al., "Hunter: Using Change Point Detection to Hunt for Performance
Regressions", ICPE 2023). Why this method and not the permutation-tested original: see
docs/history.md.

    points = detect([2.0, 2.1, 1.9, 2.0, 3.0, 3.1, 2.9], max_pvalue=0.001)
    points[0].index == 4; points[0].rel_change ≈ 0.5

1. Split: in windows of `window` points (half-overlapping), E-Divisive (Matteson & James
   2014) bisects recursively at the split that maximises the energy statistic (the
   divergence between the two sides' distributions, α = 1); a split is kept while the
   two sides differ by a two-sided Student's t-test at 10 × `max_pvalue` (weak points).
2. Merge: on the whole series, each point is re-tested against its neighbours' segments;
   the weakest (largest p, then smallest relative change) is dropped and its neighbours
   re-tested, until every point has p < `max_pvalue` and |relative change| ≥ `min_change`.

Deterministic (no permutations): the same history always gives the same answer, which a
CI gate (`--fail-on-regression`) needs. Needs ≥ 3 points; a one-point tail (the newest run)
can be a change point when the earlier points are tight enough.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import ttest_ind_from_stats

DEFAULT_MAX_PVALUE = 0.001
DEFAULT_WINDOW = 50


@dataclass(frozen=True)
class ChangePoint:
    index: int  # first point of the new level
    mean_before: float
    mean_after: float
    std_before: float
    std_after: float
    n_before: int
    n_after: int
    pvalue: float

    @property
    def rel_change(self) -> float:
        """mean_after / mean_before − 1 (0 when the earlier mean is 0)."""
        return self.mean_after / self.mean_before - 1.0 if self.mean_before else 0.0


def _ttest(left: np.ndarray, right: np.ndarray) -> tuple[float, float, float, float, float]:
    m1, m2 = float(left.mean()), float(right.mean())
    s1 = float(left.std(ddof=1)) if len(left) > 1 else 0.0  # sample std: what the t-test takes
    s2 = float(right.std(ddof=1)) if len(right) > 1 else 0.0
    if len(left) + len(right) <= 2:
        return m1, m2, s1, s2, 1.0
    if s1 == 0 and s2 == 0:  # both sides constant: a step is certain, no step is none
        return m1, m2, s1, s2, (0.0 if m1 != m2 else 1.0)
    _, p = ttest_ind_from_stats(m1, s1, len(left), m2, s2, len(right))
    return m1, m2, s1, s2, float(p) if not math.isnan(p) else 1.0


def _stats(x: np.ndarray, lo: int, index: int, hi: int) -> ChangePoint:
    """t-test of x[lo:index] against x[index:hi]; the p-value is multiplied by the number of
    splits of x[lo:hi] that could have been chosen (Bonferroni): the split was picked as the
    most different one, so the raw p would call noise a change far more often than p says."""
    left, right = x[lo:index], x[index:hi]
    m1, m2, s1, s2, p = _ttest(left, right)
    return ChangePoint(index, m1, m2, s1, s2, len(left), len(right), min(1.0, p * (hi - lo - 1)))


def _candidate(x: np.ndarray, lo: int, hi: int) -> tuple[int, float] | None:
    """The split τ of x[lo:hi] maximising the energy statistic, with its value."""
    k = hi - lo
    if k < 3:
        return None
    seg = x[lo:hi]
    upper = np.triu(np.abs(seg[:, None] - seg[None, :]), k=1)
    cum = upper.cumsum(axis=0).cumsum(axis=1)  # cum[a, b] = Σ upper[:a+1, :b+1]
    taus = np.arange(1, k)  # left = seg[:τ], right = seg[τ:]
    within_left = cum[taus - 1, taus - 1]
    rows_left = cum[taus - 1, k - 1]
    between = rows_left - within_left
    within_right = cum[k - 1, k - 1] - rows_left
    n, m = taus.astype(float), (k - taus).astype(float)
    pairs_l = np.where(n > 1, n * (n - 1) / 2, 1.0)
    pairs_r = np.where(m > 1, m * (m - 1) / 2, 1.0)
    q = n * m / (n + m) * (2 * between / (n * m) - within_left / pairs_l - within_right / pairs_r)
    best = int(np.argmax(q))
    return lo + int(taus[best]), float(q[best])


def _split(x: np.ndarray, lo: int, hi: int, max_pvalue: float) -> list[int]:
    """E-Divisive bisection of x[lo:hi]: indices of the splits passing the t-test."""
    points: list[int] = []
    while True:
        bounds = [lo, *sorted(points), hi]
        best: tuple[float, int, int, int] | None = None
        for a, b in zip(bounds, bounds[1:]):
            cand = _candidate(x, a, b)
            if cand and (best is None or cand[1] > best[0]):
                best = (cand[1], cand[0], a, b)
        if best is None:
            return points
        _, index, a, b = best
        if _stats(x, a, index, b).pvalue >= max_pvalue:
            return points
        points.append(index)


def _with_stats(x: np.ndarray, indices: list[int]) -> list[ChangePoint]:
    bounds = [0, *indices, len(x)]
    return [_stats(x, bounds[i], bounds[i + 1], bounds[i + 2]) for i in range(len(indices))]


def detect(values: Sequence[float], *, max_pvalue: float = DEFAULT_MAX_PVALUE,
           min_change: float = 0.0, window: int = DEFAULT_WINDOW) -> list[ChangePoint]:
    """Change points of `values` (oldest first), each significant at `max_pvalue` with a
    relative change of at least `min_change` (0.05 = 5 %)."""
    x = np.asarray(values, dtype=float)
    if len(x) < 3 or not np.isfinite(x).all():
        return []
    first_pass = min(0.5, max_pvalue * 10)
    window = max(window, 6)
    weak: set[int] = set()
    for start in range(0, max(1, len(x) - window // 2), window // 2):
        weak.update(_split(x, start, min(len(x), start + window), first_pass))
    indices = sorted(weak)
    while indices:
        points = _with_stats(x, indices)
        weakest = max(points, key=lambda c: c.pvalue)
        if weakest.pvalue < max_pvalue:
            weakest = min(points, key=lambda c: abs(c.rel_change))
            if abs(weakest.rel_change) >= min_change:
                return points
        indices.remove(weakest.index)
    return []
