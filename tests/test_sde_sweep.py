"""Sweeps of stochastic models over parameters × paths: a path depends only on the key and
its number, streamed statistics equal those of all the paths, and Ornstein–Uhlenbeck
moments come out as the closed form says.

Statistical assertions use fixed keys; each states the confidence of its tolerance.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simlab
from simlab._sweep._statistics import QUANTILE_BINS
from simlab.models import OrnsteinUhlenbeck
from simlab.parallel import member_mesh

OU = OrnsteinUhlenbeck(theta=1.0, mu=0.3, sigma=0.5)
Y0 = jnp.array([2.3])
TS = jnp.linspace(0.0, 2.0, 5)
THETAS = np.array([0.5, 2.0])
KEY = jax.random.key(21)
SOLVE = dict(adaptive=False, dt0=0.05, progress=False)
ONE_DEVICE = dict(chunk_size=48, mesh=member_mesh(jax.devices()[:1]))


def ou_sweep(paths, **settings):
    """OU over theta × `paths` paths (chunks of 16 unless told), every save time kept."""
    settings = SOLVE | dict(chunk_size=16) | settings
    return simlab.sweep(OU, {"theta": THETAS}, Y0, TS, paths=paths, key=KEY, **settings)


@pytest.fixture(scope="module")
def all_paths():
    """40 paths per theta, kept: shape (theta, path, time, component)."""
    result = ou_sweep(40, keep_paths=True)
    return result.observables["trajectory"].reshape(THETAS.size, 40, TS.size, 1)


def test_a_path_is_the_same_in_any_chunking_on_any_devices_and_alone(all_paths):
    """Chunks of 16 over four devices, or of 48 on one device, give the same paths; path p
    at each theta is `simulate(..., key=fold_in(key, p))`, bit for bit."""
    one_device = ou_sweep(40, keep_paths=True, **ONE_DEVICE)
    assert np.array_equal(one_device.observables["trajectory"].reshape(all_paths.shape), all_paths)
    for theta_index, path in [(0, 0), (1, 7), (1, 39)]:
        model = OrnsteinUhlenbeck(theta=THETAS[theta_index], mu=0.3, sigma=0.5)
        alone = simlab.simulate(
            model, Y0, TS, key=jax.random.fold_in(KEY, path), adaptive=False, dt0=0.05
        )
        assert np.array_equal(all_paths[theta_index, path], alone.ys)


def test_kept_paths_label_the_path_dimension_and_differ_between_paths(all_paths):
    dataset = ou_sweep(40, keep_paths=True).to_xarray()
    assert dataset["trajectory"].dims == ("theta", "path", "time", "component")
    np.testing.assert_array_equal(dataset["path"], np.arange(40))
    assert np.unique(all_paths[0, :, -1, 0]).size == 40


def test_a_resumed_store_holds_the_same_paths(all_paths, tmp_path):
    """Chunk 2 of 5 is marked unfinished in the store; rerunning computes that chunk alone
    and returns the same paths."""
    import zarr

    store = tmp_path / "paths.zarr"
    ou_sweep(40, keep_paths=True, store=store)
    group = zarr.open_group(store, mode="r+")
    group["status"][32:48] = -1
    resumed = ou_sweep(40, keep_paths=True, store=store)
    assert resumed.stats["chunks_computed"] == 1 and resumed.stats["chunks_resumed"] == 4
    np.testing.assert_allclose(
        resumed.observables["trajectory"].reshape(all_paths.shape), all_paths, rtol=1e-13
    )


def test_streamed_statistics_equal_those_of_all_paths(all_paths):
    """Means and variances streamed over chunks of 16 equal NumPy's over all 40 paths (to
    float64 roundoff), whatever the chunking; each quantile lies within its stated bound of
    `numpy.quantile` (the histogram depends on the chunking, the bound holds for any), and
    the bound is below 2/1023 of the range of the paths."""
    streamed = ou_sweep(40, quantiles=(0.05, 0.5, 0.95)).observables
    rechunked = ou_sweep(40, quantiles=(0.05, 0.5, 0.95), **ONE_DEVICE).observables
    np.testing.assert_array_equal(streamed["trajectory_count"], 40)
    np.testing.assert_allclose(streamed["trajectory_mean"], all_paths.mean(axis=1), rtol=1e-12)
    np.testing.assert_allclose(
        streamed["trajectory_variance"], all_paths.var(axis=1, ddof=1), rtol=1e-10, atol=1e-15
    )
    for name in ("trajectory_mean", "trajectory_variance"):
        np.testing.assert_allclose(rechunked[name], streamed[name], rtol=1e-10, atol=1e-15)
    exact = np.moveaxis(np.quantile(all_paths, [0.05, 0.5, 0.95], axis=1), 0, 1)
    for stats in (streamed, rechunked):
        bound = stats["trajectory_quantile_bound"][:, None]
        assert np.all(np.abs(stats["trajectory_quantiles"] - exact) <= bound)
    bound = streamed["trajectory_quantile_bound"]
    spread = np.ptp(all_paths, axis=1)
    assert np.all(bound[:, 1:] < 2 * spread[:, 1:] / (QUANTILE_BINS - 1))


def test_the_doubling_histogram_keeps_quantiles_of_spreading_values():
    """Values whose range grows a thousandfold chunk by chunk (the bins double about ten
    times): every quantile stays within its bound of NumPy's, which stays below 2/1023 of
    the range of the values."""
    from simlab._sweep._statistics import StreamingStatistics

    rng = np.random.default_rng(0)
    levels = (0.0, 0.01, 0.3, 0.5, 0.99, 1.0)
    chunks = [rng.standard_cauchy((50, 3)) * 10.0**k for k in range(4)]
    stream = StreamingStatistics(2, (3,), levels)
    for chunk in chunks:
        stream.add(np.repeat([0, 1], 25), chunk)
    results = stream.results("x")
    values = np.concatenate(chunks).reshape(4, 2, 25, 3).transpose(1, 0, 2, 3).reshape(2, 100, 3)
    exact = np.moveaxis(np.quantile(values, levels, axis=1), 0, 1)
    bound = results["x_quantile_bound"]
    assert np.all(np.abs(results["x_quantiles"] - exact) <= bound[:, None])
    assert np.all(bound < 2 * np.ptp(values, axis=1) / (QUANTILE_BINS - 1))
    np.testing.assert_allclose(results["x_mean"], values.mean(axis=1), rtol=1e-10)


def test_ornstein_uhlenbeck_moments_from_streamed_statistics():
    """From x0 = 2.3, the mean mu + (x0 - mu) e^{-theta t} and variance
    sigma^2 (1 - e^{-2 theta t}) / (2 theta) at t = 6 (stationary to 1e-5 for theta = 1, 2),
    from 512 paths per theta: the mean within 4 standard errors, the variance within 4
    standard deviations of the sample variance, sigma^2 sqrt(2 / (n - 1)) / (2 theta) (each
    99.99 %, the four together at least 99.97 %)."""
    thetas, n, t = np.array([1.0, 2.0]), 512, 6.0
    result = simlab.sweep(
        OU,
        {"theta": thetas},
        Y0,
        jnp.array([0.0, t]),
        paths=n,
        key=jax.random.key(3),
        observable=final_x,
        **SOLVE,
    )
    variance = 0.5**2 * (1 - np.exp(-2 * thetas * t)) / (2 * thetas)
    mean = 0.3 + 2.0 * np.exp(-thetas * t)
    stats = result.observables
    assert np.all(np.abs(stats["x_mean"] - mean) < 4 * np.sqrt(variance / n))
    assert np.all(np.abs(stats["x_variance"] - variance) < 4 * variance * np.sqrt(2 / (n - 1)))


def final_x(trajectory):
    return {"x": trajectory.ys[-1, 0]}


@pytest.mark.parametrize(
    ("model", "settings", "message"),
    [
        (OU, dict(key=KEY), "pass paths="),
        (OU, dict(paths=4), "pass paths=.*key=jax.random.key"),
        (OU, dict(paths=4, key=KEY, store="unused.zarr"), "pass keep_paths=True"),
        (OU, dict(paths=4, key=KEY, quantiles=(5, 50)), r"levels in \[0, 1\]"),
        (OU, dict(paths=0, key=KEY), "paths"),
        (OU, dict(paths=2**32, key=KEY), "paths must be at most"),
        (
            simlab.models.LotkaVolterra(alpha=0.5, beta=0.02, gamma=0.8, delta=0.02),
            dict(paths=4),
            "deterministic: leave them out",
        ),
    ],
)
def test_bad_paths_keys_and_quantiles_are_refused(model, settings, message):
    y0 = Y0 if model is OU else jnp.array([10.0, 5.0])
    with pytest.raises(ValueError, match=message):
        simlab.sweep(model, {model.parameter_names()[0]: THETAS}, y0, TS, **SOLVE, **settings)


def test_paths_that_need_more_than_max_steps_fail_as_in_an_ode_sweep():
    """Save times every 0.02 with steps of at most 0.05 take one step per save interval,
    100 in all: with max_steps=99 every path (kept, or reduced to its point's statistics)
    reports max_steps_reached and gives NaN, as the members of an ODE sweep do; with
    max_steps=100 all succeed."""
    ts = jnp.linspace(0.0, 2.0, 101)
    settings = dict(adaptive=False, dt0=0.05, progress=False)

    def ou(max_steps, keep_paths):
        return simlab.sweep(
            OU,
            {"theta": THETAS},
            Y0,
            ts,
            paths=4,
            key=KEY,
            keep_paths=keep_paths,
            observable=final_x,
            max_steps=max_steps,
            **settings,
        )

    lotka_volterra = simlab.models.LotkaVolterra(alpha=0.5, beta=0.02, gamma=0.8, delta=0.02)
    ode = simlab.sweep(
        lotka_volterra, {"alpha": THETAS}, jnp.array([10.0, 5.0]), ts, max_steps=99, **settings
    )
    kept, reduced = ou(99, keep_paths=True), ou(99, keep_paths=False)
    for result, name in [(ode, "trajectory"), (kept, "x"), (reduced, "x_mean")]:
        failures = [failure["status"] for failure in result.failures()]
        assert failures == ["max_steps_reached"] * result.num_members
        assert np.isnan(result.observables[name]).all()
    enough = ou(100, keep_paths=False)
    assert enough.num_failed == 0 and np.all(enough.observables["x_count"] == 4)
