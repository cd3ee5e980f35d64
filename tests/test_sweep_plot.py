"""Sweep figures: the drawn values are the result's, axes carry units, failures are marked."""

import numpy as np
import pytest

import simlab
import simlab.plot

LENGTHS = np.array([0.5, 1.0, 2.0])
DAMPINGS = np.array([0.1, 0.2, 0.4, 0.8])


def grid_result(names=("length", "damping"), axes=(LENGTHS, DAMPINGS)):
    """A hand-made grid result: value = length * 10 + damping; one failed member."""
    grid = np.meshgrid(*axes, indexing="ij")
    values = np.stack([g.reshape(-1) for g in grid], axis=1)
    observable = values[:, 0] * 10 + values[:, -1]
    status = np.zeros(len(values), np.int16)
    failed = min(5, len(values) - 1)
    status[failed], observable[failed] = 1, np.nan
    return simlab.SweepResult(
        names=names,
        values=values,
        observables={"settling_time": observable, "final_state": np.zeros((len(values), 2))},
        status=status,
        mode="grid",
        grid_axes=axes,
        units={"length": "m", "damping": "1/s"},
        dims={"settling_time": (), "final_state": ("final_state_dim_0",)},
        coords={},
        attrs={},
        stats={},
    )


def test_heatmap_draws_the_grid_with_units_and_marks_failures():
    result = grid_result()
    ax = simlab.plot.sweep_heatmap(result, "settling_time", x="length", y="damping")
    drawn = ax.collections[0].get_array().reshape(len(DAMPINGS), len(LENGTHS))
    expected = LENGTHS[None, :] * 10 + DAMPINGS[:, None]
    expected[1, 1] = np.nan  # member 5 = (length index 1, damping index 1)
    np.testing.assert_allclose(np.ma.filled(drawn, np.nan), expected)
    assert np.ma.getmaskarray(drawn)[1, 1]
    assert ax.get_xlabel() == "length [m]" and ax.get_ylabel() == "damping [1/s]"
    assert ax.get_legend().get_texts()[0].get_text() == "failed (1)"


def test_lines_draw_one_line_per_hue_value():
    ax = simlab.plot.sweep_lines(grid_result(), "settling_time", x="damping", hue="length")
    assert len(ax.lines) == len(LENGTHS)
    np.testing.assert_allclose(ax.lines[2].get_ydata(), 20 + DAMPINGS)
    np.testing.assert_allclose(ax.lines[0].get_xdata(), DAMPINGS)
    assert ax.get_xlabel() == "damping [1/s]"


def test_bad_requests_are_refused_with_a_clear_message():
    result = grid_result()
    with pytest.raises(ValueError, match="unknown observable 'period'"):
        simlab.plot.sweep_heatmap(result, "period")
    with pytest.raises(ValueError, match="plot a scalar observable"):
        simlab.plot.sweep_heatmap(result, "final_state")
    with pytest.raises(ValueError, match="'gravity' was not swept"):
        simlab.plot.sweep_heatmap(result, "settling_time", x="gravity")
    with pytest.raises(ValueError, match="x and y must be different"):
        simlab.plot.sweep_heatmap(result, "settling_time", x="length", y="length")
    one_name = grid_result(names=("length",), axes=(LENGTHS,))
    with pytest.raises(ValueError, match="at least two names"):
        simlab.plot.sweep_heatmap(one_name, "settling_time")
