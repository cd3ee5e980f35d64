"""Regenerates docs/figures/experiment_*.png from full runs of the shipped experiments.

python docs/scripts/experiment_figures.py               # runs them all (≈ 13 min on 2 cores)
python docs/scripts/experiment_figures.py RUN_FOLDER... # copies from finished runs
"""

import pathlib
import shutil
import sys
import tempfile

from simlab import cli
from simlab.experiment import StoredRun, shipped
from simlab.experiment._folder import read_run

FIGURES = pathlib.Path(__file__).resolve().parents[1] / "figures"
# experiment → (figure in the run's figures/, name under docs/figures/)
CHOSEN = {
    "boehm_petab": [("petab_fit.png", "experiment_boehm_petab_fit.png"),
                    ("waterfall.png", "experiment_boehm_petab_waterfall.png"),
                    ("profiles.png", "experiment_boehm_petab_profiles.png")],
    "lynx_hare": [("fit.png", "experiment_lynx_hare_fit.png"),
                  ("sweep_heatmap.png", "experiment_lynx_hare_sweep.png"),
                  ("waterfall.png", "experiment_lynx_hare_waterfall.png"),
                  ("profiles.png", "experiment_lynx_hare_profiles.png")],
    "pendulum_sweep": [("sweep_heatmap.png", "experiment_pendulum_sweep.png")],
    "gray_scott_patterns": [("pattern_gallery.png", "experiment_gray_scott_patterns.png")],
    "heat_inverse": [("snapshots.png", "experiment_heat_inverse.png")],
    "sir_sensitivity": [("peak_time_indices.png", "experiment_sir_peak_time_indices.png"),
                        ("peak_time_map.png", "experiment_sir_peak_time_map.png")],
    "kuramoto_sivashinsky": [("space_time.png", "experiment_kuramoto_sivashinsky.png")],
    "outer_solar_system": [("orbits.png", "experiment_outer_solar_system_orbits.png"),
                           ("energy_error.png", "experiment_outer_solar_system_energy.png")],
    "fput_recurrence": [("mode_energies.png", "experiment_fput_recurrence.png")],
    "kramers_escape": [("kramers_escape.png", "experiment_kramers_escape.png")],
    "taylor_green_decay": [("flow_snapshots.png", "experiment_taylor_green_snapshots.png"),
                           ("energy_enstrophy.png", "experiment_taylor_green_energy.png")],
    "decaying_turbulence": [("flow_snapshots.png", "experiment_decaying_turbulence.png"),
                            ("energy_spectrum.png", "experiment_decaying_turbulence_spectrum.png")],
    "kolmogorov_flow": [("flow_snapshots.png", "experiment_kolmogorov_flow.png")],
    "lid_driven_cavity": [("walled_flow_field.png", "experiment_lid_driven_cavity.png"),
                          ("centreline.png", "experiment_lid_driven_cavity_centreline.png")],
}  # fmt: skip


def copy_figures(run: StoredRun) -> None:
    if run.provenance.get("quick"):
        raise SystemExit(f"{run.folder} is a --quick run; the docs show full runs.")
    for source, target in CHOSEN[run.metrics["experiment"]]:
        shutil.copyfile(run.figures_folder / source, FIGURES / target)
        print(f"wrote {FIGURES / target}")


def main(folders: list[str]) -> None:
    if folders:
        for folder in folders:
            copy_figures(read_run(folder))
        return
    with tempfile.TemporaryDirectory() as scratch:
        for name in shipped():
            out = pathlib.Path(scratch) / name
            if cli.main(["run", name, "--out", str(out)]) != 0:
                raise SystemExit(f"{name} failed")
            copy_figures(read_run(out))


if __name__ == "__main__":
    main(sys.argv[1:])
