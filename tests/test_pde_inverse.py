"""Inverse problem: a spatially varying diffusivity recovered from noisy snapshots by `fit`."""

import jax.numpy as jnp
import numpy as np
import pytest

import simlab
from simlab.models import AbstractODEModel, parameter

GRID = simlab.Grid((16,), extent=1.0, boundary="neumann")
TRUE_LAYERS = np.array([0.02, 0.05, 0.03, 0.06])
TS = jnp.linspace(0.0, 1.0, 6)
NOISE = 1e-3


class LayeredHeat(AbstractODEModel):
    """Heat diffusion through layers, each with its own diffusivity (a piecewise-constant
    field: one parameter per layer of equal thickness)."""

    layer_diffusivity: jnp.ndarray = parameter(lower=0.0, unit="length²/time")
    grid: simlab.Grid  # an ordinary field: its boundary values are array leaves

    state_names = ()

    @property
    def state_shape(self):
        return self.grid.shape

    def __call__(self, t, y, args):
        cells_per_layer = self.grid.shape[0] // self.layer_diffusivity.shape[0]
        field = jnp.repeat(self.layer_diffusivity, cells_per_layer)
        return simlab.grid.diffusion(y, field, self.grid)


@pytest.mark.slow
def test_layered_diffusivity_is_recovered_within_its_standard_errors():
    (x,) = GRID.coordinates()
    y0 = jnp.stack([jnp.exp(-40 * (x - centre) ** 2) for centre in (0.3, 0.7)])
    options = dict(solver="rk4", adaptive=False, dt0=0.02)
    truth = LayeredHeat(layer_diffusivity=TRUE_LAYERS, grid=GRID)
    clean = jnp.stack([simlab.simulate(truth, y, TS, **options).ys for y in y0])
    noisy = clean + NOISE * np.random.default_rng(0).standard_normal(clean.shape)

    start = LayeredHeat(layer_diffusivity=jnp.full(4, 0.04), grid=GRID)
    result = simlab.fit(
        start,
        TS,
        noisy,
        y0=y0,
        params=["layer_diffusivity"],
        noise_scale=NOISE,
        simulate_options=options,
    )
    fitted = np.asarray(result.params["layer_diffusivity"])
    stderr = np.asarray(result.stderr["layer_diffusivity"])
    assert bool(result.converged)
    np.testing.assert_array_less(np.abs(fitted - TRUE_LAYERS), 4 * stderr)
    np.testing.assert_allclose(fitted, TRUE_LAYERS, rtol=0.1)
    # The noise level is recovered too: the residuals are the noise, nothing systematic.
    assert 0.7 < float(np.sqrt(result.noise_variance)) < 1.3
