"""Figures from simlab's result objects. Every function takes `ax=None`, returns the Figure
or Axes it drew on, and never calls `plt.show()`. Import with `import simlab.plot`."""

from ._bifurcation import bifurcation as bifurcation
from ._fields import (
    field_animation as field_animation,
    field_image as field_image,
    field_snapshots as field_snapshots,
    space_time as space_time,
)
from ._fit import (
    fit_curves as fit_curves,
    posterior_band as posterior_band,
    posterior_curves as posterior_curves,
)
from ._flow import (
    centreline_profile as centreline_profile,
    energy_enstrophy as energy_enstrophy,
    energy_spectrum as energy_spectrum,
    flow_field as flow_field,
    walled_flow_field as walled_flow_field,
)
from ._gallery import animate as animate, sweep_gallery as sweep_gallery
from ._hamiltonian import (
    energy_error as energy_error,
    mode_energies as mode_energies,
    orbits as orbits,
    poincare_section as poincare_section,
)
from ._likelihood import corner as corner, profiles as profiles, waterfall as waterfall
from ._loss import loss_curve as loss_curve
from ._paths import (
    escape_rates as escape_rates,
    fan_chart as fan_chart,
    terminal_histogram as terminal_histogram,
)
from ._sensitivity import sensitivity as sensitivity
from ._style import COLOURS as COLOURS, new_axes as new_axes, style as style
from ._sweep import sweep_heatmap as sweep_heatmap, sweep_lines as sweep_lines
from ._trajectory import (
    phase_portrait as phase_portrait,
    trajectory as trajectory,
)
