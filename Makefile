# manip workspace. First use: `make demo` or `make test` create .venv via scripts/setup.sh.
SHELL := /bin/bash
.DEFAULT_GOAL := test

VENV   := .venv
PYTHON := $(VENV)/bin/python
# Extra arguments for pytest, e.g. make test PYTEST_ARGS='-x -k planner'
PYTEST_ARGS ?=
# Tests marked slow (long soak/benchmark-like runs) are left to `make test-all`.
TEST_MARKERS ?= not slow
# Extra arguments for the demo, e.g. make demo DEMO_ARGS='--output /tmp/run1'
DEMO_ARGS ?=

.PHONY: setup test test-all demo bench clean distclean

# Full (re)setup; only redoes the steps whose inputs changed.
setup:
	scripts/setup.sh

# Only when the venv is missing (test/demo/bench depend on this file).
$(PYTHON):
	scripts/setup.sh

# Every run brings the venv up to date: setup.sh redoes only the steps whose inputs changed (after a git pull: new
# requirements, messages, or kernels whose numba cache would be stale) and takes under a second when nothing did.
define ensure_setup
	@scripts/setup.sh
endef

test: $(PYTHON)
	$(ensure_setup)
	@for d in $$(sed -n 's/^testpaths *= *//p' pytest.ini); do \
	  test -d "$$d" || { echo "make test: testpaths entry '$$d' (pytest.ini) does not exist" >&2; exit 1; }; \
	done
	ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST $(PYTHON) -m pytest -m "$(TEST_MARKERS)" $(PYTEST_ARGS)

# Every test, the slow ones included.
test-all:
	$(MAKE) test TEST_MARKERS=

# The main job: the simulated pick-and-place on a real ROS 2 graph (see manip_sim/manip_sim/demo.py).
demo: $(PYTHON)
	$(ensure_setup)
	$(PYTHON) -m manip_sim.demo $(DEMO_ARGS)

bench: $(PYTHON)
	$(ensure_setup)
	$(PYTHON) bench/core.py

# Build products and caches; keeps .venv (use distclean to remove it too).
clean:
	rm -rf build .pytest_cache
	find . -path ./$(VENV) -prune -o \( -name __pycache__ -o -name '*.egg-info' \) -type d -print0 | xargs -0 -r rm -rf
	find . -path ./$(VENV) -prune -o \( -name '*.nbi' -o -name '*.nbc' \) -type f -print0 | xargs -0 -r rm -f

distclean: clean
	rm -rf $(VENV)
