"""The demo: the `lynx_hare` experiment, start to finish, and where to look afterwards.

Run with `make demo` (or `python -m simlab.demo`). It fits the Lotka–Volterra model to the
Hudson's Bay lynx–hare records (log-normal noise, 100 starts), profiles the likelihood of
its four rates, sweeps around the fit and draws the figures, exactly as
`simlab run lynx_hare` does, then prints where the figures are.
"""

import pathlib
import sys

DEMO_EXPERIMENT = "lynx_hare"


def main(results_root: str = "results", *, quick: bool = False) -> pathlib.Path:
    """Runs `lynx_hare` into `results_root/lynx_hare/<timestamp>`; returns its fit figure.

    `quick=True` runs the experiment's reduced version (seconds instead of minutes).
    """
    from simlab import cli

    cli.configure_jax(None)
    import simlab.experiment as experiments

    experiment = experiments.load(experiments.find(DEMO_EXPERIMENT), quick=quick)
    folder = experiments.run(experiment, results_root=results_root)
    figures = folder / "figures"
    fit_figure = figures / "fit.png"
    print()
    print(f"The lynx–hare fit:  {fit_figure}")
    print(f"Its profiles:       {figures / 'profiles.png'} (95% intervals of the rates)")
    pictures = ", ".join(sorted(path.name for path in figures.glob("*.png")))
    print(f"All figures:        {figures}/ ({pictures})")
    print(f"Summary:            .venv/bin/simlab show {folder}")
    print("More experiments:   .venv/bin/simlab list, then .venv/bin/simlab run NAME")
    return fit_figure


if __name__ == "__main__":
    main(*sys.argv[1:])
