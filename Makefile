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

# Real tools for the node tests (tests/node): Debian's slurm-wlm 22.05 with munge (a one-node Slurm), lvm2 and
# xfsprogs (instance-store disks on loop devices). On the test path only, installed only when missing (as root, as
# on CI), pinned to the series the tests were measured with; their services are disabled like Prometheus's.
NODE_TEST_TOOLS := 'slurmctld=22.05.*' 'slurmd=22.05.*' 'slurm-client=22.05.*' 'munge=0.5.*' 'lvm2=2.03.*' 'xfsprogs=6.*'
$(STAMP)/node-tools:
	@mkdir -p $(STAMP)
	missing=; for tool in slurmctld slurmd sbatch munged pvcreate vgcreate mkfs.xfs; do \
	  command -v $$tool >/dev/null || missing="$$missing $$tool"; done; \
	test -z "$$missing" || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(NODE_TEST_TOOLS); }
	systemctl disable --now slurmctld slurmd munge >/dev/null 2>&1 || true
	@touch $@

synth: setup
	cdk synth --quiet --no-notices -c config=$(CONFIG)
	fmcluster plan $(CONFIG)

plan validate: setup
	fmcluster $@ $(CONFIG)

lint: setup
	ruff check .

test: lint $(STAMP)/node-tools
	pytest $(PYTEST_ARGS)

deploy: setup
	cdk deploy --all --no-notices -c config=$(CONFIG)

clean:
	rm -rf cdk.out $(STAMP) .pytest_cache
