"""The demo: simulate two textbook models, batch one over a parameter, save a figure.

Run with `make demo` (or `python -m simlab.demo`); the figure goes to `results/demo/`.
"""

import pathlib
import sys

import jax
import jax.numpy as jnp


def main(out_dir: str = "results/demo") -> pathlib.Path:
    import matplotlib

    matplotlib.use("Agg")
    import simlab.plot

    ts = jnp.linspace(0.0, 40.0, 400)
    predator_prey = simlab.models.LotkaVolterra(alpha=0.55, beta=0.028, gamma=0.84, delta=0.026)
    trajectory = simlab.simulate(predator_prey, jnp.array([30.0, 4.0]), ts)

    def swing(damping):
        pendulum = simlab.models.DampedPendulum(length=1.0, damping=damping)
        return simlab.simulate(pendulum, jnp.array([2.5, 0.0]), jnp.linspace(0.0, 10.0, 200)).ys

    dampings = jnp.linspace(0.05, 1.0, 6)
    pendulum_runs = jax.jit(jax.vmap(swing))(dampings)

    with simlab.plot.style():
        import matplotlib.pyplot as plt

        figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
        for index, name in enumerate(trajectory.state_names):
            left.plot(ts, trajectory.ys[:, index], label=name)
        left.set(xlabel="time (years)", ylabel="population (thousands)", title="Lotka–Volterra")
        left.legend()
        pendulum_ts = jnp.linspace(0.0, 10.0, 200)
        for damping, run in zip(dampings, pendulum_runs, strict=True):
            right.plot(pendulum_ts, run[:, 0], label=f"c = {float(damping):.2f} /s")
        right.set(xlabel="time (s)", ylabel="angle (rad)", title="Damped pendulum, vmapped over c")
        right.legend(ncols=2)
        path = pathlib.Path(out_dir)
        path.mkdir(parents=True, exist_ok=True)
        figure_path = path / "demo.png"
        figure.savefig(figure_path)
        plt.close(figure)
    print(f"figure written to {figure_path}")
    return figure_path


if __name__ == "__main__":
    main(*sys.argv[1:])
