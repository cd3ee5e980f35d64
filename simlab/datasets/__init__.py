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
