"""Figures of sensitivity indices: bars with their intervals, or stacked areas over time."""

import json

import numpy as np

from ._style import COLOURS, new_axes

INTERACTION_COLOUR = "#BBBBBB"
MEASURES = {
    "sobol": (("S1", "first order $S_i$"), ("ST", "total $S_{T,i}$")),
    "morris": (("mu_star", r"$\mu^\ast$ (importance)"), ("sigma", r"$\sigma$ (interactions)")),
}


def sensitivity(result, output: str | None = None, *, select=None, ax=None):
    r"""Draws the sensitivity indices of one output of [`simlab.sensitivity`][].

    A scalar output gets bars: Sobol' $S_i$ and $S_{T,i}$ side by side for each parameter
    (Morris: $\mu^\ast$ and $\sigma$), with the bootstrap confidence intervals as error
    bars. An output along one axis (such as `time`) gets stacked areas of the first-order
    indices, the grey remainder $1 - \sum_i S_i$ being the share of interactions, with the
    total indices as dashed lines in the same colours (Morris: lines of $\mu^\ast$). Points
    where the indices are undefined (an output that is the same in every run) are left out.

    **Arguments:**

    - `result`: the `xarray.Dataset` from [`simlab.sensitivity`][].
    - `output`: the output's name (optional when there is only one).
    - `select`: values of the output's other axes, `{dim: index}` (e.g.
      `{"component": 1}` for a whole trajectory), so that at most one axis remains.
    - `ax`: the Axes to draw on; `None` makes a new figure.

    **Returns:** the Axes.

    !!! example

        ```python
        import simlab.plot

        ax = simlab.plot.sensitivity(indices, "final_infected")
        ax.figure.savefig("indices.png")
        ```
    """
    method = result.attrs["method"]
    outputs = json.loads(result.attrs["outputs"])
    if output is None:
        if len(outputs) != 1:
            raise ValueError(f"name the output to draw: one of {outputs}.")
        output = outputs[0]
    if output not in outputs:
        raise ValueError(f"unknown output {output!r}; the result holds {outputs}.")
    (first, first_label), (second, second_label) = MEASURES[method]
    indices = {m: result[f"{output}_{m}"] for m in (first, second, f"{first}_conf")}
    if method == "sobol":
        indices[f"{second}_conf"] = result[f"{output}_{second}_conf"]
    if select:
        indices = {m: v.isel(select) for m, v in indices.items()}
    axes = [d for d in indices[first].dims if d != "parameter"]
    if len(axes) > 1:
        raise ValueError(
            f"output {output!r} has axes {axes}; pick one value of all but one with "
            f"select={{{axes[-1]!r}: 0}} (an index), for example."
        )
    figure, ax = new_axes(ax)
    names = list(result["parameter"].values)
    labels = (first_label, second_label)
    if axes:
        _areas(ax, indices, names, axes[0], method, labels)
    else:
        _bars(ax, indices, names, method, labels)
    ax.set_title(output)
    return ax


def _bars(ax, indices, names, method, labels) -> None:
    (first, second) = MEASURES[method][0][0], MEASURES[method][1][0]
    positions = np.arange(len(names))
    width = 0.38
    for offset, measure, label, colour in [
        (-width / 2, first, labels[0], COLOURS[0]),
        (width / 2, second, labels[1], COLOURS[1]),
    ]:
        conf = indices.get(f"{measure}_conf")
        ax.bar(
            positions + offset,
            indices[measure].values,
            width,
            yerr=None if conf is None else conf.values,
            capsize=3,
            color=colour,
            label=label,
        )
    ax.set_xticks(positions, names)
    ax.axhline(0.0, color="black", linewidth=0.8)
    tops = [
        indices[m].values + indices.get(f"{m}_conf", 0.0 * indices[m]).values
        for m in (first, second)
    ]
    highest = float(np.nanmax(np.concatenate(tops), initial=0.0))
    if highest > 0:
        ax.set_ylim(top=1.3 * highest)  # room for the legend above the bars
    ax.set_ylabel("Sobol' index" if method == "sobol" else "elementary effect")
    ax.legend(frameon=False)


def _areas(ax, indices, names, axis, method, labels) -> None:
    first, second = MEASURES[method][0][0], MEASURES[method][1][0]
    coordinate = indices[first][axis]
    x = coordinate.values
    main = indices[first].transpose("parameter", axis).values
    total = indices[second].transpose("parameter", axis).values
    defined = np.all(np.isfinite(main), axis=0)
    x, main, total = x[defined], main[:, defined], total[:, defined]
    colours = [COLOURS[i % len(COLOURS)] for i in range(len(names))]
    if method == "sobol":
        interactions = np.clip(1.0 - main.sum(axis=0), 0.0, None)
        ax.stackplot(
            x,
            *main,
            interactions,
            colors=[*colours, INTERACTION_COLOUR],
            labels=[f"$S_i$: {n}" for n in names] + [r"interactions $1 - \sum S_i$"],
            alpha=0.85,
        )
        for name, row, colour in zip(names, total, colours, strict=True):
            ax.plot(x, row, "--", color=colour, linewidth=1.5, label=f"$S_{{T,i}}$: {name}")
        ax.set_ylim(0.0, max(1.0, float(np.max(total, initial=0.0)) * 1.05))
        ax.set_ylabel("share of variance")
    else:
        for name, row, colour in zip(names, main, colours, strict=True):
            ax.plot(x, row, color=colour, label=rf"$\mu^\ast$: {name}")
        ax.set_ylabel(labels[0])
    ax.set_xlabel(axis)
    if x.size > 1:
        ax.set_xlim(x[0], x[-1])
    ax.legend(frameon=False, fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
