"""`sensitivity`: which parameters drive a model's outputs (Sobol' and Morris indices).

The sampling designs and the estimators are SALib's; the model runs are a `sweep`.
"""

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import diffrax as dfx
import jax.random as jr
import numpy as np
from jax.sharding import Mesh

from ._misc import Integer, RealNumber, as_count
from ._simulate import DEFAULT_MAX_STEPS
from ._sweep import sweep
from ._sweep._members import _check_names
from .integrate._sde import is_stochastic
from .models._base import AbstractModel

METHODS = ("sobol", "morris")
SOBOL_INDICES = ("S1", "S1_conf", "ST", "ST_conf")
SOBOL_SECOND_ORDER = ("S2", "S2_conf")
MORRIS_MEASURES = ("mu", "mu_star", "sigma", "mu_star_conf")


def sensitivity(
    model: AbstractModel,
    ranges: Mapping[str, Sequence[float]],
    y0: Any,
    ts: Any,
    *,
    observable: Callable[[Any], Mapping[str, Any]] | None,
    method: str = "sobol",
    num_samples: Integer,
    key: Any,
    second_order: bool = True,
    num_levels: Integer = 4,
    num_resamples: Integer = 100,
    conf_level: float = 0.95,
    time_outputs: Sequence[str] = (),
    chunk_size: Integer | None = None,
    mesh: Mesh | None = None,
    store: Any = None,
    progress: bool | None = None,
    solver: str | dfx.AbstractSolver | None = None,
    rtol: RealNumber | None = None,
    atol: RealNumber | None = None,
    dt0: RealNumber | None = None,
    max_steps: Integer = DEFAULT_MAX_STEPS,
    integrator: str = "auto",
    event: Any = None,
):
    r"""Global sensitivity of a model's outputs to its parameters, over given ranges.

    Each parameter $\theta_i$ is taken uniform on its range. With `method="sobol"` the
    variance of an output $Y$ is split into the parts due to each parameter and to their
    interactions (Sobol', 2001):

    $$
    S_i = \frac{\operatorname{Var}\,\mathbb{E}[Y \mid \theta_i]}{\operatorname{Var} Y},
    \qquad
    S_{T,i} = \frac{\mathbb{E}\,\operatorname{Var}[Y \mid \theta_{\sim i}]}{\operatorname{Var} Y},
    \qquad
    S_{ij} = \frac{\operatorname{Var}\,\mathbb{E}[Y \mid \theta_i, \theta_j]}{\operatorname{Var}
    Y} - S_i - S_j,
    $$

    first-order, total and second-order indices, estimated on Saltelli's extension of a
    scrambled Sobol' sequence ($N(2D+2)$ runs for $D$ parameters and `num_samples` $= N$;
    $N(D+2)$ without second order). With `method="morris"`, the elementary effects of
    `num_samples` one-at-a-time trajectories on a `num_levels` grid give Morris's screening
    measures $\mu$, $\mu^\ast$ (mean absolute effect: importance) and $\sigma$ (spread:
    non-linearity and interactions), $(D+1)\,N$ runs. Designs and estimators are SALib's
    (`SALib.sample.sobol`, `SALib.analyze.sobol`, `SALib.sample.morris`,
    `SALib.analyze.morris`); confidence intervals are SALib's bootstrap (`*_conf`: the
    half-width at `conf_level`).

    The runs are one [`simlab.sweep`][] (`mode="zip"` over the design's rows), so they are
    chunked, spread over devices, written to `store` and resumed from it. Every element of
    every observable output is analysed: a scalar output gets one index per parameter, a
    time series one per parameter and time.

    **Arguments:**

    - `model`: a [`simlab.models.AbstractModel`][] holding the unvaried parameter values.
    - `ranges`: maps each varied name (a parameter, or an initial-state component) to its
      range `[lower, upper]`, `lower < upper`.
    - `y0`, `ts`: the initial state and save times, as in [`simlab.sweep`][].
    - `observable`: maps a [`simlab.Trajectory`][] to a dict of named outputs (as in
      `sweep`); `None` analyses the whole trajectory (dims `time`, `component`).
    - `method`: `"sobol"` or `"morris"`.
    - `num_samples`: Sobol': the base sample size $N$, a power of two; Morris: the number of
      trajectories.
    - `key`: a `jax.random` key; the design's and the bootstrap's seeds are drawn from it
      (and recorded in the result's `attrs`).
    - `second_order`: Sobol' only: also estimate $S_{ij}$ (nearly doubles the runs).
    - `num_levels`: Morris only: the (even) number of grid levels.
    - `num_resamples`, `conf_level`: the bootstrap's resamples and confidence level.
    - `time_outputs`: names of outputs whose first axis runs over `ts`: their indices get a
      `time` dimension labelled by `ts`.
    - `chunk_size`, `mesh`, `store`, `progress`, `solver`, `rtol`, `atol`, `dt0`,
      `max_steps`, `integrator`: passed to [`simlab.sweep`][].
    - `event`: a [`simlab.Event`][] (or a function of each run's model that builds one),
      as in [`simlab.sweep`][]: the observable may then read `trajectory.event_time`.

    **Returns:** an `xarray.Dataset`. For each output `name`: `name_S1`, `name_S1_conf`,
    `name_ST`, `name_ST_conf` (dims `parameter` and the output's own), and with second order
    `name_S2`, `name_S2_conf` (dims `parameter`, `parameter_2`, ...; upper triangle, NaN
    below); for Morris `name_mu`, `name_mu_star`, `name_sigma`, `name_mu_star_conf`. The
    design is `samples` (dims `member`, `parameter`); `attrs` record the method, sizes,
    seeds and the sweep's provenance. Where an output element takes one value in every
    run its Sobol' indices are undefined and set to NaN.

    **Raises:** `ValueError` for a stochastic model (each design point runs once; see
    `sweep`'s `paths` for the mean of its outputs), an unknown name, a range with
    `lower >= upper`, a sample
    count the design cannot use, and outputs that are not finite in every run (it says how
    many runs failed, and why).

    !!! example

        ```python
        def final_infected(trajectory):
            return {"final_infected": trajectory.ys[-1, 1]}


        model = simlab.models.SIR(beta=0.3, gamma=0.1, population=1000.0)
        indices = simlab.sensitivity(
            model,
            {"beta": [0.2, 0.4], "gamma": [0.05, 0.15]},
            jnp.array([990.0, 10.0, 0.0]),
            jnp.linspace(0.0, 50.0, 51),
            observable=final_infected,
            num_samples=256,
            key=jax.random.key(0),
        )
        indices["final_infected_ST"]  # one total index per parameter
        ```
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; use one of {list(METHODS)}.")
    if not isinstance(model, AbstractModel):
        raise TypeError(
            "sensitivity needs a simlab.models.AbstractModel (to know its parameters); got "
            f"{type(model).__name__}."
        )
    _refuse_stochastic(model)
    problem = _problem(model, ranges)
    num_samples, num_levels, num_resamples = _checked_sizes(
        method, num_samples, num_levels, num_resamples, conf_level
    )
    if key is None:
        raise ValueError("sensitivity draws its design at random: pass key=jax.random.key(0).")
    sample_seed, analysis_seed = _seeds(key)
    samples = _design(problem, method, num_samples, sample_seed, second_order, num_levels)
    result = sweep(
        model,
        {name: samples[:, j] for j, name in enumerate(problem["names"])},
        y0,
        ts,
        mode="zip",
        observable=observable,
        chunk_size=chunk_size,
        mesh=mesh,
        store=store,
        progress=progress,
        solver=solver,
        rtol=rtol,
        atol=atol,
        dt0=dt0,
        max_steps=max_steps,
        integrator=integrator,
        event=event,
    )
    _check_finite(result)
    dims, coords = _output_dims(result, time_outputs, np.asarray(ts))
    settings = dict(
        method=method,
        second_order=second_order,
        num_levels=num_levels,
        num_resamples=num_resamples,
        conf_level=conf_level,
        seed=analysis_seed,
    )
    data_vars = {}
    for name, outputs in result.observables.items():
        for measure, (extra_dims, values) in _analyse(problem, samples, outputs, settings).items():
            data_vars[f"{name}_{measure}"] = (extra_dims + dims[name], values)
    data_vars["samples"] = (("member", "parameter"), samples)
    import xarray as xr

    return xr.Dataset(
        data_vars,
        coords={
            "parameter": problem["names"],
            "parameter_2": problem["names"],
            "lower": ("parameter", np.asarray(problem["bounds"])[:, 0]),
            "upper": ("parameter", np.asarray(problem["bounds"])[:, 1]),
            "unit": ("parameter", [result.units.get(n, "") for n in problem["names"]]),
            **coords,
        },
        attrs={
            "method": method,
            "outputs": json.dumps(list(result.observables)),
            "num_samples": num_samples,
            "num_members": result.num_members,
            "second_order": int(method == "sobol" and second_order),
            "num_levels": num_levels,
            "num_resamples": num_resamples,
            "conf_level": conf_level,
            "sample_seed": sample_seed,
            "analysis_seed": analysis_seed,
            "chunks_resumed": result.stats["chunks_resumed"],
            "model": result.attrs["model"],
            "simlab_version": result.attrs["simlab_version"],
            "solver_settings": result.attrs["solver_settings"],
        },
    )


def _refuse_stochastic(model: AbstractModel) -> None:
    """Sensitivity runs each design point once: a stochastic model's outputs would vary
    from path to path, and the indices would measure its noise."""
    if is_stochastic(model):
        raise ValueError(
            f"sensitivity runs each design point once, and {type(model).__name__} is "
            "stochastic (its outputs vary from path to path). To see how their mean depends "
            "on the parameters, run simlab.sweep(model, params, y0, ts, paths=..., "
            "key=jax.random.key(0), adaptive=False, dt0=...), which gives each output x as "
            "x_mean (and x_variance, x_quantiles) at every parameter point."
        )


def _problem(model: AbstractModel, ranges) -> dict:
    """SALib's problem definition, checked: names the model knows, `lower < upper`."""
    if not isinstance(ranges, Mapping) or len(ranges) == 0:
        raise ValueError(
            "ranges must be a non-empty mapping from parameter (or initial-state component) "
            "names to [lower, upper], e.g. {'beta': [0.2, 0.4]}."
        )
    names = tuple(ranges)
    _check_names(model, names)
    bounds = []
    for name in names:
        bound = np.asarray(ranges[name], dtype=float)
        if bound.shape != (2,) or not np.all(np.isfinite(bound)):
            raise ValueError(
                f"ranges[{name!r}] must be two finite numbers [lower, upper]; got "
                f"{np.asarray(ranges[name]).tolist()}."
            )
        if not bound[0] < bound[1]:
            raise ValueError(
                f"ranges[{name!r}] = {bound.tolist()}: the lower bound must be below the upper "
                "one; swap them, or leave a fixed parameter out of ranges."
            )
        bounds.append(bound.tolist())
    return {"num_vars": len(names), "names": list(names), "bounds": bounds}


def _checked_sizes(method, num_samples, num_levels, num_resamples, conf_level):
    """`num_samples`, `num_levels`, `num_resamples` as Python integers, checked for `method`."""
    num_samples = as_count("num_samples", num_samples, minimum=2)
    if method == "sobol" and num_samples & (num_samples - 1):
        below = 1 << (num_samples.bit_length() - 1)
        raise ValueError(
            f"Sobol' designs need a power of two base samples (the sequence's balance "
            f"properties hold only then); got num_samples={num_samples}. Use {below} or "
            f"{2 * below}."
        )
    if method == "morris":
        num_levels = as_count("num_levels", num_levels, minimum=2)
        if num_levels % 2:
            raise ValueError(
                f"Morris designs need an even number of levels; got num_levels={num_levels}."
            )
    num_resamples = as_count("num_resamples", num_resamples, minimum=2)
    if not 0 < conf_level < 1:
        raise ValueError(f"conf_level must lie strictly between 0 and 1; got {conf_level!r}.")
    return num_samples, num_levels, num_resamples


def _seeds(key) -> tuple[int, int]:
    """Two positive integer seeds for SALib (its bootstrap treats a seed of 0 as none)."""
    keys = jr.split(key)
    return tuple(int(jr.randint(k, (), 1, np.iinfo(np.int32).max)) for k in keys)


def _design(problem, method, num_samples, seed, second_order, num_levels) -> np.ndarray:
    import SALib.sample.morris
    import SALib.sample.sobol  # imported here: SALib (and pandas) take a second to load

    if method == "sobol":
        return SALib.sample.sobol.sample(
            problem, num_samples, calc_second_order=second_order, seed=seed
        )
    return SALib.sample.morris.sample(problem, num_samples, num_levels=num_levels, seed=seed)


def _check_finite(result) -> None:
    for name, outputs in result.observables.items():
        bad = ~np.all(np.isfinite(outputs.reshape(outputs.shape[0], -1)), axis=1)
        if np.any(bad):
            raise ValueError(
                f"{int(np.sum(bad))} of {result.num_members} runs gave non-finite values of "
                f"{name!r}, so no variance decomposition exists. Solver status: "
                f"{result.summary()} Narrow the ranges, loosen the solver's limits "
                "(max_steps, solver=...), or make the observable finite; with store=... the "
                "runs are kept for inspection."
            )


def _output_dims(result, time_outputs, ts):
    dims = dict(result.dims)
    coords = {name: values for name, (_, values) in result.coords.items()}
    for name in time_outputs:
        if name not in result.observables:
            raise ValueError(
                f"time_outputs names {name!r}, which the observable does not return; its "
                f"outputs are {list(result.observables)}."
            )
        shape = result.observables[name].shape[1:]
        if not shape or shape[0] != ts.size:
            raise ValueError(
                f"time_outputs: the first axis of {name!r} must run over the {ts.size} save "
                f"times; it has shape {shape}."
            )
        dims[name] = ("time", *dims[name][1:])
        coords["time"] = ("time", ts)
    return dims, coords


def _analyse(problem, samples, outputs, settings) -> dict:
    """SALib's estimates for every element of one output: measure -> (dims, values)."""
    shape = outputs.shape[1:]
    flat = outputs.reshape(outputs.shape[0], -1)
    num_vars = problem["num_vars"]
    if settings["method"] == "sobol":
        vector, matrix = SOBOL_INDICES, SOBOL_SECOND_ORDER if settings["second_order"] else ()
    else:
        vector, matrix = MORRIS_MEASURES, ()
    values = {m: np.full((num_vars, flat.shape[1]), np.nan) for m in vector}
    values.update({m: np.full((num_vars, num_vars, flat.shape[1]), np.nan) for m in matrix})
    for element in range(flat.shape[1]):
        column = flat[:, element]
        if settings["method"] == "sobol" and np.ptp(column) == 0:
            continue  # a constant output has no variance to decompose
        estimates = _estimate(problem, samples, column, settings)
        for measure in (*vector, *matrix):
            values[measure][..., element] = np.asarray(estimates[measure], dtype=float)
    return {
        measure: (
            ("parameter",) if measure in vector else ("parameter", "parameter_2"),
            array.reshape(array.shape[:-1] + shape),
        )
        for measure, array in values.items()
    }


def _estimate(problem, samples, column, settings):
    import SALib.analyze.morris
    import SALib.analyze.sobol

    if settings["method"] == "sobol":
        return SALib.analyze.sobol.analyze(
            problem,
            column,
            calc_second_order=settings["second_order"],
            num_resamples=settings["num_resamples"],
            conf_level=settings["conf_level"],
            seed=settings["seed"],
        )
    return SALib.analyze.morris.analyze(
        problem,
        samples,
        column,
        num_resamples=settings["num_resamples"],
        conf_level=settings["conf_level"],
        num_levels=settings["num_levels"],
        seed=settings["seed"],
    )
