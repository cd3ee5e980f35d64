"""One consistent look for every simlab figure: readable fonts, colour-blind-safe colours."""

import contextlib

import matplotlib as mpl
import matplotlib.pyplot as plt

# Okabe & Ito's palette, distinguishable under the common forms of colour blindness.
COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000")
SEQUENTIAL_CMAP = "viridis"
DIVERGING_CMAP = "RdBu_r"

STYLE = {
    "figure.dpi": 110,
    "savefig.dpi": 150,
    "savefig.bbox": "tight",
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.prop_cycle": mpl.cycler(color=COLOURS),
    "image.cmap": SEQUENTIAL_CMAP,
}


@contextlib.contextmanager
def style():
    """Context manager applying simlab's figure style."""
    # A notebook's backend turns interactive mode on when the session's first figure
    # activates it; leaving the context would turn it off again (rc_context restores every
    # parameter), and the notebook would stop showing later figures. It is kept.
    with plt.rc_context(STYLE):
        try:
            yield
        finally:
            interactive = mpl.is_interactive()
    mpl.interactive(interactive)


def new_axes(ax=None, **subplot_kwargs):
    """Returns `(figure, axes)`: the given axes and its figure, or a new styled pair."""
    if ax is not None:
        return ax.figure, ax
    with style():
        return plt.subplots(**subplot_kwargs)
