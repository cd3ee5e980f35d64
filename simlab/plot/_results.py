"""The figure each result object's `.plot()` returns: the one the experiments draw for that
kind of result, chosen from the result's shape, so that a notebook shows it inline."""

import numpy as np

from ._fields import field_snapshots, space_time
from ._fit import fit_curves
from ._gallery import sweep_gallery
from ._sweep import PATH, STATISTICS, _point_names, sweep_heatmap, sweep_lines
from ._trajectory import trajectory as states_against_time

SWEEP_KINDS = ("heatmap", "lines", "gallery")
_STREAMED_SUFFIXES = tuple(f"_{name}" for name in (*STATISTICS, "quantiles"))


def trajectory_figure(trajectory, model=None, *, grid=None, channel=None, **kwargs):
    """The figure of a [`simlab.Trajectory`][]: named states against time
    ([`simlab.plot.trajectory`][]), or a field on a grid: a 1-D field's history
    ([`simlab.plot.space_time`][]), a 2-D field at up to four times
    ([`simlab.plot.field_snapshots`][]).

    The state is a field when a grid is known (`grid`, or `model.grid`), when the
    trajectory is a grid model's (empty `state_names`), or when each state has more than
    one axis. A multi-field state draws `channel` (default: the first field). `model`
    also gives an ODE's `state_units` for the value axis. `kwargs` go to the function
    that draws.
    """
    ts, ys = np.asarray(trajectory.ts), np.asarray(trajectory.ys)
    if ts.ndim != 1:
        raise ValueError(
            f"this is a batch of trajectories (ts of shape {ts.shape}, from a vmapped "
            "simulate); plot one member, e.g. jax.tree.map(lambda leaf: leaf[0], "
            "trajectory).plot()."
        )
    grid = getattr(model, "grid", None) if grid is None else grid
    is_field = grid is not None or trajectory.state_names == () or ys.ndim > 2
    if not is_field:
        units = tuple(getattr(model, "state_units", ()))
        return states_against_time(trajectory, units=units or None, **kwargs).figure
    spatial = grid.ndim if grid is not None else min(ys.ndim - 1, 2)
    if channel is None and ys.ndim - 1 > spatial:
        channel = 0  # a multi-field state: its first field
    num_axes = ys.ndim - 1 - (channel is not None)
    if num_axes not in (1, 2):
        raise ValueError(
            f"a trajectory figure draws 1-D or 2-D fields; these states have shape "
            f"{ys.shape[1:]}{'' if channel is None else f' (channel {channel})'}. Draw a "
            "slice with simlab.plot.field_image."
        )
    kwargs.setdefault("label", "field" if channel is None else f"channel {channel}")
    if num_axes == 1:
        return space_time(trajectory, grid, channel=channel, **kwargs).figure
    return field_snapshots(trajectory, grid, channel=channel, **kwargs)


def sweep_figure(result, variable=None, *, kind=None, **kwargs):
    """The figure of a [`simlab.SweepResult`][]: a gallery of a field observable over a
    grid of two names ([`simlab.plot.sweep_gallery`][]), a heat map over the first two
    names of a grid ([`simlab.plot.sweep_heatmap`][]), else lines over the first name
    ([`simlab.plot.sweep_lines`][]); `kind` (`"heatmap"`, `"lines"`, `"gallery"`) picks
    one. `variable` may be left out when the sweep has one observable (a sweep over paths:
    one observed quantity). `kwargs` go to the function that draws.
    """
    variable = _sweep_variable(result, variable)
    if kind is None:
        kind = _sweep_kind(result, variable, kwargs.get("channel"))
    if kind == "gallery":
        return sweep_gallery(result, variable, **kwargs)
    if kind == "heatmap":
        return sweep_heatmap(result, variable, **kwargs).figure
    if kind == "lines":
        return sweep_lines(result, variable, **kwargs).figure
    raise ValueError(f"kind must be one of {list(SWEEP_KINDS)} or None; got {kind!r}.")


def fit_figure(result, *, data_set: int = 0, member: int = 0, **kwargs):
    """The figure of a [`simlab.FitResult`][]: the fitted data set's observations as
    points, the fitted curves and their bands ([`simlab.plot.fit_curves`][]), from the
    data the fit kept. `kwargs` go to `fit_curves`."""
    experiment = result.problem.experiments[data_set]
    observed = np.asarray(experiment.observed[member])
    observations = np.where(observed, np.asarray(experiment.observations[member]), np.nan)
    ts = np.asarray(experiment.ts)[experiment.skip :]
    return fit_curves(result, ts, observations, data_set=data_set, member=member, **kwargs).figure


def _sweep_variable(result, variable) -> str:
    """The observable to draw: `variable`, or the sweep's only one (a streamed sweep over
    paths names its statistics `x_mean`, `x_variance`, ...: the quantity is `x`)."""
    if variable is not None:
        return variable
    names = []
    for name in result.observables:
        for suffix in _STREAMED_SUFFIXES:
            base = name.removesuffix(suffix)
            if base != name and f"{base}_mean" in result.observables:
                name = base
                break
        if name not in names:
            names.append(name)
    if len(names) != 1:
        raise ValueError(
            f"this sweep has the observables {names}; name the one to draw, e.g. "
            f"result.plot({names[0]!r})."
        )
    return names[0]


def _sweep_kind(result, variable: str, channel) -> str:
    points = _point_names(result)
    grid = result.mode == "grid" and len(points) >= 2
    values = result.observables.get(variable)
    per_member = np.ndim(values) - 1 - (channel is not None) if values is not None else 0
    if grid and len(result.names) == 2 and PATH not in result.names and per_member == 2:
        return "gallery"
    return "heatmap" if grid else "lines"
