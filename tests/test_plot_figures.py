"""simlab.plot's trajectory, phase-portrait, loss, space-time, gallery and animation figures:
each returns a figure with labelled axes and the data in it, and refuses bad input clearly."""

import matplotlib.collections as mcollections
import numpy as np
import pytest
from PIL import Image

import simlab
import simlab.plot

TS = np.linspace(0.0, 10.0, 51)
YS = np.stack([np.cos(TS), np.sin(TS)], axis=-1)


def _trajectory(ts=TS, ys=YS, names=("prey", "predator")):
    return simlab.Trajectory(ts=ts, ys=ys, result=simlab.RESULTS.successful, stats={},
                             state_names=names)  # fmt: skip


def _sweep_result(fields, feed, kill, status=None):
    grid = np.array([(f, k) for f in feed for k in kill])
    return simlab.SweepResult(
        names=("feed_rate", "kill_rate"),
        values=grid,
        observables={"final_field": fields},
        status=np.zeros(len(grid), np.int16) if status is None else status,
        mode="grid",
        grid_axes=(np.asarray(feed), np.asarray(kill)),
        units={"feed_rate": "1/time", "kill_rate": "1/time"},
        dims={"final_field": ("channel", "x", "y")},
        coords={},
        attrs={},
        stats={},
    )


def test_trajectory_draws_curves_data_and_band():
    data_ts = TS[::5]
    stderr = 0.1 * np.ones_like(YS)
    ax = simlab.plot.trajectory(_trajectory(), data=(data_ts, YS[::5]), stderr=stderr,
                                time_label="time (years)", value_label="population")  # fmt: skip
    assert ax.get_xlabel() == "time (years)" and ax.get_ylabel() == "population"
    curves = [line for line in ax.lines if line.get_linestyle() == "-"]
    points = [line for line in ax.lines if line.get_marker() == "o"]
    assert len(curves) == 2 and len(points) == 2
    np.testing.assert_allclose(curves[1].get_ydata(), YS[:, 1])
    np.testing.assert_allclose(points[0].get_xdata(), data_ts)
    bands = [c for c in ax.collections if isinstance(c, mcollections.PolyCollection)]
    assert len(bands) == 2
    # The band spans ±1.96 standard errors around the curve.
    vertices = bands[0].get_paths()[0].vertices
    assert np.isclose(vertices[:, 1].max() - YS[:, 0].max(), 0.196, atol=1e-9)
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert labels == ["prey", "predator", "data", "95% band"]


def test_trajectory_selects_components_and_refuses_bad_input():
    ax = simlab.plot.trajectory(_trajectory(), components=["predator"])
    assert len(ax.lines) == 1
    np.testing.assert_allclose(ax.lines[0].get_ydata(), YS[:, 1])
    with pytest.raises(ValueError, match="unknown component 'wolf'"):
        simlab.plot.trajectory(_trajectory(), components=["wolf"])
    with pytest.raises(ValueError, match="stderr must have the shape of ys"):
        simlab.plot.trajectory(_trajectory(), stderr=np.ones(3))
    with pytest.raises(ValueError, match="observations of shape"):
        simlab.plot.trajectory(_trajectory(), data=(TS, YS[:, :1]))
    with pytest.raises(ValueError, match="num_components"):
        simlab.plot.trajectory(_trajectory(ys=np.zeros((51, 2, 3))))


def test_phase_portrait_plots_one_component_against_another():
    ax = simlab.plot.phase_portrait(_trajectory(), data=YS[::10])
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("prey", "predator")
    np.testing.assert_allclose(ax.lines[0].get_xdata(), YS[:, 0])
    np.testing.assert_allclose(ax.lines[0].get_ydata(), YS[:, 1])
    swapped = simlab.plot.phase_portrait(_trajectory(), x="predator", y="prey")
    assert swapped.get_xlabel() == "predator"
    with pytest.raises(ValueError, match="k >= 2"):
        simlab.plot.phase_portrait(_trajectory(ys=YS[:, :1], names=("prey",)))


def test_loss_curve_from_history_and_from_fit_like_result():
    history = 100.0 * 0.5 ** np.arange(12)
    ax = simlab.plot.loss_curve(history)
    assert ax.get_yscale() == "log" and ax.get_ylabel() == "loss"
    np.testing.assert_allclose(ax.lines[0].get_ydata(), history)

    class Stub:  # the two attributes loss_curve reads from a FitResult
        loss_history = np.concatenate([history, np.full(5, np.nan)])
        num_steps = 12

    np.testing.assert_allclose(simlab.plot.loss_curve(Stub()).lines[0].get_ydata(), history)
    with pytest.raises(ValueError, match="non-empty 1-D"):
        simlab.plot.loss_curve(np.zeros((2, 2)))


def test_space_time_image_has_colour_bar_and_labels():
    xs = np.linspace(0.05, 0.95, 10)
    field = np.exp(-TS[:, None]) * np.sin(np.pi * xs)[None]
    trajectory = _trajectory(ys=field, names=None)
    ax = simlab.plot.space_time(trajectory, coordinates=xs, label="temperature")
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("x", "time")
    mesh = ax.collections[0]
    np.testing.assert_allclose(np.asarray(mesh.get_array()).reshape(field.shape), field)
    assert mesh.colorbar.ax.get_ylabel() == "temperature"
    with pytest.raises(ValueError, match="coordinates must have shape"):
        simlab.plot.space_time(trajectory, coordinates=xs[:3])


def test_sweep_gallery_one_thumbnail_per_member_on_a_shared_scale():
    feed, kill = [0.02, 0.04, 0.06], [0.05, 0.06]
    fields = np.stack([np.full((2, 4, 4), i, float) for i in range(6)])
    fields[4, 1, 0, 0] = np.nan  # a failed member is left blank
    figure = simlab.plot.sweep_gallery(_sweep_result(fields, feed, kill), "final_field", channel=1)
    images = [ax.images[0] for ax in figure.axes if ax.images]
    assert len(images) == 5
    assert {image.get_clim() for image in images} == {(0.0, 5.0)}
    assert figure.get_supxlabel() == "feed_rate [1/time]"
    assert figure.get_supylabel() == "kill_rate [1/time]"
    # Rows run from the largest kill rate at the top: member (0.02, 0.06) is top left.
    top_left = figure.axes[0]
    assert np.all(top_left.images[0].get_array() == 1.0)
    with pytest.raises(ValueError, match="a 2-D field"):
        simlab.plot.sweep_gallery(_sweep_result(fields, feed, kill), "final_field")
    with pytest.raises(ValueError, match="unknown observable"):
        simlab.plot.sweep_gallery(_sweep_result(fields, feed, kill), "period")


def test_animate_writes_a_gif_with_one_frame_per_time(tmp_path):
    frames = np.random.default_rng(0).uniform(size=(4, 8, 8))
    path = simlab.plot.animate(frames, tmp_path / "field.gif", ts=np.arange(4.0), label="v")
    with Image.open(path) as gif:
        assert gif.n_frames == 4
    curves = simlab.plot.animate(frames[:, 0], tmp_path / "line.gif")
    assert curves.is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["field.gif", "line.gif"]
    with pytest.raises(ValueError, match=r"\.gif"):
        simlab.plot.animate(frames, tmp_path / "field.mp4")
    with pytest.raises(ValueError, match="T >= 2"):
        simlab.plot.animate(frames[:1], tmp_path / "one.gif")


def test_interactive_mode_turned_on_inside_the_style_outlives_it():
    # A notebook's backend turns interactive mode on when simlab draws the session's first
    # figure; were it turned off again on leaving the style, later figures would not show.
    import matplotlib as mpl

    from simlab.plot._style import style

    was = mpl.is_interactive()
    try:
        mpl.interactive(False)
        with style():
            mpl.interactive(True)
        assert mpl.is_interactive()
    finally:
        mpl.interactive(was)
