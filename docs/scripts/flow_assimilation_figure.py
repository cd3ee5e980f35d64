"""Makes docs/figures/flow_assimilation.png: 4D-Var on the periodic flow, the set-up of
tests/test_flow_assimilation.py at 5% noise (truth, observations, recovery).

Run from the repository root: `python docs/scripts/flow_assimilation_figure.py` (about a
minute on two CPU cores).
"""

import pathlib
import sys

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

ROOT = pathlib.Path(__file__).parents[2]
sys.path.insert(0, str(ROOT / "tests"))

import test_flow_assimilation as assimilation  # noqa: E402

import simlab  # noqa: E402


def main():
    final = simlab.simulate(
        assimilation.MODEL, assimilation.TRUTH, assimilation.TS, **assimilation.SOLVE
    ).ys[-1]
    every = assimilation.EVERY
    exact = final[::every, ::every]
    sigma = 0.05 * float(jnp.sqrt(jnp.mean(final**2)))
    noisy = exact + sigma * jax.random.normal(jax.random.PRNGKey(2), exact.shape)
    result = assimilation.assimilate(noisy.ravel(), sigma)
    error = float(
        jnp.linalg.norm(result.y0 - assimilation.TRUTH) / jnp.linalg.norm(assimilation.TRUTH)
    )
    limit = float(jnp.max(jnp.abs(assimilation.TRUTH)))
    extent = (0.0, 2 * np.pi, 0.0, 2 * np.pi)
    figure, axes = plt.subplots(1, 3, figsize=(12, 4), constrained_layout=True)
    style = {"cmap": "RdBu_r", "vmin": -limit, "vmax": limit, "origin": "lower", "extent": extent}
    axes[0].imshow(np.asarray(assimilation.TRUTH).T, **style)
    axes[0].set_title("truth ω₀")
    cells = np.full(final.shape, np.nan)
    cells[::every, ::every] = np.asarray(noisy)
    axes[1].imshow(cells.T, **style)
    axes[1].set_title(f"observed ω(1): every {every}nd point, 5% noise")
    image = axes[2].imshow(np.asarray(result.y0).T, **style)
    axes[2].set_title(f"4D-Var ω₀ (relative L2 error {error:.2f})")
    for ax in axes:
        ax.set_xlabel("x")
    axes[0].set_ylabel("y")
    figure.colorbar(image, ax=axes, shrink=0.8, label="vorticity")
    figure.savefig(ROOT / "docs" / "figures" / "flow_assimilation.png", bbox_inches="tight")


if __name__ == "__main__":
    main()
