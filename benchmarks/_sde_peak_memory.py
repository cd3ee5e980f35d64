"""The peak resident memory of a streamed ensemble statistic: the mean and variance of an
Ornstein–Uhlenbeck process at `T` over `PATHS` Euler–Maruyama paths, from `simlab.sweep`
with `paths=` (reduced chunk by chunk, no path kept).

Run by bench_sde.py in a fresh interpreter per path count, so that each peak is its own:
`python _sde_peak_memory.py SETTINGS_JSON` prints as JSON the peak resident set in bytes
and the statistics.
"""

import json
import pathlib
import sys

import jax
import jax.numpy as jnp

import simlab


def final_x(trajectory):
    return {"x": trajectory.ys[-1, 0]}


def _peak_resident_bytes() -> int:
    """This process's peak resident set, `VmHWM` (Linux). Not `getrusage`'s `ru_maxrss`,
    which a child started by fork and exec inherits from its parent: it would report the
    benchmark process's own peak."""
    status = pathlib.Path("/proc/self/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024  # kB


def main(settings: dict) -> None:
    model = simlab.models.OrnsteinUhlenbeck(theta=settings["theta"], mu=settings["mu"], sigma=0.0)
    result = simlab.sweep(
        model,
        {"sigma": jnp.array([settings["sigma"]])},
        jnp.zeros(1),
        jnp.array([0.0, settings["t1"]]),
        observable=final_x,
        paths=settings["paths"],
        key=jax.random.key(0),
        chunk_size=settings["chunk_size"],
        solver="euler_maruyama",
        adaptive=False,
        dt0=settings["dt"],
        progress=False,
    )
    peak = _peak_resident_bytes()
    moments = {name: float(result.observables[f"x_{name}"][0]) for name in ("mean", "variance")}
    print(json.dumps({"peak_rss_bytes": peak, **moments}))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
