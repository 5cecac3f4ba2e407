# Every target installs what it needs into .venv first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

SAM_VENV := .venv-sam
# The scaffolded app of sam-check: its path has a space, as users' paths may.
APP      := build/an app
export SAM_CLI_TELEMETRY := 0

.PHONY: demo test lint reference sam-check bench soak checkov clean

$(BIN)/python:
	@echo "make: creating $(VENV) (the first run installs jobkit's dependencies: about a minute)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --progress-bar on --upgrade pip

# pip prints each package as it goes, so a first run shows its progress.
$(VENV)/.local: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --progress-bar on -e '.[local]'
	touch $@

$(VENV)/.dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --progress-bar on -e '.[local,dev]'
	touch $@

demo: $(VENV)/.local
	$(BIN)/jobkit demo

# The suite on each core (at most 4); an idle worker takes tests queued for a busy one.
test: $(VENV)/.dev
	$(BIN)/pytest -n auto --maxprocesses 4 --dist worksteal

# Reproducible measurements: results to benchmarks/results/, the table into the README.
bench: $(VENV)/.dev
	$(BIN)/python benchmarks/run.py --readme README.md --docs

# 50,000 jobs through the local stack with 5% injected faults; fails unless they balance.
soak: $(VENV)/.dev
	$(BIN)/python benchmarks/soak.py --jobs 50000 --fault-rate 0.05

# checkov in a venv of its own (it pins urllib3 1.x), on the template and its translation.
.venv-checkov/.installed:
	$(PYTHON) -m venv .venv-checkov && .venv-checkov/bin/pip install -q 'checkov==3.3.30' && touch $@

checkov: $(VENV)/.dev .venv-checkov/.installed
	.venv-checkov/bin/checkov -f template.yaml --framework cloudformation --compact --quiet --skip-download
	mkdir -p build && $(BIN)/python -c "import json,pathlib; from jobkit.local.cloudformation import load_template, translate; pathlib.Path('build/template.translated.json').write_text(json.dumps(translate(load_template(pathlib.Path('template.yaml')), parameters={'Prefix': 'jobkit'})))"
	.venv-checkov/bin/checkov -f build/template.translated.json --framework cloudformation --compact --quiet --skip-download

# The reference of the [types.NAME] keys in infra/jobs.toml, from the keys the features declare,
# and the runner's stage chart in docs/architecture.md, from the declared stages.
reference: $(VENV)/.local
	$(BIN)/python -c "from jobkit.declaration.config import TYPE_OPTIONS; from jobkit.declaration.options import write_reference; write_reference(TYPE_OPTIONS, 'infra/jobs.toml')"
	$(BIN)/python -c "from jobkit.runner.stages import write_stage_chart; write_stage_chart('docs/architecture.md')"

lint: $(VENV)/.dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The deploy path, offline: the template is current and lint-clean, SAM
# validates it, and `sam build` builds the layer (with python/jobkit) and the
# runners. SAM CLI pins its own boto3, so it lives in a venv of its own.
$(SAM_VENV)/.installed:
	$(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/python -m pip install -q --upgrade pip
	$(SAM_VENV)/bin/pip install -q 'aws-sam-cli>=1.130'
	touch $@

sam-check: $(VENV)/.dev $(SAM_VENV)/.installed
	$(BIN)/jobkit template --check
	$(BIN)/cfn-lint template.yaml
	$(SAM_VENV)/bin/sam validate --lint --template template.yaml
	JOBKIT_PYTHON=$(abspath $(BIN)/python) $(SAM_VENV)/bin/sam build --template template.yaml --build-dir .aws-sam/build
	$(BIN)/python tests/deploy/check_build.py .aws-sam/build
	@echo "sam-check: this repo's template is current, lint-clean, validated and built"
	@# MediaWiki's scale: 120 types on their own queues, in nested stacks, each transformed and linted.
	$(BIN)/python tests/deploy/big_stack.py build/big
	@# An app's repo: jobkit from the wheel in the app's virtualenv, `jobkit init`, a second
	@# type; then SAM validates and builds it there, with that virtualenv active.
	$(BIN)/python tests/deploy/app_project.py "$(APP)"
	cd "$(APP)" && PATH="$$PWD/.venv/bin:$$PATH" "$(CURDIR)/$(SAM_VENV)/bin/sam" validate --lint
	cd "$(APP)" && PATH="$$PWD/.venv/bin:$$PATH" "$(CURDIR)/$(SAM_VENV)/bin/sam" build
	"$(APP)/.venv/bin/python" tests/deploy/check_build.py "$(APP)/.aws-sam/build"
	@echo "sam-check: a scaffolded app's template validates and builds, its layer holding the installed jobkit"

clean:
	rm -rf $(VENV) $(SAM_VENV) .aws-sam
