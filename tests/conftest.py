"""Test configuration: float64, strict promotion, four simulated CPU devices, headless plots."""

import os

os.environ.setdefault("MPLBACKEND", "Agg")
# The four simulated devices meet in collectives (ppermute, psum). XLA aborts the whole
# process when one of them waits more than 40 s for the others, which a loaded two-core
# machine running two test workers can reach; it has an hour instead.
os.environ["XLA_FLAGS"] = " ".join(
    (
        os.environ.get("XLA_FLAGS", ""),
        "--xla_cpu_collective_call_warn_stuck_timeout_seconds=600",
        "--xla_cpu_collective_call_terminate_timeout_seconds=3600",
    )
).strip()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")
jax.config.update("jax_num_cpu_devices", 4)

import matplotlib  # noqa: E402
import pytest  # noqa: E402
from jax.experimental.compilation_cache import compilation_cache  # noqa: E402

matplotlib.use("Agg")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


_CACHE_SETTINGS = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs")


@pytest.fixture(autouse=True)
def _compilation_cache_stays_off():
    """The `simlab` command turns JAX's persistent compilation cache on for its whole process;
    a test that runs it in-process turns it off again, so the rest of the worker does not
    serialize every executable it compiles."""
    before = {name: getattr(jax.config, name) for name in _CACHE_SETTINGS}
    yield
    if any(getattr(jax.config, name) != value for name, value in before.items()):
        for name, value in before.items():
            jax.config.update(name, value)
        compilation_cache.reset_cache()


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """Runs in an empty folder, with the `simlab` command's compilation cache kept inside it."""
    from simlab import cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(cli.CACHE_ENVIRONMENT, str(tmp_path / "cache"))
    return tmp_path


def pytest_collection_modifyitems(config, items):
    # The documentation pages are the longest tests (each runs a whole tutorial in a fresh
    # interpreter): started first, they do not leave one worker finishing alone.
    items.sort(key=lambda item: item.path.stem != "test_docs")
