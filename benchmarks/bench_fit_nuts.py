"""NUTS on the lynx–hare Lotka–Volterra posterior: simlab.sample (BlackJAX) against NumPyro's
own example of this model (`examples/ode.py` in pyro-ppl/numpyro), in effective samples per
second.

Same data: the 21 years 1900–1920 of Hudson's Bay Company pelts (simlab.datasets.lynx_hare,
the table of Carpenter's Stan case study that NumPyro's example replicates; the example now
downloads a longer 1845–1935 record, so both sides here take simlab's 21 years, years since
1900 as time). Same model and priors, NumPyro's: $\\dot u = (\\alpha - \\beta v)u$,
$\\dot v = (-\\gamma + \\delta u)v$; $\\theta \\sim$ TruncatedNormal(0; (1, 0.05, 1, 0.05),
(0.5, 0.05, 0.5, 0.05)); initial populations LogNormal(log 10, 1); one log-normal noise
scale per species, LogNormal(−1, 1); $y \\sim$ LogNormal(log z, σ). On simlab's side the
per-species scales are a noise model of two fitted fields, the priors `priors=` functions.
Same solver class and tolerances (adaptive 5th-order Runge–Kutta, rtol 1e-6, atol 1e-5:
NumPyro's `odeint` Dormand–Prince with its adjoint, simlab's Tsit5 with its default
derivatives), float64, dense mass matrices, the same warm-up, draws and chains, the chains
vectorised on both sides (NumPyro `chain_method="vectorized"`, simlab's vmap).

Starts: both at simlab's fit of this posterior's likelihood (NumPyro `init_to_value`, every
chain there; simlab within a tenth of the fit's standard errors of it, as `sample` always
does). From the priors' medians (`init_to_median`) NumPyro's chains can settle in a second
mode near alpha = 1.05, far from the fit's 0.54, which would make the comparison one of
starting points. ESS: ArviZ's bulk ESS, the minimum over the six shared scalars (four rates,
two initial states). Time: the sampling call (warm-up plus draws, one key, so every call
does the same work), best of `ROUNDS` interleaved calls after a first call with another
key compiled it; the first calls' times (with compilation) are in the detail.
"""

import time

import arviz
import jax
import jax.numpy as jnp
import jax.random as jr
import jax.scipy.stats as jstats
import numpy as np
import numpyro
import numpyro.distributions as dist
from _harness import Row
from jax.experimental.ode import odeint
from numpyro.infer import MCMC, NUTS, init_to_value

import simlab

RATES = ["alpha", "beta", "gamma", "delta"]
RATE_LOC = (1.0, 0.05, 1.0, 0.05)
RATE_SCALE = (0.5, 0.05, 0.5, 0.05)
SHARED = [*RATES, "prey0", "predator0"]
NUM_WARMUP, NUM_SAMPLES, NUM_CHAINS = 300, 300, 2
ROUNDS = 2
RTOL, ATOL = 1e-6, 1e-5  # NumPyro's example's odeint tolerances


# --- NumPyro: the example's model (examples/ode.py), on the 21 years --------------------


def _dz_dt(z, t, theta):
    u, v = z[0], z[1]
    alpha, beta, gamma, delta = theta[..., 0], theta[..., 1], theta[..., 2], theta[..., 3]
    return jnp.stack([(alpha - beta * v) * u, (-gamma + delta * u) * v])


def _numpyro_model(ts, y=None):
    z_init = numpyro.sample("z_init", dist.LogNormal(jnp.log(10.0), 1.0).expand([2]))
    theta = numpyro.sample(
        "theta",
        dist.TruncatedNormal(low=0.0, loc=jnp.array(RATE_LOC), scale=jnp.array(RATE_SCALE)),
    )
    z = odeint(_dz_dt, z_init, ts, theta, rtol=RTOL, atol=ATOL, mxstep=1000)
    sigma = numpyro.sample("sigma", dist.LogNormal(-1.0, 1.0).expand([2]))
    numpyro.sample("y", dist.LogNormal(jnp.log(z), sigma), obs=y)


def _numpyro_draws(mcmc) -> dict[str, np.ndarray]:
    samples = mcmc.get_samples(group_by_chain=True)
    theta, z_init = np.asarray(samples["theta"]), np.asarray(samples["z_init"])
    draws = {name: theta[..., i] for i, name in enumerate(RATES)}
    draws.update(prey0=z_init[..., 0], predator0=z_init[..., 1])
    return draws


# --- simlab: the same posterior through simlab.fit and simlab.sample -------------------


class SpeciesLogNormal(simlab.AbstractNoise):
    """Log-normal noise with its own scale for each species (NumPyro's `sigma`)."""

    prey: jax.Array
    predator: jax.Array

    def negative_log_likelihood(self, predicted, observed, noise_scale):
        sigma = jnp.broadcast_to(jnp.stack([self.prey, self.predator]), predicted.shape)
        sigma = sigma * noise_scale
        log_predicted = jnp.log(jnp.maximum(predicted, jnp.finfo(predicted.dtype).tiny))
        return -jstats.norm.logpdf(jnp.log(observed), log_predicted, sigma) + jnp.log(observed)


def _rate_prior(loc, scale):
    # TruncatedNormal(low=0): the normal density up to a constant on the positive rates.
    return jax.tree_util.Partial(jstats.norm.logpdf, loc=loc, scale=scale)


def _lognormal_prior(mu, s):
    return jax.tree_util.Partial(_lognormal_logpdf, mu=mu, s=s)


def _lognormal_logpdf(x, mu, s):
    return jstats.norm.logpdf(jnp.log(x), mu, s) - jnp.log(x)


PRIORS = {
    **{
        name: _rate_prior(loc, scale)
        for name, loc, scale in zip(RATES, RATE_LOC, RATE_SCALE, strict=True)
    },
    "y0.prey": _lognormal_prior(float(np.log(10.0)), 1.0),
    "y0.predator": _lognormal_prior(float(np.log(10.0)), 1.0),
    "noise.prey": _lognormal_prior(-1.0, 1.0),
    "noise.predator": _lognormal_prior(-1.0, 1.0),
}


def _simlab_fit(data):
    start = simlab.models.LotkaVolterra(alpha=0.5, beta=0.02, gamma=0.8, delta=0.02)
    return simlab.fit(
        start,
        data.ts,
        data.observations,
        y0=data.observations[0],
        params=RATES,
        fit_y0=True,
        noise=SpeciesLogNormal(prey=jnp.asarray(0.25, float), predator=jnp.asarray(0.25, float)),
        simulate_options=dict(rtol=RTOL, atol=ATOL),
    )


def _simlab_draws(posterior) -> dict[str, np.ndarray]:
    samples = {name: np.asarray(draws) for name, draws in posterior.samples.items()}
    draws = {name: samples[name] for name in RATES}
    draws.update(prey0=samples["y0.prey"], predator0=samples["y0.predator"])
    return draws


def _min_bulk_ess(draws: dict[str, np.ndarray]) -> tuple[float, float]:
    data = arviz.from_dict(posterior=draws)
    ess = arviz.ess(data, method="bulk")
    rhat = arviz.rhat(data)
    return min(float(ess[n]) for n in SHARED), max(float(rhat[n]) for n in SHARED)


def _timed(fn):
    start = time.perf_counter()
    out = jax.block_until_ready(fn())
    return out, time.perf_counter() - start


def rows() -> list[Row]:
    data = simlab.datasets.lynx_hare()
    ts, observations = jnp.asarray(data.ts), jnp.asarray(data.observations)
    result = _simlab_fit(data)

    start = init_to_value(
        values={
            "theta": jnp.stack([result.params[name] for name in RATES]),
            "z_init": jnp.asarray(result.y0),
            "sigma": jnp.stack([result.params["noise.prey"], result.params["noise.predator"]]),
        }
    )
    mcmc = MCMC(
        NUTS(_numpyro_model, dense_mass=True, init_strategy=start),
        num_warmup=NUM_WARMUP,
        num_samples=NUM_SAMPLES,
        num_chains=NUM_CHAINS,
        chain_method="vectorized",
        progress_bar=False,
    )

    def run_numpyro(key):
        mcmc.run(key, ts, y=observations)
        return mcmc.get_samples()

    def run_simlab(key):
        posterior = simlab.sample(
            result,
            priors=PRIORS,
            num_warmup=NUM_WARMUP,
            num_samples=NUM_SAMPLES,
            num_chains=NUM_CHAINS,
            key=key,
        )
        return posterior

    # First calls (they compile), then interleaved rounds, all with one key.
    _, first = _timed(lambda: run_numpyro(jr.key(100)))
    _, first_simlab = _timed(lambda: run_simlab(jr.key(100)))
    best = {"numpyro": np.inf, "simlab": np.inf}
    for _ in range(ROUNDS):
        _, seconds = _timed(lambda: run_numpyro(jr.key(1)))
        best["numpyro"] = min(best["numpyro"], seconds)
        posterior, seconds = _timed(lambda: run_simlab(jr.key(1)))
        best["simlab"] = min(best["simlab"], seconds)
    numpyro_draws, simlab_draws = _numpyro_draws(mcmc), _simlab_draws(posterior)
    numpyro_divergent = int(np.sum(mcmc.get_extra_fields()["diverging"]))
    simlab_divergent = int(np.sum(posterior.divergent))
    ess_numpyro, rhat_numpyro = _min_bulk_ess(numpyro_draws)
    ess_simlab, rhat_simlab = _min_bulk_ess(simlab_draws)
    rate_numpyro, rate_simlab = ess_numpyro / best["numpyro"], ess_simlab / best["simlab"]
    # The two posteriors agree: each rate's mean differs by this many posterior sds.
    distance = max(
        abs(simlab_draws[n].mean() - numpyro_draws[n].mean()) / numpyro_draws[n].std()
        for n in RATES
    )
    means = ", ".join(
        f"{n} {simlab_draws[n].mean():.3g}/{numpyro_draws[n].mean():.3g}" for n in RATES
    )
    return [
        Row(
            f"NUTS lynx-hare, {NUM_CHAINS}x({NUM_WARMUP}+{NUM_SAMPLES}): simlab/numpyro ESS/s",
            rate_simlab / rate_numpyro,
            ">= 1x",
            f"min bulk ESS {ess_simlab:.0f} in {best['simlab']:.1f} s vs {ess_numpyro:.0f} in "
            f"{best['numpyro']:.1f} s (first calls, compiling: {first_simlab:.1f} s vs "
            f"{first:.1f} s); R-hat max {rhat_simlab:.3f} vs {rhat_numpyro:.3f}; divergent "
            f"{simlab_divergent} vs {numpyro_divergent}; rate means simlab/numpyro {means}, "
            f"at most {distance:.2f} posterior sd apart",
        ),
    ]


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    for row in rows():
        print(row)
