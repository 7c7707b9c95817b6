# Two commands do everything on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
RANKS  ?= 2
CASE   ?= cavity
TEST_WORKERS ?= 2
# numba's compiled kernels are cached in haloflow/__pycache__/kernels (haloflow/kernel_cache.py),
# where `make run`, `make test` and the README's own `.venv/bin/haloflow ...` commands all
# find them; a NUMBA_CACHE_DIR in the environment puts them there instead

.PHONY: install run test lint clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $@

# The default case on $(RANKS) ranks with the venv's own MPI launcher (see README): the
# kernels it needs compiled first, once, on one process (not on every rank at once).
run: install
	$(PY) -m haloflow.warmup --case $(CASE)
	$(VENV)/bin/mpiexec -n $(RANKS) $(VENV)/bin/haloflow run $(CASE)

# The kernels compiled into the cache (on two cores), and the sources byte-compiled once: the
# tests start some 400 processes, ranks included, that would each compile them where
# PYTHONDONTWRITEBYTECODE is set.  One-process tests one per core first, whole modules in
# collection order (the modules with slow tests first: tests/conftest.py); then the MPI jobs
# and the tests that need the cores to themselves (threads, timings), one at a time (the
# parallel-marked tests of one rank count in one job: tests/mpi/conftest.py).
test: install
	$(PY) -m haloflow.warmup
	$(PY) -m compileall -q haloflow tests
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
		-m "not mpi and not serial" tests
	$(PY) -m pytest -q -m "mpi or serial" tests

lint: install
	$(PY) -m ruff check haloflow tests benchmarks

clean:
	rm -rf haloflow/__pycache__/kernels .numba_cache .pytest_cache build *.egg-info
