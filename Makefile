# One command to set up and cook a dish, one to test. Only python3 and pip needed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
DISH   ?= 番茄炒蛋
STAMP  := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-run
SAM_CLI_VERSION := 1.170.0
#: The translator aws-sam-cli $(SAM_CLI_VERSION) pins (tests/pipeline/test_layer_build.py keeps them in step).
SAM_TRANSLATOR_VERSION := 1.115.0
TRANSLATOR_STAMP := .venv-sam/.translator-$(SAM_TRANSLATOR_VERSION)
SAM_STAMP := .venv-sam/.installed-$(SAM_CLI_VERSION)
NODE_STAMP := node_modules/.installed
#: The AWS CLI the runbook's commands are run with (tests/pipeline/test_runbook_commands.py), in its own venv: it
#: pins its own botocore. PyPI has version 1; the runbook is written for version 2 (the test says what differs).
AWSCLI_VERSION := 1.46.3
CLI_STAMP := .venv-cli/.installed-$(AWSCLI_VERSION)
BROWSER_STAMP := .chuixiang/.browser-installed

# Python may write bytecode: pytest caches the test modules it rewrites for assertions only then (without, every
# run of the unit tier spends 2.5 s rewriting them again), and the local cloud's workers reuse what they compiled.
export PYTHONDONTWRITEBYTECODE :=

.PHONY: test-deps test-template alarms alarms-table run test test-python test-waiting test-node test-fast test-runner dashboard test-sockets test-pipeline test-js test-browser screenshot lint validate ladder docs docs-ladder openapi serve bench bench-layer sam-build deploy clean

#: uv makes every other venv and installs its packages, pinned here and itself installed by pip (all a fresh
#: machine needs): pip's resolver and installer held a fresh clone's `make test` ~40 s before its first test, uv a
#: few seconds, and `python3 -m venv` took 3-4.5 s a venv (ensurepip), `uv venv` 0.3 s. Each venv has its own pip
#: (the layer's build runs it).
UV_VERSION := 0.13.9
UV := .venv-uv/bin/uv
UV_INSTALL = $(UV) pip install --quiet --python
UV_VENV = $(UV) venv --quiet --seed --python $(PYTHON)
# The machine's pip installs into it (pip 22.3+, `--python`: ensurepip would take 3 s); an older pip, its own.
$(UV):
	test -x .venv-uv/bin/python || $(PYTHON) -m venv --without-pip .venv-uv
	$(PYTHON) -m pip --python .venv-uv/bin/python install --quiet uv==$(UV_VERSION) || \
		(.venv-uv/bin/python -m ensurepip && .venv-uv/bin/python -m pip install --quiet uv==$(UV_VERSION))

# `make run` installs what running needs (RUN_STAMP: the runtime dependencies, and SAM's translator alone);
# the tests and lint add the dev tools (STAMP) and aws-sam-cli (SAM_STAMP) on top.
$(RUN_STAMP): pyproject.toml | $(UV)
	test -x $(BIN)/python || $(UV_VENV) $(VENV)
	$(UV_INSTALL) $(BIN)/python --upgrade pip
	$(UV_INSTALL) $(BIN)/python --compile-bytecode -e .
	# Precompiled, as the layer Lambda gets is (build_layer.py): a fresh clone's first local cold start would
	# otherwise compile every module on import, ~9 s on a busy 2-core machine, past the Submit state's timeout.
	$(BIN)/python -m compileall -q layers/shared/chuixiang functions local
	touch $(RUN_STAMP)

# The dev tools with the runtime in one install (one resolve). Compiled, as the tests' processes import them at once
# (left to them, four processes compile the same modules side by side: that fresh run took 562 s of CPU, a warm one
# 502), but not the large packages they barely import (NOT_COMPILED: cfn-lint's sympy alone is 45 MB): compiling
# every module took ~13 s of both cores, this 6 s. Nor the packages no test process imports from its pyc (NOT_USED,
# read from the pyc files' access times after a fresh `make test`; hypothesis is imported as pytest rewrote it): 10.6 ->
# 8.4 s of CPU. A package listed here that comes into use is compiled by its first importer.
NOT_USED := hypothesis|graphql|docker|pre_commit|joserfc|bs4|soupsieve|distlib|identify|cffi|pycparser|mypy_boto3_[a-z0-9_]+|aws_xray_sdk
NOT_COMPILED := /(sympy|mpmath|networkx|mypy|mypyc|numpy|fontTools|pygments|openai|pip|setuptools|virtualenv|$(NOT_USED))/
$(STAMP): pyproject.toml | $(UV)
	test -x $(BIN)/python || $(UV_VENV) $(VENV)
	$(UV_INSTALL) $(BIN)/python --upgrade pip
	$(UV_INSTALL) $(BIN)/python -e '.[dev]'
	$(BIN)/python -m compileall -q -j0 -x '$(NOT_COMPILED)' $$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') > /dev/null
	$(BIN)/python -m compileall -q layers/shared/chuixiang functions local
	touch $(RUN_STAMP) $(STAMP)

# The local cloud reads the roles and versions from SAM's own transform, run by its translator's venv.
run: $(RUN_STAMP) $(TRANSLATOR_STAMP)
	$(BIN)/chuixiang cook "$(DISH)" --json

# The tests check the template after SAM's transform too, with the pinned aws-sam-cli's translator.
# What pytest needs is installed first, side by side, then four lanes: the template's lint, pytest's tests (their
# files over TEST_WORKERS), pytest's `waiting` tests in a process of their own, and the two Node tiers one after the
# other, whose installs (npm, apt's chromium) run in their lane while pytest's run. A `waiting` test (every sockets
# test, and the pipeline modules marked so) waits on its scaled limits far more than it computes: beside the
# workers, these overlap their work instead of taking the workers' turns. Each lane's output is printed whole when
# it ends. The lanes share one set of zygote and command roots (WITH_ROOTS, below): each pytest process and the
# Node lane would load a set of their own otherwise (~4 s of CPU each).
test:
	$(MAKE) --no-print-directory -j4 $(STAMP) $(SAM_STAMP) $(CLI_STAMP)
	$(WITH_ROOTS) $(MAKE) --no-print-directory -j4 --output-sync=target test-template test-python test-waiting test-node

# What every tier needs, installed side by side (each venv, npm and apt are independent of one another).
test-deps: $(STAMP) $(SAM_STAMP) $(CLI_STAMP) $(NODE_STAMP) $(BROWSER_STAMP)

# Both templates linted (cfn-lint also checks the parameters the nested one is passed), and the ladder.
test-template: $(STAMP)
	$(BIN)/cfn-lint template.yaml observability/template.yaml
	$(BIN)/chuixiang ladder > /dev/null

test-python: $(STAMP) $(SAM_STAMP) $(CLI_STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not waiting" --ignore=tests/sockets

# Only the folders that hold `waiting` tests are collected (tests/pipeline/test_lanes.py checks both selections).
test-waiting: $(STAMP) $(SAM_STAMP) $(CLI_STAMP)
	$(BIN)/python -m pytest -m waiting tests/sockets tests/pipeline

# The JS tier, then the browser tier: one `chuixiang serve` cold-starting at a time beside pytest. Side by side (and
# the JS tier's files two or three at once) they finished sooner, but with two suites on one machine the first jobs'
# cold starts overran the submit function's 10 s and failed INTERNAL; pytest is the longer lane anyway.
test-node: $(STAMP) $(TRANSLATOR_STAMP) $(NODE_STAMP) $(BROWSER_STAMP)
	$(WITH_ROOTS) $(MAKE) --no-print-directory test-js test-browser

#: pytest workers: one per core. One more is faster on an idle machine (2 cores 61 % -> 85 % busy, pytest 365 s ->
#: 277 s beside the Node tiers) but failed five tests and every browser test with two suites at once, where one per
#: core passes: CI must hold beside other work (docs/local-runner.md#run-it). `TEST_WORKERS=3` on an idle machine.
TEST_WORKERS ?= $(shell nproc 2>/dev/null || echo 2)

# The tiers are the folders of tests/ (a unit or runner test that opens a socket or starts a process fails).
# The fast tier: the product's unit tests, in-process only, on a worker per core, each file on one worker (a module's
# fixtures and caches built once: test_one_home.py parses the repository once, not on both) (README: as measured,
# once installed). `make test` runs every tier.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile tests/unit

# The local runner's own unit tests: its emulations held to AWS's documentation, its commands.
test-runner: $(STAMP)
	$(BIN)/python -m pytest tests/runner

# The fault scenarios, fallbacks and breaker on real sockets with the ladder scaled down (no local cloud).
test-sockets: $(STAMP)
	$(BIN)/python -m pytest tests/sockets

# The local cloud, whole commands, builds and the long fuzz runs.
test-pipeline: $(STAMP) $(SAM_STAMP) $(CLI_STAMP)
	$(BIN)/python -m pytest tests/pipeline

# The Node tiers' `serve`s are forked from a command root and fork their pools' zygotes from two worker roots, all
# loaded once (chuixiang_local/workers/with_roots.py; clients/js/test/serve.js starts serve through
# chuixiang_local.commands.launch), not each loading moto, boto3, Powertools and pydantic again (~1.5 s of CPU a
# serve, ~0.35 s a zygote, four or five a serve). `test-node` runs both tiers under one set of roots.
WITH_ROOTS := $(BIN)/python -m chuixiang_local.workers.with_roots

# The JavaScript client against `chuixiang serve`, with Node's own test runner (Node 20+; no dependencies).
test-js: $(STAMP) $(TRANSLATOR_STAMP) $(NODE_STAMP)
	node_modules/.bin/tsc -p clients/js
	$(WITH_ROOTS) node --test clients/js/test/*.test.js

# The demo page in headless Chromium (Debian's, driven by playwright-core from npm), against `serve --demo-port`.
test-browser: $(STAMP) $(TRANSLATOR_STAMP) $(NODE_STAMP) $(BROWSER_STAMP)
	$(WITH_ROOTS) node --test --test-concurrency=1 tests/browser/*.test.js

# docs/demo.png: the finished demo page, as the browser tier sees it.
screenshot: $(STAMP) $(TRANSLATOR_STAMP) $(NODE_STAMP) $(BROWSER_STAMP)
	UPDATE_SCREENSHOT=1 node --test --test-concurrency=1 --test-name-pattern="end to end" tests/browser/*.test.js

# docs/dashboard.png: the dashboard drawn from the scripted mix of the dashboard test.
dashboard: $(STAMP) $(TRANSLATOR_STAMP)
	UPDATE_DASHBOARD=1 $(BIN)/python -m pytest -p no:randomly tests/pipeline/test_dashboard.py -k every_widget

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $(NODE_STAMP)

# Debian's chromium, and a CJK font so screenshots show the Chinese text (root: CI and this machine are).
$(BROWSER_STAMP):
	test -x /usr/bin/chromium && test -d /usr/share/fonts/opentype/noto || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-noto-cjk)
	mkdir -p .chuixiang && touch $(BROWSER_STAMP)

$(CLI_STAMP): | $(UV)
	test -x .venv-cli/bin/python || $(UV_VENV) .venv-cli
	$(UV_INSTALL) .venv-cli/bin/python awscli==$(AWSCLI_VERSION)
	touch $(CLI_STAMP)

# checkov and bandit live in their own venv: their pins would fight the app's.
LINT_STAMP := .venv-lint/.installed
$(LINT_STAMP): requirements-lint.txt | $(UV)
	test -x .venv-lint/bin/python || $(UV_VENV) .venv-lint
	$(UV_INSTALL) .venv-lint/bin/python -r requirements-lint.txt
	touch $(LINT_STAMP)

lint: $(STAMP) $(LINT_STAMP)
	$(BIN)/ruff format --check layers functions local tests bench
	$(BIN)/ruff check layers functions local tests bench
	# One value for a job's many inputs: at most three product functions take more than five positional
	# parameters, each marked and said why (pylint's too-many-positional, a ruff preview rule).
	$(BIN)/ruff check --preview --select PLR0917 layers/shared/chuixiang functions
	# One home per name: only a package's __init__.py re-exports, no private name or private module is used
	# outside its home (complexity <= 12 is ruff's C90 above).
	$(BIN)/python -m pytest -q -p no:randomly -p no:cacheprovider tests/unit/test_one_home.py
	$(BIN)/mypy layers/shared/chuixiang local/chuixiang_local local/stack_template local/model_samples tests
	.venv-lint/bin/bandit -q -r layers/shared/chuixiang functions local/chuixiang_local local/stack_template local/model_samples
	.venv-lint/bin/checkov -f template.yaml -f observability/template.yaml --framework cloudformation --quiet --compact --skip-download

ladder: $(STAMP)
	$(BIN)/chuixiang ladder

# Rewrite docs/openapi.json from the routes (a test fails when it drifts).
openapi: $(STAMP)
	$(BIN)/python -c "from aws_lambda_powertools.event_handler import APIGatewayHttpResolver; from chuixiang.api import build_app, openapi_json; print(openapi_json(build_app(APIGatewayHttpResolver)))" > docs/openapi.json

# The burn-rate alarms: written into observability/template.yaml from their declaration (layers/shared/chuixiang/slo.py),
# and the runbook's "What pages, measured" from the simulation (~8 s of CPU); a test fails when either is stale.
alarms: $(STAMP)
	$(BIN)/python -m chuixiang_local.burn_alarms
alarms-table: $(STAMP)
	$(BIN)/python -m chuixiang_local.burn_alarms --table

# Rewrite the documents' generated tables: the ladder (docs/ladder.md) and the module map
# (docs/architecture.md). A test fails when either is stale.
docs docs-ladder: $(STAMP)
	$(BIN)/python -m chuixiang_local.commands.readme

serve: $(RUN_STAMP) $(TRANSLATOR_STAMP)
	$(BIN)/chuixiang serve

# python3.12 (the Lambda runtime's), as `sam build` needs it: on PATH, or one of pyenv's versions when pyenv is
# there (its shims answer only for the versions PYENV_VERSION names: the current one first, then every other).
PY312_PATH := $(if $(shell command -v pyenv),PYENV_VERSION=$(shell (pyenv version-name; pyenv versions --bare) | awk '!seen[$$0]++' | paste -sd: -),)

bench-layer: $(STAMP)
	$(PY312_PATH) $(BIN)/python bench/layer_cold_start.py

bench: $(STAMP) bench-layer
	$(BIN)/python bench/stream_reader.py
	$(BIN)/python bench/give_up_lateness.py
	$(BIN)/python bench/serve_load.py
	$(BIN)/python bench/fairness.py --warm-up-s 40
	$(BIN)/python bench/tracing_cold_start.py
	$(BIN)/python bench/evening.py

# aws-sam-cli is large and pins its own dependencies: it gets a venv of its own, only for validating and building.
# PYENV_VERSION puts python3.12 on PATH, which `sam build` needs for the python3.12 runtime.
$(TRANSLATOR_STAMP): | $(UV)
	test -x .venv-sam/bin/python || $(UV_VENV) .venv-sam
	$(UV_INSTALL) .venv-sam/bin/python aws-sam-translator==$(SAM_TRANSLATOR_VERSION) PyYAML
	touch $(TRANSLATOR_STAMP)

# With the translator in the same install (aws-sam-cli pins that version: one resolve, not two in a row). This
# venv and the CLI's are not compiled ahead: the few modules they import are compiled on first use.
$(SAM_STAMP): | $(UV)
	test -x .venv-sam/bin/python || $(UV_VENV) .venv-sam
	$(UV_INSTALL) .venv-sam/bin/python aws-sam-cli==$(SAM_CLI_VERSION) aws-sam-translator==$(SAM_TRANSLATOR_VERSION) PyYAML
	touch $(TRANSLATOR_STAMP) $(SAM_STAMP)

# cfn-lint after SAM's transform (the Fn::Ifs in the API body); no AWS credentials needed.
validate: $(SAM_STAMP)
	SAM_CLI_TELEMETRY=0 .venv-sam/bin/sam validate --lint --region us-east-1

sam-build: validate
	$(PY312_PATH) SAM_CLI_TELEMETRY=0 .venv-sam/bin/sam build

# The ladder is checked with what will be deployed (the stack's current values, samconfig.toml, PARAMS),
# so a stale value kept from an earlier deploy cannot slip through; and a stack whose alarms would page
# nobody is refused (UNPAGED=1 accepts it, e.g. for a developer's stack).
# Usage: make deploy PARAMS="ModelApiKeySecretArn=arn:… AlarmEmail=oncall@example.com" [NO_CONFIRM=1: CI, no prompt]
deploy: $(STAMP) sam-build
	$(BIN)/chuixiang ladder --account --deployed $(if $(UNPAGED),--unpaged) $(if $(PARAMS),--parameter-overrides $(PARAMS))
	SAM_CLI_TELEMETRY=0 .venv-sam/bin/sam deploy $(if $(PARAMS),--parameter-overrides $(PARAMS),--guided) $(if $(NO_CONFIRM),--no-confirm-changeset)

clean:
	rm -rf $(VENV) .venv-sam .venv-lint .venv-cli .venv-uv .aws-sam .chuixiang node_modules
