"""The loss curve of a fit."""

import numpy as np

from ._style import COLOURS, new_axes, style


def loss_curve(result, *, ax=None):
    r"""Plots the loss $\tfrac12\sum_i r_i^2$ after each optimiser step, on a log scale.

    **Arguments:**

    - `result`: a [`simlab.FitResult`][], or a 1-D array of losses (one per step).
    - `ax`: the Axes to draw on; `None` makes a new figure.

    **Returns:** the Axes.

    !!! example

        ```python
        result = simlab.fit(model, ts, observations, y0=y0, params=["alpha"])
        ax = simlab.plot.loss_curve(result)
        ```
    """
    if hasattr(result, "loss_history"):
        history = np.asarray(result.loss_history)[: int(result.num_steps)]
    else:
        history = np.asarray(result)
    if history.ndim != 1 or history.size == 0:
        raise ValueError(
            f"the loss history must be a non-empty 1-D array; got shape {history.shape}."
        )
    finite = np.isfinite(history)
    figure, ax = new_axes(ax, figsize=(5, 3.4))
    with style():
        steps = np.arange(1, history.size + 1)
        ax.plot(
            steps[finite],
            history[finite],
            color=COLOURS[0],
            marker="." if history.size < 60 else None,
        )
        if np.all(history[finite] > 0):
            ax.set_yscale("log")
        ax.set_xlabel("optimiser step")
        ax.set_ylabel("loss")
    return ax
