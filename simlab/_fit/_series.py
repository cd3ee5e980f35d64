r"""Observed quantities measured at their own times: `Series`, merged onto one time axis.

A fit compares the model with its data on one time axis, and NaN marks a value that was
not measured. Quantities sampled at different times (prey counted every year, predators
every other year) are given as one `Series` each; they are merged onto the union of their
times, NaN wherever a quantity was not measured, which is exactly the fit to the
NaN-masked table: the same likelihood, optimum and covariance.
"""

from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

from .._misc import is_concrete


class Series(eqx.Module):
    """One observed quantity: its measurement times and values.

    Pass a list of them to [`simlab.fit`][] in place of `ts` and `observations`, one per
    observed quantity, in the order of `observe`.

    **Arguments:**

    - `ts`: the measurement times, shape `(T,)`, strictly increasing (concrete: they fix
      the shape of the fit).
    - `values`: the measured values, shape `(T,)`, or `(batch, T)` for several experiments
      (then every series has the same batch); NaN marks a missing value.

    !!! example

        ```python
        prey = simlab.Series(ts=[0.0, 1.0, 2.0, 3.0], values=[30.0, 47.2, 70.2, 77.4])
        predators = simlab.Series(ts=[0.0, 2.0, 3.0], values=[4.0, 6.1, 9.8])
        ```
    """

    ts: Array
    values: Array

    def __init__(self, ts: ArrayLike | Sequence[float], values: ArrayLike | Sequence[Any]):
        self.ts = jnp.asarray(ts, dtype=float)
        values = jnp.asarray(values)
        if not jnp.issubdtype(values.dtype, jnp.inexact):
            values = values.astype(float)
        self.values = values


def is_series_list(value: Any) -> bool:
    """Whether `value` is a non-empty list of `Series` (one data set)."""
    return (
        isinstance(value, list | tuple)
        and len(value) > 0
        and all(isinstance(s, Series) for s in value)
    )


def from_series(ts: Any, observations: Any) -> tuple[Any, Any]:
    """`(ts, observations)` as `fit` takes them: lists of `Series` (one data set, or a list
    of such for several) merged onto one time axis each; anything else as it was."""
    several = isinstance(ts, list | tuple) and len(ts) > 0 and all(map(is_series_list, ts))
    if not (is_series_list(ts) or several):
        if any(isinstance(s, Series) for s in _flat(ts)):
            raise ValueError(
                "ts mixes simlab.Series with other values; pass a list holding one "
                "simlab.Series per observed quantity (or a list of such lists)."
            )
        if observations is None:
            raise ValueError(
                "observations are missing: pass fit(model, ts, observations, ...), or one "
                "simlab.Series(ts, values) per observed quantity in place of both, "
                "fit(model, [prey, predators], ...)."
            )
        return ts, observations
    if observations is not None:
        raise ValueError(
            "the simlab.Series hold the observations already: leave observations out, "
            "fit(model, [series, ...], y0=..., params=...)."
        )
    if several:
        merged = [merge(entry, f" (data set {i})") for i, entry in enumerate(ts)]
        return [m[0] for m in merged], [m[1] for m in merged]
    return merge(ts, "")


def _flat(value: Any) -> list:
    if isinstance(value, list | tuple):
        return [leaf for item in value for leaf in _flat(item)]
    return [value]


def merge(series: Sequence[Series], where: str) -> tuple[Array, Array]:
    """The union of the series' times, and the observations `([batch,] times, k)`: column
    `j` holds series `j` at its own times and NaN elsewhere."""
    times = []
    for j, s in enumerate(series):
        if not is_concrete(s.ts):
            raise ValueError(
                f"series {j}{where} has traced times; the times of a simlab.Series fix the "
                "fit's shapes and must be concrete (its values may be traced)."
            )
        t = np.asarray(s.ts)
        if t.ndim != 1 or t.size == 0 or s.values.shape[-1:] != t.shape or s.values.ndim > 2:
            raise ValueError(
                f"series {j}{where} must have ts of shape (T,) with T >= 1 and values of "
                f"shape (T,) or (batch, T); got ts {t.shape} and values {s.values.shape}."
            )
        if not np.all(np.isfinite(t)) or np.any(np.diff(t) <= 0):
            raise ValueError(
                f"series {j}{where} must have finite, strictly increasing times; sort them "
                "and merge repeated measurements."
            )
        times.append(t)
    batches = {s.values.shape[:-1] for s in series}
    if len(batches) != 1:
        raise ValueError(
            f"the series{where} have different batch shapes {sorted(batches)}; give every "
            "series values of shape (T,), or all (batch, T) with one batch size."
        )
    (batch,) = batches
    union = np.unique(np.concatenate(times))
    dtype = jnp.result_type(*(s.values.dtype for s in series))
    observations = jnp.full((*batch, union.size, len(series)), jnp.nan, dtype)
    for j, (s, t) in enumerate(zip(series, times, strict=True)):
        rows = np.searchsorted(union, t)
        observations = observations.at[..., rows, j].set(s.values.astype(dtype))
    return jnp.asarray(union, dtype=float), observations
