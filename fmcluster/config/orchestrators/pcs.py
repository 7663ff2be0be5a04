"""AWS PCS: the rules that hold only when the cluster file's `orchestrator.type` is `pcs` (the orchestrator seam:
`fmcluster.config.orchestrators`), and the PCS facts they rest on.

>>> default_size(17), default_size(16), default_size(600), default_size(2000)
('medium', 'small', 'large', 'large')
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from fmcluster import catalog
from fmcluster.config.service_models import instance_type_problem as regional_instance_type_problem
from fmcluster.config.value_rules import ApiValue
from fmcluster.names import HEAD_GROUP, LOGIN_GROUP
from fmcluster.problems import Problem

if TYPE_CHECKING:
    from fmcluster.config.models import ComputeGroup, Observability, Orchestrator

CLUSTER_RESOURCE = "AWS::PCS::Cluster"
CLUSTER_STACK = "fmcluster.stacks.cluster_pcs:PcsClusterStack"
"""The cluster stack's class, named and imported when an app is built (`fmcluster validate` loads no aws_cdk)."""
CLUSTER_STACK_DESCRIPTION = "AWS PCS Slurm cluster, EFA launch templates, node bootstrap"
DIAGNOSE_CHECKS = "fmcluster.live.pcs:pcs_checks"
"""`diagnose`'s checks of the deployed cluster, named and imported by diagnose (which loads boto3)."""
INSTANCE_QUOTA_CHECKS = "fmcluster.live.quotas:on_demand_checks"
"""`validate --live`'s checks of the quotas its instances draw on."""
NODE_IMAGE_DRIFT_CHECKS = "fmcluster.live.image_drift:drift_checks"
"""`validate --live`'s check of the deployed nodes' default image against the one AWS publishes today."""
ENDPOINTS = ("Pcs",)
"""Its own interface endpoints with `egress: none` (fmcluster.endpoints): PCS nodes register through the PCS API."""
NETWORK_PLACEMENT_GROUPS = True
"""Compute groups' cluster placement groups are resources of the network stack, named by the launch templates."""
RUNS_DEEP_HEALTH_CHECKS = False
"""Deep health checks are HyperPod's on-start checks; `plan` shows none for PCS groups."""
UNOFFERED_TYPE = ("error", "choose a type or zone that has it")
DEDICATED_TENANCY = (
    "error",
    "AWS PCS does not support dedicated tenancy (AWS PCS user guide, VPC and subnet requirements)",
)
"""What `validate --live` says of a VPC of one's own with dedicated instance tenancy."""
NO_HEALTH_CHECKS: str | None = (
    "AWS PCS has no on-demand health check (no operation of botocore's pcs model starts one); its instance health "
    "checks run by themselves once turned on with compute[].health_checks (Slurm 26.05)"
)
"""Why `fmcluster healthcheck` has nothing to start on PCS (None where the service has health checks to run)."""
"""(level, advice) when EC2 lists no offering of a type in the zone: PCS launches EC2 instances, so it cannot run."""
SESSION_NODE = "fmcluster.live.nodes:pcs_session_node"
"""The node `connect` and `info` go to (a group's, an instance, else the login or head node group the cluster stack
names), and `placeholder_target` its Session Manager target's form when it cannot be looked up."""
PRICE_SERVICE = "ec2"
"""The price table's service of its instances (`fmcluster.cost`): `ec2:` and `billed_instance_type`."""
COST_LINES = "fmcluster.cost:pcs_lines"
"""`fmcluster.cost`'s lines of what it bills beside the compute groups (head nodes, cluster fees, volumes)."""
RECORDS_SIZE = True
"""The cluster's size is create-only: `cdk.context.json` records the size first built (fmcluster.recorded_context)."""
CLUSTER_STATUS_EVENTS = False
"""The observability construct routes no AWS PCS cluster event to the alarm topic (none is checked here)."""
MAX_NODES = 2048
"""AWS PCS LARGE clusters manage at most 2,048 instances (PCS API reference, Cluster.size)."""
SIZES = {"small": 32, "medium": 512, "large": MAX_NODES}
"""AWS PCS cluster sizes and the instances each manages (PCS API reference, Cluster.size; botocore pcs Size)."""
SIZE_HEADROOM = 2
"""The default size manages this many times the file's nodes. Size is create-only (CloudFormation schema of
AWS::PCS::Cluster): a cluster that outgrows it is replaced with every node group and queue, so the default leaves
room to double before that happens."""
HEAD_NODE_INSTANCE_TYPE = "m5.xlarge"
"""The PCS head node made when there is no login node but metrics need one: Slurm exporter and Grafana fit 4 vCPUs."""
NEURON_ACCELERATORS = ("AWS Trainium", "AWS Inferentia")
"""Accelerators that need the AWS Neuron driver rather than NVIDIA's."""
SLURM_VERSIONS = ("24.11", "25.05", "25.11", "26.05")
"""Slurm versions AWS PCS creates clusters with (botocore pcs `SchedulerRequest.version`: "Valid Values: 24.11 | 25.05 |
25.11 | 26.05", botocore 1.44.8)."""
DEFAULT_SLURM_VERSION = SLURM_VERSIONS[-1]
"""`orchestrator.slurm_version` when the file gives none: the newest PCS runs (26.05), also the only one with PCS's
instance health checks (FACTS.md, Node images)."""


def setting_problem(key: str, value: object, earlier: Mapping[str, object]) -> str | None:
    """What AWS PCS refuses of the `orchestrator` key `key` set to `value` (not None), given the keys validated before
    it (`earlier`): a Slurm version it does not run, an image refresh or a baked image beside an image of one's own.

    >>> setting_problem("node_image", "baked", {"ami_id": "ami-0123456789abcdef0"})[:35]
    'baked builds from the PCS-Ready DLA'
    """
    if key == "slurm_version" and value not in SLURM_VERSIONS:
        return f"must be a Slurm version AWS PCS supports ({', '.join(SLURM_VERSIONS)}); got {value!r}"
    if key == "image_refresh" and earlier.get("ami_id") is not None:
        return "only without orchestrator.ami_id: it re-resolves the default PCS-Ready DLAMI, not an image of yours"
    if key == "node_image" and value == "baked" and earlier.get("ami_id") is not None:
        return "baked builds from the PCS-Ready DLAMI: remove orchestrator.ami_id, or bake your own image"
    return None


def billed_instance_type(instance_type: str) -> str:
    """The name AWS PCS's instances are billed by: the EC2 type itself (EC2 bills them)."""
    return instance_type


def placeholder_target(group: str | None, node: str | None) -> str:
    """The Session Manager target's form (an EC2 instance id), for the command printed when the real one cannot be
    looked up."""
    return node or "<instance-id>"


def default_size(nodes: int) -> str:
    """The smallest AWS PCS size that manages twice `nodes`, else the smallest that manages `nodes`."""
    for wanted in (nodes * SIZE_HEADROOM, nodes):
        for size, limit in SIZES.items():
            if wanted <= limit:
                return size
    return "large"


ACCOUNTING_ENFORCE = "associations,limits,qos"
"""The cluster's `AccountingStorageEnforce` with `orchestrator.accounting_enforce: true` (`enforces_associations`).
PCS takes the key at cluster level but only "a subset of the options" (PCS API reference, SlurmCustomSetting; the
AWS SDK for Kotlin's parameterName lists Prolog, Epilog, SelectTypeParameters, AccountingStorageEnforce); this value
is the one AWS's own PCS recipe sets (aws-hpc-recipes recipes/pcs/terraform_awscc/assets/modules/compute/main.tf;
its CloudFormation recipes offer `associations,limits,safe`). slurm.conf(5) of Slurm 24.11.5 and 26.05.5: with
`associations` no job runs without an association, `limits` enforces association and QoS limits, `qos` requires a
valid QoS (every association fmcluster makes has DefaultQOS=normal); both imply `associations`.

Off by default: Slurm's assoc_mgr gives an association's user the uid its name has on the slurmctld host
(src/common/assoc_mgr.c `_post_user_list`: `uid_from_string(user->name)`, else NO_VAL) and matches jobs to
associations by uid; on PCS slurmctld runs on AWS's side, which cannot see the accounts users.sh makes on the nodes,
so whether the file's users' own jobs are accepted with enforcement on is (unconfirmed): docs/operations.md says how
to check it on a cluster before turning it on."""


FAIR_SHARE_WEIGHT = (
    "the shares order jobs only once slurm.conf sets PriorityWeightFairshare above its default 0 (slurm.conf(5), Slurm "
    "24.11 and 26.05), and whether PCS takes it among its cluster-level custom settings is unconfirmed (PCS user "
    "guide, 'Custom Slurm settings for AWS PCS clusters'; AWS's own templates set only AccountingStorageEnforce, "
    "SrunPortRange and OverTimeLimit there), so fmcluster sets no priority weight rather than risk a refused cluster"
)
"""Why the users' equal shares may not order jobs on PCS (`advice.accounting_notes`; docs/operations.md)."""
ENFORCEMENT = {
    True: (
        f"orchestrator.accounting_enforce sets AccountingStorageEnforce={ACCOUNTING_ENFORCE}, which PCS takes at "
        "cluster level: a job of anyone without an association (the image's login user, e.g. ubuntu, or ssm-user) is "
        "refused at submission, as is a user's first job until the head node's timer has made their association "
        "(3 minutes after that node boots; within 10 minutes of a deploy that adds the user); whether PCS's "
        "slurmctld, which cannot see the nodes' accounts, accepts the users' own jobs is unconfirmed (check with "
        "sbatch --test-only first: docs/operations.md)"
    ),
    False: (
        "it sets no AccountingStorageEnforce (orchestrator.accounting_enforce is false), so Slurm runs jobs outside "
        "an association too and applies no association or QoS limit; the associations still record usage for sacct "
        "and sshare"
    ),
}
"""What happens on PCS to jobs outside an association, by `orchestrator.accounting_enforce` (`advice.accounting_notes`;
`enforces_associations`)."""


def enforcement_note(orchestrator: Orchestrator) -> str:
    """`ENFORCEMENT` for this cluster file's `orchestrator.accounting_enforce`."""
    return ENFORCEMENT[orchestrator.accounting_enforce]


def enforces_associations(orchestrator: Orchestrator, observability: Observability | None, has_users: bool) -> bool:
    """Whether the cluster refuses jobs outside an association (`ACCOUNTING_ENFORCE`): only when the file asks for it
    (`orchestrator.accounting_enforce`, refused by `enforcement_problem` without users or a node that makes their
    associations)."""
    return orchestrator.accounting_enforce and enforcement_problem(orchestrator, observability, has_users) is None


def enforcement_problem(orchestrator: Orchestrator, observability: Observability | None, has_users: bool) -> str | None:
    """Why `orchestrator.accounting_enforce: true` cannot hold for this file, or None."""
    if not orchestrator.accounting_enforce:
        return None
    if not has_users:
        return (
            "needs users: without them no one but root has a Slurm association, so every job of the image's login "
            "user (ubuntu) or ssm-user would be refused"
        )
    if problem := associations_problem(orchestrator, observability):
        return f"needs a node that makes the users' associations: {problem}"
    return None


def associations_problem(orchestrator: Orchestrator, observability: Observability | None) -> str | None:
    """Why no node gives the cluster users their Slurm associations, or None: they are made on the head node (the
    login node, or the head node of its own), from the PCS managed accounting database."""
    if not orchestrator.accounting:
        return (
            "orchestrator.accounting is false: the users get no Slurm associations, fair share or QoS (PCS keeps no "
            "accounting database)"
        )
    if head_group(orchestrator, observability) is None:
        return (
            "no node makes the users' Slurm associations: they are made on the login node (or the head node that "
            "observability.prometheus: managed adds); set orchestrator.login_instance_type"
        )
    return None


def head_group(orchestrator: Orchestrator, observability: Observability | None) -> tuple[str, str, str] | None:
    """(key path that asks for it, group name, instance type) of the PCS node group of the head node, or None.

    The login node is the head node; without one, a small group of its own when metrics need a head node.
    """
    if orchestrator.login_instance_type:
        return "orchestrator.login_instance_type", LOGIN_GROUP, orchestrator.login_instance_type
    if observability is not None and observability.prometheus == "managed":
        return "observability.prometheus", HEAD_GROUP, HEAD_NODE_INSTANCE_TYPE
    return None


def nodes(orchestrator: Orchestrator, observability: Observability | None, compute_nodes: int) -> int:
    """The instances an AWS PCS cluster manages: the compute nodes and, when there is one, the head (login) node."""
    return compute_nodes + (1 if head_group(orchestrator, observability) else 0)


def users_problem(users: object) -> str | None:
    """None: PCS nodes create the cluster users as a required node lifecycle action (users.sh install)."""
    return None


def capacity_problem(capacity: object) -> str | None:
    """Capacity AWS PCS cannot consume: a SageMaker training plan."""
    if capacity == "training-plan":
        return (
            "'training-plan' needs orchestrator.type: hyperpod-slurm (training plans reserve SageMaker capacity); "
            "with pcs use 'capacity-block' or 'odcr'"
        )
    return None


CONTROLLER = (
    "AWS PCS runs the Slurm controller itself (a managed service; orchestrator.size picks its capacity), so no "
    "instance type is used; remove it with pcs"
)


def controller_type_problem(given_keys: Iterable[str]) -> str | None:
    """A controller instance type asked of an AWS PCS cluster (`given_keys`: the orchestrator's keys as given)."""
    return CONTROLLER if "controller_instance_type" in given_keys else None


NODE_GROUP_SCALE_DOWN_SLURM = (25, 11)
"""A compute node group's own `scaleDownIdleTimeInSeconds` "Requires Slurm version 25.11 or later" (botocore pcs
ComputeNodeGroupSlurmConfigurationRequest); older clusters have only the cluster-wide setting (default 600 s)."""


INSTANCE_HEALTH_CHECKS_SLURM = (26, 5)
""""Instance health checks require Slurm version 26.05 or later" (botocore pcs CreateComputeNodeGroup and
UpdateComputeNodeGroup, `instanceHealthChecks`)."""


def group_problems(group: ComputeGroup, slurm_version: str | None) -> Iterator[tuple[str, str]]:
    """(key, message): an idle scale-down time of its own, or instance health checks, on a cluster whose Slurm version
    has none (None: unknown)."""
    version = re.fullmatch(r"(\d+)\.(\d+)", slurm_version or "")
    if version is None:
        return  # no version known (an invalid one is its own problem)
    if group.health_checks is not None and (int(version[1]), int(version[2])) < INSTANCE_HEALTH_CHECKS_SLURM:
        yield (
            "health_checks",
            "PCS instance health checks need Slurm 26.05 or later (botocore pcs UpdateComputeNodeGroup "
            f"instanceHealthChecks); orchestrator.slurm_version is {slurm_version}: remove them or use 26.05",
        )
    if group.scale_down_idle_minutes is None:
        return
    if (int(version[1]), int(version[2])) < NODE_GROUP_SCALE_DOWN_SLURM:
        yield (
            "scale_down_idle_minutes",
            "a node group's own idle scale-down time needs Slurm 25.11 or later (botocore pcs "
            f"ComputeNodeGroupSlurmConfigurationRequest); orchestrator.slurm_version is {slurm_version}: remove it "
            "(idle nodes then stop after PCS's cluster-wide 10 minutes) or use 25.11 or later",
        )


def key_problems(orchestrator: Orchestrator, groups: list[tuple[int, ComputeGroup]]) -> Iterator[Problem]:
    """Keys the file gives that AWS PCS does not take: a controller instance type."""
    if problem := controller_type_problem(orchestrator.model_fields_set):
        yield Problem("orchestrator.controller_instance_type", problem)


def head_instance_types(orchestrator: Orchestrator, observability: Observability | None) -> Iterator[tuple[str, str]]:
    """(key path, EC2 type) of the head node, which is the login node or the group metrics need (PCS runs the Slurm
    controller itself)."""
    if (head := head_group(orchestrator, observability)) is not None:
        yield head[0], head[2]


def deep_health_checks_problem(checks: Iterable[str]) -> str | None:
    """Deep health checks asked of an AWS PCS group (they are HyperPod's)."""
    if tuple(checks):
        return (
            "are SageMaker HyperPod's on-start checks: they need orchestrator.type: hyperpod-slurm; remove them with "
            "pcs"
        )
    return None


def node_limit_problem(nodes: int) -> str | None:
    """More instances (head node included) than the largest AWS PCS cluster manages."""
    if nodes > MAX_NODES:
        return (
            f"{nodes} nodes (with the head node) exceed the {MAX_NODES:,} instances an AWS PCS cluster manages "
            "(size large); split the cluster or use orchestrator.type: hyperpod-slurm"
        )
    return None


def size_problem(size: str | None, nodes: int) -> str | None:
    """An AWS PCS size (any case) that manages fewer instances than `nodes` (head node included)."""
    if size is None or size.lower() not in SIZES or nodes > MAX_NODES:
        return None
    size = size.lower()
    if nodes <= SIZES[size]:
        return None
    return (
        f"{size!r} manages {SIZES[size]} instances, fewer than these {nodes} nodes (with the head node); "
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


def node_image_problem(instance_type: str) -> str | None:
    """An instance type the default PCS node image (the PCS-Ready DLAMI) cannot drive: its accelerators need the AWS
    Neuron driver, and the image is built on the NVIDIA-driver DLAMI (Deep Learning Base AMI, Ubuntu 24.04; its
    release notes list the NVIDIA driver and CUDA, no Neuron), so refuse."""
    row = catalog.CATALOG.get(instance_type)
    if row is None or not row.accelerator.startswith(NEURON_ACCELERATORS):
        return None
    return (
        f"required for {instance_type} ({row.accelerator}): the default PCS node image (the PCS-Ready DLAMI) carries "
        "the NVIDIA driver and CUDA, not the AWS Neuron driver these accelerators need; give an image with Neuron "
        "(for example one built from a Neuron DLAMI with AWS's PCS software installers)"
    )


def instance_type_problem(instance_type: str, region: str | None) -> str | None:
    """A launch-template type EC2 does not offer in `region` (cfn-lint's regional list, E3628); None unknown."""
    return regional_instance_type_problem("ec2", region, instance_type) if region else None


def api_values(
    name: str | None,
    orchestrator: Orchestrator,
    groups: list[tuple[int, ComputeGroup]],
    observability: Observability | None,
) -> Iterator[ApiValue]:
    """The cluster name and every node group and queue name the PCS cluster stack sends."""
    if name is not None:
        yield ApiValue("name", "pcs", "ClusterName", name)
    for index, group in groups:
        for shape in ("ComputeNodeGroupName", "QueueName"):
            yield ApiValue(f"compute[{index}].name", "pcs", shape, group.name)
    head = head_group(orchestrator, observability)
    if head is not None:
        yield ApiValue(head[0], "pcs", "ComputeNodeGroupName", head[1])


def instance_types(
    orchestrator: Orchestrator,
    groups: list[tuple[int, ComputeGroup]],
    observability: Observability | None,
) -> Iterator[tuple[str, str]]:
    """(key path, EC2 type) of every compute group and the head node (each in a launch template)."""
    for index, group in groups:
        yield f"compute[{index}].instance_type", group.instance_type
    yield from head_instance_types(orchestrator, observability)


LOGIN_ROOT_VOLUME_GIB = 200
"""The login (or head) node's encrypted gp3 root volume (constructs/pcs/cluster.py)."""
CAPACITY_BLOCK_FAMILIES = ("p6-b300", "p6-b200", "p5en", "p5e", "p5", "p4d")
"""The instance families AWS PCS takes Capacity Blocks of (AWS PCS user guide, "Using Amazon EC2 Capacity Blocks for
ML with AWS PCS", Limitations: "P6-B300, P6-B200, P5en, P5e, P5, and P4d instance families"). EC2 sells blocks of
more (trn1, trn2, p6e-gb200 UltraServers: EC2 user guide, Capacity Blocks, supported instance types)."""


def capacity_block_type_problem(capacity: str, instance_type: str) -> str | None:
    """A capacity block of a type AWS PCS does not take."""
    if capacity != "capacity-block" or instance_type.split(".", 1)[0] in CAPACITY_BLOCK_FAMILIES:
        return None
    return (
        f"AWS PCS takes Capacity Blocks of the P6-B300, P6-B200, P5en, P5e, P5 and P4d families only (AWS PCS user "
        f"guide, Capacity Blocks, Limitations); {instance_type} is not one: use hyperpod-slurm with a training plan, "
        "or an odcr"
    )


def file_problems(
    orchestrator: Orchestrator,
    observability: Observability | None,
    groups: list[tuple[int, ComputeGroup]],
    complete: bool,
) -> Iterator[Problem]:
    """The cluster's size against its nodes, one architecture per given image, an image for Neuron nodes.

    `groups` are the valid compute groups; `complete` False when some group is invalid, so that nothing counting
    every group is judged."""
    for index, group in groups:
        if problem := capacity_block_type_problem(group.capacity, group.instance_type):
            yield Problem(f"compute[{index}].capacity", problem)
    if complete:
        total = nodes(orchestrator, observability, sum(group.count for _, group in groups))
        if problem := node_limit_problem(total):
            yield Problem("compute", problem)
        if problem := size_problem(orchestrator.size, total):
            yield Problem("orchestrator.size", problem)
    if orchestrator.ami_id is not None:
        if not complete:
            return
        types = [group.instance_type for _, group in groups]
        if head := head_group(orchestrator, observability):
            types.append(head[2])  # the login node, or the head node of its own (m5.xlarge)
        if problem := mixed_architectures_problem(types):
            yield Problem("orchestrator.ami_id", problem)
        return
    for instance_type in dict.fromkeys(group.instance_type for _, group in groups):
        if problem := node_image_problem(instance_type):
            yield Problem("orchestrator.ami_id", problem)
            return
