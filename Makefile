# fmcluster: `make synth` synthesizes a cluster file (default the quickstart) and prints its plan;
# `make test` runs every quality gate. Both install what they need first, once; only `make test` installs the test
# tools (Prometheus), so `make synth` works without apt or root.
CONFIG ?= examples/quickstart.yaml
VENV := .venv
CHECKOV_VENV := .checkov
STAMP := .make
export PATH := $(CURDIR)/$(VENV)/bin:$(CURDIR)/node_modules/.bin:$(PATH)
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
export CDK_DISABLE_VERSION_CHECK := 1
export AWS_EC2_METADATA_DISABLED := true
PYTEST_ARGS ?=

.PHONY: setup synth synth-speed plan validate validate-live diagnose test lint deploy clean

setup: $(STAMP)/python $(STAMP)/node

$(STAMP)/python: pyproject.toml
	@mkdir -p $(STAMP)
	test -x $(VENV)/bin/python || python3 -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check --editable '.[dev]'
	@touch $@

$(STAMP)/node: package.json package-lock.json
	@mkdir -p $(STAMP)
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# Test tools from Debian (bookworm): a real Prometheus and promtool check the observability rules and dashboards
# (`promtool test rules` runs the alert unit tests), and a real node_exporter runs against a fake EFA sysfs tree.
# Installed only when missing; the packages' own services are disabled so nothing listens behind your back. The
# upstream versions are pinned; Debian's stable updates of them (+deb12uN, +bN) are accepted, since the archive keeps
# only the newest.
TEST_DEBS := 'prometheus=2.42.0+ds-5*' 'prometheus-node-exporter=1.5.0-1*'
$(STAMP)/test-tools:
	@mkdir -p $(STAMP)
	command -v prometheus >/dev/null && command -v promtool >/dev/null && command -v prometheus-node-exporter >/dev/null || { \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(TEST_DEBS); }
	systemctl disable --now prometheus prometheus-node-exporter >/dev/null 2>&1 || true
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

# checkov (a test-only scanner) pins boto3, packaging and more that clash with the dev extra: it gets its own
# virtual environment, from a pinned list, only on the test path.
$(STAMP)/checkov: tests/gates/checkov-requirements.txt
	@mkdir -p $(STAMP)
	test -x $(CHECKOV_VENV)/bin/python || python3 -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r tests/gates/checkov-requirements.txt
	@touch $@

synth: setup
	cdk synth --quiet --no-notices -c config=$(CONFIG)
	fmcluster plan $(CONFIG) --assembly cdk.out

# The synth's cost against an empty CDK app's, side by side (needs hyperfine; see docs/development.md, "Synth speed").
synth-speed: setup
	python tools/synth_speed.py --config $(CONFIG)

plan validate: setup
	fmcluster $@ $(CONFIG)

# Read-only calls to the account with your credentials (AWS_PROFILE, ...); see the README's IAM policies.
validate-live: setup
	fmcluster validate $(CONFIG) --live

diagnose: setup
	fmcluster diagnose $(CONFIG)

lint: setup
	ruff check .

test: lint $(STAMP)/test-tools $(STAMP)/node-tools $(STAMP)/checkov
	pytest $(PYTEST_ARGS)

deploy: setup
	cdk deploy --all --concurrency 8 --no-notices -c config=$(CONFIG)

clean:
	rm -rf cdk.out $(STAMP) .pytest_cache $(CHECKOV_VENV)
