"""Sweep figures of stochastic models over paths draw statistics, not paths: the drawn
means, bands and heat maps equal NumPy's statistics of the kept paths and the streamed
statistics, and the Ornstein–Uhlenbeck mean and variance they show match the closed form.

Statistical assertions use fixed keys and state their confidence.
"""

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.collections import PolyCollection
from PIL import Image

import simlab
import simlab.plot
from simlab.models import OrnsteinUhlenbeck

OU = OrnsteinUhlenbeck(theta=1.0, mu=0.3, sigma=0.5)
X0, T_END = 2.0, 1.0
THETAS, SIGMAS = np.array([0.5, 1.0, 2.0]), np.array([0.3, 0.6])
PATHS = 64
AT_END = {"time": T_END, "component": "x"}
SETTINGS = dict(paths=PATHS, key=jax.random.key(0), adaptive=False, dt0=0.05, progress=False)


def sweep(**changes):
    grid = {"theta": THETAS, "sigma": SIGMAS}
    ts = jnp.linspace(0.0, T_END, 3)
    return simlab.sweep(OU, grid, jnp.array([X0]), ts, **SETTINGS, **changes)


@pytest.fixture(scope="module")
def kept():
    """Every path: shape (theta, sigma, path) at the end time."""
    result = sweep(keep_paths=True)
    return result, result.to_xarray()["trajectory"].isel(time=-1, component=0).values


@pytest.fixture(scope="module")
def streamed():
    return sweep(quantiles=(0.1, 0.5, 0.9))


def band_edges(ax):
    """The lower and upper edge of each band drawn by fill_between, at the x positions."""
    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    edges = []
    for band in bands:
        vertices = band.get_paths()[0].vertices
        lower = vertices[1 : len(THETAS) + 1, 1]
        upper = vertices[len(THETAS) + 2 : 2 * len(THETAS) + 2, 1][::-1]
        edges.append((lower, upper))
    return edges


def test_lines_of_kept_paths_draw_each_points_mean_in_a_quantile_band(kept, tmp_path):
    result, paths = kept
    ax = simlab.plot.sweep_lines(result, "trajectory", x="theta", hue="sigma", at=AT_END)
    assert len(ax.lines) == len(SIGMAS)  # one mean line per sigma, not one per path
    for j, line in enumerate(ax.lines):
        np.testing.assert_allclose(line.get_xdata(), THETAS)
        np.testing.assert_allclose(line.get_ydata(), paths[:, j].mean(axis=-1), rtol=1e-12)
    for j, (lower, upper) in enumerate(band_edges(ax)):
        np.testing.assert_allclose(lower, np.quantile(paths[:, j], 0.05, axis=-1), rtol=1e-12)
        np.testing.assert_allclose(upper, np.quantile(paths[:, j], 0.95, axis=-1), rtol=1e-12)
    # The closed-form OU mean mu + (x0 - mu) e^{-theta t} lies within 4 standard errors
    # (99.99%) of each drawn mean; Euler's bias at theta dt <= 0.1 is below 0.1 of one.
    exact = OU.mu + (X0 - OU.mu) * np.exp(-THETAS * T_END)
    for j, line in enumerate(ax.lines):
        error = paths[:, j].std(axis=-1, ddof=1) / np.sqrt(PATHS)
        assert np.all(np.abs(line.get_ydata() - exact) < 4 * error + 0.01)
    assert ax.get_ylabel() == "trajectory (mean over 64 paths)"
    ax.figure.savefig(tmp_path / "lines.png")
    with Image.open(tmp_path / "lines.png") as image:
        assert np.asarray(image.convert("L")).std() > 10  # something was drawn
    plt.close(ax.figure)


def test_lines_of_streamed_statistics_draw_the_mean_between_the_outer_quantiles(streamed, kept):
    result, paths = kept
    ax = simlab.plot.sweep_lines(streamed, "trajectory", x="theta", hue="sigma", at=AT_END)
    for j, line in enumerate(ax.lines):  # the same paths, streamed: the same means
        np.testing.assert_allclose(line.get_ydata(), paths[:, j].mean(axis=-1), rtol=1e-12)
    bound = streamed.to_xarray()["trajectory_quantile_bound"].isel(time=-1, component=0).values
    for j, (lower, upper) in enumerate(band_edges(ax)):
        assert np.all(np.abs(lower - np.quantile(paths[:, j], 0.1, axis=-1)) <= bound[:, j])
        assert np.all(np.abs(upper - np.quantile(paths[:, j], 0.9, axis=-1)) <= bound[:, j])
    plt.close(ax.figure)


def test_heatmap_colours_each_point_by_the_chosen_statistic(streamed, kept, tmp_path):
    result, paths = kept
    ax = simlab.plot.sweep_heatmap(result, "trajectory", statistic=0.5, at=AT_END)
    drawn = ax.collections[0].get_array().reshape(len(SIGMAS), len(THETAS))
    np.testing.assert_allclose(drawn, np.median(paths, axis=-1).T, rtol=1e-12)
    plt.close(ax.figure)
    ax = simlab.plot.sweep_heatmap(streamed, "trajectory", statistic="variance", at=AT_END)
    drawn = ax.collections[0].get_array().reshape(len(SIGMAS), len(THETAS))
    np.testing.assert_allclose(drawn, paths.var(axis=-1, ddof=1).T, rtol=1e-10)
    # The closed-form variance sigma^2 (1 - e^{-2 theta t}) / 2 theta: a sample variance
    # of 64 Gaussian values has relative spread sqrt(2/63) = 0.18; 4 of them is 99.99%.
    exact = SIGMAS[:, None] ** 2 * (1 - np.exp(-2 * THETAS * T_END)) / (2 * THETAS)
    assert np.all(np.abs(drawn / exact - 1) < 4 * np.sqrt(2 / (PATHS - 1)))
    assert ax.figure.axes[1].get_ylabel() == "trajectory (variance over 64 paths)"
    ax.figure.savefig(tmp_path / "heatmap.png")
    plt.close(ax.figure)


def test_bad_requests_name_what_to_do(streamed, kept):
    result, _ = kept
    with pytest.raises(ValueError, match=r"has the axes \['time', 'component'\] per member"):
        simlab.plot.sweep_heatmap(result, "trajectory")
    with pytest.raises(ValueError, match=r"streamed the quantiles \[0.1, 0.5, 0.9\]"):
        simlab.plot.sweep_heatmap(streamed, "trajectory", statistic=0.25, at=AT_END)
    with pytest.raises(ValueError, match="statistic must be one of"):
        simlab.plot.sweep_heatmap(result, "trajectory", statistic="median", at=AT_END)
    with pytest.raises(ValueError, match="band must be two quantile levels"):
        simlab.plot.sweep_lines(result, "trajectory", band=(0.9, 0.1), at=AT_END)
    with pytest.raises(ValueError, match="'path' was not swept"):
        simlab.plot.sweep_lines(result, "trajectory", x="path", at=AT_END)


def test_lines_outside_a_grid_split_kept_paths_by_point_and_sort_along_x():
    """A zip sweep in unsorted theta: the kept paths of each point (members run path by
    path within a point) give the same means as the streamed sweep, drawn in theta order."""
    thetas = np.array([2.0, 0.5, 1.0])

    def final_x(trajectory):
        return {"x": trajectory.ys[-1, 0]}

    settings = SETTINGS | dict(paths=16, mode="zip", observable=final_x)
    ts = jnp.linspace(0.0, T_END, 3)
    kept = simlab.sweep(OU, {"theta": thetas}, jnp.array([X0]), ts, keep_paths=True, **settings)
    streamed = simlab.sweep(OU, {"theta": thetas}, jnp.array([X0]), ts, **settings)
    per_point = kept.observables["x"].reshape(thetas.size, 16)
    order = np.argsort(thetas)
    for result in (kept, streamed):
        ax = simlab.plot.sweep_lines(result, "x")
        np.testing.assert_allclose(ax.lines[0].get_xdata(), thetas[order])
        np.testing.assert_allclose(ax.lines[0].get_ydata(), per_point.mean(axis=1)[order])
        plt.close(ax.figure)
