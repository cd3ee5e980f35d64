"""When simlab draws a progress bar: asked for, never when told not to, and by default only in
an interactive process (a terminal, or a Jupyter kernel)."""

import sys
import types

import jax.numpy as jnp
import numpy as np
import pytest
from helpers import LOTKA_VOLTERRA

import simlab
from simlab._misc import show_progress


class _Stream:
    def __init__(self, terminal: bool):
        self.terminal = terminal

    def isatty(self):
        return self.terminal

    def write(self, text):
        pass

    def flush(self):
        pass


def _fake_kernel(monkeypatch, kernel):
    """A process that has imported ipykernel and IPython, whose shell has `kernel`."""
    shell = types.SimpleNamespace(kernel=kernel)
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    ipython = types.ModuleType("IPython")
    ipython.get_ipython = lambda: shell
    monkeypatch.setitem(sys.modules, "IPython", ipython)


@pytest.fixture
def batch(monkeypatch):
    """Neither a terminal nor a kernel: a batch job."""
    monkeypatch.setattr(sys, "stderr", _Stream(terminal=False))
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)


def test_a_batch_job_shows_no_bar_unless_asked(batch):
    assert show_progress(None) is False
    assert show_progress(True) is True
    assert show_progress(False) is False


def test_a_terminal_shows_a_bar_by_default(batch, monkeypatch):
    monkeypatch.setattr(sys, "stderr", _Stream(terminal=True))
    assert show_progress(None) is True
    assert show_progress(False) is False


def test_a_jupyter_kernel_shows_a_bar_by_default(batch, monkeypatch):
    _fake_kernel(monkeypatch, kernel=object())
    assert show_progress(None) is True
    assert show_progress(False) is False


def test_ipython_in_a_terminal_without_a_kernel_is_not_a_notebook(batch, monkeypatch):
    _fake_kernel(monkeypatch, kernel=None)
    assert show_progress(None) is False


def test_ipykernel_loaded_without_ipython_is_not_a_notebook(batch, monkeypatch):
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    monkeypatch.delitem(sys.modules, "IPython", raising=False)
    assert show_progress(None) is False
    assert "IPython" not in sys.modules  # looked up, never imported


def _sweep(**options):
    return simlab.sweep(
        LOTKA_VOLTERRA,
        {"alpha": np.array([0.5, 0.6, 0.7])},
        jnp.array([30.0, 4.0]),
        jnp.linspace(0.0, 1.0, 3),
        observable=lambda trajectory: {"final_state": trajectory.ys[-1]},
        chunk_size=1,
        **options,
    )


def test_a_sweep_draws_its_bar_on_stderr_when_asked_and_none_by_default(capsys):
    _sweep(progress=True)
    err = capsys.readouterr().err
    assert "3/3" in err and "member" in err
    _sweep()  # pytest's captured stderr is no terminal, and this is no kernel
    assert capsys.readouterr().err == ""
