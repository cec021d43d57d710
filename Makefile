# The two set-up commands of the README:
#   make demo   run panio's main job on the embedded default
#   make test   install everything, lint (ruff) and run the whole test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test test-loaded install system-deps bench scale clean

$(BIN)/panio: pyproject.toml
	@echo "make: installing panio and its test dependencies into $(VENV) (a minute or two on a fresh clone)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

install: $(BIN)/panio

system-deps:
	bash scripts/system-deps.sh

demo: install
	bash scripts/demo.sh

# Most tests wait on real peers (QEMU boots, sshd, Redis, workers), not on the CPU:
# four pytest-xdist workers, each taking whole files (a file's module fixtures,
# such as one QEMU boot, are set up once), finish the suite in about a third of
# the time on two cores. `make test TEST_WORKERS=0` runs it in one process.
# The longest files go first (tests/slowfirst.py: last run's durations, else a list).
TEST_WORKERS ?= 4

# panio's modules compiled once (the environment may say PYTHONDONTWRITEBYTECODE): else each of the suite's
# thousands of panio, capture and worker processes compiles them again (and a benchmark measures that, not
# what an installed panio costs: `bench` and `scale` compile them too).
test: system-deps install
	$(BIN)/ruff check .
	$(BIN)/python -m compileall -q -j 0 bench_agent controller scenarios skills > /dev/null
	@echo "make: running the test suite ($(TEST_WORKERS) workers; about 10 minutes on 2 quiet cores; a dot a test)"
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# The suite beside one CPU-bound busy loop per core (scripts/loaded.sh): it must pass there too.
test-loaded:
	bash scripts/loaded.sh $(MAKE) test

# labgrid (measured side by side in benchmarks/serial_roundtrip.py) ships its own
# fork of pyserial, so it lives in a venv of its own.
.venv-labgrid/bin/python:
	$(PYTHON) -m venv .venv-labgrid
	.venv-labgrid/bin/pip install -q 'labgrid>=24'

# Every benchmark, each leaving its rows in $(BENCH_OUT); then one table of issue 24's figures
# (benchmarks/_summary.py), each with its goal, met / NOT met, and the load average it was measured at.
# The scale tools (seed_history.py, history_scale.py, scale.py; procmem.py reads a run's processes) take a
# database and minutes: `make scale`.
BENCH_OUT ?= bench-out
# Two source trees side by side (`--base REV`: the commit before a change against this tree), run by hand:
COMPARE := benchmarks/recorder_drain.py benchmarks/api_cpu.py
SCALE := benchmarks/seed_history.py benchmarks/history_scale.py benchmarks/scale.py benchmarks/procmem.py \
	benchmarks/controller_load.py

bench: install .venv-labgrid/bin/python
	$(BIN)/python -m compileall -q -j 0 bench_agent controller scenarios skills > /dev/null
	rm -rf $(BENCH_OUT) && mkdir -p $(BENCH_OUT)
	failed=""; \
	for b in $(filter-out $(SCALE) $(COMPARE),$(wildcard benchmarks/[!_]*.py)); do \
		PANIO_BENCH_OUT=$(BENCH_OUT) $(BIN)/python $$b || failed="$$failed $$b"; done; \
	$(BIN)/python benchmarks/_summary.py $(BENCH_OUT); \
	if [ -n "$$failed" ]; then echo "failed:$$failed"; exit 1; fi

# docs/scale.md: a million jobs on PostgreSQL (the test suite's), their reads measured, then 10 hosts x 10 boards,
# then the controller alone under 1,000 boards of protocol-level hosts (ten minutes).
SCALE_DB ?= postgresql://postgres@127.0.0.1:5432/panio_scale
scale: install
	$(BIN)/python -m compileall -q -j 0 bench_agent controller scenarios skills > /dev/null
	$(BIN)/python benchmarks/seed_history.py --jobs 1000000 --results $(SCALE_DB)
	$(BIN)/python benchmarks/history_scale.py --results $(SCALE_DB)
	$(BIN)/python benchmarks/scale.py --hosts 10 --boards 10 --minutes 5
	$(BIN)/python benchmarks/controller_load.py --boards 1000 --job-every-s 60 --minutes 10

clean:
	rm -rf $(VENV) demo-out $(BENCH_OUT)
