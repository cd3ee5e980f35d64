"""Figures of the SDE page: a fan chart of Ornstein–Uhlenbeck paths and their final
states against the stationary density. Run: `python docs/scripts/sde_figures.py`."""

import pathlib

import jax
import jax.numpy as jnp
import numpy as np

import simlab
import simlab.plot

jax.config.update("jax_enable_x64", True)
FIGURES = pathlib.Path(__file__).parents[1] / "figures"

model = simlab.models.OrnsteinUhlenbeck(theta=1.0, mu=0.5, sigma=0.6)
ts = jnp.linspace(0.0, 6.0, 121)


def path(key):
    return simlab.simulate(model, jnp.array([2.0]), ts, key=key, adaptive=False, dt0=0.01).ys


paths = jax.jit(jax.vmap(path))(jax.random.split(jax.random.key(0), 4000))
ax = simlab.plot.fan_chart(ts, paths, value_label="x")
ax.set_title("Ornstein–Uhlenbeck: median, 50 % and 90 % bands, five paths")
ax.figure.savefig(FIGURES / "sde_fan_chart.png", dpi=110, bbox_inches="tight")

variance = 0.6**2 / 2
ax = simlab.plot.terminal_histogram(
    paths[:, -1, 0],
    density=lambda x: np.exp(-((x - 0.5) ** 2) / (2 * variance)) / np.sqrt(2 * np.pi * variance),
    density_label="N(mu, sigma² / 2 theta)",
    value_label="x at t = 6",
)
ax.figure.savefig(FIGURES / "sde_ou_histogram.png", dpi=110, bbox_inches="tight")
