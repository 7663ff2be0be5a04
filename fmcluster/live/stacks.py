"""fmcluster's CloudFormation stacks: each one's status and, for a failed one, the event that started the failure.

The root cause is the first resource that failed in the stack's last operation, in time order; the cascade that
follows it ("Resource creation cancelled", and the stack's own "The following resource(s) failed ...") is skipped.
Its logical id is mapped back to the cluster-file key and construct that made it (logical ids are stable; the
test builds the mapping's expectations from the synthesized templates' snapshots).
Sources: CloudFormation API reference (DescribeStacks StackStatus values, DescribeStackEvents, newest first).
"""

from __future__ import annotations

import re
from functools import partial
from typing import Any

from botocore.exceptions import ClientError

from fmcluster.config import ClusterConfig, ComputeGroup
from fmcluster.live.aws import Aws, error_code, error_message
from fmcluster.live.findings import Collected, Finding, ok, problem, warning
from fmcluster.live.runner import Check
from fmcluster.names import IMAGE_STACK, MIRROR_STACK

PARTS = ("network", "storage", "image", "cluster", "observability")
HEALTHY = ("CREATE_COMPLETE", "UPDATE_COMPLETE", "IMPORT_COMPLETE")
STARTS = ("CREATE_IN_PROGRESS", "UPDATE_IN_PROGRESS", "DELETE_IN_PROGRESS", "IMPORT_IN_PROGRESS")
CASCADE = re.compile(r"^Resource (creation|update|deletion) cancelled|^The following resource\(s\) failed", re.I)

CONSTRUCTS: tuple[tuple[str, str, str], ...] = (
    # (logical id prefix, cluster-file key, what fmcluster built there); first match wins, specific first.
    ("LustreRepository", "storage.lustre.repositories", "a data repository association (LustreStorage)"),
    ("LinksRepository", "storage.lustre.repositories", "a data repository association (DataRepositoryLinks)"),
    ("LustreSecurityGroup", "storage.lustre", "the file system's security group and Lustre port rules"),
    ("ExistingLustre", "storage.lustre.security_group_id", "the nodes' egress to the existing file system's group"),
    ("Lustre", "storage.lustre", "FSx for Lustre (LustreStorage)"),
    ("Buckets", "storage", "the project buckets and their KMS key (ProjectBuckets)"),
    ("NodeDataAccess", "storage", "the nodes' policy for datasets and checkpoints"),
    ("BucketNotifications", "storage", "the nccl-tests results trigger on the checkpoint bucket"),
    ("Mirror", "storage", "the artifact mirror: a CodeBuild job outside the VPC, run at deploy (ArtifactMirror)"),
    ("Users", "users", "the cluster users in SSM, which every node's users.sh reads"),
    ("NcclTests", "storage", "the nccl-tests results function and its alarms"),
    ("BlockEnd", "compute[].drain_before_end_minutes", "the drain before a capacity block ends (BlockEndDrain)"),
    ("NcclEnvironment", "nccl.env", "a compute group's NCCL environment in SSM"),
    ("Nccl", "nccl.env", "the NCCL environment function"),
    ("NetworkNat", "network.egress", "the NAT gateway and its Elastic IP"),
    ("NetworkPublic", "network.egress", "the public subnet for the NAT gateway"),
    ("NetworkInternetGateway", "network.egress", "the internet gateway"),
    ("NetworkComputeSubnet", "availability_zone_id", "the compute subnet in availability_zone_id"),
    ("NetworkEfaSecurityGroup", "network", "the EFA security group and its self rules"),
    ("Network", "network", "the VPC, subnets, endpoints and flow logs (TrainingNetwork)"),
    ("LogsKey", "network", "the network stack's KMS key for its log groups"),
    ("AWS679f53fac002430cb0da5b7982bd2287", "network", "CDK's AwsCustomResource function closing the default SG"),
    ("HyperPodCluster", "compute", "the SageMaker HyperPod cluster (HyperPodSlurmCluster)"),
    ("HyperPodLifecycle", "orchestrator", "the lifecycle scripts and their bucket"),
    ("HyperPod", "orchestrator", "the HyperPod execution role and node logs"),
    ("SlurmNodeImage", "orchestrator.ami_id", "the PCS-Ready DLAMI resolution (orchestrator.image_refresh)"),
    ("SlurmCluster", "orchestrator", "the AWS PCS cluster (PcsSlurmCluster)"),
    ("Slurmlogin", "orchestrator.login_instance_type", "the login node group"),
    ("Slurmhead", "observability", "the head node group"),
    ("loginLaunchTemplate", "orchestrator.login_instance_type", "the login node launch template"),
    ("Slurm", "orchestrator", "the PCS node role, profile and groups"),
    ("TrainingImage", "image", "the training image: repository, CodeBuild project and build (TrainingImage)"),
    ("BaseImage", "orchestrator.image_refresh", "the PCS-Ready DLAMI a baked node image is built from"),
    ("NodeImage", "orchestrator.image_refresh", "the PCS-Ready DLAMI resolution of the node-image stack"),
    ("Image", "orchestrator.node_image", "a baked node image: EC2 Image Builder component, recipe, build"),
    ("Observability", "observability", "Prometheus, Grafana, alarms and events (Observability)"),
    ("CustomCDKBucketDeployment", "orchestrator", "the node-software upload (CDK BucketDeployment)"),
    ("CustomS3AutoDeleteObjects", "storage.retain_on_delete", "emptying buckets on delete"),
    ("AutoDeleteObjectsLogs", "storage.retain_on_delete", "the log group of CDK's bucket-emptying function"),
)
IN_STACK: dict[str, tuple[tuple[str, str, str], ...]] = {
    # As CONSTRUCTS, for the resources of one stack (by the part of its name after `<name>-`), looked up first there:
    # stacks share logical ids (the image and the mirror stacks each have a Key961B73FD).
    MIRROR_STACK: (
        ("Mirror", "orchestrator.node_image", "the artifact mirror's job, in its own stack with a baked node image"),
        ("LogsBucket", "orchestrator.node_image", "the artifact mirror bucket's server access logs (MirrorStack)"),
        ("Bucket", "orchestrator.node_image", "the artifact mirror's bucket (MirrorStack)"),
        ("Key", "orchestrator.node_image", "the artifact mirror's KMS key (MirrorStack)"),
    ),
    IMAGE_STACK: (("Key", "image", "the image repository's KMS key"),),
}


def owner(config: ClusterConfig, logical_id: str, part: str) -> str:
    """The cluster-file key and construct behind `logical_id` of the stack `<name>-<part>`:
    ('LustreFileSystem4AFDAE78', 'storage') -> 'storage.lustre: FSx for Lustre (LustreStorage)'."""
    found = group_of(config, logical_id)
    if found is not None:
        index, group, what = found
        if what == "placement group":
            return f"compute[{index}].placement_group ({group.name}): its cluster placement group"
        return f"compute[{index}] ({group.name}): its node group, queue, launch template or NCCL environment"
    for prefix, key, what in (*IN_STACK.get(part, ()), *CONSTRUCTS):
        if logical_id.startswith(prefix):
            return f"{key}: {what}"
    return "a resource fmcluster does not map to a key"


def group_of(config: ClusterConfig, logical_id: str) -> tuple[int, ComputeGroup, str] | None:
    """(index, compute group, what of it) that made the resource `logical_id`, or None."""
    for index, group in enumerate(config.compute):
        name = re.sub(r"[^A-Za-z0-9]", "", group.name)
        prefixes = (f"Slurm{name}NodeGroup", f"Slurm{name}Queue", f"{name}LaunchTemplate", f"NcclEnvironment{name}")
        if logical_id.startswith(prefixes):
            return index, group, "node group"
        if logical_id.startswith(f"{name}PlacementGroup"):
            return index, group, "placement group"
    return None


def stack_parts(config: ClusterConfig) -> tuple[str, ...]:
    """The stacks a cluster file deploys, by the part of their name after `<name>-`: with S3 links, `data-links`
    (deployed beside the cluster) too; with a baked node image, `mirror` (before storage) and `node-image` (before the
    cluster)."""
    links = ("data-links",) if config.storage.repositories else ()
    baked = config.orchestrator.node_image == "baked"
    mirror = (MIRROR_STACK,) if baked else ()  # fmcluster.stacks.mirror.mirror_has_own_stack
    node_image = ("node-image",) if baked else ()
    return (PARTS[0], *mirror, PARTS[1], *links, PARTS[2], *node_image, *PARTS[3:])


def stack_checks(config: ClusterConfig, aws: Aws, kept: Collected) -> list[Check]:
    return [
        Check(
            f"stack {config.name}-{part}",
            f"{config.name}-{part}",
            partial(check_stack, config, aws, f"{config.name}-{part}", kept),
        )
        for part in stack_parts(config)
    ]


def check_stack(config: ClusterConfig, aws: Aws, name: str, kept: Collected) -> list[Finding]:
    subject = f"stack {name}"
    try:
        stack = aws.call("cloudformation", "DescribeStacks", StackName=name)["Stacks"][0]
    except ClientError as error:
        if error_code(error) == "ValidationError" and "does not exist" in error_message(error):
            return [warning(subject, "not deployed")]
        raise
    kept.keep(f"stacks/{name}", stack)
    status = stack.get("StackStatus", "")
    if status in HEALTHY:
        return [ok(subject, status)]
    if status.endswith("_IN_PROGRESS") and "ROLLBACK" not in status:
        return [warning(subject, f"{status} (a deploy is running; diagnose again when it ends)")]
    events = _last_operation(aws, name)
    kept.keep(f"events/{name}", events)
    first = root_cause(events, name)
    if first is None:
        reason = stack.get("StackStatusReason", "no failed resource event found")
        return [problem(subject, f"{status}: {reason}")]
    reason = first.get("ResourceStatusReason", "")
    message = (
        f"{status}; first failure: {first['LogicalResourceId']} ({first.get('ResourceType', '?')}) "
        f"{first.get('ResourceStatus')}: {reason}"
    )
    found = group_of(config, first["LogicalResourceId"])
    capacity = found[1].capacity if found else None
    return [
        problem(
            subject,
            message,
            key=owner(config, first["LogicalResourceId"], name.removeprefix(f"{config.name}-")),
            text=reason,
            capacity=capacity,
        )
    ]


def _last_operation(aws: Aws, name: str) -> list[dict[str, Any]]:
    """The stack's events back to the start of its last operation, newest first (stops paging there)."""
    events: list[dict[str, Any]] = []
    for event in aws.pages("cloudformation", "DescribeStackEvents", "StackEvents", StackName=name):
        events.append(event)
        if event.get("LogicalResourceId") == name and event.get("ResourceStatus") in STARTS:
            break
    return events


def root_cause(events: list[dict[str, Any]], stack_name: str) -> dict[str, Any] | None:
    """The earliest failed resource event of the last operation that is not part of the cascade."""
    for event in reversed(events):  # oldest first
        if (
            event.get("ResourceStatus", "").endswith("_FAILED")
            and event.get("LogicalResourceId") != stack_name
            and not CASCADE.search(event.get("ResourceStatusReason", ""))
        ):
            return event
    return None
