"""Redefined functions: a checkpoint or store is reused only by what computes the same.

A model class, an observation function or an event condition redefined under the same name
(a notebook cell rerun with an edit, a global changed between runs) is a different
computation; the results of the old one are refused, naming what changed.
"""

import json
import os
import pathlib
import subprocess
import sys
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import Array, Float

import simlab
from simlab.io._fingerprint import computation_digest
from simlab.models import AbstractODEModel, parameter

HERE = pathlib.Path(__file__).parent
TS = jnp.linspace(0.0, 2.0, 9)
Y0 = jnp.array([1.0])


class Decay(AbstractODEModel):
    """dy/dt = -k y."""

    k: Float[Array, ""] = parameter(lower=0.0)
    state_names: ClassVar[tuple[str, ...]] = ("y",)

    def __call__(self, t, y, args):
        return -self.k * y


LinearDecay = Decay


class Decay(AbstractODEModel):  # noqa: F811 (the same name, as a rerun cell redefines it)
    """dy/dt = -k y²."""

    k: Float[Array, ""] = parameter(lower=0.0)
    state_names: ClassVar[tuple[str, ...]] = ("y",)

    def __call__(self, t, y, args):
        return -self.k * y**2


QuadraticDecay = Decay

OBSERVED_SCALE = 1.0  # a global that `observe_scaled` reads


def observe_scaled(y):
    return OBSERVED_SCALE * y


def _decay_fit(model_class, checkpoint):
    observations = jnp.exp(-0.7 * TS)[:, None]  # y(t) = exp(-k t) with k = 0.7
    return simlab.fit(
        model_class(k=0.3),
        TS,
        observations,
        y0=Y0,
        params=["k"],
        observe=observe_scaled,
        max_steps=30,
        checkpoint=checkpoint,
        checkpoint_every=5,
    )


@pytest.fixture(scope="module")
def linear_checkpoint(tmp_path_factory) -> bytes:
    """The checkpoint of a finished fit of the linear decay (the same fit resuming from
    its checkpoint is tested in test_faults.py)."""
    path = tmp_path_factory.mktemp("fit") / "fit.npz"
    fitted = _decay_fit(LinearDecay, path)
    np.testing.assert_allclose(fitted.params["k"], 0.7, rtol=1e-6)
    return path.read_bytes()


def _checkpoint(tmp_path, linear_checkpoint: bytes):
    path = tmp_path / "fit.npz"
    path.write_bytes(linear_checkpoint)
    return path


def test_a_checkpoint_of_a_model_class_redefined_under_its_name_is_refused(
    tmp_path, linear_checkpoint
):
    path = _checkpoint(tmp_path, linear_checkpoint)
    assert LinearDecay.__qualname__ == QuadraticDecay.__qualname__
    with pytest.raises(ValueError, match=r"different problem \(differs in: model\)"):
        _decay_fit(QuadraticDecay, path)


def test_a_checkpoint_whose_observe_reads_a_changed_global_is_refused(
    tmp_path, linear_checkpoint, monkeypatch
):
    path = _checkpoint(tmp_path, linear_checkpoint)
    monkeypatch.setattr(sys.modules[__name__], "OBSERVED_SCALE", 2.0)
    with pytest.raises(ValueError, match=r"different problem \(differs in: observe\)"):
        _decay_fit(LinearDecay, path)


class Growth(AbstractODEModel):
    """dy/dt = k y."""

    k: Float[Array, ""] = parameter(lower=0.0)
    state_names: ClassVar[tuple[str, ...]] = ("y",)

    def __call__(self, t, y, args):
        return self.k * y


ExponentialGrowth = Growth


class Growth(AbstractODEModel):  # noqa: F811 (the same name, as a rerun cell redefines it)
    """dy/dt = -k y: the sign edited."""

    k: Float[Array, ""] = parameter(lower=0.0)
    state_names: ClassVar[tuple[str, ...]] = ("y",)

    def __call__(self, t, y, args):
        return -self.k * y


ExponentialDecay = Growth
RATES = {"k": np.array([0.5, 1.0])}
SWEEP_TS = jnp.linspace(0.0, 1.0, 3)


def final_y(trajectory):
    return {"final_y": trajectory.ys[-1, 0]}


def event_time(trajectory):
    return {"event_time": trajectory.event_time}


def _growth_sweep(model_class, store, observable=final_y, **settings):
    return simlab.sweep(
        model_class(k=1.0),
        RATES,
        Y0,
        SWEEP_TS,
        observable=observable,
        chunk_size=4,
        progress=False,
        store=store,
        **settings,
    )


def test_a_store_of_a_model_class_redefined_under_its_name_is_refused(tmp_path):
    path = tmp_path / "sweep.zarr"
    grown = _growth_sweep(ExponentialGrowth, path)
    np.testing.assert_allclose(grown.observables["final_y"], np.exp([0.5, 1.0]), rtol=1e-5)
    assert _growth_sweep(ExponentialGrowth, path).stats["chunks_computed"] == 0
    with pytest.raises(ValueError, match=r"different sweep \(differs in: model\)"):
        _growth_sweep(ExponentialDecay, path)


def _reaching(level):
    """The first time y rises through `level` (the condition closes over it)."""

    def reached(t, y, args):
        return y[0] - level

    return simlab.Event(reached, direction=1, terminate=False)


def test_a_store_whose_event_threshold_changed_is_refused(tmp_path):
    path = tmp_path / "sweep.zarr"
    timed = _growth_sweep(ExponentialGrowth, path, event_time, event=_reaching(1.2))
    # y = exp(k t) reaches the level at t = log(level) / k.
    np.testing.assert_allclose(timed.observables["event_time"], np.log(1.2) / RATES["k"], rtol=1e-6)
    with pytest.raises(ValueError, match=r"different sweep \(differs in: event\)"):
        _growth_sweep(ExponentialGrowth, path, event_time, event=_reaching(1.5))


# --- the digest: what a function computes, the same in every process ----------------------


def test_identities_are_the_same_in_a_fresh_process():
    import _digest_worker

    worker = subprocess.run(
        [sys.executable, str(HERE / "_digest_worker.py")],
        # The checkout under test first, as in this process, then the worker's own folder.
        env={
            **os.environ,
            "JAX_PLATFORMS": "cpu",
            "PYTHONPATH": f"{HERE.parent}{os.pathsep}{HERE}",
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert worker.returncode == 0, worker.stderr[-3000:]
    assert json.loads(worker.stdout) == _digest_worker.identities()


def test_a_digest_sees_every_captured_value():
    y = jax.ShapeDtypeStruct((3,), jnp.float64)

    def digest(function):
        return computation_digest(function, y)

    table = np.zeros(2000)  # printed, a jaxpr would abbreviate it
    edited = table.copy()
    edited[1000] = 1.0
    assert digest(lambda y: y + jnp.sum(table)) != digest(lambda y: y + jnp.sum(edited))
    assert digest(lambda y: y * 1.2) != digest(lambda y: y * np.nextafter(1.2, 2.0))
    keys = jax.random.key(0), jax.random.key(1)  # typed keys, hashed by their key data
    noisy = [lambda y, key=key: y + jax.random.normal(key, y.shape) for key in keys]
    assert digest(noisy[0]) != digest(noisy[1])


def _reaction(combine):
    def reaction(fields, rates):
        u, v = fields
        return combine(u, v), -v

    return reaction


def test_a_digest_sees_the_body_of_a_pallas_kernel():
    """A printed jaxpr names a Pallas kernel without its body: here the reaction."""
    padded = jax.ShapeDtypeStruct((2, 10, 10), jnp.float64)

    def digest(reaction_fn):
        def tendency(padded):
            return simlab.kernels.reaction_diffusion(
                padded, (1.0, 1.0), (0.2, 0.1), reaction_fn=reaction_fn
            )

        return computation_digest(tendency, padded)

    assert digest(_reaction(jnp.multiply)) == digest(_reaction(jnp.multiply))
    assert digest(_reaction(jnp.multiply)) != digest(_reaction(jnp.add))
