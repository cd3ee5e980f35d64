"""The bifurcation diagram of a branch of fixed points."""

import numpy as np

from ._style import COLOURS, new_axes

BRANCH_COLOUR = COLOURS[0]
CYCLE_COLOUR = COLOURS[1]
MARKERS = {"hopf": ("o", "Hopf"), "fold": ("s", "fold")}


def bifurcation(branch, component=0, *, ax=None, annotate: bool = True):
    """Draws one component of a [`simlab.Branch`][] against the continued parameter.

    Stable fixed points are drawn solid and unstable ones dashed (points whose solve failed
    are left out); where the fixed point is oscillatory, the smallest and largest value of
    the limit cycle are drawn as an envelope around it; folds and Hopf points are marked.

    **Arguments:**

    - `branch`: a [`simlab.Branch`][] from [`simlab.continuation`][].
    - `component`: the state component to draw, by index or by name (e.g. `"x"`).
    - `ax`: the Axes to draw on; `None` makes a new figure.
    - `annotate`: label each marked bifurcation with its parameter value.

    **Returns:** the Axes.

    !!! example

        ```python
        import simlab.plot

        ax = simlab.plot.bifurcation(branch, "x")
        ax.figure.savefig("bifurcation.png")
        ```
    """
    index = _component_index(branch, component)
    figure, ax = new_axes(ax)
    values, states = branch.values, branch.states[:, index]
    stable = branch.is_stable
    located = {b.index: (b.value, b.state[index]) for b in branch.bifurcations}
    for begin, end in _runs(stable, branch.succeeded):
        x, y = list(values[begin:end]), list(states[begin:end])
        # Runs meet at the located bifurcation between them, or else at the next point.
        if begin - 1 in located and branch.succeeded[begin - 1]:
            x.insert(0, located[begin - 1][0])
            y.insert(0, located[begin - 1][1])
        if end < values.size and branch.succeeded[end]:
            x.append(located[end - 1][0] if end - 1 in located else values[end])
            y.append(located[end - 1][1] if end - 1 in located else states[end])
        ax.plot(x, y, "-" if stable[begin] else "--", color=BRANCH_COLOUR, linewidth=2.0)
    ax.plot([], [], "-", color=BRANCH_COLOUR, label="stable fixed point")
    if np.any(branch.succeeded & ~stable):
        ax.plot([], [], "--", color=BRANCH_COLOUR, label="unstable fixed point")
    lowest, highest = branch.oscillation_min[:, index], branch.oscillation_max[:, index]
    cycle = np.isfinite(lowest) & np.isfinite(highest)
    if np.any(cycle):
        ax.fill_between(values, lowest, highest, where=cycle, color=CYCLE_COLOUR, alpha=0.2)
        ax.plot(values[cycle], highest[cycle], color=CYCLE_COLOUR, label="limit cycle: max, min")
        ax.plot(values[cycle], lowest[cycle], color=CYCLE_COLOUR)
    for kind in MARKERS:
        points = [b for b in branch.bifurcations if b.kind == kind]
        if not points:
            continue
        marker, name = MARKERS[kind]
        ax.plot(
            [b.value for b in points],
            [b.state[index] for b in points],
            marker,
            color="black",
            markersize=7,
            linestyle="none",
            label=f"{name} point",
        )
        if annotate:
            for b in points:
                ax.annotate(
                    f"{name}: {branch.parameter} = {b.value:.6g}",
                    (b.value, b.state[index]),
                    textcoords="offset points",
                    xytext=(8, -14),
                    fontsize=8,
                )
    ax.set_xlabel(branch.parameter)
    ax.set_ylabel(branch.state_names[index])
    ax.legend(frameon=False)
    return ax


def _component_index(branch, component) -> int:
    names = list(branch.state_names)
    if isinstance(component, str):
        if component not in names:
            raise ValueError(f"unknown state component {component!r}; the branch has {names}.")
        return names.index(component)
    if not isinstance(component, int) or not -len(names) <= component < len(names):
        raise ValueError(f"component must be a name in {names} or an index below {len(names)}.")
    return component % len(names)


def _runs(stable, succeeded):
    """(begin, end) of each maximal run of converged points with the same stability."""
    runs, begin = [], None
    for i in range(stable.size):
        if not succeeded[i]:
            if begin is not None:
                runs.append((begin, i))
            begin = None
            continue
        if begin is None:
            begin = i
        elif stable[i] != stable[begin]:
            runs.append((begin, i))
            begin = i
    if begin is not None:
        runs.append((begin, stable.size))
    return runs
