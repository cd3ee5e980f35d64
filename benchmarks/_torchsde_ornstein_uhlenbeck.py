"""torchsde's Euler–Maruyama on Ornstein–Uhlenbeck paths, $dx = \theta(\mu - x)\,dt + \sigma\,dW$:
`torchsde.sdeint(method="euler")` over the whole batch of paths at once, with its default
Brownian motion (a `BrownianInterval`), on the CPU in float32.

Run by bench_sde.py in an interpreter that has torchsde, which need not be simlab's:
`python _torchsde_ornstein_uhlenbeck.py SETTINGS_JSON` prints as JSON the best seconds of
a solve and the mean and variance of the paths' final values.
"""

import json
import sys
import time

import torch
import torchsde


class OrnsteinUhlenbeck(torch.nn.Module):
    noise_type = "diagonal"
    sde_type = "ito"

    def __init__(self, theta: float, mu: float, sigma: float):
        super().__init__()
        self.theta, self.mu, self.sigma = theta, mu, sigma

    def f(self, t, y):
        return self.theta * (self.mu - y)

    def g(self, t, y):
        return torch.full_like(y, self.sigma)


def main(settings: dict) -> None:
    torch.manual_seed(0)
    sde = OrnsteinUhlenbeck(settings["theta"], settings["mu"], settings["sigma"])
    y0 = torch.zeros(settings["paths"], 1, dtype=torch.float32)
    ts = torch.tensor([0.0, settings["t1"]], dtype=torch.float32)

    def solve():
        with torch.no_grad():
            return torchsde.sdeint(sde, y0, ts, method="euler", dt=settings["dt"])[-1, :, 0]

    final = solve()  # a warm-up, as the other contenders get
    best = float("inf")
    for _ in range(settings["repeats"]):
        start = time.perf_counter()
        final = solve()
        best = min(best, time.perf_counter() - start)
    moments = {"mean": final.mean().item(), "variance": final.var().item()}
    print(json.dumps({"seconds": best, **moments}))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
