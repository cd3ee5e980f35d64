"""Small real data sets shipped with simlab, each with its source."""

import csv
import dataclasses
import importlib.resources

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array


@dataclasses.dataclass(frozen=True)
class LynxHare:
    """Yearly pelt counts of snowshoe hare and Canada lynx (thousands of pelts).

    **Attributes:**

    - `year`: calendar years, shape `(21,)`.
    - `hare`, `lynx`: thousands of pelts traded that year.
    - `ts`: years since the first record, as floats (the time axis for a fit).
    - `observations`: `(21, 2)` array of `(hare, lynx)`, in the state order of
      [`simlab.models.LotkaVolterra`][] (prey, predator).
    - `time_unit`, `value_unit`: units of `ts` and `observations`, for axis labels.
    """

    year: np.ndarray
    hare: np.ndarray
    lynx: np.ndarray
    time_unit: str = "years"
    value_unit: str = "thousands of pelts"

    @property
    def ts(self) -> Array:
        return jnp.asarray(self.year - self.year[0], dtype=float)

    @property
    def observations(self) -> Array:
        return jnp.stack([jnp.asarray(self.hare), jnp.asarray(self.lynx)], axis=-1)


def lynx_hare() -> LynxHare:
    """The Hudson's Bay Company lynx–hare pelt records, 1900–1920.

    Pelts of snowshoe hare (*Lepus americanus*, the prey) and Canada lynx (*Lynx
    canadensis*, the predator) traded each year, in thousands. The numbers are those of
    D. A. MacLulich, "Fluctuations in the numbers of the varying hare (*Lepus
    americanus*)", University of Toronto Studies, Biological Series 43 (1937), as
    tabulated by E. P. Odum, *Fundamentals of Ecology* (1953); they are the classic test
    data for the Lotka–Volterra model (e.g. the Stan case study "Predator-prey population
    dynamics", B. Carpenter, 2018). Pelt counts are a proxy for population sizes, with
    trapping effort and reporting as sources of error.

    **Returns:** a `LynxHare` with `year`, `hare`, `lynx`, and `ts`/`observations` ready
    for [`simlab.fit`][].

    !!! example

        ```python
        import simlab

        data = simlab.datasets.lynx_hare()
        data.observations.shape  # (21, 2)
        ```
    """
    text = importlib.resources.files(__package__).joinpath("lynx_hare.csv").read_text("utf-8")
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    rows = list(csv.DictReader(lines))
    return LynxHare(
        year=np.array([int(row["year"]) for row in rows]),
        hare=np.array([float(row["hare"]) for row in rows]),
        lynx=np.array([float(row["lynx"]) for row in rows]),
    )


# Ghia, Ghia & Shin (1982), Table I: y of the grid points on the vertical centreline (wall
# points y = 0 and 1 left out) and u there, by Reynolds number.
_GHIA_Y = (0.9766, 0.9688, 0.9609, 0.9531, 0.8516, 0.7344, 0.6172, 0.5000,
           0.4531, 0.2813, 0.1719, 0.1016, 0.0703, 0.0625, 0.0547)  # fmt: skip
_GHIA_U = {
    100: (0.84123, 0.78871, 0.73722, 0.68717, 0.23151, 0.00332, -0.13641, -0.20581,
          -0.21090, -0.15662, -0.10150, -0.06434, -0.04775, -0.04192, -0.03717),
    400: (0.75837, 0.68439, 0.61756, 0.55892, 0.29093, 0.16256, 0.02135, -0.11477,
          -0.17119, -0.32726, -0.24299, -0.14612, -0.10338, -0.09266, -0.08186),
    1000: (0.65928, 0.57492, 0.51117, 0.46604, 0.33304, 0.18719, 0.05702, -0.06080,
           -0.10648, -0.27805, -0.38289, -0.29730, -0.22220, -0.20196, -0.18109),
}  # fmt: skip
GHIA_REYNOLDS = tuple(_GHIA_U)


def ghia_cavity_centreline(reynolds: int | float) -> tuple[np.ndarray, np.ndarray]:
    """The lid-driven cavity's reference solution: $u$ on the vertical centreline
    $x = 1/2$ of the unit square with the lid ($y = 1$) sliding at speed 1, from U. Ghia,
    K. N. Ghia and C. T. Shin, "High-Re solutions for incompressible flow using the
    Navier–Stokes equations and a multigrid method", J. Comput. Phys. 48 (1982) 387–411,
    Table I (a 129 × 129 grid at these Reynolds numbers). The values are the paper's, as
    transcribed by public cavity benchmarks; their own accuracy is about $5\\times10^{-3}$
    (the difference at which refined solutions settle, `benchmarks/bench_walled_flow.py`).

    **Arguments:**

    - `reynolds`: 100, 400 or 1000 (`GHIA_REYNOLDS`).

    **Returns:** `(y, u)`, the 15 interior points of the table, from the lid down.

    !!! example

        ```python
        y, u = simlab.datasets.ghia_cavity_centreline(100)
        float(u.min())  # -0.2109, the return flow, at y = 0.4531
        ```
    """
    key = round(float(reynolds))
    if key not in _GHIA_U or not np.isclose(float(reynolds), key):
        raise ValueError(
            f"ghia_cavity_centreline: reynolds must be one of {GHIA_REYNOLDS}; got {reynolds!r}."
        )
    return np.array(_GHIA_Y), np.array(_GHIA_U[key])
