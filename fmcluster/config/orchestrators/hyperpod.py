"""SageMaker HyperPod with Slurm: the rules that hold only when the cluster file's `orchestrator.type` is
`hyperpod-slurm` (the orchestrator seam: `fmcluster.config.orchestrators`).

>>> capacity_problem("odcr")[:40]
"'odcr' needs orchestrator.type: pcs (EC2"
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from fmcluster.config.service_models import instance_type_problem as regional_instance_type_problem
from fmcluster.config.value_rules import ApiValue, api_name_problem
from fmcluster.names import CONTROLLER_GROUP, LOGIN_GROUP
from fmcluster.problems import Problem

if TYPE_CHECKING:
    from fmcluster.config.models import ComputeGroup, Observability, Orchestrator

CLUSTER_RESOURCE = "AWS::SageMaker::Cluster"
CLUSTER_STACK = "fmcluster.stacks.cluster_hyperpod:HyperPodClusterStack"
"""The cluster stack's class, named and imported when an app is built (`fmcluster validate` loads no aws_cdk)."""
CLUSTER_STACK_DESCRIPTION = "SageMaker HyperPod Slurm cluster, lifecycle scripts, node role"
DIAGNOSE_CHECKS = "fmcluster.live.hyperpod:hyperpod_checks"
"""`diagnose`'s checks of the deployed cluster, named and imported by diagnose (which loads boto3)."""
INSTANCE_QUOTA_CHECKS = "fmcluster.live.quotas:hyperpod_instance_checks"
"""`validate --live`'s checks of the quotas its instances draw on."""
NODE_IMAGE_DRIFT_CHECKS = "fmcluster.live.image_drift:no_drift_checks"
"""None: HyperPod's nodes run SageMaker's image, which HyperPod itself updates (UpdateClusterSoftware)."""
ENDPOINTS = ("SageMakerApi",)
"""Its own interface endpoints with `egress: none` (fmcluster.endpoints): HyperPod's agents call the SageMaker API."""
NETWORK_PLACEMENT_GROUPS = False
"""HyperPod places its instance groups itself; the network stack makes no placement group."""
RUNS_DEEP_HEALTH_CHECKS = True
"""HyperPod runs on-start deep health checks; `plan` shows each group's and what they add to a new node."""
UNOFFERED_TYPE = ("warning", "HyperPod may not be able to place it either")
CONTROLLER_VOLUME_GIB = 500
"""Default size of the controller's extra EBS volume (HyperPod mounts it at /opt/sagemaker): Slurm state, logs."""
DEDICATED_TENANCY = ("warning", "whether HyperPod's instances run so is unconfirmed")
"""What `validate --live` says of a VPC of one's own with dedicated instance tenancy."""
NO_HEALTH_CHECKS: str | None = None
"""HyperPod starts deep health checks on demand (StartClusterHealthCheck), so `fmcluster healthcheck` runs them."""
"""(level, advice) when EC2 lists no offering of a type in the zone: only a proxy (unconfirmed: no API lists HyperPod's
offerings per zone), so a warning."""
SESSION_NODE = "fmcluster.live.nodes:hyperpod_session_node"
"""The node `connect` and `info` go to (a group's, an instance, else the head node group the cluster stack names), and
`placeholder_target` its Session Manager target's form when it cannot be looked up."""
PRICE_SERVICE = "sagemaker"
"""The price table's service of its instances (`fmcluster.cost`): `sagemaker:` and `billed_instance_type`."""
COST_LINES = "fmcluster.cost:hyperpod_lines"
"""`fmcluster.cost`'s lines of what it bills beside the compute groups (head nodes, cluster fees, volumes)."""
RECORDS_SIZE = False
"""HyperPod clusters have no size: `cdk.context.json` records nothing for them (fmcluster.recorded_context)."""
CLUSTER_STATUS_EVENTS = True
"""SageMaker sends the cluster's status changes to EventBridge ("SageMaker HyperPod Cluster State Change"): the
observability construct routes its failures to the alarm topic."""
DEFAULT_SLURM_VERSION: str | None = None
"""HyperPod runs the Slurm version it ships: the file names none."""
CAPACITIES = ("on-demand", "training-plan")
"""What HyperPod consumes: on-demand capacity, or a SageMaker training plan (botocore sagemaker
ClusterInstanceGroupSpecification has TrainingPlanArn and no EC2 capacity reservation)."""


FAIR_SHARE_WEIGHT = (
    "the shares order jobs only once slurm.conf sets PriorityWeightFairshare above its default 0 (slurm.conf(5), Slurm "
    "24.11 and 26.05), and HyperPod's slurm.conf is HyperPod's: its cluster agent rewrites it, and its API takes no "
    "Slurm settings (botocore sagemaker ClusterOrchestratorSlurmConfig: SlurmConfigStrategy, which manages "
    "partitions, and AccountingDatabase), so fmcluster sets no priority weight"
)
"""Why the users' equal shares may not order jobs on HyperPod (`advice.accounting_notes`; docs/operations.md)."""
ENFORCEMENT = (
    "nor does it set AccountingStorageEnforce, for the same reason: QoS limits set with sacctmgr are recorded, and "
    "whether HyperPod's own slurm.conf enforces them, or refuses jobs outside an association, is unconfirmed"
)
"""What fmcluster does about jobs outside an association on HyperPod (`advice.accounting_notes`)."""


def enforcement_note(orchestrator: Orchestrator) -> str:
    """`ENFORCEMENT` (HyperPod has no `orchestrator.accounting_enforce`: the model refuses it)."""
    return ENFORCEMENT


def enforcement_problem(orchestrator: Orchestrator, observability: Observability | None, has_users: bool) -> None:
    """None: the model refuses `orchestrator.accounting_enforce` on HyperPod, so nothing is left to judge here."""
    return None


def associations_problem(orchestrator: Orchestrator, observability: Observability | None) -> str | None:
    """HyperPod's controller runs slurmdbd, so the users' associations are always made there."""
    return None


PCS_ONLY = {
    "slurm_version": "only for orchestrator.type: pcs (HyperPod runs the Slurm version it ships)",
    "ami_id": "only for orchestrator.type: pcs (HyperPod nodes run SageMaker's HyperPod image)",
    "image_refresh": "only for orchestrator.type: pcs (HyperPod nodes run SageMaker's HyperPod image)",
    "size": "only for orchestrator.type: pcs (HyperPod clusters have no size)",
}
"""The `orchestrator` keys only AWS PCS takes, and why HyperPod does not."""
BAKED = (
    "baked is only for orchestrator.type: pcs for now: fmcluster builds no HyperPod image yet. AWS documents the Slurm "
    "base (/aws/service/sagemaker-hyperpod/ami/x86_64/slurm-ubuntu-22.04/latest/ami-id, SageMaker developer guide "
    "'Build a custom AMI') and its roll-out (UpdateClusterSoftware with ImageId, 'Cluster management with custom "
    "AMIs'), not an arm64 base, the AMI's root device, nor what a CloudFormation update of a group's ImageId does to "
    "its running nodes; use boot"
)
ACCOUNTING = (
    "HyperPod always runs Slurm accounting (slurmdbd with MariaDB on the controller: SageMaker HyperPod guide, 'Using "
    "an external accounting database'); remove accounting: false"
)
ACCOUNTING_ENFORCE = (
    "only for orchestrator.type: pcs (HyperPod's slurm.conf is HyperPod's own: its API takes no Slurm settings, so "
    "fmcluster sets no AccountingStorageEnforce there)"
)


def setting_problem(key: str, value: object, earlier: Mapping[str, object]) -> str | None:
    """What HyperPod refuses of the `orchestrator` key `key` set to `value` (not None): a key only AWS PCS takes, a
    baked node image, accounting turned off, accounting enforced (`earlier`: the keys validated before it).

    >>> setting_problem("size", "small", {})
    'only for orchestrator.type: pcs (HyperPod clusters have no size)'
    """
    if key in PCS_ONLY:
        return PCS_ONLY[key]
    if key == "node_image" and value == "baked":
        return BAKED
    if key == "accounting" and value is False:
        return ACCOUNTING
    if key == "accounting_enforce" and value is True:
        return ACCOUNTING_ENFORCE
    return None


def billed_instance_type(instance_type: str) -> str:
    """The name HyperPod bills (and takes) an EC2 type by: with SageMaker's `ml.` prefix.

    >>> billed_instance_type("p5.48xlarge")
    'ml.p5.48xlarge'
    """
    return f"ml.{instance_type}"


def placeholder_target(group: str | None, node: str | None) -> str:
    """The Session Manager target's form, for the command printed when the real one cannot be looked up.

    >>> placeholder_target(None, None)
    'sagemaker-cluster:<cluster-id>_controller-<instance-id>'
    """
    return f"sagemaker-cluster:<cluster-id>_{group or CONTROLLER_GROUP}-{node or '<instance-id>'}"


def users_problem(users: object) -> str | None:
    """HyperPod's lifecycle creates the cluster users on every node (on_create.sh, step users)."""
    return None


def capacity_problem(capacity: object) -> str | None:
    """EC2 reservations (capacity blocks, ODCRs), which HyperPod cannot consume."""
    if capacity in ("capacity-block", "odcr"):
        return (
            f"{capacity!r} needs orchestrator.type: pcs (EC2 reservations are consumed through launch templates); "
            "HyperPod takes reserved capacity as capacity: training-plan with training_plan_arn"
        )
    return None


ROOT_VOLUME = (
    "HyperPod sizes each node's root volume itself (SageMaker API ClusterEbsVolumeConfig: for the root volume \"you "
    "can't specify the VolumeSizeInGB field\"); root_volume_gib sizes AWS PCS nodes' root volumes: remove it with "
    "hyperpod-slurm"
)


def root_volume_problem(given_keys: Iterable[str]) -> str | None:
    """A root volume size asked of a HyperPod group (`given_keys`: the keys the group was given)."""
    return ROOT_VOLUME if "root_volume_gib" in given_keys else None


NO_AUTOSCALING = (
    "HyperPod Slurm instance groups do not scale with the queue (HyperPod's autoscaling is for EKS-orchestrated "
    "clusters: SageMaker developer guide, Autoscaling on SageMaker HyperPod EKS; MinInstanceCount only sets how many "
    "nodes must start before a group is InService, botocore sagemaker ClusterInstanceGroupSpecification); scaling to "
    "zero is for orchestrator.type: pcs"
)


def group_problems(group: ComputeGroup, slurm_version: str | None) -> Iterator[tuple[str, str]]:
    """(key, message) for what a HyperPod group cannot do: scale between a minimum and a maximum, idle scale-down, a
    placement group of one's own (HyperPod places its nodes itself; its instance groups take no placement group)."""
    if group.scales:
        yield "min_count", f"must equal count ({group.count}) with hyperpod-slurm: {NO_AUTOSCALING}"
    if group.scale_down_idle_minutes is not None:
        yield "scale_down_idle_minutes", f"only for orchestrator.type: pcs: {NO_AUTOSCALING}"
    if group.health_checks is not None:
        yield (
            "health_checks",
            "are AWS PCS instance health checks: only for orchestrator.type: pcs; HyperPod's are "
            "compute[].deep_health_checks (before a node joins) and its health monitoring agent (always on)",
        )
    if group.existing_placement_group is not None:
        yield (
            "placement_group",
            "a placement group name is for orchestrator.type: pcs: HyperPod places its nodes itself and its instance "
            "groups take no placement group (botocore sagemaker ClusterInstanceGroupSpecification)",
        )


def key_problems(orchestrator: Orchestrator, groups: list[tuple[int, ComputeGroup]]) -> Iterator[Problem]:
    """Keys the file gives that HyperPod does not take: a group's root volume size."""
    for index, group in groups:
        if problem := root_volume_problem(group.model_fields_set):
            yield Problem(f"compute[{index}].root_volume_gib", problem)


def nodes(orchestrator: Orchestrator, observability: Observability | None, compute_nodes: int) -> int:
    """The instances of a HyperPod cluster that take an address in its subnet: compute nodes, the controller and the
    login node when there is one."""
    return compute_nodes + 1 + (1 if orchestrator.login_instance_type else 0)


def head_instance_types(orchestrator: Orchestrator, observability: Observability | None) -> Iterator[tuple[str, str]]:
    """(key path, EC2 type) of the controller and the login node."""
    yield "orchestrator.controller_instance_type", orchestrator.controller_instance_type
    if orchestrator.login_instance_type:
        yield "orchestrator.login_instance_type", orchestrator.login_instance_type


def deep_health_checks_problem(checks: Iterable[str]) -> str | None:
    """HyperPod runs both of its deep health checks (whether a group can is `checks.deep_health_checks_problem`)."""
    return None


def instance_type_problem(instance_type: str, region: str | None) -> str | None:
    """An EC2 type (without `ml.`) HyperPod does not take (botocore sagemaker ClusterInstanceType) or, when `region`
    is known, does not offer there (the regional list `cdk synth` checks as E3644)."""
    if problem := api_name_problem("sagemaker", "ClusterInstanceType", f"ml.{instance_type}"):
        return problem
    if region is None:
        return None
    return regional_instance_type_problem("hyperpod", region, f"ml.{instance_type}")


def api_values(
    name: str | None,
    orchestrator: Orchestrator,
    groups: list[tuple[int, ComputeGroup]],
    observability: Observability | None,
) -> Iterator[ApiValue]:
    """The cluster name and every instance group and partition name the HyperPod cluster stack sends."""
    if name is not None:
        yield ApiValue("name", "sagemaker", "ClusterName", name)
    yield ApiValue("orchestrator.controller_instance_type", "sagemaker", "ClusterInstanceGroupName", CONTROLLER_GROUP)
    if orchestrator.login_instance_type:
        yield ApiValue("orchestrator.login_instance_type", "sagemaker", "ClusterInstanceGroupName", LOGIN_GROUP)
    for index, group in groups:
        yield ApiValue(f"compute[{index}].name", "sagemaker", "ClusterInstanceGroupName", group.name)
        yield ApiValue(f"compute[{index}].name", "sagemaker", "ClusterPartitionName", group.name)


def instance_types(
    orchestrator: Orchestrator,
    groups: list[tuple[int, ComputeGroup]],
    observability: Observability | None,
) -> Iterator[tuple[str, str]]:
    """(key path, EC2 type) of the controller, the login node and every compute group."""
    yield from head_instance_types(orchestrator, observability)
    for index, group in groups:
        yield f"compute[{index}].instance_type", group.instance_type


def file_problems(
    orchestrator: Orchestrator,
    observability: Observability | None,
    groups: list[tuple[int, ComputeGroup]],
    complete: bool,
) -> Iterator[Problem]:
    """HyperPod has no rule across sections of its own."""
    return iter(())
