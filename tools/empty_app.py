"""The floor `tools/synth_speed.py` measures the quickstart against: a CDK app with one empty stack.

Run through the CDK CLI from the repository root (`cdk synth --app "python3 tools/empty_app.py"`), it gets the same
cdk.json flags and the same Python as the real app; what it costs is starting Python, jsii's node kernel and the
CLI, which no fmcluster change can remove.
"""

import aws_cdk as cdk

app = cdk.App()
cdk.Stack(app, "Empty")
app.synth()
