"""Figures of grid fields: images in grid coordinates, snapshots, GIF animation, bad input."""

import numpy as np
import pytest
from PIL import Image

import simlab
import simlab.plot

GRID = simlab.Grid((8, 6), extent=(2.0, 1.5), origin=(-1.0, 0.0))


def _trajectory(num_times=3):
    ts = np.linspace(0.0, 1.0, num_times)
    ys = np.stack(
        [np.stack([np.full(GRID.shape, t), np.outer(np.arange(8), np.ones(6)) * t]) for t in ts]
    )
    return simlab.Trajectory(ts=ts, ys=ys, result=simlab.RESULTS.successful, stats={})


def test_field_image_uses_grid_coordinates_and_adds_a_colour_bar():
    field = np.outer(np.arange(8.0), np.ones(6))
    ax = simlab.plot.field_image(field, GRID, label="v")
    image = ax.images[0]
    assert image.get_extent() == [-1.0, 1.0, 0.0, 1.5]
    np.testing.assert_array_equal(image.get_array(), field.T)  # x runs along the horizontal
    assert len(ax.figure.axes) == 2 and ax.figure.axes[1].get_ylabel() == "v"


def test_snapshots_share_one_colour_scale():
    figure = simlab.plot.field_snapshots(_trajectory(), GRID, channel=1, label="v")
    images = [ax.images[0] for ax in figure.axes if ax.images]
    assert len(images) == 3
    assert {image.get_clim() for image in images} == {(0.0, 7.0)}
    assert figure.axes[0].get_title() == "t = 0"


def test_animation_writes_one_gif_frame_per_save_time(tmp_path):
    path = simlab.plot.field_animation(_trajectory(4), GRID, tmp_path / "v.gif", channel=1)
    with Image.open(path) as gif:
        assert gif.n_frames == 4
    assert [p.name for p in tmp_path.iterdir()] == ["v.gif"]  # no temporary file left


def test_field_plots_reject_bad_input():
    with pytest.raises(ValueError, match=r"field_image draws shape \(8, 6\); got shape \(6, 8\)"):
        simlab.plot.field_image(np.zeros((6, 8)), GRID)
    with pytest.raises(ValueError, match="field_image draws a 2-D array"):
        simlab.plot.field_image(np.zeros(8))
    with pytest.raises(ValueError, match="channel 2 does not exist"):
        simlab.plot.field_snapshots(_trajectory(), GRID, channel=2)
