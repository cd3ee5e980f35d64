"""Global sensitivity indices against analytic variance decompositions and SALib itself."""

from typing import ClassVar

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import pytest
import SALib.analyze.morris
import SALib.analyze.sobol
import SALib.sample.sobol
from matplotlib.container import BarContainer

import simlab
import simlab.plot
from simlab._sensitivity import _seeds
from simlab.models import AbstractODEModel, parameter

FAST = dict(solver="tsit5", integrator="lean", progress=False)
NAMES = ("x1", "x2", "x3", "x4")
TS_AT_REST = jnp.array([0.0, 1.0])


class AtRest(AbstractODEModel):
    """dy/dt = 0: the varied initial state is the input of a function of the final state."""

    state_names: ClassVar[tuple[str, ...]] = NAMES

    def __call__(self, t, y, args):
        return jnp.zeros_like(y)


class IndependentDecays(AbstractODEModel):
    """Three first-order decays, dy_i/dt = -k_i y_i, each with its own rate."""

    k1: jax.Array = parameter(lower=0.0, unit="1/s")
    k2: jax.Array = parameter(lower=0.0, unit="1/s")
    k3: jax.Array = parameter(lower=0.0, unit="1/s")

    state_names: ClassVar[tuple[str, ...]] = ("a", "b", "c")

    def __call__(self, t, y, args):
        return -jnp.stack([self.k1, self.k2, self.k3]) * y


def ishigami(trajectory):
    x1, x2, x3 = trajectory.ys[-1, 0], trajectory.ys[-1, 1], trajectory.ys[-1, 2]
    return {"f": jnp.sin(x1) + 7.0 * jnp.sin(x2) ** 2 + 0.1 * x3**4 * jnp.sin(x1)}


def ishigami_numpy(x):
    return np.sin(x[:, 0]) + 7.0 * np.sin(x[:, 1]) ** 2 + 0.1 * x[:, 2] ** 4 * np.sin(x[:, 0])


ISHIGAMI_RANGES = {name: [-np.pi, np.pi] for name in NAMES[:3]}


@pytest.fixture(scope="module")
def ishigami_indices():
    return simlab.sensitivity(
        AtRest(),
        ISHIGAMI_RANGES,
        jnp.zeros(4),
        TS_AT_REST,
        observable=ishigami,
        num_samples=2**12,
        key=jax.random.key(0),
        **FAST,
    )


def test_ishigami_indices_contain_the_analytic_values(ishigami_indices):
    """Ishigami & Homma (1990), a = 7, b = 0.1: V = a^2/8 + b pi^4/5 + b^2 pi^8/18 + 1/2,
    V1 = (1 + b pi^4/5)^2 / 2, V2 = a^2/8, V13 = b^2 pi^8 (1/18 - 1/50); S3 = S12 = S23 = 0."""
    a, b, pi = 7.0, 0.1, np.pi
    variance = a**2 / 8 + b * pi**4 / 5 + b**2 * pi**8 / 18 + 0.5
    v1, v2, v13 = 0.5 * (1 + b * pi**4 / 5) ** 2, a**2 / 8, b**2 * pi**8 * (1 / 18 - 1 / 50)
    s1 = np.array([v1, v2, 0.0]) / variance
    st = np.array([v1 + v13, v2, v13]) / variance
    np.testing.assert_allclose(s1, [0.3139, 0.4424, 0.0], atol=1e-4)  # the published values
    np.testing.assert_allclose(st, [0.5576, 0.4424, 0.2437], atol=1e-4)
    ds = ishigami_indices
    assert np.all(np.abs(ds["f_S1"].values - s1) <= ds["f_S1_conf"].values)
    assert np.all(np.abs(ds["f_ST"].values - st) <= ds["f_ST_conf"].values)
    s2 = ds["f_S2"].values
    s2_conf = ds["f_S2_conf"].values
    expected_s2 = {(0, 1): 0.0, (0, 2): v13 / variance, (1, 2): 0.0}
    for (i, j), value in expected_s2.items():
        assert abs(s2[i, j] - value) <= s2_conf[i, j]
    assert np.all(np.isnan(s2[np.tril_indices(3)]))  # only i < j is estimated


def test_indices_equal_salib_run_directly_on_the_same_samples(ishigami_indices):
    ds = ishigami_indices
    problem = {"num_vars": 3, "names": list(ISHIGAMI_RANGES), "bounds": [[-np.pi, np.pi]] * 3}
    design = SALib.sample.sobol.sample(problem, 2**12, seed=ds.attrs["sample_seed"])
    np.testing.assert_array_equal(ds["samples"].values, design)
    direct = SALib.analyze.sobol.analyze(
        problem, ishigami_numpy(design), seed=ds.attrs["analysis_seed"]
    )
    for measure in ("S1", "S1_conf", "ST", "ST_conf", "S2", "S2_conf"):
        np.testing.assert_allclose(
            ds[f"f_{measure}"].values, direct[measure], rtol=1e-9, atol=1e-12, equal_nan=True
        )
    assert ds.attrs["num_members"] == 2**12 * (2 * 3 + 2)


DECAY_RANGES = {"k1": [0.5, 1.5], "k2": [0.1, 2.0], "k3": [0.1, 1.0]}
DECAY_TS = jnp.linspace(0.0, 2.0, 5)


def decay_outputs(trajectory):
    final = trajectory.ys[-1]
    return {
        "total": trajectory.ys.sum(axis=1),  # the amount left, at every save time
        "survival": jnp.prod(final),  # all three still intact: a series system
    }


def decay_moments(t):
    """E[X] and E[X^2] of X = exp(-k t), k uniform on [lower, upper], for each rate."""
    lower, upper = np.asarray(list(DECAY_RANGES.values())).T
    width = upper - lower
    mean = (np.exp(-lower * t) - np.exp(-upper * t)) / (t * width)
    square = (np.exp(-2 * lower * t) - np.exp(-2 * upper * t)) / (2 * t * width)
    return mean, square


@pytest.fixture(scope="module")
def decay_indices():
    model = IndependentDecays(k1=1.0, k2=1.0, k3=0.3)
    return simlab.sensitivity(
        model,
        DECAY_RANGES,
        jnp.ones(3),
        DECAY_TS,
        observable=decay_outputs,
        num_samples=2**12,
        key=jax.random.key(1),
        time_outputs=("total",),
        **FAST,
    )


def test_independent_decays_match_their_closed_form_decomposition(decay_indices):
    r"""With $X_i = e^{-k_i t}$ independent, $m_i = \mathbb{E}X_i$, $q_i = \mathbb{E}X_i^2$,
    $v_i = q_i - m_i^2$:

    - the amount left, $\sum_i X_i$, is additive: $S_i = S_{T,i} = v_i / \sum_j v_j$;
    - the survival of all three, $\prod_i X_i$, has $V = \prod q_j - \prod m_j^2$,
      $S_i = v_i \prod_{j \ne i} m_j^2 / V$, $S_{T,i} = v_i \prod_{j \ne i} q_j / V$ and
      $S_{ij} = v_i v_j \prod_{l \ne i,j} m_l^2 / V$.
    """
    ds = decay_indices
    for time_index, t in enumerate(np.asarray(DECAY_TS)[1:], start=1):
        mean, square = decay_moments(t)
        additive = (square - mean**2) / np.sum(square - mean**2)
        for measure in ("S1", "ST"):
            estimate = ds[f"total_{measure}"].isel(time=time_index).values
            interval = ds[f"total_{measure}_conf"].isel(time=time_index).values
            assert np.all(np.abs(estimate - additive) <= interval), (t, measure)
    mean, square = decay_moments(float(DECAY_TS[-1]))
    v = square - mean**2
    variance = np.prod(square) - np.prod(mean**2)
    others = lambda moments: np.prod(moments) / moments  # noqa: E731
    s1 = v * others(mean**2) / variance
    st = v * others(square) / variance
    assert np.all(st - s1 > 0.02)  # interactions matter: the test can tell S1 from ST
    assert np.all(np.abs(ds["survival_S1"].values - s1) <= ds["survival_S1_conf"].values)
    assert np.all(np.abs(ds["survival_ST"].values - st) <= ds["survival_ST_conf"].values)
    for i, j in [(0, 1), (0, 2), (1, 2)]:
        rest = np.prod(np.delete(mean**2, [i, j]))
        expected = v[i] * v[j] * rest / variance
        assert abs(ds["survival_S2"].values[i, j] - expected) <= ds["survival_S2_conf"][i, j]


def test_time_resolved_indices_are_labelled_and_undefined_at_the_start(decay_indices):
    ds = decay_indices
    assert ds["total_S1"].dims == ("parameter", "time")
    np.testing.assert_allclose(ds["time"], DECAY_TS)
    assert np.all(np.isnan(ds["total_S1"].isel(time=0)))  # every run starts from y0
    assert ds["survival_S1"].dims == ("parameter",)
    assert list(ds["unit"].values) == ["1/s"] * 3


def test_morris_recovers_effects_and_their_ordering():
    """y = 4 x1 + x2 x3 on [0, 1]^4: each elementary effect of x1 is exactly 4 (sigma 0);
    those of x2 and x3 are the other's level (mean |effect| below 1, spread above 0); x4
    has none. Importance: x1 > x2, x3 > x4."""

    def screened(trajectory):
        x = trajectory.ys[-1]
        return {"y": 4.0 * x[0] + x[1] * x[2]}

    ds = simlab.sensitivity(
        AtRest(),
        {name: [0.0, 1.0] for name in NAMES},
        jnp.zeros(4),
        TS_AT_REST,
        observable=screened,
        method="morris",
        num_samples=64,
        key=jax.random.key(2),
        **FAST,
    )
    mu_star, sigma = ds["y_mu_star"].values, ds["y_sigma"].values
    np.testing.assert_allclose(mu_star[0], 4.0, rtol=1e-10)
    np.testing.assert_allclose(ds["y_mu"].values[0], 4.0, rtol=1e-10)
    np.testing.assert_allclose(sigma[[0, 3]], 0.0, atol=1e-10)
    np.testing.assert_allclose(mu_star[3], 0.0, atol=1e-12)
    assert mu_star[0] > max(mu_star[1], mu_star[2]) and min(mu_star[1], mu_star[2]) > mu_star[3]
    assert np.all(sigma[1:3] > 0.1)
    assert ds.attrs["num_members"] == 64 * (4 + 1)
    design = ds["samples"].values
    direct = SALib.analyze.morris.analyze(
        {"num_vars": 4, "names": list(NAMES), "bounds": [[0.0, 1.0]] * 4},
        design,
        4.0 * design[:, 0] + design[:, 1] * design[:, 2],
        seed=ds.attrs["analysis_seed"],
    )
    np.testing.assert_allclose(mu_star, direct["mu_star"], rtol=1e-12)
    np.testing.assert_allclose(ds["y_mu_star_conf"].values, direct["mu_star_conf"], rtol=1e-12)


def test_store_resumes_and_gives_the_same_indices(tmp_path):
    arguments = dict(
        observable=ishigami,
        num_samples=64,
        key=jax.random.key(3),
        store=tmp_path / "ishigami",
        chunk_size=128,
        **FAST,
    )
    first = simlab.sensitivity(AtRest(), ISHIGAMI_RANGES, jnp.zeros(4), TS_AT_REST, **arguments)
    again = simlab.sensitivity(AtRest(), ISHIGAMI_RANGES, jnp.zeros(4), TS_AT_REST, **arguments)
    assert first.attrs["chunks_resumed"] == 0
    assert again.attrs["chunks_resumed"] == -(-first.attrs["num_members"] // 128)
    np.testing.assert_array_equal(first["f_ST"].values, again["f_ST"].values)


def test_non_finite_outputs_are_refused_with_their_count():
    def log_x1(trajectory):
        return {"log_x1": jnp.log(trajectory.ys[-1, 0])}

    key = jax.random.key(4)
    ranges = {"x1": [-1.0, 1.0], "x2": [0.0, 1.0]}
    design = SALib.sample.sobol.sample(
        {"num_vars": 2, "names": ["x1", "x2"], "bounds": list(ranges.values())},
        16,
        seed=_seeds(key)[0],
    )
    num_bad = int(np.sum(design[:, 0] <= 0))
    assert 0 < num_bad < design.shape[0]
    with pytest.raises(ValueError, match=f"{num_bad} of {design.shape[0]} runs gave non-finite"):
        simlab.sensitivity(
            AtRest(),
            ranges,
            jnp.zeros(4),
            TS_AT_REST,
            observable=log_x1,
            num_samples=16,
            key=key,
            **FAST,
        )


def test_failed_solves_are_reported_with_the_sweep_summary():
    with pytest.raises(ValueError, match=r"20 of 20 runs .*\(20 max_steps_reached\)"):
        simlab.sensitivity(
            IndependentDecays(k1=1.0, k2=1.0, k3=1.0),
            {"k1": [1.0, 2.0], "k2": [1.0, 2.0], "k3": [1.0, 2.0]},
            jnp.ones(3),
            DECAY_TS,
            observable=decay_outputs,
            num_samples=4,
            second_order=False,
            key=jax.random.key(0),
            max_steps=1,
            **FAST,
        )


@pytest.mark.parametrize(
    "ranges, options, match",
    [
        ({"x1": [1.0, 0.0]}, {}, "lower bound must be below the upper"),
        ({"x1": [0.0, 0.0]}, {}, "lower bound must be below the upper"),
        ({"x9": [0.0, 1.0]}, {}, "unknown parameter 'x9'"),
        ({"x1": [0.0]}, {}, "two finite numbers"),
        ({"x1": [0.0, np.inf]}, {}, "two finite numbers"),
        ({}, {}, "non-empty mapping"),
        ({"x1": [0.0, 1.0]}, {"num_samples": 1000}, "power of two .* Use 512 or 1024"),
        ({"x1": [0.0, 1.0]}, {"method": "fast"}, "unknown method"),
        ({"x1": [0.0, 1.0]}, {"method": "morris", "num_levels": 3}, "even number of levels"),
        ({"x1": [0.0, 1.0]}, {"key": None}, "pass key="),
        ({"x1": [0.0, 1.0]}, {"time_outputs": ("g",)}, "does not return"),
        ({"x1": [0.0, 1.0]}, {"time_outputs": ("f",)}, "first axis of 'f'"),
    ],
)
def test_bad_input_is_answered_clearly(ranges, options, match):
    arguments = dict(observable=ishigami, num_samples=16, key=jax.random.key(0), **FAST)
    arguments.update(options)
    with pytest.raises(ValueError, match=match):
        simlab.sensitivity(AtRest(), ranges, jnp.zeros(4), TS_AT_REST, **arguments)


def test_a_stochastic_model_is_refused_with_what_to_run_instead():
    """Sensitivity runs each design point once; for an SDE it says so before any run and
    points to sweep's paths, instead of asking for arguments it does not take."""
    model = simlab.models.OrnsteinUhlenbeck(theta=1.0, mu=0.0, sigma=0.5)
    with pytest.raises(ValueError, match="is stochastic") as refusal:
        simlab.sensitivity(
            model,
            {"theta": [0.5, 2.0]},
            jnp.ones(1),
            TS_AT_REST,
            observable=None,
            num_samples=4,
            key=jax.random.key(0),
            progress=False,
        )
    message = str(refusal.value)
    assert "simlab.sweep" in message and "paths=" in message and "x_mean" in message


def test_parameter_range_outside_the_model_bounds_is_refused():
    with pytest.raises(ValueError, match="must lie in"):
        simlab.sensitivity(
            IndependentDecays(k1=1.0, k2=1.0, k3=1.0),
            {"k1": [-1.0, 1.0]},
            jnp.ones(3),
            DECAY_TS,
            observable=decay_outputs,
            num_samples=4,
            key=jax.random.key(0),
            **FAST,
        )


def bar_groups(ax):
    return [container for container in ax.containers if isinstance(container, BarContainer)]


def test_bar_chart_draws_the_indices_with_their_intervals(ishigami_indices):
    ds = ishigami_indices
    ax = simlab.plot.sensitivity(ds, "f")
    assert isinstance(ax.figure, plt.Figure)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["x1", "x2", "x3"]
    for container, measure in zip(bar_groups(ax), ("S1", "ST"), strict=True):
        heights = [bar.get_height() for bar in container.patches]
        np.testing.assert_allclose(heights, ds[f"f_{measure}"].values)
        segments = container.errorbar.lines[2][0].get_segments()
        half_widths = [0.5 * (top[1] - bottom[1]) for bottom, top in segments]
        np.testing.assert_allclose(half_widths, ds[f"f_{measure}_conf"].values)


def test_time_resolved_indices_are_stacked_areas(decay_indices):
    ds = decay_indices
    ax = simlab.plot.sensitivity(ds, "total")
    assert len(ax.collections) == 3 + 1  # one band per parameter, and the interactions
    assert ax.get_xlabel() == "time"
    for line, row in zip(ax.lines, ds["total_ST"].values, strict=True):
        np.testing.assert_allclose(line.get_xdata(), DECAY_TS[1:])  # t = 0 is undefined
        np.testing.assert_allclose(line.get_ydata(), row[1:])


def test_morris_bars_and_trajectory_selection(decay_indices):
    ds = simlab.sensitivity(
        IndependentDecays(k1=1.0, k2=1.0, k3=0.3),
        DECAY_RANGES,
        jnp.ones(3),
        DECAY_TS,
        observable=None,
        method="morris",
        num_samples=8,
        key=jax.random.key(5),
        **FAST,
    )
    assert ds["trajectory_mu_star"].dims == ("parameter", "time", "component")
    ax = simlab.plot.sensitivity(ds, select={"component": 0})
    np.testing.assert_allclose(
        ax.lines[0].get_ydata(), ds["trajectory_mu_star"].isel(component=0).values[0]
    )
    with pytest.raises(ValueError, match="select="):
        simlab.plot.sensitivity(ds)
    ax = simlab.plot.sensitivity(ds, select={"component": 1, "time": -1})
    np.testing.assert_allclose(
        [bar.get_height() for bar in bar_groups(ax)[0].patches],
        ds["trajectory_mu_star"].isel(component=1, time=-1).values,
    )


def test_plot_refuses_an_unknown_output(ishigami_indices):
    with pytest.raises(ValueError, match="unknown output 'g'"):
        simlab.plot.sensitivity(ishigami_indices, "g")
