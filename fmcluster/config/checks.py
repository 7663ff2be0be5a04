"""Every rule the cluster file and the constructs share, written once.

The pydantic models (`fmcluster.config.models`), the cross-section rules (`fmcluster.config.rules`) and the
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

import aws_cdk as cdk

from fmcluster import catalog
from fmcluster.config.service_models import API_LABELS, instance_type_problem, shape_problem

CLUSTER_NAME_PATTERN = re.compile(r"^[a-z][a-z0-9-]{0,22}[a-z0-9]$")
"""fmcluster's own cluster names (the file's `name`): short and lowercase, because they go into S3 bucket names,
SSM paths and HyperPod's `sagemaker-<name>-<account>-<region>` lifecycle bucket."""
GROUP_NAME_PATTERN = re.compile(r"^[a-z][a-z0-9-]{0,19}$")
"""Compute group names: Slurm partition names and HyperPod instance group names (a trailing '-' is checked apart)."""
HYPERPOD_CLUSTER_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
"""SageMaker cluster names (botocore `sagemaker` ClusterName: 1-63 characters, `[a-zA-Z0-9](-*[a-zA-Z0-9])*`)."""
RESERVATION_ID_PATTERN = re.compile(r"^cr-[0-9a-f]{17}$")
TRAINING_PLAN_ARN_PATTERN = re.compile(
    r"^arn:aws[a-z-]*:sagemaker:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):training-plan/[A-Za-z0-9-]{1,63}$"
)
AMI_ID_PATTERN = re.compile(r"^ami-([0-9a-f]{8}|[0-9a-f]{17})$")
S3_URI_PATTERN = re.compile(r"^s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?P<prefix>/[^\s]*)?$")
LUSTRE_DNS_NAME_PATTERN = re.compile(r"^(fs|fc)i?-[0-9a-f]{8,}\..{4,253}$")
"""FSx for Lustre DNS names (botocore `fsx` DNSName, the same as `sagemaker` ClusterDnsName)."""
LUSTRE_MOUNT_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,8}$")
"""FSx for Lustre mount names (botocore `fsx` LustreFileSystemMountName: 1-8 of `[A-Za-z0-9_-]`; `sagemaker`
ClusterMountName is the same)."""
SSM_PATH_PATTERN = re.compile(r"^(/[A-Za-z0-9_.-]+)+$")
"""A fully qualified SSM parameter name or path prefix (SSM user guide, parameter hierarchies)."""
RESERVATION_CAPACITIES = ("capacity-block", "odcr")


PCS_MAX_NODES = 2048
"""AWS PCS LARGE clusters manage at most 2,048 instances (PCS API reference, Cluster.size)."""
PCS_SIZES = {"small": 32, "medium": 512, "large": PCS_MAX_NODES}
"""AWS PCS cluster sizes and the instances each manages (PCS API reference, Cluster.size; botocore pcs Size)."""


def is_token(value: object) -> bool:
    """True when `value` is an unresolved CDK token: known only at deploy time, so no rule can judge it yet."""
    return isinstance(value, str | int | float) and not isinstance(value, bool) and cdk.Token.is_unresolved(value)


def unknown_instance_type(value: str) -> str | None:
    """An instance type fmcluster has no row for in `fmcluster.catalog`, with the closest known name."""
    if value in catalog.CATALOG:
        return None
    close = difflib.get_close_matches(value, list(catalog.CATALOG), n=1, cutoff=0.7)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown instance type {value!r}; {hint}known: {', '.join(catalog.CATALOG)}"


def no_efa(instance_type: str, turn_off: str) -> str | None:
    """EFA asked for on a type without it; `turn_off` says how, in the caller's words (`efa: false`, `efa=False`)."""
    row = catalog.CATALOG.get(instance_type)
    if row is None or row.supports_efa:
        return None
    with_efa = ", ".join(name for name, r in catalog.CATALOG.items() if r.supports_efa)
    return f"{instance_type} has no EFA; {turn_off} or use an EFA type ({with_efa})"


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


def reservation_problem(capacity: str | None, reservation_id: str | None) -> str | None:
    """A capacity reservation id where the capacity takes none, missing where it needs one, or malformed.

    `capacity` None means it is itself invalid: then only the id's form is judged.
    """
    needs_one = capacity in RESERVATION_CAPACITIES
    if reservation_id is None:
        return f"required when capacity is {capacity!r}" if needs_one else None
    if capacity is not None and not needs_one:
        return f"only for capacity 'capacity-block' or 'odcr'; this group's capacity is {capacity!r}"
    if not is_token(reservation_id) and not RESERVATION_ID_PATTERN.match(reservation_id):
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
    """A training plan in another region or account than the cluster's (a plan serves only its own)."""
    match = TRAINING_PLAN_ARN_PATTERN.match(arn or "")
    if match and region and not is_token(region) and match["region"] != region:
        yield (f"the training plan is in {match['region']}, the cluster in {region}; a plan serves only its own region")
    if match and account and not is_token(account) and match["account"] != account:
        yield f"the training plan belongs to account {match['account']}, the cluster to {account}"


def grafana_without_source(grafana: str, prometheus: str) -> str | None:
    """Grafana with no Prometheus to read from (an unknown `grafana` value is its own problem)."""
    if grafana in ("self-hosted", "managed") and prometheus == "none":
        return f"{grafana!r} needs prometheus: managed as its data source; set grafana: none or prometheus: managed"
    return None


def lustre_dns_name_problem(value: str | None) -> str | None:
    if value is None or is_token(value) or LUSTRE_DNS_NAME_PATTERN.match(value):
        return None
    return f"must be an FSx DNS name like fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com; got {value!r}"


def lustre_mount_name_problem(value: str | None) -> str | None:
    if value is None or is_token(value) or LUSTRE_MOUNT_NAME_PATTERN.match(value):
        return None
    return f"must be an FSx mount name of 1-8 letters, digits, '_' or '-'; got {value!r}"


def cluster_name_problem(value: object) -> str | None:
    """fmcluster's rule for a cluster name (the file's `name`)."""
    if isinstance(value, str) and (is_token(value) or CLUSTER_NAME_PATTERN.match(value)):
        return None
    return (
        "must be 2-24 characters of lowercase letters, digits and '-', starting with a letter and ending with a "
        f"letter or digit; got {value!r}"
    )


def api_name_problem(service: str, shape: str, value: str) -> str | None:
    """A name AWS PCS ('pcs') or SageMaker ('sagemaker') takes, judged by botocore's shape `shape` (tokens skipped).

    >>> api_name_problem("pcs", "QueueName", "gp")
    "AWS PCS takes 3-25 characters matching (?!pcs_)^[A-Za-z][A-Za-z0-9-]+ (botocore pcs QueueName); got 'gp'"
    """
    if is_token(value):
        return None
    problem = shape_problem(service, shape, value)
    return f"{API_LABELS[service]} {problem}" if problem else None


def hyperpod_instance_type_problem(instance_type: str, region: str | None) -> str | None:
    """An EC2 type (without `ml.`) HyperPod does not take (botocore sagemaker ClusterInstanceType) or, when `region`
    is known, does not offer there (the regional list `cdk synth` checks as E3644)."""
    if is_token(instance_type):
        return None
    if problem := api_name_problem("sagemaker", "ClusterInstanceType", f"ml.{instance_type}"):
        return problem
    if region is None or is_token(region):
        return None
    return instance_type_problem("hyperpod", region, f"ml.{instance_type}")


def pcs_capacity_problem(capacity: str) -> str | None:
    """Capacity AWS PCS cannot consume: a SageMaker training plan."""
    if capacity == "training-plan":
        return (
            "'training-plan' needs orchestrator.type: hyperpod-slurm (training plans reserve SageMaker capacity); "
            "with pcs use 'capacity-block' or 'odcr'"
        )
    return None


HYPERPOD_ROOT_VOLUME = (
    "HyperPod sizes each node's root volume itself (SageMaker API ClusterEbsVolumeConfig: for the root volume \"you "
    "can't specify the VolumeSizeInGB field\"); root_volume_gib sizes AWS PCS nodes' root volumes: remove it with "
    "hyperpod-slurm"
)
PCS_CONTROLLER = (
    "AWS PCS runs the Slurm controller itself (a managed service; orchestrator.size picks its capacity), so no "
    "instance type is used; remove it with pcs"
)


def hyperpod_root_volume_problem(given_keys: Iterable[str]) -> str | None:
    """A root volume size asked of a HyperPod group (`given_keys`: the keys the group was given)."""
    return HYPERPOD_ROOT_VOLUME if "root_volume_gib" in given_keys else None


def pcs_controller_type_problem(given_keys: Iterable[str]) -> str | None:
    """A controller instance type asked of an AWS PCS cluster (`given_keys`: the orchestrator's keys as given)."""
    return PCS_CONTROLLER if "controller_instance_type" in given_keys else None


def pcs_deep_health_checks_problem(checks: Iterable[str]) -> str | None:
    """Deep health checks asked of an AWS PCS group (they are HyperPod's)."""
    if tuple(checks):
        return (
            "are SageMaker HyperPod's on-start checks: they need orchestrator.type: hyperpod-slurm; remove them with "
            "pcs"
        )
    return None


def pcs_node_limit_problem(nodes: int) -> str | None:
    """More instances (head node included) than the largest AWS PCS cluster manages."""
    if nodes > PCS_MAX_NODES:
        return (
            f"{nodes} nodes (with the head node) exceed the {PCS_MAX_NODES:,} instances an AWS PCS cluster manages "
            "(size large); split the cluster or use orchestrator.type: hyperpod-slurm"
        )
    return None


def pcs_size_problem(size: str | None, nodes: int) -> str | None:
    """An AWS PCS size (any case) that manages fewer instances than `nodes` (head node included)."""
    if size is None or is_token(size) or size.lower() not in PCS_SIZES or nodes > PCS_MAX_NODES:
        return None
    size = size.lower()
    if nodes <= PCS_SIZES[size]:
        return None
    return (
        f"{size!r} manages {PCS_SIZES[size]} instances, fewer than these {nodes} nodes (with the head node); "
        "the size of a running cluster cannot change (it replaces the cluster with every node group and queue): "
        "to grow past it, deploy the file under a new name with a larger size, move the work, then delete the "
        "old cluster"
    )


def mixed_architectures_problem(instance_types: Iterable[str]) -> str | None:
    """One AMI (`ami_id`) asked to serve instance types of more than one CPU architecture."""
    architectures: dict[str, str] = {}
    for instance_type in instance_types:
        architectures.setdefault(catalog.instance_architecture(instance_type), instance_type)
    if len(architectures) < 2:
        return None
    pairs = ", ".join(f"{name} is {arch}" for arch, name in sorted(architectures.items()))
    return (
        f"one image serves every node group, but {pairs}; omit ami_id to get the matching AWS PCS image per "
        "architecture, or keep the groups to one architecture"
    )


NEURON_ACCELERATORS = ("AWS Trainium", "AWS Inferentia")
"""Accelerators that need the AWS Neuron driver rather than NVIDIA's."""


def sample_image_problem(instance_type: str) -> str | None:
    """An instance type the AWS PCS sample AMI cannot drive: its accelerators need the AWS Neuron driver, and the
    sample AMI's release notes list the NVIDIA driver and CUDA only (no Neuron; unconfirmed, so refuse)."""
    row = catalog.CATALOG.get(instance_type)
    if row is None or not row.accelerator.startswith(NEURON_ACCELERATORS):
        return None
    return (
        f"required for {instance_type} ({row.accelerator}): the AWS PCS sample AMI carries the NVIDIA driver and "
        "CUDA, not the AWS Neuron driver these accelerators need; give an image with Neuron (for example one built "
        "from a Neuron DLAMI with AWS's PCS software installers)"
    )
