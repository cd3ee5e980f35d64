"""Figures from simlab's result objects. Every function takes `ax=None`, returns the Figure
or Axes it drew on, and never calls `plt.show()`. Import with `import simlab.plot`."""

from ._style import COLOURS as COLOURS, new_axes as new_axes, style as style
from ._sweep import sweep_heatmap as sweep_heatmap, sweep_lines as sweep_lines
