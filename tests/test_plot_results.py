"""The result objects' `.plot()`: each returns the matplotlib Figure of the result, drawn by
the function the experiments use for it, with the result's own values in it."""

import io

import jax
import jax.numpy as jnp
import matplotlib.collections as mcollections
import numpy as np
import pytest
from helpers import LOTKA_VOLTERRA
from matplotlib.figure import Figure

import simlab
import simlab.plot

TS = np.linspace(0.0, 4.0, 9)


def _drawn(figure) -> Figure:
    """The figure, once it has been rendered to PNG bytes (as a notebook shows it)."""
    assert isinstance(figure, Figure) and figure.axes
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    assert buffer.getvalue().startswith(b"\x89PNG")
    return figure


def _trajectory(ys, names=None, ts=TS):
    return simlab.Trajectory(ts=ts, ys=ys, result=simlab.RESULTS.successful, stats={},
                             state_names=names)  # fmt: skip


def _mesh(ax) -> mcollections.QuadMesh:
    (mesh,) = [c for c in ax.collections if isinstance(c, mcollections.QuadMesh)]
    return mesh


def _centres(mesh) -> np.ndarray:
    """The horizontal positions of a mesh's tiles: the middles of their edges."""
    edges = np.asarray(mesh.get_coordinates()[0, :, 0])
    return (edges[:-1] + edges[1:]) / 2


# --- Trajectory ---------------------------------------------------------------------------


def test_trajectory_plot_draws_each_named_state_against_time_with_its_unit():
    ts = jnp.linspace(0.0, 10.0, 41)
    trajectory = simlab.simulate(LOTKA_VOLTERRA, jnp.array([30.0, 4.0]), ts)
    figure = _drawn(trajectory.plot(LOTKA_VOLTERRA))
    (ax,) = figure.axes
    assert len(ax.lines) == len(trajectory.state_names) == 2
    for line, index in zip(ax.lines, range(2), strict=True):
        np.testing.assert_array_equal(line.get_xdata(), np.asarray(trajectory.ts))
        np.testing.assert_array_equal(line.get_ydata(), np.asarray(trajectory.ys[:, index]))
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert legend == ["prey", "predator"]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("time", "state (population)")


def test_trajectory_plot_passes_its_options_to_simlab_plot_trajectory():
    ys = np.stack([np.cos(TS), np.sin(TS), TS], axis=-1)
    trajectory = _trajectory(ys, names=("x", "y", "z"))
    figure = _drawn(trajectory.plot(components=["z"], time_label="time (s)"))
    (ax,) = figure.axes
    assert len(ax.lines) == 1 and ax.get_xlabel() == "time (s)"
    np.testing.assert_array_equal(ax.lines[0].get_ydata(), TS)
    # Without names (a Trajectory built by hand) the components are numbered.
    unnamed = _trajectory(ys).plot()
    assert [t.get_text() for t in unnamed.axes[0].get_legend().get_texts()] == ["y0", "y1", "y2"]
    assert unnamed.axes[0].get_ylabel() == "state"


def test_trajectory_plot_of_a_1d_grid_model_is_its_space_time_image():
    grid = simlab.Grid((16,), extent=1.0, boundary="dirichlet")
    (x,) = grid.coordinates()
    model = simlab.models.Heat(diffusivity=0.01, grid=grid)
    trajectory = simlab.simulate(model, jnp.sin(jnp.pi * x), jnp.asarray(TS))
    assert trajectory.state_names == ()
    figure = _drawn(trajectory.plot(model))
    ax = figure.axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("x", "time")
    mesh = _mesh(ax)
    np.testing.assert_array_equal(np.asarray(mesh.get_array()).reshape(9, 16), trajectory.ys)
    assert mesh.colorbar.ax.get_ylabel() == "field"
    # The same figure as the experiments' 1-D `field` kind: positions at the cell centres.
    np.testing.assert_allclose(_centres(mesh), np.asarray(x))
    # Without the model, the positions are cell indices.
    indexed = _mesh(trajectory.plot(label="temperature").axes[0])
    np.testing.assert_allclose(_centres(indexed), np.arange(16.0))
    assert indexed.colorbar.ax.get_ylabel() == "temperature"


def test_trajectory_plot_of_a_2d_field_is_snapshots_at_four_times():
    grid = simlab.Grid((6, 5), extent=(3.0, 2.5))
    ys = np.arange(9 * 6 * 5, dtype=float).reshape(9, 6, 5)
    trajectory = _trajectory(ys, names=())
    figure = _drawn(trajectory.plot(grid=grid))
    panels = [ax for ax in figure.axes if ax.images]
    assert len(panels) == 4  # and a colour bar each
    shown = [0, 2, 5, 8]  # four save times, evenly spread from the first to the last
    for ax, index in zip(panels, shown, strict=True):
        np.testing.assert_array_equal(ax.images[0].get_array(), ys[index].T)
        assert ax.get_title() == f"t = {TS[index]:g}"
        assert ax.images[0].get_extent() == [0.0, 3.0, 0.0, 2.5]
        assert (ax.get_xlabel(), ax.get_ylabel()) == ("x", "y")
    # States with two axes are a 2-D field even without a grid: cell indices.
    bare = trajectory.plot(indices=[8])
    assert [ax.get_xlabel() for ax in bare.axes if ax.images] == ["cell index (x)"]


def test_trajectory_plot_of_a_multi_field_state_draws_one_channel():
    grid = simlab.Grid((4, 4), extent=1.0)
    ys = np.stack([np.zeros((9, 4, 4)), np.ones((9, 4, 4))], axis=1) * TS[:, None, None, None]
    trajectory = _trajectory(ys, names=())
    first = trajectory.plot(grid=grid)
    images = [ax.images[0] for ax in first.axes if ax.images]
    np.testing.assert_array_equal(images[-1].get_array(), ys[-1, 0].T)
    second = trajectory.plot(grid=grid, channel=1, label="v")
    images = [ax.images[0] for ax in second.axes if ax.images]
    np.testing.assert_array_equal(images[-1].get_array(), ys[-1, 1].T)
    colour_bars = [ax for ax in second.axes if not ax.images]
    assert colour_bars and all(ax.get_ylabel() == "v" for ax in colour_bars)
    with pytest.raises(ValueError, match="channel 2 does not exist"):
        trajectory.plot(grid=grid, channel=2)


def test_trajectory_plot_refuses_a_batch_and_three_dimensional_fields():
    batch = jax.vmap(  # as a vmapped simulate returns it: every leaf has the batch axis
        lambda scale: _trajectory(scale * jnp.ones((9, 3)), ts=jnp.asarray(TS) + 0 * scale)
    )(jnp.arange(2.0))
    with pytest.raises(ValueError, match="batch of trajectories.*plot one member"):
        batch.plot()
    member = jax.tree.map(lambda leaf: leaf[0], batch)
    assert len(member.plot().axes[0].lines) == 3
    cube = simlab.Grid((3, 3, 3), extent=1.0)
    with pytest.raises(ValueError, match="1-D or 2-D fields.*field_image"):
        _trajectory(np.zeros((9, 3, 3, 3)), names=()).plot(grid=cube)


# --- SweepResult --------------------------------------------------------------------------


def _grid_sweep(observables, dims, feed=(0.02, 0.04), kill=(0.05, 0.06, 0.07), status=None):
    values = np.array([(f, k) for f in feed for k in kill])
    return simlab.SweepResult(
        names=("feed_rate", "kill_rate"),
        values=values,
        observables=observables,
        status=np.zeros(len(values), np.int16) if status is None else status,
        mode="grid",
        grid_axes=(np.asarray(feed), np.asarray(kill)),
        units={"feed_rate": "1/time", "kill_rate": ""},
        dims=dims,
        coords={},
        attrs={},
        stats={},
    )


def test_sweep_plot_of_a_scalar_over_a_grid_is_its_heatmap():
    peak = np.array([1.0, 2.0, 3.0, 4.0, np.nan, 6.0])
    result = _grid_sweep({"peak": peak}, {"peak": ()}, status=np.array([0, 0, 0, 0, 4, 0]))
    figure = _drawn(result.plot())
    ax = figure.axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("feed_rate [1/time]", "kill_rate")
    mesh = _mesh(ax)
    # Rows follow kill_rate (y), columns feed_rate (x); the failed member is masked.
    drawn = np.ma.masked_invalid(mesh.get_array()).reshape(3, 2)
    np.testing.assert_array_equal(drawn.filled(np.nan), peak.reshape(2, 3).T)
    assert drawn.mask.sum() == 1
    assert mesh.colorbar.ax.get_ylabel() == "peak"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["failed (1)"]


def test_sweep_plot_of_a_grid_draws_lines_on_request_and_names_its_observable():
    peak = np.arange(6.0)
    result = _grid_sweep({"peak": peak, "period": -peak}, {"peak": (), "period": ()})
    with pytest.raises(ValueError, match=r"observables \['peak', 'period'\].*plot\('peak'\)"):
        result.plot()
    figure = _drawn(result.plot("period", kind="lines"))
    ax = figure.axes[0]
    assert len(ax.lines) == 3  # one per kill_rate
    for line, k in zip(ax.lines, range(3), strict=True):
        np.testing.assert_array_equal(line.get_xdata(), [0.02, 0.04])
        np.testing.assert_array_equal(line.get_ydata(), -peak.reshape(2, 3)[:, k])
    assert ax.get_ylabel() == "period" and ax.get_legend().get_title().get_text() == "kill_rate"
    with pytest.raises(ValueError, match="kind must be one of"):
        result.plot("peak", kind="contour")


def test_sweep_plot_of_a_field_over_two_names_is_its_gallery():
    fields = np.arange(6 * 2 * 4 * 4, dtype=float).reshape(6, 2, 4, 4)
    result = _grid_sweep({"final_field": fields}, {"final_field": ("channel", "x", "y")})
    figure = _drawn(result.plot(channel=1))
    thumbnails = [ax for ax in figure.axes if ax.images]
    assert len(thumbnails) == result.num_members == 6
    shown = sorted(tuple(ax.images[0].get_array().ravel()) for ax in thumbnails)
    expected = sorted(tuple(field.T.ravel()) for field in fields[:, 1])
    np.testing.assert_array_equal(shown, expected)


def test_sweep_plot_of_a_real_sweep_over_one_name_is_the_observable_against_it():
    alphas = jnp.array([0.4, 0.5, 0.6])
    result = simlab.sweep(
        LOTKA_VOLTERRA, {"alpha": alphas}, jnp.array([30.0, 4.0]), jnp.linspace(0.0, 5.0, 11),
        observable=lambda t: {"peak_prey": jnp.max(t.ys[:, 0])},
    )  # fmt: skip
    figure = _drawn(result.plot())
    (ax,) = figure.axes
    (line,) = ax.lines
    np.testing.assert_allclose(line.get_xdata(), np.asarray(alphas))
    np.testing.assert_array_equal(line.get_ydata(), result.observables["peak_prey"])
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("alpha [1/time]", "peak_prey")


def test_sweep_plot_names_the_quantity_of_a_streamed_sweep_over_paths():
    mean = np.array([1.0, 2.0, 3.0])
    result = simlab.SweepResult(
        names=("D",),
        values=np.array([[0.1], [0.2], [0.3]]),
        observables={"x_mean": mean, "x_variance": np.full(3, 0.25)},
        status=np.zeros(3, np.int16),
        mode="grid",
        grid_axes=(np.array([0.1, 0.2, 0.3]),),
        units={"D": ""},
        dims={"x_mean": (), "x_variance": ()},
        coords={},
        attrs={"paths": 50},
        stats={},
    )
    ax = _drawn(result.plot()).axes[0]
    (line,) = ax.lines
    np.testing.assert_array_equal(line.get_ydata(), mean)
    assert ax.get_ylabel() == "x (mean over 50 paths)"
    band = [c for c in ax.collections if isinstance(c, mcollections.PolyCollection)]
    assert len(band) == 1  # mean ± one standard deviation


# --- FitResult ----------------------------------------------------------------------------


def test_fit_plot_draws_the_data_it_was_fitted_to_and_the_fitted_curves():
    data_ts = jnp.linspace(0.0, 8.0, 9)
    y0 = jnp.array([30.0, 4.0])
    observations = simlab.simulate(LOTKA_VOLTERRA, y0, data_ts).ys
    observations = observations.at[3, 1].set(jnp.nan)  # one value not observed
    start = simlab.models.LotkaVolterra(alpha=0.5, beta=0.028, gamma=0.84, delta=0.026)
    result = simlab.fit(start, data_ts, observations, y0=y0, params=["alpha"])
    figure = _drawn(result.plot(time_label="time (days)", num_points=50))
    (ax,) = figure.axes
    points = [line for line in ax.lines if line.get_marker() == "o"]
    curves = [line for line in ax.lines if line.get_linestyle() == "-"]
    assert len(points) == len(curves) == 2
    for index, line in enumerate(points):
        np.testing.assert_array_equal(line.get_xdata(), np.asarray(data_ts))
        np.testing.assert_array_equal(line.get_ydata(), np.asarray(observations[:, index]))
    prediction, _ = result.predict(jnp.linspace(0.0, 8.0, 50))
    for index, line in enumerate(curves):
        np.testing.assert_allclose(line.get_ydata(), np.asarray(prediction[:, index]))
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert {"prey", "predator", "prey (fit)", "predator (fit)"} <= set(legend)
    assert "95% confidence band of the mean" in legend
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("time (days)", "observed value (population)")


# --- Profile, Starts, Posterior, Branch ---------------------------------------------------


def test_profile_plot_draws_its_curve_threshold_and_interval():
    values = jnp.linspace(0.4, 0.6, 5)
    profile = simlab.Profile(
        name="alpha", values=values, nll=jnp.array([4.0, 1.0, 0.0, 1.0, 4.0]),
        threshold=jnp.asarray(1.92), estimate=jnp.asarray(0.5), lower=jnp.asarray(0.43),
        upper=jnp.asarray(0.57), lower_open=jnp.asarray(False), upper_open=jnp.asarray(False),
        converged=jnp.ones(5, bool), level=0.95,
    )  # fmt: skip
    (ax,) = _drawn(profile.plot()).axes
    curve, threshold, estimate = ax.lines
    np.testing.assert_array_equal(curve.get_xdata(), np.asarray(values))
    np.testing.assert_array_equal(curve.get_ydata(), [4.0, 1.0, 0.0, 1.0, 4.0])
    assert threshold.get_ydata()[0] == pytest.approx(1.92)
    assert estimate.get_xdata()[0] == pytest.approx(0.5)
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("alpha", "Δ negative log-likelihood")


def test_starts_plot_is_the_waterfall_of_their_sorted_losses():
    loss = jnp.array([3.0, 1.0, 1.0, jnp.inf, 2.0])
    starts = simlab.Starts(
        initial={"a": jnp.arange(5.0)}, params={"a": jnp.arange(5.0)}, loss=loss,
        converged=jnp.isfinite(loss), best=jnp.asarray(1), draws=jnp.ones(5, int),
    )  # fmt: skip
    (ax,) = _drawn(starts.plot()).axes
    sorted_losses, at_best = ax.lines
    np.testing.assert_array_equal(
        sorted_losses.get_xdata(), [1, 2, 3, 4]
    )  # the failed one left out
    np.testing.assert_array_equal(sorted_losses.get_ydata(), [1.0, 1.0, 2.0, 3.0])
    assert len(at_best.get_xdata()) == 2
    assert ax.get_title() == "1 start(s) failed"


def test_posterior_plot_is_a_corner_plot_of_its_draws():
    draws = np.random.default_rng(0).normal(size=(2, 50, 2))
    posterior = simlab.Posterior(
        samples={"alpha": jnp.asarray(draws[..., 0]), "beta": jnp.asarray(draws[..., 1])},
        log_density=jnp.zeros((2, 50)), divergent=jnp.zeros((2, 50), bool),
        acceptance_rate=jnp.full((2, 50), 0.8),
    )  # fmt: skip
    figure = _drawn(posterior.plot(num_bins=10))
    shown = [ax for ax in figure.axes if ax.get_visible()]
    assert len(shown) == 3  # two histograms and the pair below them
    (pair,) = [ax for ax in shown if ax.lines]
    np.testing.assert_array_equal(pair.lines[0].get_xdata(), draws[..., 0].reshape(-1))
    np.testing.assert_array_equal(pair.lines[0].get_ydata(), draws[..., 1].reshape(-1))
    assert (pair.get_xlabel(), pair.get_ylabel()) == ("alpha", "beta")
    histograms = [ax for ax in shown if ax.patches]
    assert [sum(p.get_height() for p in ax.patches) for ax in histograms] == [100, 100]


def test_branch_plot_draws_a_component_against_the_parameter():
    from simlab._steady_state import STABILITY_LABELS

    values = np.linspace(0.0, 1.0, 6)
    stable = STABILITY_LABELS.index("stable")
    branch = simlab.Branch(
        parameter="mu", values=values, states=np.stack([values, values**2], axis=1),
        state_names=("x", "y"), eigenvalues=np.full((6, 2), -1.0 + 0j),
        stability=np.full(6, stable), result=np.zeros(6, int), bifurcations=(),
        oscillation_min=np.full((6, 2), np.nan), oscillation_max=np.full((6, 2), np.nan),
    )  # fmt: skip
    (ax,) = _drawn(branch.plot("y")).axes
    drawn = [line for line in ax.lines if len(line.get_xdata())]
    assert len(drawn) == 1  # all stable: one solid line
    np.testing.assert_array_equal(drawn[0].get_xdata(), values)
    np.testing.assert_array_equal(drawn[0].get_ydata(), values**2)
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("mu", "y")
    assert branch.plot().axes[0].get_ylabel() == "x"
