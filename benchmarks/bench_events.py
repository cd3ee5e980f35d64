"""Events under `vmap`: a sweep that locates an event in every member against the same sweep
without one.

The problem: 1024 SIR epidemics with the transmission rate beta swept over [0.15, 0.6]
(R0 from 1.5 to 6), Tsit5 on the lean loop at rtol = 1e-8, t in [0, 200] days, float64.
The event is the epidemic peak, dI/dt = beta S I / N - gamma I crossing zero downward,
recorded without stopping (`terminate=False`) so both sweeps integrate the same span; a
second row stops at the peak instead.
"""

import jax
import numpy as np
from _harness import Row, best_seconds

import simlab

NUM_MEMBERS = 1024
TOLERANCE = 1e-8
BETAS = np.linspace(0.15, 0.6, NUM_MEMBERS)
MODEL = simlab.models.SIR(beta=0.3, gamma=0.1, population=1000.0)
Y0 = np.array([990.0, 10.0, 0.0])
TS = np.linspace(0.0, 200.0, 21)


def _peak(model, terminate):
    def growth(t, y, args):
        return model(t, y, args)[1]

    return simlab.Event(growth, terminate=terminate, direction=-1)


def recorded_peak(model):
    return _peak(model, terminate=False)


def stopping_peak(model):
    return _peak(model, terminate=True)


def final_state(trajectory):
    return {"final_state": trajectory.ys[-1]}


def peak_and_final_state(trajectory):
    return {"peak_time": trajectory.event_time, "final_state": trajectory.ys[-1]}


def peak_time(trajectory):
    return {"peak_time": trajectory.event_time}


def run_sweep(observable, event=None):
    return simlab.sweep(
        MODEL,
        {"beta": BETAS},
        Y0,
        TS,
        observable=observable,
        event=event,
        mesh=simlab.parallel.member_mesh(jax.devices()[:1]),
        rtol=TOLERANCE,
        atol=TOLERANCE,
        integrator="lean",
        progress=False,
    )


def rows() -> list[Row]:
    best = best_seconds(
        {
            "plain": lambda: run_sweep(final_state),
            "recorded": lambda: run_sweep(peak_and_final_state, recorded_peak),
            "stopping": lambda: run_sweep(peak_time, stopping_peak),
        },
        repeats=15,  # each sweep takes milliseconds: more rounds steady the best times
    )
    recorded = run_sweep(peak_and_final_state, recorded_peak).observables
    stopped = run_sweep(peak_time, stopping_peak).observables
    agreement = np.max(np.abs(recorded["peak_time"] - stopped["peak_time"]))
    assert np.all(np.isfinite(recorded["peak_time"])), "every member has R0 > 1: a peak"
    return [
        Row(
            "events: 1024 SIR peaks (recorded) / same sweep without events",
            best["recorded"] / best["plain"],
            "<= 1.3",
            f"{best['recorded'] * 1e3:.0f} ms vs {best['plain'] * 1e3:.0f} ms, lean Tsit5, "
            "1 device",
        ),
        Row(
            "  same, stopping at the peak / without events",
            best["stopping"] / best["plain"],
            "",
            f"{best['stopping'] * 1e3:.0f} ms; peak times agree to {agreement:.1e} days",
        ),
    ]
