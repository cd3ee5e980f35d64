"""Multi-start fits: sharded over devices, and compacted between chunks, change no start."""

from typing import ClassVar

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from jaxtyping import Array, Float

import simlab
from simlab._fit import _multistart
from simlab.models import AbstractODEModel, parameter


class Oscillator(AbstractODEModel):
    """x'' = -frequency² x: its least-squares loss in the frequency has many local minima,
    so the starts end in different places after different numbers of steps."""

    frequency: Float[Array, ""] = parameter(lower=0.0)
    state_names: ClassVar[tuple[str, ...]] = ("x", "v")

    def __call__(self, t, y, args):
        return jnp.stack([y[1], -(self.frequency**2) * y[0]])


TS = jnp.linspace(0.0, 10.0, 41)
NUM_STARTS = 16


@pytest.fixture(scope="module")
def observations():
    clean = np.cos(3.0 * np.asarray(TS))
    return (clean + 0.05 * np.asarray(jr.normal(jr.key(0), clean.shape)))[:, None]


def multi_start(observations, **settings):
    return simlab.fit(
        Oscillator(frequency=1.0),
        TS,
        observations,
        y0=jnp.array([1.0, 0.0]),
        params=["frequency"],
        observe=["x"],
        noise_scale=0.05,
        starts=NUM_STARTS,
        bounds={"frequency": (0.2, 6.0)},
        key=jr.key(1),
        throw=False,
        **settings,
    )


@pytest.fixture(scope="module")
def unsharded(observations):
    return multi_start(observations)


def assert_same_starts(result, reference):
    np.testing.assert_allclose(result.starts.loss, reference.starts.loss, rtol=1e-10)
    np.testing.assert_allclose(
        result.starts.params["frequency"], reference.starts.params["frequency"], rtol=1e-10
    )
    np.testing.assert_array_equal(result.starts.converged, reference.starts.converged)
    assert int(result.starts.best) == int(reference.starts.best)
    np.testing.assert_allclose(result.params["frequency"], reference.params["frequency"], 1e-10)
    np.testing.assert_allclose(result.covariance, reference.covariance, rtol=1e-8)


def test_sharded_multi_start_equals_unsharded(observations, unsharded):
    devices = jax.devices()[:4]
    sharded = multi_start(observations, devices=devices)
    assert_same_starts(sharded, unsharded)
    # The starts really were laid out over the four devices.
    assert len(sharded.starts.loss.sharding.device_set) == 4
    # The global optimum is among the starts' end points.
    assert np.sum(np.abs(np.asarray(unsharded.starts.params["frequency"]) - 3.0) < 0.05) >= 1
    with pytest.raises(ValueError, match="starts=16 is not divisible by 3 devices"):
        multi_start(observations, devices=jax.devices()[:3])


def test_gathering_unfinished_starts_changes_no_start(observations, unsharded, monkeypatch):
    # Small chunks and batches, so that this small fit is gathered into several batches,
    # ordered by solver steps, several times.
    monkeypatch.setattr(_multistart, "CHUNK_STEPS", 2)
    monkeypatch.setattr(_multistart, "BATCH_SIZE", 4)
    sizes, advance_all = [], _multistart._advance_all

    def recording(problem, stepper, carries, stop_step):
        sizes.append(int(carries.step.shape[0]))
        return advance_all(problem, stepper, carries, stop_step)

    monkeypatch.setattr(_multistart, "_advance_all", recording)
    # Sharded too: each gathered batch is laid out over the devices again.
    compacted = multi_start(observations, devices=jax.devices()[:4])
    assert_same_starts(compacted, unsharded)
    assert set(sizes) == {4} and len(sizes) > NUM_STARTS // 4


def test_one_vmapped_loop_under_jit_equals_the_compacted_run(observations, unsharded):
    # Under jax.jit the data are traced: no host loop, one loop over all starts.
    losses = jax.jit(lambda obs: multi_start(obs).starts.loss)(jnp.asarray(observations))
    np.testing.assert_allclose(losses, unsharded.starts.loss, rtol=1e-10)


def test_batch_size_is_a_device_multiple():
    assert _multistart.batch_size(2000, 1) == _multistart.BATCH_SIZE
    assert _multistart.batch_size(1000, 24) == 144
    assert _multistart.batch_size(100, 4) == 100
    assert _multistart.batch_size(24, 8) == 24


class Blowup(AbstractODEModel):
    """y' = rate · y², y(0) = 1: y = 1 / (1 - rate · t) blows up at t = 1 / rate, so over
    t ≤ 10 the model cannot be simulated for rate ≥ 0.1."""

    rate: Float[Array, ""] = parameter(lower=0.0)
    state_names: ClassVar[tuple[str, ...]] = ("y",)

    def __call__(self, t, y, args):
        return self.rate * y**2


BLOWUP_TS = jnp.linspace(0.0, 10.0, 11)
BLOWUP_BOUNDS = (1e-3, 1.0)  # log-uniform starts: a third of the decades blow up


def blowup_fit(starts=8):
    truth = 1.0 / (1.0 - 0.05 * BLOWUP_TS)
    return simlab.fit(
        Blowup(rate=0.01),
        BLOWUP_TS,
        truth[:, None],
        y0=jnp.array([1.0]),
        params=["rate"],
        starts=starts,
        bounds={"rate": BLOWUP_BOUNDS},
        key=jr.key(0),
        throw=False,
    )


@pytest.mark.accelerator
def test_starts_that_cannot_be_simulated_are_drawn_again():
    result = blowup_fit()
    lower, upper = BLOWUP_BOUNDS
    unit = np.clip(np.asarray(_multistart.latin_hypercube(jr.key(0), 8, 1))[:, 0], 1e-6, 1 - 1e-6)
    first_draw = lower * (upper / lower) ** unit
    blows_up = first_draw * BLOWUP_TS[-1] >= 1.0
    # Latin hypercube strata put at least two of eight starts in the blow-up third.
    assert np.sum(blows_up) >= 2
    draws = np.asarray(result.starts.draws)
    initial = np.asarray(result.starts.initial["rate"])
    np.testing.assert_array_equal(draws > 1, blows_up)
    np.testing.assert_allclose(initial[~blows_up], first_draw[~blows_up], rtol=1e-5)
    assert f"{np.sum(blows_up)} drawn again" in repr(result)
    assert np.all(initial * BLOWUP_TS[-1] < 1.0)  # every start now simulates...
    # ... and so the redrawn ones too reach the one minimum, rate = 0.05 (in float32 a
    # start drawn at the lower bound, where the sine map is flat, may stay there).
    redrawn = draws > 1
    np.testing.assert_allclose(np.asarray(result.starts.params["rate"])[redrawn], 0.05, rtol=1e-4)
    assert np.all(np.asarray(result.starts.converged)[redrawn])
    assert float(result.params["rate"]) == pytest.approx(0.05, rel=1e-4)
    # Under jax.jit (one vmapped loop) the same starts are drawn again the same way.
    traced = jax.jit(lambda: blowup_fit().starts)()
    np.testing.assert_array_equal(traced.draws, draws)
    np.testing.assert_allclose(traced.initial["rate"], initial, rtol=1e-5)
