#!/usr/bin/env python3
"""CDK app: `cdk synth|diff|deploy -c config=FILE` (default examples/quickstart.yaml)."""

import sys

import aws_cdk as cdk

from fmcluster.cli import DEFAULT_FILE, EXIT_INVALID, load_or_report
from fmcluster.stacks import build

app = cdk.App()
config = load_or_report(app.node.try_get_context("config") or DEFAULT_FILE)
if config is None:
    sys.exit(EXIT_INVALID)
build(app, config)
app.synth()
