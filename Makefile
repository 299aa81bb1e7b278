# vtl — developer entry points. `make test` and `make demo` work on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
STAMP  := $(VENV)/.installed-test

.PHONY: test demo bench lint vulkan mpi clean docs

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(STAMP): pyproject.toml | $(VENV)/bin/python mpi
	$(PIP) install -q -e '.[test,wgpu]'
	touch $(STAMP)

# The wgpu backend needs a Vulkan driver; without a GPU, Mesa's software driver (lavapipe) serves.
vulkan:
	@if ls /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json 2>/dev/null | grep -q .; then \
		echo "vulkan: driver present"; \
	elif command -v apt-get >/dev/null 2>&1; then \
		echo "vulkan: installing mesa-vulkan-drivers (software Vulkan)"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mesa-vulkan-drivers libvulkan1) >/dev/null \
			|| echo "vulkan: could not install mesa-vulkan-drivers; wgpu tests will skip"; \
	else \
		echo "vulkan: no driver and no apt-get; wgpu tests will skip"; \
	fi

# vtl.distributed's tests launch ranks with mpiexec: Debian's Open MPI (before the pip install,
# so that mpi4py, from the test extra, could also build against it if no wheel fits).
mpi:
	@if command -v mpiexec >/dev/null 2>&1; then \
		echo "mpi: mpiexec present"; \
	elif command -v apt-get >/dev/null 2>&1; then \
		echo "mpi: installing openmpi-bin libopenmpi-dev"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin libopenmpi-dev) >/dev/null \
			|| echo "mpi: could not install Open MPI; distributed tests will skip"; \
	else \
		echo "mpi: no mpiexec and no apt-get; distributed tests will skip"; \
	fi

# The suite exercises the wgpu backend wherever a Vulkan driver exists (lavapipe in CI), on
# one worker process per core (pytest-xdist; PYTEST_WORKERS=0 runs them in this process).
PYTEST_WORKERS ?= auto
test: $(STAMP) vulkan
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist worksteal

# `make demo` (BACKEND=numpy|cupy|wgpu): train an MLP on the bundled Digits, print the test
# accuracy, write demo_out/digits.safetensors and demo_out/learning_curve.png.
BACKEND ?= numpy
DEMO_STAMP := $(VENV)/.installed-demo

$(DEMO_STAMP): pyproject.toml | $(VENV)/bin/python
	$(PIP) install -q -e '.[plot]'
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
ifeq ($(BACKEND),wgpu)
	$(PIP) install -q -e '.[plot,wgpu]'
	@$(MAKE) -s vulkan
	$(PY) examples/demo.py --backend wgpu
else
	$(PY) examples/demo.py --backend $(BACKEND)
endif

# `make docs`: the documentation site (user guide, tutorials, API reference) into site/.
DOCS_STAMP := $(VENV)/.installed-docs

$(DOCS_STAMP): pyproject.toml | $(VENV)/bin/python
	$(PIP) install -q -e '.[docs]'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

bench: $(STAMP)
	$(PY) -m pytest benchmarks --benchmark-only --benchmark-enable

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) build dist site .pytest_cache .hypothesis .benchmarks
