"""Test configuration: float64, strict promotion, four simulated CPU devices, headless plots."""

import os

os.environ.setdefault("MPLBACKEND", "Agg")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")
jax.config.update("jax_num_cpu_devices", 4)

import matplotlib  # noqa: E402
import pytest  # noqa: E402

matplotlib.use("Agg")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def pytest_collection_modifyitems(config, items):
    # The documentation pages are the longest tests (each runs a whole tutorial in a fresh
    # interpreter): started first, they do not leave one worker finishing alone.
    items.sort(key=lambda item: item.path.stem != "test_docs")
