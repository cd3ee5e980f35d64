# Every target sets up .venv itself, so a fresh clone needs only python3 and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test slow demo bench docs lint mutate clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev,docs,bench,petab]"
	# The PEtab test suite's cases (tests/test_petab_suite.py). Not an extra: its one
	# release requires pysb, whose releases here either pin sympy below the petab extra's
	# floor or build only from the network; its SBML cases need none of pysb.
	$(BIN)/python -m pip install --quiet --no-deps petabtests==0.0.1
	touch $(STAMP)

# A test file's tests run in one worker (`--dist loadscope`), so its module fixtures and the
# programs its tests share are built once, not once per worker.
test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadscope --durations=15 -m "not slow"

# The long cases `make test` leaves out (marked `slow`).
slow: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadscope --durations=15 -m slow

demo: $(STAMP)
	$(BIN)/python -m simlab.demo

# JAX-MD pulls in flax, orbax and tensorstore: it gets its own environment, on simlab's jax,
# and the Lennard-Jones benchmark runs it there in a subprocess.
JAXMD_VENV := .venv-jaxmd
$(JAXMD_VENV)/.installed: $(STAMP)
	test -x $(JAXMD_VENV)/bin/python || $(PYTHON) -m venv $(JAXMD_VENV)
	$(JAXMD_VENV)/bin/python -m pip install --quiet \
		"$$($(BIN)/python -m pip freeze | grep '^jax==')" jax-md
	touch $@

# torch is large: torchsde gets its own environment too, and the SDE benchmark runs it there.
# torch is pinned to the release whose CPU build the configured package sources hold: an
# unpinned one may resolve to a multi-GB CUDA build.
TORCHSDE_VENV := .venv-torchsde
$(TORCHSDE_VENV)/.installed:
	test -x $(TORCHSDE_VENV)/bin/python || $(PYTHON) -m venv $(TORCHSDE_VENV)
	$(TORCHSDE_VENV)/bin/python -m pip install --quiet torch==2.13.0 torchsde
	touch $@

bench: $(STAMP) $(JAXMD_VENV)/.installed $(TORCHSDE_VENV)/.installed slow
	JAXMD_PYTHON=$(JAXMD_VENV)/bin/python TORCHSDE_PYTHON=$(TORCHSDE_VENV)/bin/python \
		$(BIN)/python benchmarks/run.py

# Mutation testing of the core modules (mutmut); long, and not part of `make test`.
# MUTATE_BUDGET is the time per module in seconds, MUTATE_STRIDE runs every n-th mutant,
# MUTATE_MODULES narrows the run (default: every module in benchmarks/mutate.py).
MUTATE_BUDGET ?= 1200
MUTATE_STRIDE ?= 1
MUTATE_MODULES ?=
mutate: $(STAMP)
	$(BIN)/python benchmarks/mutate.py --budget $(MUTATE_BUDGET) --stride $(MUTATE_STRIDE) \
		$(MUTATE_MODULES)

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

lint: $(STAMP)
	$(BIN)/ruff check simlab tests benchmarks examples docs/scripts
	$(BIN)/ruff format --check simlab tests benchmarks examples docs/scripts
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) $(JAXMD_VENV) $(TORCHSDE_VENV) site results .pytest_cache
