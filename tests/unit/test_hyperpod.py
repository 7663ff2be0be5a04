"""HyperPodSlurmCluster and the HyperPod cluster stack: instance groups, FSx, the lifecycle bucket and scripts, the
execution role, cdk-nag and cfn-lint, and prop errors for library users.

The examples come from the session (tests/conftest.py `synthesized`):
* the quickstart (examples/quickstart.yaml): network, storage and HyperPod cluster stacks;
* the training-plan example (examples/hyperpod-training-plan.yaml): a login group, a group on a training plan and a
  group without EFA.
This module builds only what no example has, one app synthesized once (tests/support.py): a library user's stack
without an environment (account and region are tokens) using every optional prop, with compute groups given as
mappings and the file system by its attributes. A few tests synthesize a small app of their own (the defaults).
"""

from __future__ import annotations

import fnmatch
import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk.assertions import Match

from fmcluster.config import ComputeGroup
from fmcluster.config.users import NO_USERS
from fmcluster.constructs.buckets import ProjectBuckets
from fmcluster.constructs.hyperpod import (
    LIFECYCLE_ENV,
    LIFECYCLE_PREFIX,
    HyperPodSlurmCluster,
    lifecycle_bucket_name,
    lifecycle_files,
)
from fmcluster.constructs.lustre import LustreMount, LustreStorage
from fmcluster.constructs.network import TrainingNetwork
from fmcluster.constructs.observability import endpoint_parameter_name
from fmcluster.node_files import NODE_FILES, dashboard_files, node_tree
from tests import support

pytestmark = pytest.mark.synth

ENV = cdk.Environment(account="123456789012", region="us-east-1")
PLAN_ARN = "arn:aws:sagemaker:us-west-2:123456789012:training-plan/llm-pretrain-2026q4"
DNS = "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com"
VPC_DESCRIBE = [
    "ec2:DescribeDhcpOptions",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeSubnets",
    "ec2:DescribeVpcs",
]
STAR_ACTIONS = {*VPC_DESCRIBE, "ecr:GetAuthorizationToken", "cloudwatch:PutMetricData"}
"""The only actions allowed on Resource "*": none of them supports resource-level permissions."""


@dataclass
class Cluster(support.StackTemplate):
    """One HyperPodSlurmCluster, the template of its stack, and the cloud assembly it was synthesized into."""

    construct: HyperPodSlurmCluster | None = None
    outdir: Path | None = None

    @property
    def props(self) -> dict:
        return self.resource(self.construct.cluster)["Properties"]

    def group(self, name: str) -> dict:
        (found,) = [group for group in self.props["InstanceGroups"] if group["InstanceGroupName"] == name]
        return found

    def statements(self) -> list[dict]:
        policy = self.construct.role.node.find_child("DefaultPolicy").node.default_child
        found = []
        for statement in self.resource(policy)["Properties"]["PolicyDocument"]["Statement"]:
            actions, resources = statement["Action"], statement["Resource"]
            found.append(
                {
                    **statement,
                    "Action": sorted(actions if isinstance(actions, list) else [actions]),
                    "Resource": resources if isinstance(resources, list) else [resources],
                }
            )
        return found

    def allowed(self, action: str) -> list[dict]:
        return [statement for statement in self.statements() if action in statement["Action"]]


def example_cluster(example: support.Synthesized) -> Cluster:
    stack = example.built.cluster
    view = example.view(stack)
    return Cluster(stack=stack, template=view.template, construct=stack.hyperpod, outdir=example.outdir)


@dataclass
class Library:
    """The library user's app: its cluster and the parts given to it."""

    built: support.Synthesized
    cluster: Cluster
    buckets: ProjectBuckets
    repository: ecr.Repository
    network: TrainingNetwork
    extra: ec2.SecurityGroup


@pytest.fixture(scope="module")
def lib(tmp_path_factory) -> Library:
    app = support.app(tmp_path_factory.mktemp("hyperpod"))
    stack = cdk.Stack(app, "HyperPodLibrary")
    network = TrainingNetwork(stack, "Network", availability_zone_id="use1-az6")
    buckets = ProjectBuckets(stack, "Buckets")
    repository = ecr.Repository(stack, "Images", image_scan_on_push=True, removal_policy=cdk.RemovalPolicy.DESTROY)
    extra = ec2.SecurityGroup(stack, "Extra", vpc=network.vpc, allow_all_outbound=False)
    construct = HyperPodSlurmCluster(
        stack,
        "HyperPod",
        cluster_name="Research-Cluster",
        subnet=network.compute_subnet,
        security_groups=[network.efa_security_group, extra],
        compute_groups=[
            {"name": "h100", "instance_type": "p5.48xlarge", "count": 4},
            ComputeGroup(name="trn", instance_type="trn1.32xlarge", count=0, efa=False),
        ],
        controller_instance_type="c5.4xlarge",
        file_system=LustreMount(dns_name=DNS, mount_name="abcdef12"),
        buckets=buckets,
        nccl_parameter_prefix="/tuning/research",
        key=buckets.key,
        image_repositories=[repository],
        access_logs_bucket=buckets.logs_bucket,
        controller_volume_gib=1000,
        slurm_config_strategy="Managed",
        prometheus="managed",
        grafana="none",
        removal_policy=cdk.RemovalPolicy.DESTROY,
    )
    built = support.synthesize(app, [stack])
    cluster = Cluster(stack=stack, template=built.templates.get(stack.stack_name, {}), construct=construct,
                      outdir=built.outdir)  # fmt: skip
    return Library(built=built, cluster=cluster, buckets=buckets, repository=repository, network=network, extra=extra)


@pytest.fixture(scope="module")
def quickstart(synthesized) -> Cluster:
    return example_cluster(synthesized["quickstart"])


@pytest.fixture(scope="module")
def plan(synthesized) -> Cluster:
    return example_cluster(synthesized["hyperpod-training-plan"])


@pytest.fixture(scope="module")
def library(lib) -> Cluster:
    return lib.cluster


def output_of(value: object, stack: str, name_part: str) -> bool:
    """Whether `value` reads an output of `stack` whose name contains `name_part` (a reference across stacks)."""
    if not isinstance(value, dict) or "Fn::GetStackOutput" not in value:
        return False
    output = value["Fn::GetStackOutput"]
    return output["StackName"] == stack and name_part in output["OutputName"]


# --- the cluster ----------------------------------------------------------------------------------------------


def test_quickstart_is_one_api_driven_slurm_cluster_with_automatic_recovery(quickstart):
    quickstart.assertions().resource_count_is("AWS::SageMaker::Cluster", 1)
    quickstart.assertions().has_resource_properties(
        "AWS::SageMaker::Cluster",
        {"ClusterName": "quickstart", "Orchestrator": {"Slurm": {}}, "NodeRecovery": "Automatic"},
    )
    assert [group["InstanceGroupName"] for group in quickstart.props["InstanceGroups"]] == ["controller", "gpu"]
    assert quickstart.construct.instance_group_names == ["controller", "gpu"]


def test_nodes_sit_in_the_compute_subnet_and_the_efa_security_group(quickstart):
    vpc = quickstart.props["VpcConfig"]
    (subnet,) = vpc["Subnets"]
    (group,) = vpc["SecurityGroupIds"]
    assert output_of(subnet, "quickstart-network", "ComputeSubnet")
    assert output_of(group, "quickstart-network", "EfaSecurityGroup")
    assert quickstart.stack.dependencies and {s.stack_name for s in quickstart.stack.dependencies} == {
        "quickstart-network",
        "quickstart-storage",
    }  # not the image: the nodes boot while it builds


def test_controller_group_is_one_slurm_controller_with_an_extra_encrypted_volume(quickstart):
    controller = quickstart.group("controller")
    assert controller["InstanceType"] == "ml.m5.4xlarge"
    assert controller["InstanceCount"] == 1
    assert controller["SlurmConfig"] == {"NodeType": "Controller"}
    volume, fsx = controller["InstanceStorageConfigs"]
    assert volume == {"EbsVolumeConfig": {"VolumeSizeInGB": 500}}  # HyperPod encrypts it with an AWS owned key
    assert "FsxLustreConfig" in fsx
    for key in ("ThreadsPerCore", "OnStartDeepHealthChecks", "NetworkInterface", "TrainingPlanArn"):
        assert key not in controller


def test_compute_group_is_a_partition_of_accelerated_efa_nodes(quickstart):
    gpu = quickstart.group("gpu")
    assert gpu["InstanceType"] == "ml.p5.48xlarge"
    assert gpu["InstanceCount"] == 2
    assert gpu["SlurmConfig"] == {"NodeType": "Compute", "PartitionNames": ["gpu"]}
    assert gpu["ThreadsPerCore"] == 1
    assert "OnStartDeepHealthChecks" not in gpu  # compute[].deep_health_checks defaults to none
    assert gpu["NetworkInterface"] == {"InterfaceType": "efa-only"}
    assert "TrainingPlanArn" not in gpu
    assert [list(config) for config in gpu["InstanceStorageConfigs"]] == [["FsxLustreConfig"]]  # no EBS volume


def test_every_group_mounts_the_storage_stacks_file_system_at_fsx(quickstart, plan):
    for cluster, storage in ((quickstart, "quickstart-storage"), (plan, "llm-plan-storage")):
        for group in cluster.props["InstanceGroups"]:
            (fsx,) = [c["FsxLustreConfig"] for c in group["InstanceStorageConfigs"] if "FsxLustreConfig" in c]
            assert fsx["MountPath"] == "/fsx"
            assert output_of(fsx["DnsName"], storage, "DNSName"), group["InstanceGroupName"]
            assert output_of(fsx["MountName"], storage, "LustreMountName"), group["InstanceGroupName"]


def test_every_group_runs_the_entry_script_after_hyperpod_set_up_from_the_lifecycle_prefix(quickstart, plan, library):
    for cluster in (quickstart, plan, library):
        bucket = cluster.logical_id(cluster.construct.lifecycle_bucket)
        role = cluster.logical_id(cluster.construct.role)
        for group in cluster.props["InstanceGroups"]:
            assert group["LifeCycleConfig"] == {
                "OnInitComplete": "on_create.sh",
                "SourceS3Uri": {"Fn::Join": ["", ["s3://", {"Ref": bucket}, f"/{LIFECYCLE_PREFIX}/"]]},
            }
            assert group["ExecutionRole"] == {"Fn::GetAtt": [role, "Arn"]}


def test_training_plan_example_has_a_login_group_and_a_group_on_the_plan(plan, synthesized):
    groups = plan.props["InstanceGroups"]
    assert [(g["InstanceGroupName"], g["InstanceType"], g["InstanceCount"]) for g in groups] == [
        ("controller", "ml.m5.8xlarge", 1),
        ("login", "ml.m5.4xlarge", 1),
        ("gpu", "ml.p5en.48xlarge", 8),
        ("dev", "ml.g5.12xlarge", 1),
    ]
    login = plan.group("login")
    assert login["SlurmConfig"] == {"NodeType": "Login"}
    assert [list(config) for config in login["InstanceStorageConfigs"]] == [["FsxLustreConfig"]]
    assert plan.group("gpu")["TrainingPlanArn"] == PLAN_ARN
    assert PLAN_ARN.split(":")[3] == synthesized["hyperpod-training-plan"].config.region
    assert [g["InstanceGroupName"] for g in groups if "TrainingPlanArn" in g] == ["gpu"]  # compute groups only
    dev = plan.group("dev")  # g5.12xlarge: accelerated, one EFA card (EC2 docs; eksctl's DescribeInstanceTypes data)
    assert dev["SlurmConfig"] == {"NodeType": "Compute", "PartitionNames": ["dev"]}
    assert dev["NetworkInterface"] == {"InterfaceType": "efa-only"}
    assert dev["ThreadsPerCore"] == 1 and "OnStartDeepHealthChecks" not in dev  # the file asks for none
    assert plan.group("gpu")["OnStartDeepHealthChecks"] == ["InstanceStress", "InstanceConnectivity"]  # as in the file
    assert plan.construct.instance_group_names == ["controller", "login", "gpu", "dev"]


def test_cluster_waits_for_the_role_policy_and_the_scripts(quickstart):
    depends_on = set(quickstart.resource(quickstart.construct.cluster)["DependsOn"])
    policy = quickstart.construct.role.node.find_child("DefaultPolicy")
    deployment = quickstart.construct.lifecycle_deployment.node.find_child("CustomResource")
    assert quickstart.logical_id(policy) in depends_on
    assert quickstart.logical_id(deployment) in depends_on


# --- the lifecycle bucket and scripts -------------------------------------------------------------------------


def test_lifecycle_bucket_name_starts_with_sagemaker_and_names_account_region_and_cluster(quickstart, plan, library):
    assert quickstart.resource(quickstart.construct.lifecycle_bucket)["Properties"]["BucketName"] == {
        "Fn::Join": ["", ["sagemaker-quickstart-", {"Ref": "AWS::AccountId"}, "-us-east-1"]]
    }
    assert plan.resource(plan.construct.lifecycle_bucket)["Properties"]["BucketName"] == (
        "sagemaker-llm-plan-123456789012-us-west-2"
    )
    assert library.resource(library.construct.lifecycle_bucket)["Properties"]["BucketName"] == {
        "Fn::Join": ["", ["sagemaker-research-cluster-", {"Ref": "AWS::AccountId"}, "-", {"Ref": "AWS::Region"}]]
    }


@pytest.mark.parametrize(
    ("cluster_name", "region", "expected"),
    [
        ("quickstart", "us-east-1", "sagemaker-quickstart-123456789012-us-east-1"),
        ("a" * 24, "ap-southeast-7", f"sagemaker-{'a' * 24}-123456789012-ap-southeast-7"),  # the longest config
        ("Mixed-Case", "eu-west-1", "sagemaker-mixed-case-123456789012-eu-west-1"),
        ("b" * 63, "us-east-1", f"sagemaker-{'b' * 21}-94e419fa-123456789012-us-east-1"),
        ("c" * 20 + "-" + "d" * 20, "us-east-1", f"sagemaker-{'c' * 20}-6068d1c1-123456789012-us-east-1"),
    ],
    ids=["short", "longest-config-name", "uppercase", "long", "long-with-dash"],
)
def test_lifecycle_bucket_name_fits_s3(cluster_name, region, expected):
    name = lifecycle_bucket_name(cluster_name, "123456789012", region)
    assert name == expected
    assert len(name) <= 63 and re.fullmatch(r"sagemaker-[a-z0-9][a-z0-9-]*[a-z0-9]", name)


def test_lifecycle_bucket_name_leaves_room_for_any_region_when_it_is_a_token():
    name = lifecycle_bucket_name("e" * 40, cdk.Aws.ACCOUNT_ID, cdk.Aws.REGION)
    longest = name.replace(cdk.Aws.ACCOUNT_ID, "1" * 12).replace(cdk.Aws.REGION, "ap-southeast-7")
    assert len(longest) == 63


def test_lifecycle_bucket_is_private_encrypted_tls_only_and_goes_with_the_stack(quickstart):
    resource = quickstart.resource(quickstart.construct.lifecycle_bucket)
    props = resource["Properties"]
    assert props["BucketEncryption"] == {
        "ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
    }
    assert props["PublicAccessBlockConfiguration"] == dict.fromkeys(
        ("BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"), True
    )
    assert props["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    assert "LoggingConfiguration" not in props  # acknowledged: see test_acknowledgments
    assert (resource["DeletionPolicy"], resource["UpdateReplacePolicy"]) == ("Delete", "Delete")
    quickstart.assertions().has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "Bucket": {"Ref": quickstart.logical_id(quickstart.construct.lifecycle_bucket)},
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})]
                )
            },
        },
    )


def test_lifecycle_bucket_logs_access_when_given_a_logs_bucket(library, lib):
    props = library.resource(library.construct.lifecycle_bucket)["Properties"]
    assert props["LoggingConfiguration"] == {
        "DestinationBucketName": library.ref(lib.buckets.logs_bucket.bucket_name),
        "LogFilePrefix": f"{LIFECYCLE_PREFIX}/",
    }


def deployment(cluster: Cluster) -> dict:
    (found,) = [r for r in cluster.template["Resources"].values() if r["Type"] == "Custom::CDKBucketDeployment"]
    return found["Properties"]


def deployed_files(cluster: Cluster) -> dict[str, str]:
    """What the BucketDeployment copies below the lifecycle prefix (e.g. dashboards/rules/alerts.yml), read from the
    source assets in cdk.out: a zip file asset (staged as it is, `asset.<hash>.zip`) or a directory asset (staged as
    `asset.<hash>/`, zipped when published). The deployment unpacks every source into the same prefix."""
    files: dict[str, str] = {}
    for key in deployment(cluster)["SourceObjectKeys"]:
        staged = cluster.outdir / f"asset.{key}"
        if staged.is_file():
            with zipfile.ZipFile(staged) as archive:
                found = {name: archive.read(name).decode() for name in archive.namelist()}
        else:
            directory = cluster.outdir / f"asset.{key.removesuffix('.zip')}"
            found = {p.relative_to(directory).as_posix(): p.read_text() for p in directory.rglob("*") if p.is_file()}
        assert not set(found) & set(files), "two sources write the same object"
        files |= found
    return files


def test_the_node_files_are_deployed_as_they_lie_on_a_node_and_pruned(quickstart):
    """The lifecycle prefix holds on_create.sh, fmcluster.env and the one node-file tree (fmcluster.node_files), laid
    out as /opt/fmcluster is: the same files, in the same places, as a PCS node's bundle."""
    props = deployment(quickstart)
    assert props["DestinationBucketName"] == {"Ref": quickstart.logical_id(quickstart.construct.lifecycle_bucket)}
    assert props["DestinationBucketKeyPrefix"] == LIFECYCLE_PREFIX
    assert props["Prune"] is True
    assert props["RetainOnDelete"] is False
    files = deployed_files(quickstart)
    tree = node_tree()
    assert set(files) == {"on_create.sh", LIFECYCLE_ENV, *tree}
    for name, (data, _) in tree.items():
        assert files[name] == data.decode(), name
    assert {entry.path for entry in NODE_FILES} <= set(files)
    assert files["on_create.sh"] == (support.REPO / "fmcluster/node/hyperpod/on_create.sh").read_text()


def test_the_deployment_ships_observability_sh_its_dashboards_folder_and_the_nccl_tests_job(quickstart):
    files = deployed_files(quickstart)
    assert files["node/observability.sh"] == (support.REPO / "fmcluster/node/observability.sh").read_text()
    assert files["nccl-tests.sbatch"] == (support.REPO / "fmcluster/node/nccl-tests.sbatch").read_text()
    shipped = {name.removeprefix("dashboards/") for name in files if name.startswith("dashboards/")}
    assert shipped == set(dashboard_files()) >= {"agent.yml", "rules/alerts.yml", "rules/recording.yml", "gpu.json"}


def test_settings_file_tells_the_scripts_about_this_cluster(quickstart, library):
    assert deployed_files(quickstart)[LIFECYCLE_ENV] == (
        "FMCLUSTER_CLUSTER=quickstart\n"
        "FMCLUSTER_REGION=us-east-1\n"
        "FMCLUSTER_NCCL_PREFIX=/fmcluster/quickstart\n"
        "FMCLUSTER_IMAGE_PARAMETER=/fmcluster/quickstart/image-uri\n"
        "FMCLUSTER_CONTROLLER_GROUP=controller\n"
        "FMCLUSTER_FSX_MOUNT=/fsx\n"
        "FMCLUSTER_PROMETHEUS=managed\n"
        "FMCLUSTER_GRAFANA=self-hosted\n"
        "FMCLUSTER_ENDPOINT_PARAMETER=/fmcluster/quickstart/observability/prometheus-endpoint\n"
        # the artifact mirror's s3:// URI: a deploy-time value of the storage stack's mirror (a marker here)
        "FMCLUSTER_ARTIFACT_MIRROR=<<marker:0xbaba:0>>\n"
        "FMCLUSTER_USERS_PARAMETER=/fmcluster/quickstart/users\n"  # no users yet, but the step from the first boot
        # its gpu group's fabric check: 32 EFA devices, 8 GPUs, NVLink floor 250 GB/s (fmcluster.fabric)
        "FMCLUSTER_FABRIC=gpu=32,8,250\n"
        "FMCLUSTER_TRAINING_PLANS=\n"  # on-demand capacity: no plan to drain before its end
    )
    settings = deployed_files(library)[LIFECYCLE_ENV]
    assert "FMCLUSTER_NCCL_PREFIX=/tuning/research\n" in settings
    assert "FMCLUSTER_IMAGE_PARAMETER=/fmcluster/Research-Cluster/image-uri\n" in settings
    (marker,) = re.findall(r"^FMCLUSTER_REGION=(<<marker:\w+:\d+>>)$", settings, re.MULTILINE)
    markers = [m for m in deployment(library)["SourceMarkers"] if m]
    assert {"Ref": "AWS::Region"} in [m.get(marker) for m in markers]  # filled in at deploy time


def test_settings_file_tells_the_observability_step_what_to_run(quickstart, plan, library):
    """The cluster file's observability section (defaults: managed, self-hosted) reaches fmcluster.env; the endpoint
    parameter is the one ClusterObservability writes; a library user's props likewise."""
    for cluster in (quickstart, plan):
        name = cluster.construct.cluster_name
        settings = deployed_files(cluster)[LIFECYCLE_ENV].splitlines()
        assert settings[-7:-4] == [
            "FMCLUSTER_PROMETHEUS=managed",
            "FMCLUSTER_GRAFANA=self-hosted",
            f"FMCLUSTER_ENDPOINT_PARAMETER={endpoint_parameter_name(name)}",
        ]
        assert cluster.construct.endpoint_parameter_name == endpoint_parameter_name(name)
    assert deployed_files(library)[LIFECYCLE_ENV].splitlines()[-7:-4] == [
        "FMCLUSTER_PROMETHEUS=managed",
        "FMCLUSTER_GRAFANA=none",
        "FMCLUSTER_ENDPOINT_PARAMETER=/fmcluster/Research-Cluster/observability/prometheus-endpoint",
    ]
    # the nodes may read the endpoint parameter: it is one of the cluster's own parameters
    ((ssm,),) = [statement["Resource"] for statement in quickstart.allowed("ssm:GetParameter")]
    granted = "".join(part for part in ssm["Fn::Join"][1] if isinstance(part, str)).split(":parameter", 1)[1]
    assert fnmatch.fnmatchcase(endpoint_parameter_name("quickstart"), granted)


def test_by_default_the_nodes_collect_no_metrics(tmp_path):
    """A library user who leaves out prometheus: no observability step runs (FMCLUSTER_PROMETHEUS=none)."""
    app = support.app(tmp_path)
    stack = cdk.Stack(app, "Defaults", env=ENV)
    network = TrainingNetwork(stack, "Network", availability_zone_id="use1-az6")
    cluster = HyperPodSlurmCluster(
        stack,
        "HyperPod",
        cluster_name="llm",
        subnet=network.compute_subnet,
        security_groups=[network.efa_security_group],
        compute_groups=[{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2}],
    )
    built = support.synthesize(app, [stack])
    files = deployed_files(Cluster(stack=stack, template=built.templates[stack.stack_name], construct=cluster,
                                   outdir=tmp_path))  # fmt: skip
    assert files[LIFECYCLE_ENV].splitlines()[-7:-4] == [
        "FMCLUSTER_PROMETHEUS=none",
        "FMCLUSTER_GRAFANA=none",
        "FMCLUSTER_ENDPOINT_PARAMETER=",
    ]
    assert "node/observability.sh" in files and "nccl-tests.sbatch" in files  # shipped all the same


# --- the execution role ---------------------------------------------------------------------------------------


def test_role_is_trusted_by_sagemaker_with_the_hyperpod_instance_policy(quickstart):
    props = quickstart.resource(quickstart.construct.role)["Properties"]
    assert props["AssumeRolePolicyDocument"]["Statement"] == [
        {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}}
    ]
    instance_policy, node_data = props["ManagedPolicyArns"]
    assert instance_policy == {
        "Fn::Join": [
            "",
            ["arn:", {"Ref": "AWS::Partition"}, ":iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy"],
        ]
    }
    assert output_of(node_data, "quickstart-storage", "NodeDataAccess")  # the storage stack's node data policy


def test_only_actions_without_resource_level_permissions_get_star(quickstart, plan, library):
    for cluster in (quickstart, plan, library):
        for statement in cluster.statements():
            assert statement["Effect"] == "Allow"
            assert all("*" not in action for action in statement["Action"]), statement
            if "*" in statement["Resource"]:
                assert statement["Resource"] == ["*"]
                assert set(statement["Action"]) <= STAR_ACTIONS, statement
        (metrics,) = cluster.allowed("cloudwatch:PutMetricData")
        assert metrics["Condition"] == {"StringEquals": {"cloudwatch:namespace": cluster.construct.metrics_namespace}}
        assert cluster.construct.metrics_namespace == f"fmcluster/{cluster.construct.cluster_name}"


def test_vpc_permissions_hyperpod_needs_are_scoped_to_the_subnet_groups_and_interfaces(quickstart):
    (describe,) = [s for s in quickstart.statements() if "ec2:DescribeVpcs" in s["Action"]]
    assert set(VPC_DESCRIBE) <= set(describe["Action"]) and describe["Resource"] == ["*"]
    interfaces = {"Fn::Join": ["", ["arn:aws:ec2:us-east-1:", {"Ref": "AWS::AccountId"}, ":network-interface/*"]]}
    (create,) = quickstart.allowed("ec2:CreateNetworkInterface")
    subnet = [r for r in create["Resource"] if ":subnet/" in json.dumps(r)]
    groups = [r for r in create["Resource"] if ":security-group/" in json.dumps(r)]
    assert interfaces in create["Resource"] and len(create["Resource"]) == 3
    assert output_of(subnet[0]["Fn::Join"][1][-1], "quickstart-network", "ComputeSubnet")
    assert output_of(groups[0]["Fn::Join"][1][-1], "quickstart-network", "EfaSecurityGroup")
    (manage,) = [s for s in quickstart.statements() if "ec2:CreateNetworkInterfacePermission" in s["Action"]]
    assert manage["Action"] == [
        "ec2:CreateNetworkInterfacePermission",
        "ec2:CreateTags",
        "ec2:DeleteNetworkInterface",
        "ec2:DeleteNetworkInterfacePermission",
        "ec2:DetachNetworkInterface",
    ]
    assert manage["Resource"] == [interfaces]
    (detach,) = [
        s for s in quickstart.allowed("ec2:DetachNetworkInterface") if s is not manage and len(s["Action"]) == 1
    ]
    assert detach["Resource"] == ["arn:aws:ec2:us-east-1:*:instance/*"]


def test_nodes_read_their_lifecycle_prefix_and_their_own_ssm_parameters(quickstart, library):
    bucket = quickstart.logical_id(quickstart.construct.lifecycle_bucket)
    (read,) = quickstart.allowed("s3:GetObject")
    assert read["Resource"] == [{"Fn::Join": ["", [{"Fn::GetAtt": [bucket, "Arn"]}, f"/{LIFECYCLE_PREFIX}/*"]]}]
    (listing,) = quickstart.allowed("s3:ListBucket")
    assert listing["Resource"] == [{"Fn::GetAtt": [bucket, "Arn"]}]
    assert listing["Condition"] == {"StringLike": {"s3:prefix": [f"{LIFECYCLE_PREFIX}/*", LIFECYCLE_PREFIX]}}
    (ssm,) = quickstart.allowed("ssm:GetParameter")
    assert ssm["Action"] == ["ssm:GetParameter"]
    assert ssm["Resource"] == [
        {"Fn::Join": ["", ["arn:aws:ssm:us-east-1:", {"Ref": "AWS::AccountId"}, ":parameter/fmcluster/quickstart/*"]]}
    ]
    (ssm,) = library.allowed("ssm:GetParameter")  # its own parameters, and the NCCL prefix it was given
    assert [json.dumps(r) for r in ssm["Resource"]] == [
        json.dumps({"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":ssm:", {"Ref": "AWS::Region"}, ":",
                                      {"Ref": "AWS::AccountId"}, f":parameter/{path}/*"]]})
        for path in ("fmcluster/Research-Cluster", "tuning/research")
    ]  # fmt: skip


def test_ecr_pull_only_and_node_logs(quickstart, library, lib):
    for cluster in (quickstart, library):
        (pull,) = cluster.allowed("ecr:BatchGetImage")
        assert pull["Action"] == ["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"]
        assert not [s for s in cluster.statements() if any(a.startswith("ecr:Put") for a in s["Action"])]
        (logs,) = cluster.allowed("logs:PutLogEvents")
        assert logs["Action"] == ["logs:CreateLogStream", "logs:PutLogEvents"]
        assert logs["Resource"] == [{"Fn::GetAtt": [cluster.logical_id(cluster.construct.node_log_group), "Arn"]}]
    # the cluster's own image, by its repository's tag: nothing of the image stack is referenced (no wait for it)
    (pull,) = quickstart.allowed("ecr:BatchGetImage")
    assert json.dumps(pull["Resource"]).endswith(':repository/*"]]}]')
    assert pull["Condition"] == {"StringEquals": {"ecr:ResourceTag/fmcluster:training-image": "quickstart"}}
    assert "quickstart-image" not in json.dumps(quickstart.template)
    repository = lib.repository
    assert library.allowed("ecr:BatchGetImage")[0]["Resource"] == [library.ref(repository.repository_arn)]
    group = quickstart.resource(quickstart.construct.node_log_group)
    assert group["Properties"]["RetentionInDays"] == 365 and group["DeletionPolicy"] == "Retain"
    assert library.resource(library.construct.node_log_group)["DeletionPolicy"] == "Delete"


def test_project_buckets_given_to_the_construct_grant_what_the_buckets_decide(library, lib):
    """ProjectBuckets.grant_node_access decides (test_buckets): datasets read-only, checkpoints read and written."""
    buckets = lib.buckets
    data, checkpoints = (library.ref(b.bucket_arn) for b in (buckets.data_bucket, buckets.checkpoints_bucket))
    data_objects, checkpoint_objects = ({"Fn::Join": ["", [arn, "/*"]]} for arn in (data, checkpoints))
    assert [s["Action"] for s in library.statements() if data_objects in s["Resource"]] == [["s3:GetObject"]]
    checkpoint_actions = ["s3:AbortMultipartUpload", "s3:DeleteObject", "s3:GetObject", "s3:ListMultipartUploadParts",
                          "s3:PutObject"]  # fmt: skip
    assert [s["Action"] for s in library.statements() if checkpoint_objects in s["Resource"]] == [checkpoint_actions]
    key = library.ref(buckets.key.key_arn)
    (via_s3,) = [s for s in library.allowed("kms:GenerateDataKey")]
    assert via_s3["Resource"] == [key]
    assert via_s3["Condition"] == {
        "StringEquals": {
            "kms:ViaService": {"Fn::Join": ["", ["s3.", {"Ref": "AWS::Region"}, ".", {"Ref": "AWS::URLSuffix"}]]}
        }
    }


def test_a_customer_key_encrypts_the_controller_volume_and_the_role_may_use_it_for_ebs(library, lib):
    key = library.ref(lib.buckets.key.key_arn)
    (volume,) = [c for c in library.group("controller")["InstanceStorageConfigs"] if "EbsVolumeConfig" in c]
    assert volume == {"EbsVolumeConfig": {"VolumeSizeInGB": 1000, "VolumeKmsKeyId": key}}
    (grant,) = library.allowed("kms:CreateGrant")
    assert grant["Resource"] == [key]
    assert grant["Condition"] == {"Bool": {"kms:GrantIsForAWSResource": "true"}}
    (use,) = library.allowed("kms:GenerateDataKeyWithoutPlaintext")
    assert use["Resource"] == [key]


def test_library_props_reach_the_cluster(library, lib):
    props = library.props
    assert props["ClusterName"] == "Research-Cluster"
    assert props["Orchestrator"] == {"Slurm": {"SlurmConfigStrategy": "Managed"}}
    assert props["VpcConfig"]["SecurityGroupIds"] == [
        library.ref(lib.network.efa_security_group.security_group_id),
        library.ref(lib.extra.security_group_id),
    ]
    for group in props["InstanceGroups"]:
        (fsx,) = [c["FsxLustreConfig"] for c in group["InstanceStorageConfigs"] if "FsxLustreConfig" in c]
        assert fsx == {"DnsName": DNS, "MountName": "abcdef12", "MountPath": "/fsx"}
    assert library.group("controller")["InstanceType"] == "ml.c5.4xlarge"
    assert library.group("h100")["NetworkInterface"] == {"InterfaceType": "efa-only"}
    trn = library.group("trn")
    assert trn["InstanceCount"] == 0 and "NetworkInterface" not in trn  # efa: false
    assert library.construct.nccl_parameter_prefix == "/tuning/research"
    assert library.construct.image_parameter_name == "/fmcluster/Research-Cluster/image-uri"


# --- gates ----------------------------------------------------------------------------------------------------


def test_cdk_nag_and_cfn_lint_find_nothing_in_the_library_users_stack(lib):
    """The examples pass the same gates in tests/gates/test_templates.py."""
    assert lib.built.nag == []
    assert lib.built.lint() == {"HyperPodLibrary": []}


def acknowledged(app: cdk.App, path_part: str) -> dict[str, str]:
    found = {}
    for construct in app.node.find_all():
        if path_part not in construct.node.path:
            continue
        for entry in construct.node.metadata:
            if entry.type == cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                found.update({rule.removeprefix("Annotation::"): reason for rule, reason in entry.data.items()})
    # cdk-nag's acknowledgments; the Control Tower ones (cdk-validator-cfnguard::) are held by tests/gates
    return {rule: reason for rule, reason in found.items() if rule.startswith("AwsSolutions-")}


def test_acknowledgments_are_finding_level_with_reasons(synthesized, lib):
    quickstart_app, library_app = synthesized["quickstart"].app, lib.built.app
    role = acknowledged(quickstart_app, "quickstart-cluster/HyperPod/ExecutionRole")
    assert set(role) == {
        "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy]",
        "AwsSolutions-IAM5[Resource::*]",
        "AwsSolutions-IAM5[Resource::arn:aws:ec2:us-east-1:<AWS::AccountId>:network-interface/*]",
        "AwsSolutions-IAM5[Resource::arn:aws:ec2:us-east-1:*:instance/*]",
        "AwsSolutions-IAM5[Resource::<HyperPodLifecycleBucket47A602DB.Arn>/fmcluster-lifecycle/*]",
        "AwsSolutions-IAM5[Resource::arn:aws:ssm:us-east-1:<AWS::AccountId>:parameter/fmcluster/quickstart/*]",
        "AwsSolutions-IAM5[Resource::arn:aws:ecr:us-east-1:<AWS::AccountId>:repository/*]",
    }
    bucket = acknowledged(quickstart_app, "quickstart-cluster/HyperPod/LifecycleBucket")
    assert {rule for rule in bucket if rule.startswith("AwsSolutions-")} == {"AwsSolutions-S1"}  # cfn-guard's beside
    assert "AwsSolutions-S1" not in acknowledged(library_app, "HyperPodLibrary/HyperPod/LifecycleBucket")  # it logs
    function = acknowledged(quickstart_app, "quickstart-cluster/Custom::CDKBucketDeployment")
    assert {rule for rule in function if rule.startswith("AwsSolutions-")} == {
        "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
        "AwsSolutions-L1",
        *(f"AwsSolutions-IAM5[Action::{a}]" for a in ("s3:GetObject*", "s3:GetBucket*", "s3:List*",
                                                     "s3:DeleteObject*", "s3:Abort*")),
        "AwsSolutions-IAM5[Resource::arn:aws:s3:::cdk-hnb659fds-assets-<AWS::AccountId>-us-east-1/*]",
        "AwsSolutions-IAM5[Resource::<HyperPodLifecycleBucket47A602DB.Arn>/*]",
    }  # fmt: skip
    for reason in (*role.values(), *function.values()):
        assert len(reason) >= 40
    ours = {
        rule: reason
        for app in (quickstart_app, library_app)
        for part in ("/HyperPod/", "/Custom::CDKBucketDeployment")
        for rule, reason in acknowledged(app, part).items()
    }
    rule_level = {rule for rule in ours if "[" not in rule and rule.startswith("AwsSolutions-")}
    assert rule_level == {"AwsSolutions-S1", "AwsSolutions-L1"}  # these two rules have no finding-level ids


# --- prop errors ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scope() -> tuple[cdk.Stack, dict]:
    app = cdk.App()
    stack = cdk.Stack(app, "Errors", env=ENV)
    network = TrainingNetwork(stack, "Network", availability_zone_id="use1-az6")
    required = {
        "cluster_name": "llm",
        "subnet": network.compute_subnet,
        "security_groups": [network.efa_security_group],
        "compute_groups": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2}],
    }
    return stack, required


GPU = {"name": "gpu", "instance_type": "p5.48xlarge", "count": 2}
ON_PLAN = {**GPU, "capacity": "training-plan"}


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"cluster_name": "-llm"}, "cluster_name: must be 1-63 letters, digits and '-', starting and ending with a "
         "letter or digit (HyperPod's rule); got '-llm'"),
        ({"cluster_name": "llm_1"}, "cluster_name: must be 1-63 letters, digits and '-', starting and ending with a "
         "letter or digit (HyperPod's rule); got 'llm_1'"),
        ({"compute_groups": []}, "compute_groups: needs at least one compute group (each becomes a Slurm partition); "
         "got none"),
        ({"compute_groups": [GPU, {**GPU, "instance_type": "p4d.24xlarge"}]}, "compute_groups[1].name: 'gpu' is "
         "already the name of compute_groups[0]; group names must be unique"),
        ({"compute_groups": [{**GPU, "name": "GPU"}]}, "compute_groups[0].name: must start with a lowercase letter, "
         "then up to 19 lowercase letters, digits or '-'; got 'GPU'"),
        ({"compute_groups": [{**GPU, "name": "login"}]}, "compute_groups[0].name: 'login' is reserved for the "
         "cluster's own login nodes; choose another name"),
        ({"compute_groups": [{**GPU, "name": "gpu-"}]}, "compute_groups[0].name: must end with a letter or digit "
         "(HyperPod and Slurm reject a trailing '-'); got 'gpu-'"),
        ({"compute_groups": [{**GPU, "count": -1}]}, "compute_groups[0].count: must be at least 0; got -1"),
        ({"compute_groups": [{**GPU, "count": 7000}]}, "compute_groups[0].count: must be at most 6758; got 7000"),
        # the cluster file's rule (config/value_rules.py), word for word: connectivity needs 2 or more nodes with EFA
        ({"compute_groups": [{**GPU, "count": 1, "deep_health_checks": ["InstanceConnectivity"]}]},
         "compute_groups[0].deep_health_checks: InstanceConnectivity tests EFA between nodes: it needs count of 2 or "
         "more and efa: true; got count 1, efa true (keep InstanceStress alone)"),
        ({"compute_groups": ["gpu"]}, "compute_groups[0]: must be a ComputeGroup or a mapping of its keys; "
         "got 'gpu'"),
        ({"compute_groups": [{**GPU, "capacity": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}]},
         # one rule for the file and the construct (config/orchestrators/hyperpod.py), in the cluster file's words
         "compute_groups[0].capacity: 'capacity-block' needs orchestrator.type: pcs (EC2 reservations are consumed "
         "through launch templates); HyperPod takes reserved capacity as capacity: training-plan with "
         "training_plan_arn"),
        ({"compute_groups": [ON_PLAN]}, "compute_groups[0].training_plan_arn: required when capacity is "
         "'training-plan'"),
        ({"compute_groups": [{**GPU, "training_plan_arn": PLAN_ARN}]}, "compute_groups[0].training_plan_arn: only "
         "for capacity 'training-plan'; this group's capacity is 'on-demand'"),
        ({"compute_groups": [{**ON_PLAN, "training_plan_arn": PLAN_ARN}]}, "compute_groups[0].training_plan_arn: "
         "the training plan is in us-west-2, the cluster in us-east-1; a plan serves only its own region"),
        ({"compute_groups": [{**ON_PLAN, "training_plan_arn": PLAN_ARN.replace("us-west-2:123456789012",
                                                                               "us-east-1:210987654321")}]},
         "compute_groups[0].training_plan_arn: the training plan belongs to account 210987654321, the cluster to "
         "123456789012"),
        ({"compute_groups": [{**GPU, "root_volume_gib": 1024}]}, "compute_groups[0].root_volume_gib: HyperPod "
         "sizes each node's root volume itself (SageMaker API ClusterEbsVolumeConfig: for the root volume \"you "
         "can't specify the VolumeSizeInGB field\"); root_volume_gib sizes AWS PCS nodes' root volumes: remove it "
         "with hyperpod-slurm"),
        ({"controller_instance_type": "ml.m5.4xlarge"}, "controller_instance_type: give the EC2 name 'm5.4xlarge'; "
         "HyperPod's 'ml.' prefix is added for you"),
        ({"login_instance_type": "big"}, "login_instance_type: must be an EC2 instance type like m5.4xlarge; "
         "got 'big'"),
        ({"security_groups": []}, "security_groups: HyperPod takes 1-5 security groups (give the EFA group); got 0"),
        ({"file_system": DNS}, "file_system: must be a LustreStorage or a LustreMount (a dns_name, a mount_name and "
         f"efa); got {DNS!r}"),
        ({"file_system": LustreMount("nfs.example.com", "abcdef12")}, "file_system.dns_name: must be an FSx DNS name "
         "like fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com; got 'nfs.example.com'"),
        ({"file_system": LustreMount(DNS, "abcdefghi")}, "file_system.mount_name: must be an FSx mount name of 1-8 "
         "letters, digits, '_' or '-'; got 'abcdefghi'"),
        ({"nccl_parameter_prefix": "fmcluster/llm"}, "nccl_parameter_prefix: must be an SSM path like "
         "/fmcluster/llm; got 'fmcluster/llm'"),
        ({"controller_volume_gib": 0}, "controller_volume_gib: must be 1-16384 GiB; got 0"),
        ({"slurm_config_strategy": "Auto"}, "slurm_config_strategy: must be one of Managed, Overwrite, Merge; "
         "got 'Auto'"),
        ({"prometheus": "amp"}, "prometheus: must be 'managed' or 'none'; got 'amp'"),
        ({"grafana": "cloud"}, "grafana: must be 'self-hosted', 'managed' or 'none'; got 'cloud'"),
        ({"grafana": "self-hosted"}, "grafana: 'self-hosted' needs prometheus: managed as its data source; set "
         "grafana: none or prometheus: managed"),
        ({"grafana": "managed"}, "grafana: 'managed' needs prometheus: managed as its data source; set "
         "grafana: none or prometheus: managed"),
        # botocore sagemaker ClusterInstanceType has no ml.r5.* (FACTS.md, Service truth)
        ({"controller_instance_type": "r5.large"}, "controller_instance_type: SageMaker HyperPod takes one of the "
         "209 values of botocore sagemaker ClusterInstanceType; got 'ml.r5.large'; did you mean ml.m5.large or "
         "ml.c5.large or ml.r7i.large?"),
        # the regional list cdk synth checks (E3644): no region offers ml.p5e.48xlarge
        ({"compute_groups": [{"name": "gpu", "instance_type": "p5e.48xlarge", "count": 2}]},
         "compute_groups[0].instance_type: SageMaker HyperPod does not offer ml.p5e.48xlarge in us-east-1 "
         "(CloudFormation's regional list, which cdk synth checks as E3644); no region lists it"),
        # HyperPod's autoscaling is for EKS clusters (SageMaker developer guide); Slurm groups run InstanceCount
        ({"compute_groups": [{"name": "cpu", "instance_type": "m5.2xlarge", "count": 2, "min_count": 0}]},
         "compute_groups[0].min_count: must equal count (2) with hyperpod-slurm: HyperPod Slurm instance groups do "
         "not scale with the queue (HyperPod's autoscaling is for EKS-orchestrated clusters: SageMaker developer "
         "guide, Autoscaling on SageMaker HyperPod EKS; MinInstanceCount only sets how many nodes must start before "
         "a group is InService, botocore sagemaker ClusterInstanceGroupSpecification); scaling to zero is for "
         "orchestrator.type: pcs"),
    ],
    ids=[
        "name-dash", "name-underscore", "no-groups", "duplicate-group", "uppercase-group", "reserved-group",
        "trailing-dash", "negative-count", "too-many", "connectivity-one-node", "not-a-group", "capacity-block",
        "plan-without-arn", "arn-without-plan", "plan-in-other-region", "plan-of-other-account", "root-volume",
        "ml-prefix",
        "bad-login-type",
        "no-security-group", "not-a-file-system", "dns-name", "mount-name", "nccl-prefix", "volume", "strategy",
        "prometheus", "grafana", "grafana-without-prometheus", "managed-grafana-without-prometheus",
        "controller-not-a-hyperpod-type", "type-not-in-region", "min-count",
    ],
)  # fmt: skip
def test_props_hyperpod_would_reject_raise_with_exact_messages(scope, props, message):
    stack, required = scope
    with pytest.raises(ValueError) as error:
        HyperPodSlurmCluster(stack, "Invalid", **{**required, **props})
    assert str(error.value) == f"HyperPodSlurmCluster: {message}"
    assert stack.node.try_find_child("Invalid") is None  # nothing half-built is left in the tree


def test_every_problem_is_reported_at_once(scope):
    stack, required = scope
    with pytest.raises(ValueError) as error:
        HyperPodSlurmCluster(
            stack, "Invalid", **{**required, "cluster_name": "-", "compute_groups": [], "controller_volume_gib": 0}
        )
    assert str(error.value).splitlines() == [
        "HyperPodSlurmCluster: cluster_name: must be 1-63 letters, digits and '-', starting and ending with a letter "
        "or digit (HyperPod's rule); got '-'",
        "HyperPodSlurmCluster: compute_groups: needs at least one compute group (each becomes a Slurm partition); "
        "got none",
        "HyperPodSlurmCluster: controller_volume_gib: must be 1-16384 GiB; got 0",
    ]


def test_a_file_system_created_elsewhere_is_mounted_by_its_attributes(scope):
    """A LustreStorage and a LustreMount of the same attributes give the same instance storage."""
    stack, required = scope
    network = stack.node.find_child("Network")
    lustre = LustreStorage(stack, "Lustre", vpc=network.vpc, subnet=network.compute_subnet,
                           client_security_groups=[network.efa_security_group])  # fmt: skip
    configs = []
    for name, file_system in (("Storage", lustre), ("Mount", LustreMount(lustre.dns_name, lustre.mount_name))):
        cluster = HyperPodSlurmCluster(stack, name, **required, file_system=file_system)
        (fsx,) = [c.fsx_lustre_config for c in cluster.cluster.instance_groups[0].instance_storage_configs
                  if c.fsx_lustre_config is not None]  # fmt: skip
        configs.append(stack.resolve(fsx))
    assert configs[0] == configs[1] and configs[0]["mountPath"] == "/fsx"


def test_tokens_are_left_for_deploy_time(scope):
    stack, required = scope
    name = cdk.CfnParameter(stack, "ClusterName").value_as_string
    volume = cdk.CfnParameter(stack, "Volume", type="Number").value_as_number
    cluster = HyperPodSlurmCluster(stack, "Tokens", **{**required, "cluster_name": name}, controller_volume_gib=volume)
    assert stack.resolve(cluster.cluster.cluster_name) == {"Ref": "ClusterName"}


def test_the_lifecycle_archive_is_the_same_bytes_on_every_machine():
    """One zip of every lifecycle file: stored (no zlib build in the bytes), dated 1980, sorted, each with its mode
    of the one list; so the asset hash, and the deployment, change only when a shipped file does."""
    import io
    import zipfile

    from fmcluster.constructs.hyperpod.lifecycle import lifecycle_archive

    data = lifecycle_archive()
    assert data == lifecycle_archive()
    entries = zipfile.ZipFile(io.BytesIO(data)).infolist()
    assert [entry.filename for entry in entries] == sorted(lifecycle_files())
    assert {(entry.compress_type, entry.date_time) for entry in entries} == {
        (zipfile.ZIP_STORED, (1980, 1, 1, 0, 0, 0))
    }
    assert {entry.filename: entry.external_attr >> 16 for entry in entries} == {
        name: 0o100000 | mode for name, (_, mode) in lifecycle_files().items()
    }


def test_the_orchestrator_is_sent_with_the_managed_slurm_strategy(quickstart):
    """AWS's API-driven Slurm examples send SlurmConfigStrategy: Managed (HyperPod's default, drift-checked); the
    enum is CloudFormation's (cfn-lint schema ClusterOrchestratorSlurmConfig) and botocore's."""
    assert quickstart.props["Orchestrator"] == {"Slurm": {"SlurmConfigStrategy": "Managed"}}


def test_users_reach_every_node_through_one_standard_parameter_they_may_read(plan, quickstart):
    """The example's two users: one SSM parameter (standard tier, botocore ssm PutParameter: 4 KB), named in
    fmcluster.env for on_create.sh's users step, under the prefix the role may read. The quickstart lists none, yet has
    the parameter (NO_USERS) and the step, so its first users later change only the parameter's value."""
    (parameter,) = [
        p
        for p in support.properties_of(plan.template, "AWS::SSM::Parameter")
        if p["Name"] == "/fmcluster/llm-plan/users"
    ]
    assert parameter["Tier"] == "Standard"
    assert parameter["Value"].splitlines() == [
        "alice 2001 1 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILhNKVh6gtWI4uhWApsWulxJTq/vvu90WGGDXD+zeqUn",
        "bob 2002 0",
    ]
    assert "FMCLUSTER_USERS_PARAMETER=/fmcluster/llm-plan/users" in deployed_files(plan)[LIFECYCLE_ENV].splitlines()
    (ssm,) = plan.allowed("ssm:GetParameter")
    assert ":parameter/fmcluster/llm-plan/*" in json.dumps(ssm["Resource"])
    assert [
        p["Value"] for p in support.properties_of(quickstart.template, "AWS::SSM::Parameter") if "users" in p["Name"]
    ] == [NO_USERS]


def test_the_controller_drains_a_training_plans_partition_before_the_plan_ends(plan):
    """hyperpod-training-plan's gpu group draws on a training plan (drain_before_end_minutes: the default 60): the
    controller's plan-drain step gets the plan, its grace and the partition (fmcluster.drains.plan_words), and the
    execution role may read that plan's end (SageMaker DescribeTrainingPlan, at run time; never at synth)."""
    arn = "arn:aws:sagemaker:us-west-2:123456789012:training-plan/llm-pretrain-2026q4"
    assert f"FMCLUSTER_TRAINING_PLANS={arn}=60=gpu" in deployed_files(plan)[LIFECYCLE_ENV].splitlines()
    (statement,) = plan.allowed("sagemaker:DescribeTrainingPlan")
    assert statement["Resource"] in (arn, [arn])
