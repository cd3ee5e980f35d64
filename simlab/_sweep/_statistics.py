"""Statistics over the paths of each parameter point, accumulated chunk by chunk.

Memory is set by the number of points and the shape of one path's outputs, never by the
number of paths: means and variances merge chunk by chunk (Chan, Golub and LeVeque's
pairwise update, in float64), and quantiles come from a histogram of `QUANTILE_BINS` bins
per output element, on a grid of bins `[j w, (j + 1) w)` whose width `w` doubles (merging
neighbouring bins exactly) whenever the values seen no longer fit.

A quantile is read off the histogram by locating the two order statistics that NumPy's
default (linear) quantile interpolates between, each placed inside its bin: the result lies
within one bin width of `numpy.quantile` of all the paths. The bin width is reported as
the quantile's error bound; it is below `2 (max - min) / (QUANTILE_BINS - 1)` of the values
seen (or a floor of `1e-12` of their magnitude where all values were equal).
"""

from typing import Any

import numpy as np

QUANTILE_BINS = 1024
WIDTH_FLOOR = 1e-12  # relative to the values' magnitude, where the first values are all equal


class StreamingStatistics:
    """Count, mean, variance and quantiles of each element of one output, per point."""

    def __init__(self, num_points: int, shape: tuple[int, ...], quantiles: tuple[float, ...]):
        self.quantiles = quantiles
        cells = (num_points, *shape)
        self.count = np.zeros(cells, np.int64)
        self.mean = np.zeros(cells)
        self.m2 = np.zeros(cells)
        self.histogram = AlignedHistogram(cells) if quantiles else None

    def add(self, points: np.ndarray, values: np.ndarray) -> None:
        """Adds the rows `values` (one per path, NaN where a path gave none) belonging to the
        points `points` (sorted, as members run point by point)."""
        values = np.asarray(values, np.float64)
        finite = np.isfinite(values)
        starts = np.flatnonzero(np.r_[True, points[1:] != points[:-1]])
        owners = points[starts]
        count = np.add.reduceat(finite, starts, axis=0)
        total = np.add.reduceat(np.where(finite, values, 0.0), starts, axis=0)
        mean = total / np.maximum(count, 1)
        segment = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, points.size]))
        deviation = np.where(finite, values - mean[segment], 0.0)
        m2 = np.add.reduceat(deviation**2, starts, axis=0)
        self._merge(owners, count, mean, m2)
        if self.histogram is not None:
            self.histogram.add(points, values, finite)

    def _merge(self, owners, count, mean, m2) -> None:
        old_count = self.count[owners]
        merged = np.maximum(old_count + count, 1)
        delta = mean - self.mean[owners]
        self.mean[owners] += delta * count / merged
        self.m2[owners] += m2 + delta**2 * old_count * count / merged
        self.count[owners] = old_count + count

    def results(self, name: str) -> dict[str, np.ndarray]:
        """`name_count`, `name_mean`, `name_variance` (unbiased, NaN below two values) and,
        with quantiles, `name_quantiles` (a quantile axis after the point axis) and
        `name_quantile_bound`."""
        variance = np.where(self.count > 1, self.m2 / np.maximum(self.count - 1, 1), np.nan)
        out = {
            f"{name}_count": self.count.astype(np.float64),
            f"{name}_mean": np.where(self.count > 0, self.mean, np.nan),
            f"{name}_variance": variance,
        }
        if self.histogram is not None:
            out[f"{name}_quantiles"] = self.histogram.quantiles(self.quantiles, self.count)
            out[f"{name}_quantile_bound"] = np.where(self.count > 0, self.histogram.width, np.nan)
        return out


class AlignedHistogram:
    """Per cell, `QUANTILE_BINS` bins of `width` on the grid `[j width, (j + 1) width)`,
    from bin `start`; the width doubles (merging bins `2j` and `2j + 1` exactly) until the
    range of the values seen fits, and the window then moves to their lowest bin."""

    def __init__(self, cells: tuple[int, ...]):
        self.low = np.full(cells, np.inf)
        self.high = np.full(cells, -np.inf)
        self.width = np.full(cells, np.nan)
        self.start = np.zeros(cells, np.int64)
        self.counts = np.zeros((*cells, QUANTILE_BINS), np.int64)

    def add(self, points: np.ndarray, values: np.ndarray, finite: np.ndarray) -> None:
        np.minimum.at(self.low, points, np.where(finite, values, np.inf))
        np.maximum.at(self.high, points, np.where(finite, values, -np.inf))
        seen = np.isfinite(self.low)
        new = seen & np.isnan(self.width)
        floor = WIDTH_FLOOR * np.maximum(np.maximum(np.abs(self.low), np.abs(self.high)), 1.0)
        first = np.maximum((self.high - self.low) / (QUANTILE_BINS - 1), floor)
        self.width = np.where(new, first, self.width)
        self.start = np.where(new, self._bin(self.low, self.width, seen), self.start)
        self._refit(seen)
        cells = np.arange(self.width.size).reshape(self.width.shape)[points]
        bins = self._bin(values, self.width[points], finite) - self.start[points]
        flat = (cells * QUANTILE_BINS + np.clip(bins, 0, QUANTILE_BINS - 1))[finite]
        self.counts += np.bincount(flat, minlength=self.counts.size).reshape(self.counts.shape)

    @staticmethod
    def _bin(values, width, valid) -> np.ndarray:
        return np.floor(np.where(valid, values / width, 0.0)).astype(np.int64)

    def _refit(self, seen) -> None:
        """Doubles each cell's width until the bins of its lowest and highest values fit one
        window (a doubling means `max - min > (QUANTILE_BINS - 1) width`, so the width stays
        below `2 (max - min) / (QUANTILE_BINS - 1)`), then moves the window to start at the
        lowest value's bin, carrying the counts over."""
        doublings = np.zeros(self.width.shape, np.int64)
        while True:
            width = self.width * 2.0**doublings
            low_bin = self._bin(self.low, width, seen)
            wide = seen & (self._bin(self.high, width, seen) - low_bin >= QUANTILE_BINS)
            if not wide.any():
                break
            doublings += wide
        moved = seen & ((doublings > 0) | (low_bin != self.start))
        if moved.any():
            self._rebin(moved, doublings[moved], low_bin[moved])
            self.width = np.where(moved, width, self.width)
            self.start = np.where(moved, low_bin, self.start)

    def _rebin(self, moved, doublings, start) -> None:
        old = self.counts[moved]
        old_bins = self.start[moved][:, None] + np.arange(QUANTILE_BINS)
        # Integer floor division merges 2**doublings neighbouring bins of the global grid.
        new_bins = (old_bins >> doublings[:, None]) - start[:, None]
        rows = np.arange(old.shape[0])[:, None]
        occupied = old > 0  # only occupied bins are sure to land inside the new window
        flat = (rows * QUANTILE_BINS + np.clip(new_bins, 0, QUANTILE_BINS - 1))[occupied]
        rebinned = np.bincount(flat, weights=old[occupied], minlength=old.size)
        self.counts[moved] = rebinned.reshape(old.shape).astype(np.int64)

    def quantiles(self, levels: tuple[float, ...], count: np.ndarray) -> np.ndarray:
        """Each level's quantile per cell (levels after the point axis), NaN where a cell
        saw no values."""
        cumulative = np.cumsum(self.counts, axis=-1)
        out = []
        for level in levels:
            rank = level * (count - 1)
            below, fraction = np.floor(rank), rank - np.floor(rank)
            low = self._order_statistic(cumulative, below)
            high = self._order_statistic(cumulative, np.minimum(below + 1, count - 1))
            out.append(np.where(count > 0, (1 - fraction) * low + fraction * high, np.nan))
        return np.stack(out, axis=1)

    def _order_statistic(self, cumulative, rank) -> np.ndarray:
        """The `rank`-th smallest value (from 0), placed evenly among its bin's values."""
        rank = np.maximum(rank, 0).astype(np.int64)
        bins = np.minimum(np.sum(cumulative <= rank[..., None], axis=-1), QUANTILE_BINS - 1)
        before = np.take_along_axis(cumulative - self.counts, bins[..., None], -1)[..., 0]
        in_bin = np.maximum(np.take_along_axis(self.counts, bins[..., None], -1)[..., 0], 1)
        position = (rank - before + 0.5) / in_bin
        return self.width * (self.start + bins + position)


def checked_quantiles(quantiles: Any) -> tuple[float, ...]:
    """`quantiles` as a tuple of levels in [0, 1], or a clear error."""
    levels = np.asarray(quantiles, np.float64)
    if levels.ndim != 1 or not np.all((levels >= 0) & (levels <= 1)):
        raise ValueError(
            f"quantiles must be a sequence of levels in [0, 1], e.g. (0.05, 0.5, 0.95); got "
            f"{quantiles!r}."
        )
    return tuple(levels.tolist())


class EnsembleStatistics:
    """Reduces the paths of each point to statistics as chunks arrive (see the module
    docstring); `outputs`, `status`, `dims` and `coords` describe the points."""

    def __init__(self, members: Any, specs: dict[str, Any], quantiles: tuple[float, ...]):
        self.members = members
        num_points = members.points.num_members
        self.streams = {
            name: StreamingStatistics(num_points, spec.shape, quantiles)
            for name, spec in specs.items()
        }
        self.status = np.zeros(num_points, np.int16)
        suffixes = ("count", "mean", "variance") + (("quantile_bound",) if quantiles else ())
        self.dims = {}
        for name, spec in specs.items():
            self.dims.update({f"{name}_{suffix}": spec.dims for suffix in suffixes})
            if quantiles:
                self.dims[f"{name}_quantiles"] = ("quantile", *spec.dims)
        self.coords = {"quantile": ("quantile", np.asarray(quantiles))} if quantiles else {}

    def add(self, index: int, begin: int, end: int, outputs, status) -> None:
        points = self.members.point_of(begin, end)
        for name, values in outputs.items():
            self.streams[name].add(points, values)
        failed = status != 0
        self.status[points[failed]] = status[failed]

    @property
    def outputs(self) -> dict[str, np.ndarray]:
        return {
            key: value
            for name, stream in self.streams.items()
            for key, value in stream.results(name).items()
        }
