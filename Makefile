# One command to set up and cook a dish, one to test. Only python3 and pip needed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
DISH   ?= 番茄炒蛋
STAMP  := $(VENV)/.installed

.PHONY: run test lint ladder serve bench sam-build clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/chuixiang cook "$(DISH)" --json

test: $(STAMP)
	$(BIN)/cfn-lint template.yaml
	$(BIN)/chuixiang ladder > /dev/null
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check layers functions local tests bench
	$(BIN)/mypy layers/shared/chuixiang local/chuixiang_local

ladder: $(STAMP)
	$(BIN)/chuixiang ladder

serve: $(STAMP)
	$(BIN)/chuixiang serve

bench: $(STAMP)
	$(BIN)/python bench/stream_reader.py
	$(BIN)/python bench/give_up_lateness.py

# aws-sam-cli is large; install it only for building. PYENV_VERSION puts python3.12 on PATH.
sam-build: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[sam]'
	PYENV_VERSION=3.11.7:3.12.1:3.13.0 PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/sam build

clean:
	rm -rf $(VENV) .aws-sam .chuixiang
