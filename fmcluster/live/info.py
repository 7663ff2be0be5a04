"""`fmcluster info FILE`: what a deployed cluster's stacks say a user needs next, and where its head node is.

Read-only: DescribeStacks of each of the file's stacks (their outputs, as `fmcluster.outputs` declares them), then the
head node (`fmcluster.live.nodes`): HyperPod's controller through ListClusterNodes, PCS's login or head node through
DescribeInstances by its node group's tag; and each capacity block's and training plan's window
(`fmcluster.live.windows`). A stack not deployed yet is reported as such; a head node that cannot be
found is a note, not a failure (it may still be booting).
Sources: CloudFormation API reference (DescribeStacks: Outputs with OutputKey, OutputValue, Description; a missing
stack is a ValidationError "Stack with id ... does not exist").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from botocore.exceptions import ClientError

from fmcluster.config import ClusterConfig, orchestrators
from fmcluster.live.aws import Aws, error_code, error_message
from fmcluster.live.nodes import Node, NodeNotFound
from fmcluster.live.stacks import stack_parts
from fmcluster.live.windows import Window, capacity_windows
from fmcluster.outputs import OUTPUTS


@dataclass
class StackOutputs:
    part: str
    name: str
    status: str | None
    """CloudFormation's StackStatus; None when the stack does not exist."""
    outputs: dict[str, str] = field(default_factory=dict)


@dataclass
class ClusterInfo:
    config: ClusterConfig
    stacks: list[StackOutputs]
    head: Node | None = None
    head_note: str = ""
    windows: list[Window] = field(default_factory=list)
    """The window of each capacity block and training plan of the file (fmcluster.live.windows)."""
    now: datetime = field(default_factory=lambda: datetime.now(UTC))

    def output(self, part: str, key: str) -> str | None:
        return next((stack.outputs.get(key) for stack in self.stacks if stack.part == part), None)

    def as_json(self) -> dict:
        """{part: {key: value}, "head_node": {...}}: for scripts (`fmcluster info FILE --json | jq ...`)."""
        data: dict = {stack.part: dict(stack.outputs) for stack in self.stacks if stack.status is not None}
        data["head_node"] = (
            {"group": self.head.group, "instance_id": self.head.instance_id, "ssm_target": self.head.target}
            if self.head is not None
            else None
        )
        if self.windows:
            data["capacity_windows"] = [window.as_json() for window in self.windows]
        return data

    def report(self, path: str) -> str:
        config = self.config
        lines = [f"{config.name}: {config.orchestrator.type} in {config.region} ({config.availability_zone_id})"]
        for stack in self.stacks:
            if stack.status is None:
                lines.append(f"{stack.part}: stack {stack.name} is not deployed")
                continue
            lines.append(f"{stack.part}: stack {stack.name} {stack.status}")
            declared = [output.key for output in OUTPUTS.get(stack.part, ())]
            keys = [key for key in declared if key in stack.outputs] + sorted(set(stack.outputs) - set(declared))
            width = max((len(key) for key in keys), default=0)
            lines += [f"  {key:<{width}}  {stack.outputs[key]}" for key in keys]
        if self.head is not None:
            lines.append(f"head node: {self.head.group} {self.head.instance_id} ({self.head.found_by})")
            lines.append(f"  SSM target  {self.head.target}")
            lines.append(f"  connect     fmcluster connect {path}")
        elif self.head_note:
            lines.append(f"head node: {self.head_note}")
        lines += [window.line(self.now) for window in self.windows]
        return "\n".join(lines)


def read_stack(aws: Aws, part: str, name: str) -> StackOutputs:
    try:
        stack = aws.call("cloudformation", "DescribeStacks", StackName=name)["Stacks"][0]
    except ClientError as error:
        if error_code(error) == "ValidationError" and "does not exist" in error_message(error):
            return StackOutputs(part, name, None)
        raise
    outputs = {item["OutputKey"]: item.get("OutputValue", "") for item in stack.get("Outputs", [])}
    return StackOutputs(part, name, stack.get("StackStatus", ""), outputs)


def cluster_info(config: ClusterConfig, aws: Aws) -> ClusterInfo:
    """The outputs of every stack of `config`, and its head node when it can be found."""
    stacks = [read_stack(aws, part, f"{config.name}-{part}") for part in stack_parts(config)]
    info = ClusterInfo(config, stacks, windows=capacity_windows(config, aws))
    group = info.output("cluster", "HeadNodeGroup")
    if group is None:
        info.head_note = "none named by the cluster stack (not deployed, or a PCS cluster without a login node)"
        return info
    cluster = next(stack for stack in stacks if stack.part == "cluster")
    try:
        info.head = orchestrators.resolve(orchestrators.of(config.orchestrator.type).SESSION_NODE)(config, aws, cluster)
    except NodeNotFound as error:
        info.head_note = f"{group}: {error}"
    return info
