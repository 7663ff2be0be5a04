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
# Python may cache compiled modules (__pycache__/, git-ignored; the assets exclude it): with PYTHONDONTWRITEBYTECODE
# set, as on some CI images and machines, every pytest process compiled every module and rewrote every test module
# again (collecting the suite took 12.5 CPU s a process instead of 7.5).
unexport PYTHONDONTWRITEBYTECODE
PYTEST_ARGS ?=
# `make test` runs two worker processes per core: tests run in workers, grouped so that each example is synthesized
# on one worker and each module's own apps are built once (tests/conftest.py). Twice the cores, because a third of a
# worker's time there is waiting (real Slurm jobs, shadow-utils' 15 s lock retries, torchrun): on 2 cores under the same
# load its pytest took 412 s with 4 workers against 463 s with 2. `make test-fast`, which waits for nothing, keeps one
# worker per core (4 workers cost it 1.2x the CPU for the same wall time). docs/development.md, "Test tiers and speed".
# `PYTEST_WORKERS=0` runs `make test` in one process.
PYTEST_WORKERS ?= $(shell echo $$(( $$(nproc) * 2 )))
FAST_WORKERS ?= auto
PYTEST := pytest --dist loadgroup
FAST_TESTS := not examples and not synth and not real_tools

.PHONY: setup synth synth-speed plan validate validate-live diagnose test test-fast lint typecheck lock deploy clean

setup: $(STAMP)/python $(STAMP)/node

# The library declares ranges (pyproject.toml); the exact set it was tested with is requirements.lock, installed here
# as constraints, so every machine runs the same versions.
$(STAMP)/python: pyproject.toml requirements.lock
	@mkdir -p $(STAMP)
	test -x $(VENV)/bin/python || python3 -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check --constraint requirements.lock --editable '.[dev]'
	@touch $@

# Re-resolve requirements.lock: the newest versions pyproject.toml's ranges admit, installed into a fresh virtual
# environment and frozen. Run `make test` on the result before committing it (docs/development.md, "Dependencies").
LOCK_VENV := .lock-venv
lock:
	rm -rf $(LOCK_VENV) && python3 -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --editable '.[dev]'
	{ sed -n '1,2p' requirements.lock; $(LOCK_VENV)/bin/python -m pip freeze --all --exclude-editable | grep -v '^pip=='; } > requirements.lock.new
	mv requirements.lock.new requirements.lock
	rm -rf $(LOCK_VENV)

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

# Newer real Slurm for the node tests: Debian trixie's Slurm 24.11 and forky's 26.05 (PCS's oldest and newest), each in
# a debootstrap chroot cached outside the checkout (tests/node/real_slurm.py runs the daemons inside; FACTS.md,
# "Machine": ~20 s and ~220 MB each). On the test path only; built once, as root; delete a directory to rebuild it.
SLURM_CHROOTS := /var/cache/fmcluster-test/slurm-trixie /var/cache/fmcluster-test/slurm-forky
$(SLURM_CHROOTS):
	command -v debootstrap >/dev/null || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap; }
	tools/slurm-chroot.sh $(patsubst slurm-%,%,$(notdir $@)) $@

# A real slurmdbd for the accounting tests (tests/node/real_slurmdbd.py): trixie's Slurm 24.11 and forky's 26.05 with
# their slurmdbd, and bookworm's MariaDB 10.11 in a chroot of its own (trixie's and forky's MariaDB 11.8.9 make
# slurmdbd 24.11.5 and 26.05.5 exit at start: error 5027 in _check_mysql_concat_is_sane, measured 2026-12-02). Their
# own directories, so the Slurm chroots above stay as they are.
SLURMDBD_CHROOTS := /var/cache/fmcluster-test/slurmdbd-trixie /var/cache/fmcluster-test/slurmdbd-forky \
  /var/cache/fmcluster-test/mariadb-bookworm
/var/cache/fmcluster-test/slurmdbd-trixie /var/cache/fmcluster-test/slurmdbd-forky:
	command -v debootstrap >/dev/null || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap; }
	tools/slurm-chroot.sh $(patsubst slurmdbd-%,%,$(notdir $@)) $@ slurmdbd
/var/cache/fmcluster-test/mariadb-bookworm:
	command -v debootstrap >/dev/null || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap; }
	tools/slurm-chroot.sh bookworm $@ mariadb-server

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
	ruff format --check .

# mypy over the whole package (settings in pyproject.toml). Its first run on a fresh clone reads aws-cdk-lib's
# annotations (~2 min of CPU); later runs reuse .mypy_cache/ and take seconds.
typecheck: setup
	mypy

# Every gate: ruff, mypy, and every test (the docstring examples included) with the real tools installed.
test: lint typecheck $(STAMP)/test-tools $(STAMP)/node-tools $(SLURM_CHROOTS) $(SLURMDBD_CHROOTS) $(STAMP)/checkov
	$(PYTEST) -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

# The edit loop: ruff and the tests that synthesize nothing and need no real outside tool (markers in pyproject.toml).
test-fast: setup
	ruff check .
	$(PYTEST) -n $(FAST_WORKERS) -m '$(FAST_TESTS)' $(PYTEST_ARGS)

deploy: setup
	cdk deploy --all --concurrency 8 --no-notices -c config=$(CONFIG)

clean:
	rm -rf cdk.out $(STAMP) .pytest_cache .mypy_cache $(CHECKOV_VENV)
