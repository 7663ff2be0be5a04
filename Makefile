# fmcluster: `make synth` synthesizes a cluster file (default the quickstart) and prints its plan;
# `make test` runs every quality gate. Both install what they need first, once.
CONFIG ?= examples/quickstart.yaml
VENV := .venv
STAMP := .make
export PATH := $(CURDIR)/$(VENV)/bin:$(CURDIR)/node_modules/.bin:$(PATH)
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
export CDK_DISABLE_VERSION_CHECK := 1
export AWS_EC2_METADATA_DISABLED := true
PYTEST_ARGS ?=

.PHONY: setup synth plan validate validate-live diagnose test lint deploy clean

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

synth: setup
	cdk synth --quiet --no-notices -c config=$(CONFIG)
	fmcluster plan $(CONFIG)

plan validate: setup
	fmcluster $@ $(CONFIG)

# Read-only calls to the account with your credentials (AWS_PROFILE, ...); see the README's IAM policy.
validate-live: setup
	fmcluster validate $(CONFIG) --live

diagnose: setup
	fmcluster diagnose $(CONFIG)

lint: setup
	ruff check .

test: lint
	pytest $(PYTEST_ARGS)

deploy: setup
	cdk deploy --all --no-notices -c config=$(CONFIG)

clean:
	rm -rf cdk.out $(STAMP) .pytest_cache
