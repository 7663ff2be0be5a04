#!/usr/bin/env python3
"""CDK app: `cdk synth|diff|deploy -c config=FILE` (default examples/quickstart.yaml).

An AWS PCS cluster's size is recorded in ./cdk.context.json on the first synth and held on later ones
(`fmcluster.recorded_context`): growth past it fails here, before CloudFormation would replace the cluster.
"""

import sys
from pathlib import Path

import aws_cdk as cdk

from fmcluster import recorded_context
from fmcluster.cli import DEFAULT_FILE, EXIT_INVALID, load_or_report
from fmcluster.config import ConfigError
from fmcluster.stacks import build

app = cdk.App()
path = app.node.try_get_context("config") or DEFAULT_FILE
config = load_or_report(path)
if config is None:
    sys.exit(EXIT_INVALID)
key = recorded_context.pcs_size_key(config)
try:
    config = recorded_context.pinned(config, {key: app.node.try_get_context(key)}, path)
except ConfigError as error:
    print(*error.lines(), sep="\n", file=sys.stderr)
    sys.exit(EXIT_INVALID)
build(app, config)
app.synth()
recorded_context.record(config, Path.cwd())
