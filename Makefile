# fmcluster: `make synth` synthesizes a cluster file (default the quickstart) and prints its plan;
# `make test` runs every quality gate. Both install what they need first, once.
CONFIG ?= examples/quickstart.yaml
VENV := .venv
CHECKOV_VENV := .checkov
STAMP := .make
export PATH := $(CURDIR)/$(VENV)/bin:$(CURDIR)/node_modules/.bin:$(PATH)
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
export CDK_DISABLE_VERSION_CHECK := 1
export AWS_EC2_METADATA_DISABLED := true
PYTEST_ARGS ?=

.PHONY: setup synth plan validate test lint deploy clean

setup: $(STAMP)/python $(STAMP)/node $(STAMP)/prometheus

$(STAMP)/python: pyproject.toml
	@mkdir -p $(STAMP)
	test -x $(VENV)/bin/python || python3 -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check --editable '.[dev]'
	@touch $@

$(STAMP)/node: package.json package-lock.json
	@mkdir -p $(STAMP)
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# A real Prometheus (Debian's package) checks the observability rules and dashboards; the package's own service
# is disabled so nothing listens on :9090 behind your back.
$(STAMP)/prometheus:
	@mkdir -p $(STAMP)
	command -v prometheus >/dev/null && command -v promtool >/dev/null || { \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus; }
	systemctl disable --now prometheus >/dev/null 2>&1 || true
	@touch $@

# checkov (a test-only scanner) pins boto3, packaging and more that clash with the dev extra: it gets its own
# virtual environment, from a pinned list, only on the test path.
$(STAMP)/checkov: tests/gates/checkov-requirements.txt
	@mkdir -p $(STAMP)
	test -x $(CHECKOV_VENV)/bin/python || python3 -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r tests/gates/checkov-requirements.txt
	@touch $@

synth: setup
	cdk synth --quiet --no-notices -c config=$(CONFIG)
	fmcluster plan $(CONFIG)

plan validate: setup
	fmcluster $@ $(CONFIG)

lint: setup
	ruff check .

test: lint $(STAMP)/checkov
	pytest $(PYTEST_ARGS)

deploy: setup
	cdk deploy --all --no-notices -c config=$(CONFIG)

clean:
	rm -rf cdk.out $(STAMP) .pytest_cache $(CHECKOV_VENV)
