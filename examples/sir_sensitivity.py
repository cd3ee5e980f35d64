"""Which of the transmission rate, the recovery rate and the initial infected fraction drive
the time and the size of an epidemic's peak? Sobol' indices of the SIR model.

Run: `python examples/sir_sensitivity.py` (writes sir_sensitivity.png next to where it runs).
"""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

import simlab  # noqa: E402
import simlab.plot  # noqa: E402

RANGES = {
    "beta": [0.25, 0.5],  # transmission rate, per day
    "gamma": [0.05, 0.15],  # recovery rate, per day (R0 = beta / gamma from 1.7 to 10)
    "I": [1e-4, 1e-2],  # initial infected fraction of the population
}
DAYS = jnp.linspace(0.0, 300.0, 1501)


def peak(trajectory):
    """The time (days) and the height (fraction infected) of the epidemic's peak."""
    infected = trajectory.component("I")
    top = jnp.argmax(infected)
    return {"peak_time": trajectory.ts[top], "peak_size": infected[top]}


def main() -> None:
    model = simlab.models.SIR(beta=0.3, gamma=0.1, population=1.0)
    indices = simlab.sensitivity(
        model,
        RANGES,
        jnp.array([0.99, 0.01, 0.0]),  # S(0) = 0.99; I(0) is varied
        DAYS,
        observable=peak,
        num_samples=2**10,
        key=jax.random.key(0),
        solver="tsit5",
        integrator="lean",
    )
    for output in ("peak_time", "peak_size"):
        print(output)
        for name in RANGES:
            row = indices.sel(parameter=name)
            print(
                f"  {name:>5}: S1 = {float(row[f'{output}_S1']):.3f} "
                f"± {float(row[f'{output}_S1_conf']):.3f}, "
                f"ST = {float(row[f'{output}_ST']):.3f} ± {float(row[f'{output}_ST_conf']):.3f}"
            )
    with simlab.plot.style():
        figure, axes = plt.subplots(1, 2, figsize=(9, 3.5), sharey=True)
        simlab.plot.sensitivity(indices, "peak_time", ax=axes[0])
        simlab.plot.sensitivity(indices, "peak_size", ax=axes[1])
        axes[1].set_ylabel("")
        figure.savefig("sir_sensitivity.png")


if __name__ == "__main__":
    main()
