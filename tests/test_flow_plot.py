"""Figures of 2-D flow: the vorticity and speed of the Taylor–Green vortex with streamlines,
the energy spectrum with its reference slope, energy and enstrophy against their exact
decay; bad input refused."""

import matplotlib.collections as mcollections
import numpy as np
import pytest

import simlab
import simlab.plot
from simlab.models import taylor_green_vorticity

GRID = simlab.Grid((32, 32), extent=2 * np.pi)
VORTEX = np.asarray(taylor_green_vorticity(GRID))  # 2 sin x sin y


def test_flow_field_draws_vorticity_or_speed_with_streamlines():
    ax = simlab.plot.flow_field(VORTEX, GRID)
    image = ax.images[0]
    np.testing.assert_allclose(image.get_array(), VORTEX.T)
    assert image.get_clim() == (-np.max(np.abs(VORTEX)), np.max(np.abs(VORTEX)))
    assert ax.figure.axes[1].get_ylabel() == "vorticity ω"
    streamlines = [c for c in ax.collections if isinstance(c, mcollections.LineCollection)]
    assert len(streamlines) == 1 and len(streamlines[0].get_segments()) > 50
    # Taylor–Green: u = sin x cos y, v = -cos x sin y, |u|² = sin²x cos²y + cos²x sin²y.
    x, y = (np.asarray(c) for c in GRID.mesh())
    speed = np.sqrt((np.sin(x) * np.cos(y)) ** 2 + (np.cos(x) * np.sin(y)) ** 2)
    ax = simlab.plot.flow_field(VORTEX, GRID, quantity="speed", streamlines=False)
    np.testing.assert_allclose(ax.images[0].get_array(), speed.T, atol=1e-13)
    assert not ax.collections


def test_energy_spectrum_draws_the_shells_and_a_labelled_reference_slope():
    rng = np.random.default_rng(0)
    fields = np.stack([VORTEX, VORTEX + 0.1 * np.asarray(simlab.grid.dealias(
        rng.standard_normal(GRID.shape), GRID))])  # fmt: skip
    ax = simlab.plot.energy_spectrum(fields, GRID, slope=-5 / 3, labels=["a", "b"])
    k, shells = simlab.grid.energy_spectrum(fields, GRID)
    curve = ax.lines[1]
    resolved = (k > 0) & (k <= 32 / 3)
    np.testing.assert_allclose(curve.get_xdata(), k[resolved])
    np.testing.assert_allclose(curve.get_ydata(), shells[1][resolved])
    reference = ax.lines[2]
    slope = np.polyfit(np.log(reference.get_xdata()), np.log(reference.get_ydata()), 1)[0]
    np.testing.assert_allclose(slope, -5 / 3, rtol=1e-12)
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert labels == ["a", "b", "$k^{-5/3}$"]
    assert ax.get_xscale() == ax.get_yscale() == "log"
    ax = simlab.plot.energy_spectrum(fields[1], GRID)
    assert [text.get_text() for text in ax.get_legend().get_texts()] == ["$k^{-3}$"]


def test_energy_and_enstrophy_follow_the_exact_taylor_green_decay():
    viscosity, drag = 0.1, 0.05
    ts = np.linspace(0.0, 4.0, 9)
    ys = np.stack(
        [taylor_green_vorticity(GRID, time=t, viscosity=viscosity, drag=drag) for t in ts]
    )
    trajectory = simlab.Trajectory(ts=ts, ys=ys, result=simlab.RESULTS.successful, stats={})
    figure = simlab.plot.energy_enstrophy(trajectory, GRID, time_label="time (s)")
    energy_axes, enstrophy_axes = figure.axes
    decay = np.exp(-2 * (2 * viscosity + drag) * ts)
    np.testing.assert_allclose(energy_axes.lines[0].get_ydata(), 0.25 * decay, rtol=1e-12)
    np.testing.assert_allclose(enstrophy_axes.lines[0].get_ydata(), 0.5 * decay, rtol=1e-12)
    assert energy_axes.get_xlabel() == "time (s)" and enstrophy_axes.get_ylabel() == "enstrophy Z"
    # With a passive scalar the vorticity is the first channel.
    with_scalar = simlab.Trajectory(ts=ts, ys=np.stack([ys, 0 * ys], axis=1),
                                    result=simlab.RESULTS.successful, stats={})  # fmt: skip
    figure = simlab.plot.energy_enstrophy(with_scalar, GRID)
    np.testing.assert_allclose(figure.axes[0].lines[0].get_ydata(), 0.25 * decay, rtol=1e-12)


def test_flow_plots_reject_bad_input():
    with pytest.raises(ValueError, match="quantity must be one of"):
        simlab.plot.flow_field(VORTEX, GRID, quantity="pressure")
    with pytest.raises(ValueError, match=r"flow_field draws a 2-D vorticity field of shape"):
        simlab.plot.flow_field(VORTEX[:8], GRID)
    with pytest.raises(ValueError, match="one label per spectrum"):
        simlab.plot.energy_spectrum(VORTEX, GRID, labels=["a", "b"])
    with pytest.raises(ValueError, match="energy_spectrum draws vorticity of shape"):
        simlab.plot.energy_spectrum(VORTEX[None, None], GRID)
    bad = simlab.Trajectory(ts=np.zeros(2), ys=np.zeros((2, 8, 8)),
                            result=simlab.RESULTS.successful, stats={})  # fmt: skip
    with pytest.raises(ValueError, match="energy_enstrophy needs vorticity of shape"):
        simlab.plot.energy_enstrophy(bad, GRID)
