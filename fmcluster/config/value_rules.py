"""Rules of one value (a name, an id, a pattern) that the cluster file and the constructs share, written once.

Where the cluster file's rules live: here, rules of one value; `file_rules`, rules across sections of a file;
`api_rules`, what AWS's own models accept (`service_models` reads them); `orchestrators/`, the rules of one
orchestrator; `models`, each section's own keys.

The pydantic models (`fmcluster.config.models`), the cross-section rules (`fmcluster.config.file_rules`) and the
constructs (`fmcluster.constructs`) call these functions, so `fmcluster validate` and a library user who builds a
construct by hand get the same rule and the same words. Each check returns the message of a problem, or None when
the value is fine; the caller adds where the value came from (`compute[0].reservation_id: ...` in a cluster file,
`EfaLaunchTemplate: reservation_id: ...` for a construct).

One pattern per kind of name, each with the public source it follows:

>>> bool(CLUSTER_NAME_PATTERN.match("llm-pretrain")), bool(HYPERPOD_CLUSTER_NAME_PATTERN.match("LLM-1"))
(True, True)
>>> lustre_mount_name_problem("abcdefghi")
"must be an FSx mount name of 1-8 letters, digits, '_' or '-'; got 'abcdefghi'"
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from fmcluster import catalog
from fmcluster.config.service_models import API_LABELS, ec2_instance_types, shape_problem

CLUSTER_NAME_PATTERN = re.compile(r"^[a-z][a-z0-9-]{0,22}[a-z0-9]$")
"""fmcluster's own cluster names (the file's `name`): short and lowercase, because they go into S3 bucket names,
SSM paths and HyperPod's `sagemaker-<name>-<account>-<region>` lifecycle bucket."""
GROUP_NAME_PATTERN = re.compile(r"^[a-z][a-z0-9-]{0,19}$")
"""Compute group names: Slurm partition names and HyperPod instance group names (a trailing '-' is checked apart).
block-end-drain.sh applies it to the partitions it drains (`node_scripts.NODE_RULES`)."""
HYPERPOD_CLUSTER_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
"""SageMaker cluster names (botocore `sagemaker` ClusterName: 1-63 characters, `[a-zA-Z0-9](-*[a-zA-Z0-9])*`)."""
RESERVATION_ID_PATTERN = re.compile(r"^cr-[0-9a-f]{17}$")
"""A capacity reservation id; block-end-drain.sh applies it too (rendered into lib.sh: `node_scripts.NODE_RULES`)."""
TRAINING_PLAN_ARN_FORM = r"arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:[0-9]{12}:training-plan/[A-Za-z0-9-]{1,64}"
"""A SageMaker training plan's ARN, unanchored and without groups so that bash's `=~` (POSIX ERE) reads it as Python
does: block-end-drain.sh and plan-end-drain.sh apply it too (`node_scripts.NODE_RULES`). The plan's name is 1-64
characters (botocore sagemaker TrainingPlanName: max 64; this pattern once allowed 63)."""
TRAINING_PLAN_ARN_PATTERN = re.compile(f"^{TRAINING_PLAN_ARN_FORM}$")
ARN_PARTS = re.compile(r"^arn:[^:]*:[^:]*:(?P<region>[^:]*):(?P<account>[^:]*):")
"""The region and account of an ARN (`arn:partition:service:region:account:resource`)."""
AMI_ID_PATTERN = re.compile(r"^ami-([0-9a-f]{8}|[0-9a-f]{17})$")
ROOT_VOLUME_GIB = (100, 16384)
"""The sizes a node's root volume may have, GiB (`compute[].root_volume_gib`, EfaLaunchTemplate's `root_volume_gib`):
at most gp3's 16 TiB."""
IMAGE_REFRESH_PATTERN = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
"""`orchestrator.image_refresh`: a label that, when changed, re-resolves the default node image."""
S3_URI_PATTERN = re.compile(r"^s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?P<prefix>/[^\s]*)?$")
LUSTRE_DNS_NAME_PATTERN = re.compile(r"^(fs|fc)i?-[0-9a-f]{8,}\..{4,253}$")
"""FSx for Lustre DNS names (botocore `fsx` DNSName, the same as `sagemaker` ClusterDnsName). mount-lustre.sh applies
it too (`node_scripts.NODE_RULES`)."""
HOST_NAME_PATTERN = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$")
"""A host name's characters (letters, digits, '-' and '.'; RFC 1123): what a Lustre DNS name must also be, since
DNSName's pattern takes any character after the id and mount-lustre.sh puts the name into the mount source. The node
script applied this alone, the cluster file only DNSName's form; both now apply both."""
LUSTRE_MOUNT_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,8}$")
"""FSx for Lustre mount names (botocore `fsx` LustreFileSystemMountName: 1-8 of `[A-Za-z0-9_-]`; `sagemaker`
ClusterMountName is the same). mount-lustre.sh applies it too, rendered into lib.sh (`node_scripts.NODE_RULES`)."""
LUSTRE_MOUNT_NAME_RULE = "1-8 letters, digits, '_' or '-'"
MOUNT_POINT_PATTERN = re.compile(r"^(/[A-Za-z0-9._-]+)+$")
"""An absolute directory to mount a file system at (no `.` or `..` tricks beyond plain names)."""
SSM_PATH_PATTERN = re.compile(r"^(/[A-Za-z0-9_.-]+)+$")
"""A fully qualified SSM parameter name or path prefix (SSM user guide, parameter hierarchies)."""
RESERVATION_CAPACITIES = ("capacity-block", "odcr")
VPC_ID_PATTERN = re.compile(r"^vpc-[0-9a-f]{8,17}$")
"""An existing VPC's id (botocore `fsx` VpcId `^(vpc-[0-9a-f]{8,})$`, 12-21 characters, so 8-17 hex digits)."""
SUBNET_ID_PATTERN = re.compile(r"^subnet-[0-9a-f]{8,17}$")
"""An existing subnet's id (botocore `fsx` SubnetId `^(subnet-[0-9a-f]{8,})$`, 15-24 characters)."""
FILE_SYSTEM_ID_PATTERN = re.compile(r"^fs-[0-9a-f]{8,18}$")
"""An FSx file system's id (botocore `fsx` FileSystemId `^(fs-[0-9a-f]{8,})$`, 11-21 characters)."""
SECURITY_GROUP_ID_PATTERN = re.compile(r"^sg-[0-9a-f]{8,17}$")
"""An EC2 security group's id (botocore `fsx` SecurityGroupId `^(sg-[0-9a-f]{8,})$`, 11-20 characters)."""


EC2_TYPES_SOURCE = "botocore ec2 InstanceType"
"""Where the instance types EC2 offers come from (cut into service_data.json.gz by tools/service_data.py)."""


def unknown_instance_type(value: str) -> str | None:
    """An instance type EC2 does not offer (botocore's EC2 model), with the closest type it does.

    >>> unknown_instance_type("c6i.4xlage").split("; ")[1]
    "did you mean 'c6i.4xlarge'?"
    """
    offered = ec2_instance_types()
    if value in offered or value in catalog.CATALOG:
        return None
    close = difflib.get_close_matches(value, sorted(offered), n=1, cutoff=0.8)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown instance type {value!r}: EC2 offers no such type ({EC2_TYPES_SOURCE}){hint}"


def hyperpod_prefix_problem(value: str) -> str | None:
    """An EC2 type written with HyperPod's `ml.` prefix, which fmcluster adds itself."""
    if value.startswith("ml.") and (value[3:] in ec2_instance_types() or value[3:] in catalog.CATALOG):
        return f"give the EC2 name {value[3:]!r}; HyperPod's 'ml.' prefix is added for you"
    return None


def no_efa(instance_type: str, turn_off: str) -> str | None:
    """EFA asked for on a type without it, or on one outside the catalog (whose EFA layout fmcluster does not know);
    `turn_off` says how, in the caller's words (`efa: false`, `efa=False`)."""
    row = catalog.CATALOG.get(instance_type)
    if row is not None and row.supports_efa:
        return None
    with_efa = ", ".join(name for name, r in catalog.CATALOG.items() if r.supports_efa)
    if row is None:
        return (
            f"{instance_type} is not in fmcluster's instance catalog, so it runs as a general-purpose group without "
            f"EFA (fmcluster wires EFA only where it knows the interface layout); {turn_off} or use a cataloged "
            f"EFA type ({with_efa})"
        )
    return f"{instance_type} has no EFA; {turn_off} or use an EFA type ({with_efa})"


PLACEMENT_GROUP_NAME_MAX = 255
"""EC2 placement group names: "Constraints: Up to 255 ASCII characters", unique per account and region (botocore ec2
CreatePlacementGroupRequest.GroupName)."""


def placement_group_name_problem(value: str) -> str | None:
    """A name EC2 cannot hold as a placement group's (1-255 ASCII characters; botocore ec2 CreatePlacementGroup).

    >>> placement_group_name_problem("odcr-pg-1") is None, placement_group_name_problem("")[:30]
    (True, 'must be true, false or the nam')
    """
    if 1 <= len(value) <= PLACEMENT_GROUP_NAME_MAX and value.isascii() and value.isprintable():
        return None
    return (
        "must be true, false or the name of an existing placement group: 1-255 printable ASCII characters "
        f"(botocore ec2 CreatePlacementGroup GroupName); got {value!r}"
    )


SCALE_DOWN_IDLE_MAX_SECONDS = 10_000_000
"""AWS PCS `scaleDownIdleTimeInSeconds` of a compute node group: at most 10,000,000 (botocore pcs
ComputeNodeGroupSlurmConfigurationRequest; CloudFormation schema of AWS::PCS::ComputeNodeGroup: 1-10,000,000)."""
SCALE_DOWN_IDLE_MAX_MINUTES = SCALE_DOWN_IDLE_MAX_SECONDS // 60
PAID_WHILE_IDLE = {
    "capacity-block": "a capacity block is paid up front for its whole term (EC2 Capacity Blocks for ML)",
    "odcr": "an On-Demand Capacity Reservation is billed whether instances run in it or not (EC2 user guide, "
    "Capacity Reservation pricing and billing)",
}
"""Capacity that is paid while idle: scaling its nodes down saves nothing and gives the reservation away to nobody."""


def min_count_problem(min_count: int, count: int, capacity: object) -> str | None:
    """A minimum below 0 or above the group's maximum (`count`), or below it on capacity paid while idle.

    >>> min_count_problem(0, 4, "on-demand") is None, min_count_problem(5, 4, "on-demand")
    (True, 'must be at most count (the most nodes the group runs), 4; got 5')
    """
    if min_count < 0:
        return f"must be at least 0; got {min_count}"
    if min_count > count:
        return f"must be at most count (the most nodes the group runs), {count}; got {min_count}"
    if min_count < count and capacity in PAID_WHILE_IDLE:
        return (
            f"must equal count ({count}) with capacity {capacity!r}: {PAID_WHILE_IDLE[capacity]}, so idle nodes cost "
            "the same as running ones; remove min_count"
        )
    return None


def scale_down_problem(minutes: int, min_count: int | None, count: int | None) -> str | None:
    """An idle scale-down time for a group that never scales down, or outside what AWS PCS takes."""
    if not 1 <= minutes <= SCALE_DOWN_IDLE_MAX_MINUTES:
        return (
            f"must be 1-{SCALE_DOWN_IDLE_MAX_MINUTES:,} minutes (AWS PCS scaleDownIdleTimeInSeconds is at most "
            f"{SCALE_DOWN_IDLE_MAX_SECONDS:,} s, botocore pcs); got {minutes}"
        )
    if min_count is not None and count is not None and min_count >= count:
        return "only for a group that scales (min_count below count): a static group never scales down"
    return None


STRESS_CHECK = "InstanceStress"
"""HyperPod's on-start GPU/accelerator stress check (DCGM diagnostics at level 4)."""
CONNECTIVITY_CHECK = "InstanceConnectivity"
"""HyperPod's on-start check of multi-node GPU communication over EFA: it needs at least 2 nodes with EFA (SageMaker
developer guide, HyperPod Slurm "Deep health checks")."""


def possible_deep_health_checks(accelerated: bool, efa: bool, count: int) -> list[str]:
    """The on-start deep health checks a group can run: stress where accelerated, connectivity where EFA links at
    least 2 nodes.

    >>> possible_deep_health_checks(True, True, 1)
    ['InstanceStress']
    """
    checks = [STRESS_CHECK] if accelerated else []
    if efa and count >= 2:
        checks.append(CONNECTIVITY_CHECK)
    return checks


def deep_health_checks_problem(checks: Iterable[str], count: int | None, efa: bool | None) -> str | None:
    """InstanceConnectivity asked of a group that cannot run it (fewer than 2 nodes, or no EFA).

    >>> deep_health_checks_problem(["InstanceConnectivity"], 1, True)[:45]
    'InstanceConnectivity tests EFA between nodes:'
    """
    if CONNECTIVITY_CHECK in checks and ((count is not None and count < 2) or efa is False):
        return (
            f"{CONNECTIVITY_CHECK} tests EFA between nodes: it needs count of 2 or more and efa: true; got "
            f"count {count}, efa {str(efa).lower()} (keep {STRESS_CHECK} alone)"
        )
    return None


def reservation_problem(capacity: str | None, reservation_id: str | None, *, deferred: bool = False) -> str | None:
    """A capacity reservation id where the capacity takes none, missing where it needs one, or malformed.

    `capacity` None means it is itself invalid: then only the id's form is judged. `deferred`: the id is known only
    at deploy time (a construct's token), so its form is not judged.
    """
    needs_one = capacity in RESERVATION_CAPACITIES
    if reservation_id is None:
        return f"required when capacity is {capacity!r}" if needs_one else None
    if capacity is not None and not needs_one:
        return f"only for capacity 'capacity-block' or 'odcr'; this group's capacity is {capacity!r}"
    if not deferred and not RESERVATION_ID_PATTERN.match(reservation_id):
        return (
            "must be a capacity reservation id like cr-0123456789abcdef0 ('cr-' and 17 hex digits); "
            f"got {reservation_id!r}"
        )
    return None


def repeated_names(names: Iterable[tuple[int, str]]) -> Iterator[tuple[int, str, int]]:
    """(index, name, index of its first use) for every name already used, in order."""
    first: dict[str, int] = {}
    for index, name in names:
        if name in first:
            yield index, name, first[name]
        first.setdefault(name, index)


def repeated_group_name(name: str, first: str) -> str:
    """A compute group named like an earlier one (`first` says where that one is)."""
    return f"{name!r} is already the name of {first}; group names must be unique"


def training_plan_elsewhere(arn: str | None, region: str | None, account: str | None) -> Iterator[str]:
    """A training plan in another region or account than the cluster's (a plan serves only its own); a region or
    account of None is not known (yet) and not compared."""
    if arn is None or not TRAINING_PLAN_ARN_PATTERN.match(arn) or not (parts := ARN_PARTS.match(arn)):
        return
    plan_region, plan_account = parts["region"], parts["account"]
    if region and plan_region != region:
        yield f"the training plan is in {plan_region}, the cluster in {region}; a plan serves only its own region"
    if account and plan_account != account:
        yield f"the training plan belongs to account {plan_account}, the cluster to {account}"


def grafana_without_source(grafana: str, prometheus: str) -> str | None:
    """Grafana with no Prometheus to read from (an unknown `grafana` value is its own problem)."""
    if grafana in ("self-hosted", "managed") and prometheus == "none":
        return f"{grafana!r} needs prometheus: managed as its data source; set grafana: none or prometheus: managed"
    return None


def lustre_dns_name_problem(value: str | None) -> str | None:
    """A DNS name not of an FSx for Lustre file system's form, or not a host name."""
    if value is None or (LUSTRE_DNS_NAME_PATTERN.match(value) and HOST_NAME_PATTERN.match(value)):
        return None
    return f"must be an FSx DNS name like fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com; got {value!r}"


def lustre_mount_name_problem(value: str | None) -> str | None:
    if value is None or LUSTRE_MOUNT_NAME_PATTERN.match(value):
        return None
    return f"must be an FSx mount name of {LUSTRE_MOUNT_NAME_RULE}; got {value!r}"


def cluster_name_problem(value: object) -> str | None:
    """fmcluster's rule for a cluster name (the file's `name`)."""
    if isinstance(value, str) and CLUSTER_NAME_PATTERN.match(value):
        return None
    return (
        "must be 2-24 characters of lowercase letters, digits and '-', starting with a letter and ending with a "
        f"letter or digit; got {value!r}"
    )


@dataclass(frozen=True)
class ApiValue:
    """One name that reaches an AWS API: where it comes from in the cluster file, and the shape that judges it."""

    path: str
    service: str
    shape: str
    value: str

    def problem(self) -> str | None:
        """'AWS PCS takes 3-25 characters ...' when the value breaks its shape, else None."""
        return api_name_problem(self.service, self.shape, self.value)


def api_name_problem(service: str, shape: str, value: str) -> str | None:
    """A name AWS PCS ('pcs') or SageMaker ('sagemaker') takes, judged by botocore's shape `shape`.

    >>> api_name_problem("pcs", "QueueName", "gp")
    "AWS PCS takes 3-25 characters matching (?!pcs_)^[A-Za-z][A-Za-z0-9-]+ (botocore pcs QueueName); got 'gp'"
    """
    problem = shape_problem(service, shape, value)
    return f"{API_LABELS[service]} {problem}" if problem else None
