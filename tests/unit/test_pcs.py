"""The AWS PCS cluster stack, read from the session's synthesized examples:
p5-capacity-block (16 x p5 on a capacity block, login node) and p6-b300-isolated (on-demand p6-b300 in a
placement group plus a g5 group, EFA-enabled Lustre, no internet path). One test synthesizes p5-capacity-block again
with `observability.prometheus: none`."""

from __future__ import annotations

import hashlib
import json
import re
import zipfile
from pathlib import Path

import aws_cdk as cdk
import botocore.session
import cfnlint
import pytest
import yaml
from aws_cdk import assertions
from aws_cdk import aws_ec2 as ec2
from botocore.validate import validate_parameters
from constructs import Construct

from fmcluster import node_files, node_scripts
from fmcluster.config import load, parse
from fmcluster.config.errors import ConfigError
from fmcluster.config.orchestrators import pcs as pcs_rules
from fmcluster.constructs import LustreMount, LustreStorage, ProjectBuckets, TrainingNetwork
from fmcluster.constructs.pcs import PcsSlurmCluster, cluster_size
from fmcluster.stacks.cluster_pcs import released_logical_id
from tests.conftest import REPO, synthesize
from tests.support import of_type
from tests.support import properties_of as props

pytestmark = pytest.mark.synth


@pytest.fixture(scope="module")
def block(synthesized) -> dict:
    return synthesized["p5-capacity-block"].templates["llm-pretrain-cluster"]


@pytest.fixture(scope="module")
def b300(synthesized) -> dict:
    return synthesized["p6-b300-isolated"].templates["b300-isolated-cluster"]


def test_cluster_runs_the_newest_slurm_pcs_creates_sized_for_its_nodes(block):
    (cluster,) = props(block, "AWS::PCS::Cluster")
    assert cluster["Name"] == "llm-pretrain"
    # botocore pcs SchedulerRequest.version: "Valid Values: 24.11 | 25.05 | 25.11 | 26.05"
    assert cluster["Scheduler"] == {"Type": "SLURM", "Version": "26.05"}
    # 16 GPU nodes + 1 login node: SMALL manages 32 (PCS API reference, Cluster.size), not twice 17
    assert cluster["Size"] == "MEDIUM"


def test_capacity_block_group_is_static_and_purchased_as_a_capacity_block(block):
    groups = {g["Name"]: g for g in props(block, "AWS::PCS::ComputeNodeGroup")}
    assert set(groups) == {"gpu", "login"}
    gpu = groups["gpu"]
    assert gpu["PurchaseOption"] == "CAPACITY_BLOCK"
    assert gpu["ScalingConfiguration"] == {"MinInstanceCount": 16, "MaxInstanceCount": 16}
    assert gpu["InstanceConfigs"] == [{"InstanceType": "p5.48xlarge"}]
    assert groups["login"]["PurchaseOption"] == "ONDEMAND"
    assert groups["login"]["ScalingConfiguration"] == {"MinInstanceCount": 1, "MaxInstanceCount": 1}


def test_every_compute_group_gets_a_queue_and_login_gets_none(block, b300):
    assert sorted(q["Name"] for q in props(block, "AWS::PCS::Queue")) == ["gpu"]
    assert sorted(q["Name"] for q in props(b300, "AWS::PCS::Queue")) == ["b300", "dev"]


def test_capacity_block_template_targets_the_reservation_without_placement_group(block):
    templates = {
        k: r["Properties"]["LaunchTemplateData"] for k, r in of_type(block, "AWS::EC2::LaunchTemplate").items()
    }
    (gpu,) = [data for key, data in templates.items() if key.startswith("gpu")]
    assert gpu["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    target = gpu["CapacityReservationSpecification"]["CapacityReservationTarget"]
    assert target == {"CapacityReservationId": "cr-0123456789abcdef0"}
    assert "Placement" not in gpu
    assert sum(i["InterfaceType"] == "efa-only" for i in gpu["NetworkInterfaces"]) == 32


def test_on_demand_group_sits_in_its_placement_group_and_p6_b300_card_zero_is_ena(b300, synthesized):
    network = synthesized["p6-b300-isolated"].templates["b300-isolated-network"]
    placement = props(network, "AWS::EC2::PlacementGroup")
    assert len(placement) == 2 and all(p["Strategy"] == "cluster" for p in placement)
    templates = {k: r["Properties"]["LaunchTemplateData"] for k, r in of_type(b300, "AWS::EC2::LaunchTemplate").items()}
    (gpu,) = [data for key, data in templates.items() if key.startswith("b300")]
    assert "GroupName" in gpu["Placement"]
    card_zero = [i for i in gpu["NetworkInterfaces"] if i["NetworkCardIndex"] == 0]
    assert [i["InterfaceType"] for i in card_zero] == ["interface"]
    assert sum(i["InterfaceType"] == "efa-only" for i in gpu["NetworkInterfaces"]) == 16


def test_root_volume_maps_to_the_pcs_ready_dlami_root_device(block):
    """awsome-distributed-training architectures/aws-pcs/assets/pcs-ready-dlami-with-enroot-pyxis.yaml:
    DLAMIConfigs.ubuntu2404.deviceName /dev/sda1."""
    for resource in of_type(block, "AWS::EC2::LaunchTemplate").values():
        (volume,) = resource["Properties"]["LaunchTemplateData"]["BlockDeviceMappings"]
        assert volume["DeviceName"] == "/dev/sda1"
        assert volume["Ebs"]["Encrypted"] is True


def test_node_role_is_under_the_aws_pcs_path_and_may_register_with_this_cluster_only(block):
    roles = [r for r in props(block, "AWS::IAM::Role") if r.get("Path") == "/aws-pcs/"]
    assert len(roles) == 1
    assert props(block, "AWS::IAM::InstanceProfile")[0]["Path"] == "/aws-pcs/"
    statements = [s for p in props(block, "AWS::IAM::Policy") for s in p["PolicyDocument"]["Statement"]]
    register = [s for s in statements if s["Action"] == "pcs:RegisterComputeNodeGroupInstance"]
    assert register == [
        {
            "Action": "pcs:RegisterComputeNodeGroupInstance",
            "Effect": "Allow",
            "Resource": {"Fn::GetAtt": ["SlurmClusterB946DAE9", "Arn"]},
        }
    ]
    ssm = [s for s in statements if s["Action"] == "ssm:GetParameter" and "aws/service" not in str(s["Resource"])]
    # this cluster's own parameters: the NCCL environment, the image URI and the image build's status
    assert [s["Resource"] for s in ssm] == ["arn:aws:ssm:us-east-1:123456789012:parameter/fmcluster/llm-pretrain/*"]


def test_without_ami_id_nodes_run_the_pcs_ready_dlami_resolved_once_at_deploy_time(block, b300):
    lookups = props(block, "Custom::PcsNodeImage")
    # no Slurm version among the properties: a version upgrade keeps the image (it holds several versions)
    assert lookups == [{"ServiceToken": lookups[0]["ServiceToken"], "Architecture": "x86_64"}]
    statements = [s for p in props(block, "AWS::IAM::Policy") for s in p["PolicyDocument"]["Statement"]]
    (read,) = [s for s in statements if "aws/service" in str(s["Resource"])]
    assert read["Action"] == "ssm:GetParameter"
    assert read["Resource"] == "arn:aws:ssm:us-east-1::parameter/aws/service/pcs/ami/dlami-base-ubuntu2404/*"
    for group in props(b300, "AWS::PCS::ComputeNodeGroup"):
        assert group["AmiId"]["Fn::GetAtt"][1] == "ImageId"
    functions = props(block, "AWS::Lambda::Function")
    assert any(f.get("Runtime") == "python3.14" and f["Handler"] == "handler.on_event" for f in functions)


def test_lifecycle_actions_mount_lustre_over_efa_only_where_the_node_can(b300):
    actions = lifecycle(b300)
    assert "--efa" in actions["b300"]["lustre"]
    assert "--efa" not in actions["dev"]["lustre"]
    for steps in actions.values():  # every node builds pyxis against the cluster's Slurm, not the image's newest
        assert "--slurm-version 26.05" in steps["install"]


@pytest.mark.parametrize(
    ("nodes", "size"),
    # botocore pcs Size (SMALL, MEDIUM, LARGE) and the PCS API reference's limits 32 / 512 / 2,048 instances; the
    # default leaves room to double, then settles for the smallest size that fits.
    [(1, "SMALL"), (16, "SMALL"), (17, "MEDIUM"), (256, "MEDIUM"), (257, "LARGE"), (513, "LARGE"), (2048, "LARGE")],
)
def test_cluster_size_follows_the_node_count(nodes, size):
    assert cluster_size(nodes) == size


@pytest.fixture
def scope() -> tuple[cdk.Stack, dict]:
    stack = cdk.Stack(cdk.App(), "Errors", env=cdk.Environment(account="123456789012", region="us-east-1"))
    network = TrainingNetwork(stack, "Network", availability_zone_id="use1-az6")
    return stack, {"cluster_name": "llm", "subnet": network.compute_subnet,
                   "security_groups": [network.efa_security_group]}  # fmt: skip


GPU = {"name": "gpu", "instance_type": "p5.48xlarge", "count": 2}
BLOCK = {**GPU, "capacity": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}
PCS_NAME = "AWS PCS takes 3-25 characters matching (?!pcs_)^[A-Za-z][A-Za-z0-9-]+"


@pytest.mark.parametrize(
    ("props", "message"),
    [
        # botocore pcs 2023-02-10 ClusterName: 3-40 characters
        ({"cluster_name": "x"}, "cluster_name: AWS PCS takes 3-40 characters matching (?!pcs_)^[A-Za-z][A-Za-z0-9-]+ "
         "(botocore pcs ClusterName); got 'x'"),
        ({"security_groups": []}, "security_groups: needs at least one group (the EFA group)"),
        # PCS user guide, Slurm versions
        ({"slurm_version": "23.11"},
         "slurm_version: must be a Slurm version AWS PCS supports (24.11, 25.05, 25.11, 26.05); got '23.11'"),
        # botocore pcs Size: SMALL | MEDIUM | LARGE
        ({"size": "HUGE"}, "size: must be SMALL, MEDIUM or LARGE; got 'HUGE'"),
        # PCS API reference, Cluster.size: SMALL manages up to 32 instances (33 = 32 compute nodes + the login node)
        ({"size": "small", "login_instance_type": "m5.xlarge", "compute_groups": [{**GPU, "count": 32}]},
         "size: 'small' manages 32 instances, fewer than these 33 nodes (with the head node); the size of a running "
         "cluster cannot change (it replaces the cluster with every node group and queue): to grow past it, deploy "
         "the file under a new name with a larger size, move the work, then delete the old cluster"),
        ({"expected_nodes": 2049}, "expected_nodes: 2049 nodes (with the head node) exceed the 2,048 instances an AWS "
         "PCS cluster manages (size large); split the cluster or use orchestrator.type: hyperpod-slurm"),
        ({"ami_id": "ubuntu"}, "ami_id: must be an AMI id like ami-0123456789abcdef0; got 'ubuntu'"),
        # one image for x86_64 p5 and arm64 p6e-gb200 (the GB200's Grace CPUs)
        ({"ami_id": "ami-0123456789abcdef0",
          "compute_groups": [GPU, {"name": "gb200", "instance_type": "p6e-gb200.36xlarge", "count": 2}]},
         "ami_id: one image serves every node group, but p6e-gb200.36xlarge is arm64, p5.48xlarge is x86_64; omit "
         "ami_id to get the matching AWS PCS image per architecture, or keep the groups to one architecture"),
        # the head node (m5.xlarge, x86_64) of an arm64 cluster with metrics and no login node
        ({"ami_id": "ami-0123456789abcdef0", "prometheus": "managed",
          "compute_groups": [{"name": "gb200", "instance_type": "p6e-gb200.36xlarge", "count": 2}]},
         "ami_id: one image serves every node group, but p6e-gb200.36xlarge is arm64, m5.xlarge is x86_64; omit "
         "ami_id to get the matching AWS PCS image per architecture, or keep the groups to one architecture"),
        # botocore pcs ComputeNodeGroupName / QueueName: 3-25 characters, no underscore
        ({"compute_groups": [{**GPU, "name": "gp"}]}, f"compute_groups[0].name: {PCS_NAME} (botocore pcs "
         "ComputeNodeGroupName); got 'gp'"),
        ({"compute_groups": [GPU, {**GPU, "count": 1}]},
         "compute_groups[1].name: 'gpu' is already the name of compute_groups[0]; group names must be unique"),
        ({"compute_groups": [{**GPU, "name": "head"}]},
         "compute_groups[0].name: 'head' is reserved for the cluster's own head nodes; choose another name"),
        ({"compute_groups": [{**GPU, "capacity": "training-plan",
                              "training_plan_arn": "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p"}]},
         "compute_groups[0].capacity: 'training-plan' needs orchestrator.type: hyperpod-slurm (training plans "
         "reserve SageMaker capacity); with pcs use 'capacity-block' or 'odcr'"),
        ({"compute_groups": [{**GPU, "deep_health_checks": ["InstanceStress"]}]},
         "compute_groups[0].deep_health_checks: are SageMaker HyperPod's on-start checks: they need "
         "orchestrator.type: hyperpod-slurm; remove them with pcs"),
        ({"compute_groups": [{**GPU, "capacity": "capacity-block"}]},
         "compute_groups[0].reservation_id: required when capacity is 'capacity-block'"),
        ({"compute_groups": ["gpu"]}, "compute_groups[0]: must be a ComputeGroup or a mapping of its keys; got 'gpu'"),
        ({"compute_groups": [GPU], "placement_groups": {"cpu": object()}},
         "placement_groups: 'cpu' is not a compute group (gpu)"),
        ({"compute_groups": [BLOCK], "placement_groups": {"gpu": object()}},
         "placement_groups: 'gpu' has placement_group false (capacity 'capacity-block': a capacity block is placed by "
         "EC2, a reservation serves only the group it was made in); leave it out"),
        ({"compute_groups": [{**GPU, "capacity": "odcr", "reservation_id": "cr-0123456789abcdef0",
                              "placement_group": "odcr-pg"}], "placement_groups": {"gpu": object()}},
         "placement_groups: 'gpu' names its own placement group 'odcr-pg', used as it is; leave it out"),
        # "Requires Slurm version 25.11 or later" (botocore pcs ComputeNodeGroupSlurmConfigurationRequest)
        ({"slurm_version": "24.11", "compute_groups": [{**GPU, "min_count": 0, "scale_down_idle_minutes": 5}]},
         "compute_groups[0].scale_down_idle_minutes: a node group's own idle scale-down time needs Slurm 25.11 or "
         "later (botocore pcs ComputeNodeGroupSlurmConfigurationRequest); orchestrator.slurm_version is 24.11: remove "
         "it (idle nodes then stop after PCS's cluster-wide 10 minutes) or use 25.11 or later"),
        ({"compute_groups": [{**BLOCK, "min_count": 0}]},
         "compute_groups[0].min_count: must equal count (2) with capacity 'capacity-block': a capacity block is paid "
         "up front for its whole term (EC2 Capacity Blocks for ML), so idle nodes cost the same as running ones; "
         "remove min_count"),
        ({"login_instance_type": "ml.m5.xlarge"},
         "login_instance_type: give the EC2 name 'm5.xlarge'; HyperPod's 'ml.' prefix is added for you"),
        ({"file_system": "fs-0123"}, "file_system: must be a LustreStorage or a LustreMount (a dns_name, a "
         "mount_name and efa); got 'fs-0123'"),
        # botocore fsx LustreFileSystemMountName: 1-8 characters
        ({"file_system": LustreMount("fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com", "abcdefghi")},
         "file_system.mount_name: must be an FSx mount name of 1-8 letters, digits, '_' or '-'; got 'abcdefghi'"),
        ({"nccl_parameter_prefix": "fmcluster"},
         "nccl_parameter_prefix: must be an SSM path like /fmcluster/llm; got 'fmcluster'"),
        ({"prometheus": "none", "grafana": "self-hosted"}, "grafana: 'self-hosted' needs prometheus: managed as its "
         "data source; set grafana: none or prometheus: managed"),
        ({"ami_id": "ami-0123456789abcdef0", "node_images": {"x86_64": "ami-0fedcba9876543210"}},
         "node_images: give ami_id or node_images, not both"),
    ],
    ids=[
        "cluster-name", "no-security-group", "slurm-version", "size-unknown", "size-too-small", "too-many-nodes",
        "ami-id", "ami-two-architectures", "ami-head-node-architecture", "group-name-short", "group-name-repeated",
        "group-name-reserved", "training-plan", "deep-health-checks", "block-without-reservation", "not-a-group",
        "placement-group-of-no-group", "placement-group-for-a-capacity-block", "placement-group-named-by-the-group",
        "scale-down-on-old-slurm", "min-count-on-a-capacity-block",
        "login-ml-prefix", "not-a-file-system", "mount-name", "nccl-prefix",
        "grafana-without-prometheus", "ami-id-and-node-images",
    ],
)  # fmt: skip
def test_props_pcs_would_reject_raise_with_exact_messages(scope, props, message):
    stack, required = scope
    with pytest.raises(ValueError) as error:
        PcsSlurmCluster(stack, "Invalid", **{**required, **props})
    assert str(error.value) == f"PcsSlurmCluster: {message}"
    assert stack.node.try_find_child("Invalid") is None  # nothing half-built is left in the tree


def test_every_problem_is_reported_at_once(scope):
    stack, required = scope
    with pytest.raises(ValueError) as error:
        PcsSlurmCluster(
            stack,
            "Invalid",
            **{**required, "cluster_name": "x", "slurm_version": "23.11", "compute_groups": [{**GPU, "name": "gp"}]},
        )
    assert [line.split(": ")[1] for line in str(error.value).splitlines()] == [
        "cluster_name",
        "slurm_version",
        "compute_groups[0].name",
    ]


def test_node_images_give_each_architecture_its_image_and_nothing_is_resolved(scope):
    """A baked image per architecture (the node-image stack's `image_ids`): the groups of that architecture run it,
    those of another still get the PCS-Ready DLAMI from the resolver."""
    stack, required = scope
    arm = {"name": "arm", "instance_type": "c7g.4xlarge", "count": 2}
    cluster = PcsSlurmCluster(
        stack, "Baked", **required, compute_groups=[GPU, arm], node_images={"x86_64": "ami-0fedcba9876543210"}
    )
    assert cluster.node_groups["gpu"].ami_id == "ami-0fedcba9876543210"
    assert cluster.node_groups["arm"].ami_id != "ami-0fedcba9876543210"
    resolvers = [child.node.id for child in cluster.node.children if isinstance(child, cdk.CustomResource)]
    assert resolvers == ["NodeImagearm64"]  # the x86_64 groups resolve nothing


def test_node_groups_added_by_hand_are_checked(scope):
    stack, required = scope
    cluster = PcsSlurmCluster(stack, "Ok", **required)
    group = {"instance_type": "p5.48xlarge", "count": 1, "launch_template_id": "lt-1", "launch_template_version": "1"}
    with pytest.raises(ValueError) as bad:
        cluster.add_node_group("my_head", **group, ami_id="ubuntu")
    # botocore pcs ComputeNodeGroupName: the pattern allows no underscore (the old head group was 'fmcluster_head')
    assert str(bad.value).splitlines() == [
        "PcsSlurmCluster: ami_id: must be an AMI id like ami-0123456789abcdef0; got 'ubuntu'",
        f"PcsSlurmCluster: name: {PCS_NAME} (botocore pcs ComputeNodeGroupName); got 'my_head'",
    ]
    with pytest.raises(ValueError, match=r"^PcsSlurmCluster: ami_id: required for trn1.32xlarge \(AWS Trainium\)"):
        cluster.add_node_group("trn", **{**group, "instance_type": "trn1.32xlarge"})
    cluster.add_node_group("gpu", **group, ami_id="ami-0123456789abcdef0")
    with pytest.raises(ValueError, match=r"^PcsSlurmCluster: name: a node group named 'gpu' exists already$"):
        cluster.add_node_group("gpu", **group)


def test_a_cluster_from_constructs_alone_has_every_part(scope):
    """A library user's cluster: compute groups, login node, file system and buckets, without the app's stacks."""
    stack, required = scope
    network = stack.node.find_child("Network")
    lustre = LustreStorage(stack, "Lustre", vpc=network.vpc, subnet=network.compute_subnet,
                           client_security_groups=[network.efa_security_group], capacity_gib=1200)  # fmt: skip
    buckets = ProjectBuckets(stack, "Buckets")
    cluster = PcsSlurmCluster(
        stack, "Slurm", **required, compute_groups=[BLOCK], login_instance_type="m5.4xlarge", file_system=lustre,
        buckets=buckets, prometheus="managed", grafana="self-hosted",
    )  # fmt: skip
    template = assertions.Template.from_stack(stack)
    assert set(cluster.node_groups) == {"gpu", "login"} and set(cluster.queues) == {"gpu"}
    template.has_resource_properties(
        "AWS::PCS::ComputeNodeGroup",
        {"Name": "gpu", "PurchaseOption": "CAPACITY_BLOCK",
         "ScalingConfiguration": {"MinInstanceCount": 2, "MaxInstanceCount": 2}},
    )  # fmt: skip
    # 2 compute nodes + the login node, with room to double: SMALL (32)
    template.has_resource_properties("AWS::PCS::Cluster", {"Size": "SMALL"})
    steps = lifecycle(template.to_json())
    login, gpu = " ".join(steps["login"].values()), " ".join(steps["gpu"].values())
    assert "--head-node" in login and "--grafana" in login and "image-uri" in login
    assert "--head-node" not in gpu and "image-uri" not in gpu and "/fmcluster/llm/gpu/nccl-env" in gpu
    policy = json.dumps(template.find_resources("AWS::IAM::Policy"))
    assert "kms:ViaService" in policy  # ProjectBuckets.grant_node_access: the key only through S3
    assert "ecr:ResourceTag/fmcluster:training-image" in policy


# -- the node bundle and observability --------------------------------------------------------------------------

BUNDLE = re.compile(r"^install (s3://cdk-hnb659fds-assets-[^/]+/([0-9a-f]{64})\.zip) --region ")
# cfn-lint's schema of AWS::PCS::ComputeNodeGroup (cfnlint/data/schemas/resources/b72c27816367bc03.json), whose
# limits on lifecycle actions replaced user data's 16 KB as the budget of a node's set-up
PCS_SCHEMA = json.loads(
    (REPO / ".venv/lib/python3.11/site-packages/cfnlint/data/schemas/resources/b72c27816367bc03.json").read_text()
)


def _text(value: object) -> str:
    """A lifecycle action argument as text (a token as its JSON)."""
    if isinstance(value, dict) and isinstance(value.get("Fn::Join"), list):
        return "".join(_text(part) for part in value["Fn::Join"][1])
    if isinstance(value, dict) and isinstance(value.get("Fn::Sub"), str):
        return value["Fn::Sub"]
    return value if isinstance(value, str) else json.dumps(value)


def actions(template: dict) -> dict[str, list[dict]]:
    """Each PCS node group's nodeBootstrapped lifecycle actions, by group name."""
    return {
        group["Name"]: group["NodeLifecycleActions"]["Stages"]["NodeBootstrapped"]
        for group in props(template, "AWS::PCS::ComputeNodeGroup")
    }


def lifecycle(template: dict) -> dict[str, dict[str, str]]:
    """Each node group's steps: action name -> its arguments as one string, in order."""
    return {
        name: {action["Name"]: " ".join(_text(a) for a in action.get("Arguments", [])) for action in scripts}
        for name, scripts in actions(template).items()
    }


def test_every_pcs_node_group_of_every_example_sets_up_its_nodes_as_lifecycle_actions(synthesized):
    """Each action runs the runner (an asset whose SHA-256 the agent checks); required steps terminate the node on
    failure, the others continue; and no launch template carries user data of fmcluster's any more."""
    checked = 0
    for example in synthesized:
        result = synthesized[example]
        for template in result.templates.values():
            for name, scripts in actions(template).items():
                checked += 1
                steps = [action["Name"] for action in scripts]
                assert steps[:3] == ["install", "updates", "scratch"] and {"nccl", "enroot"} <= set(steps), (
                    example,
                    name,
                )
                for action in scripts:
                    required = action["Name"] == "install" or node_files.step(action["Name"]).required
                    assert action["OnError"] == ("TERMINATE" if required else "CONTINUE"), (example, action)
                    assert action["ExecutionPolicy"] == "FIRST_BOOT_ONLY"
                    source = action["ScriptSource"]
                    assert source["Checksum"] == node_scripts.runner_checksum()
                    digest = re.search(r"/([0-9a-f]{64})\.sh$", _text(source["ScriptLocation"]))
                    assert digest, source
                    runner = result.outdir / f"asset.{digest[1]}.sh"
                    assert hashlib.sha256(runner.read_bytes()).hexdigest() == source["Checksum"]
            for launch_template in props(template, "AWS::EC2::LaunchTemplate"):
                assert "UserData" not in launch_template["LaunchTemplateData"]
    assert checked >= 5


def test_a_failing_required_step_terminates_the_node_and_the_rest_only_warn(block):
    """The steps a node cannot train without (node_files.STEPS: required) are TERMINATE (botocore pcs OnError:
    "Terminates the compute node"); run-step.sh exits non-zero for them (tests/node/test_profiles.py)."""
    on_error = {action["Name"]: action["OnError"] for action in actions(block)["gpu"]}
    assert on_error == {
        "install": "TERMINATE", "updates": "CONTINUE", "scratch": "TERMINATE", "lustre": "TERMINATE",
        "shared-dirs": "CONTINUE", "nccl": "TERMINATE", "enroot": "CONTINUE", "slurm-hooks": "CONTINUE",
        "users": "TERMINATE", "observability": "CONTINUE",
    }  # fmt: skip


def test_gpu_groups_check_their_fabric_in_the_node_ready_stage_and_the_head_node_does_not(block, b300):
    """fabric-check.sh runs after slurmd registered (botocore pcs NodeLifecycleStages nodeReady: "after the Slurm daemon
    (slurmd) starts and the compute node registers with the Slurm controller"; cfn-lint's schema has NodeReady), at
    every boot, warn-only (the script drains a node that fails), with the catalog's figures (fmcluster.fabric)."""
    stage = PCS_SCHEMA["definitions"]["NodeLifecycleStages"]["properties"]
    assert "NodeReady" in stage
    expected = {
        "gpu": "--efa 32 --gpus 8 --nvlink-floor 250",  # p5
        "b300": "--efa 16 --gpus 8",  # p6-b300: no published NVLink floor
        "dev": "--efa 1 --gpus 4",  # g5.12xlarge
    }
    for template in (block, b300):
        ready = {
            group["Name"]: group["NodeLifecycleActions"]["Stages"].get("NodeReady")
            for group in props(template, "AWS::PCS::ComputeNodeGroup")
        }
        for head in ("login", "head"):  # the login or head node: no GPU, no EFA wired, nothing to check
            assert ready.pop(head, None) is None
        for name, scripts in ready.items():
            (action,) = scripts
            assert action["Name"] == "fabric" and action["OnError"] == "CONTINUE", name
            assert action["ExecutionPolicy"] == "EVERY_BOOT"
            assert " ".join(action["Arguments"]) == f"fabric --hold {expected[name]}"
            assert action["ScriptSource"]["Checksum"] == node_scripts.runner_checksum()


def test_lifecycle_actions_fit_the_limits_pcs_sets(block, b300):
    """The budget that replaced user data's: at most 20 actions per stage, 20 arguments each of 256 characters
    (cfn-lint's schema), names of its pattern; the biggest examples leave room for five more actions and their longest
    values for more arguments."""
    definitions = PCS_SCHEMA["definitions"]
    stage = definitions["NodeLifecycleStages"]["properties"]["NodeBootstrapped"]
    script = definitions["NodeLifecycleScript"]["properties"]
    assert (stage["maxItems"], script["Arguments"]["maxItems"], script["Arguments"]["items"]["maxLength"]) == (
        node_scripts.MAX_SCRIPTS_PER_STAGE, node_scripts.MAX_ARGUMENTS, node_scripts.MAX_ARGUMENT_LENGTH
    )  # fmt: skip
    name = re.compile(script["Name"]["pattern"])
    for template in (block, b300):
        for scripts in actions(template).values():
            assert len(scripts) <= stage["maxItems"] - 5  # room for five more steps
            for action in scripts:
                assert name.match(action["Name"]) and len(action["Name"]) <= script["Name"]["maxLength"]
                assert len(action["Arguments"]) <= script["Arguments"]["maxItems"] // 2
                # tokens resolve at deploy time: an asset URI (~110 characters) or a cross-stack bucket name
                assert all(len(_text(a)) <= script["Arguments"]["items"]["maxLength"] for a in action["Arguments"])


def test_every_node_installs_the_same_node_bundle_from_a_cdk_asset(block, b300, synthesized):
    examples = (("p5-capacity-block", block, "us-east-1"), ("p6-b300-isolated", b300, "us-west-2"))
    for example, template, region in examples:
        bundles = {BUNDLE.search(steps["install"]).groups() for steps in lifecycle(template).values()}
        ((uri, digest),) = bundles  # one bundle for compute and login nodes alike
        assert uri.startswith("s3://cdk-hnb659fds-assets-") and f"-{region}/" in uri  # the stack's bootstrap bucket
        asset = synthesized[example].outdir / f"asset.{digest}.zip"
        assert asset.read_bytes() == node_scripts.bundle_archive()
        with zipfile.ZipFile(asset) as archive:
            assert set(archive.namelist()) == set(node_files.node_tree())
            assert {"node/observability.sh", "dashboards/agent.yml", "nccl-tests.sbatch", "manifest"} <= set(
                archive.namelist()
            )


def test_compute_nodes_run_observability_and_the_login_node_is_the_head_node(block):
    steps = lifecycle(block)
    endpoint = "--endpoint-parameter /fmcluster/llm-pretrain/observability/prometheus-endpoint"
    gpu, login = steps["gpu"], steps["login"]
    assert list(gpu)[-1] == "observability"
    assert gpu["observability"].startswith("observability --cluster llm-pretrain --region ")
    assert gpu["observability"].endswith(endpoint)
    assert login["observability"].endswith(endpoint + " --head-node --grafana")  # grafana defaults to self-hosted
    # observability.sh takes the node's artifact mirror (the install step's --mirror, kept in node.env), as every step
    assert "--mirror" not in gpu["observability"] + login["observability"]


def test_isolated_nodes_take_observability_downloads_from_the_artifact_mirror_as_every_step(b300):
    """egress: none changes nothing for observability.sh: it has no mirror argument of its own; the install step's
    --mirror (the storage stack's artifact mirror, kept in node.env as FMCLUSTER_ARTIFACT_MIRROR) serves every step."""
    steps = lifecycle(b300)
    for group in steps.values():
        assert "--mirror" not in group["observability"]
        assert re.search(r" --mirror \S+", group["install"]), group["install"]
        assert "--grafana" not in group["observability"]  # observability.grafana: none
    heads = [name for name, group in steps.items() if "--head-node" in group["observability"]]
    assert heads == ["head"]  # no login node here: a head node group of its own


def test_without_login_node_a_small_head_node_group_of_its_own_serves_metrics(b300):
    groups = {g["Name"]: g for g in props(b300, "AWS::PCS::ComputeNodeGroup")}
    assert set(groups) == {"b300", "dev", "head"}
    head = groups["head"]
    assert head["InstanceConfigs"] == [{"InstanceType": "m5.xlarge"}]
    assert head["ScalingConfiguration"] == {"MinInstanceCount": 1, "MaxInstanceCount": 1}
    assert sorted(q["Name"] for q in props(b300, "AWS::PCS::Queue")) == ["b300", "dev"]


def test_node_role_reads_the_bundle_and_the_wildcards_are_acknowledged_finding_by_finding(block, synthesized):
    statements = [s for p in props(block, "AWS::IAM::Policy") for s in p["PolicyDocument"]["Statement"]]
    (read,) = [s for s in statements if "s3:GetObject*" in s["Action"]]
    assert sorted(read["Action"]) == ["s3:GetBucket*", "s3:GetObject*", "s3:List*"]
    assets = "arn:aws:s3:::cdk-hnb659fds-assets-123456789012-us-east-1"
    assert read["Resource"] == [assets, f"{assets}/*"]
    metadata = json.loads((synthesized["p5-capacity-block"].outdir / "llm-pretrain-cluster.metadata.json").read_text())
    acknowledged = {
        rule.removeprefix("Annotation::"): reason
        for entry in metadata["/llm-pretrain-cluster/Slurm/NodeRole"]
        if entry["type"] == "aws:cdk:acknowledged-rules"
        for rule, reason in entry["data"].items()
    }
    bundle = {
        *(f"AwsSolutions-IAM5[Action::{action}]" for action in ("s3:GetObject*", "s3:GetBucket*", "s3:List*")),
        f"AwsSolutions-IAM5[Resource::{assets}/*]",
    }
    assert bundle <= set(acknowledged)
    for rule in bundle:
        assert "node bundle" in acknowledged[rule] and len(acknowledged[rule]) >= 80


def test_with_prometheus_none_nodes_get_the_bundle_but_no_observability_arguments(tmp_path):
    path = REPO / "examples" / "p5-capacity-block.yaml"
    data = load(path).model_dump(by_alias=True, exclude_none=True, exclude_unset=True)  # the file as written
    data["observability"] = {**data.get("observability", {}), "prometheus": "none", "grafana": "none"}
    result = synthesize(path, tmp_path, parse(data), guard=False)  # the user data is the point here
    assert result.nag == []
    steps = lifecycle(result.templates["llm-pretrain-cluster"])
    assert set(steps) == {"gpu", "login"}
    for group in steps.values():
        assert BUNDLE.search(group["install"]) and "observability" not in group


def test_compliance_control_tower_turns_on_detailed_monitoring_without_an_acknowledgment(tmp_path):
    # CT.EC2.PR.10 (ct-ec2-pr-10.guard in cdklabs.cdk-validator-cfnguard 0.0.62): LaunchTemplateData.Monitoring.Enabled
    path = REPO / "examples" / "p5-capacity-block.yaml"
    data = load(path).model_dump(by_alias=True, exclude_none=True, exclude_unset=True)  # the file as written
    data["compliance"] = "control-tower"
    result = synthesize(path, tmp_path, parse(data))
    assert (result.nag, result.guard_findings) == ([], [])
    templates = props(result.templates["llm-pretrain-cluster"], "AWS::EC2::LaunchTemplate")
    assert [t["LaunchTemplateData"]["Monitoring"] for t in templates] == [{"Enabled": True}] * 2


# The cluster-level Slurm custom settings AWS PCS takes, from the AWS PCS API reference, SlurmCustomSetting
# parameterName ("For clusters: Prolog, Epilog, SelectTypeParameters, AccountingStorageEnforce"; AWS SDK for Kotlin
# reference aws.sdk.kotlin.services.pcs.model/-slurm-custom-setting/parameter-name): TaskProlog is not among them.
PCS_CLUSTER_SETTINGS = {"Prolog", "Epilog", "SelectTypeParameters", "AccountingStorageEnforce"}


def test_cluster_sets_fmcluster_prolog_and_epilog_and_only_settings_pcs_takes(block):
    (cluster,) = props(block, "AWS::PCS::Cluster")
    settings = {s["ParameterName"]: s["ParameterValue"] for s in cluster["SlurmConfiguration"]["SlurmCustomSettings"]}
    assert set(settings) <= PCS_CLUSTER_SETTINGS
    hook = "/opt/fmcluster/node/slurm/gpu-job-map.sh"  # where the install step puts it (node_files.NODE_ROOT)
    assert settings == {"Prolog": hook, "Epilog": hook}
    assert node_files.node_file(hook.removeprefix(f"{node_files.NODE_ROOT}/")).mode == 0o755


def test_cluster_without_job_hook_sets_no_custom_settings():
    stack = cdk.Stack(cdk.App(), "NoHook")
    vpc = ec2.Vpc(stack, "Vpc", max_azs=1, nat_gateways=0)
    PcsSlurmCluster(
        stack,
        "Pcs",
        cluster_name="llm",
        subnet=vpc.isolated_subnets[0],
        security_groups=[ec2.SecurityGroup(stack, "Sg", vpc=vpc)],
        job_hook=None,
    )
    (cluster,) = props(assertions.Template.from_stack(stack).to_json(), "AWS::PCS::Cluster")
    assert "SlurmCustomSettings" not in cluster["SlurmConfiguration"]


@pytest.mark.parametrize("accounting", [True, False])
def test_enforcing_associations_adds_accounting_storage_enforce_with_accounting_only(scope, accounting):
    """The value is AWS's own PCS recipe's (aws-hpc-recipes recipes/pcs/terraform_awscc/assets/modules/compute/
    main.tf: AccountingStorageEnforce "associations,limits,qos"); without accounting there is nothing to enforce."""
    stack, required = scope
    PcsSlurmCluster(stack, "Slurm", **required, accounting=accounting, enforce_associations=True)
    (cluster,) = props(assertions.Template.from_stack(stack).to_json(), "AWS::PCS::Cluster")
    settings = {s["ParameterName"]: s["ParameterValue"] for s in cluster["SlurmConfiguration"]["SlurmCustomSettings"]}
    assert set(settings) <= PCS_CLUSTER_SETTINGS
    enforced = {"AccountingStorageEnforce": "associations,limits,qos"} if accounting else {}
    hook = "/opt/fmcluster/node/slurm/gpu-job-map.sh"
    assert settings == {"Prolog": hook, "Epilog": hook, **enforced}


ENFORCING = {
    "name": "team",
    "region": "us-east-1",
    "availability_zone_id": "use1-az6",
    "orchestrator": {"type": "pcs", "login_instance_type": "m7i.xlarge", "accounting_enforce": True},
    "compute": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2}],
    "users": [{"name": "alice", "uid": 2001}],
}


@pytest.mark.parametrize(
    ("change", "enforced"),
    [
        ({}, True),
        ({"orchestrator": {"type": "pcs", "login_instance_type": "m7i.xlarge"}}, False),  # off unless asked for
        ({"orchestrator": {"type": "pcs", "accounting_enforce": True}}, True),  # the head node Prometheus adds
    ],
)
def test_the_cluster_enforces_associations_only_when_the_file_asks(change, enforced):
    config = parse({**ENFORCING, **change}, source="team.yaml")
    assert pcs_rules.enforces_associations(config.orchestrator, config.observability, bool(config.users)) is enforced


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"users": []},
            "team.yaml: orchestrator.accounting_enforce: needs users: without them no one but root has a Slurm "
            "association, so every job of the image's login user (ubuntu) or ssm-user would be refused",
        ),
        (
            {"orchestrator": {"type": "pcs", "accounting": False, "accounting_enforce": True}},
            "team.yaml: orchestrator.accounting_enforce: needs orchestrator.accounting: true (AccountingStorageEnforce "
            "checks the accounting database)",
        ),
        (
            {"orchestrator": {"type": "pcs", "accounting_enforce": True},
             "observability": {"prometheus": "none", "grafana": "none"}},
            "team.yaml: orchestrator.accounting_enforce: needs a node that makes the users' associations: no node "
            "makes the users' Slurm associations: they are made on the login node (or the head node that "
            "observability.prometheus: managed adds); set orchestrator.login_instance_type",
        ),
        (
            {"orchestrator": {"type": "hyperpod-slurm", "accounting_enforce": True}},
            "team.yaml: orchestrator.accounting_enforce: only for orchestrator.type: pcs (HyperPod's slurm.conf is "
            "HyperPod's own: its API takes no Slurm settings, so fmcluster sets no AccountingStorageEnforce there)",
        ),
    ],
    ids=["no-users", "no-accounting", "no-head-node", "hyperpod"],
)  # fmt: skip
def test_accounting_enforce_is_refused_where_it_cannot_hold(change, message):
    with pytest.raises(ConfigError) as error:
        parse({**ENFORCING, **change}, source="team.yaml")
    assert message in str(error.value).splitlines()


@pytest.mark.parametrize("group", ["gpu", "p5-block", "login"])
def test_released_logical_ids_are_the_ones_cdk_gave_the_stack_level_templates(group):
    """The expected id comes from CDK itself: a launch template made directly under a stack, as released."""
    stack = cdk.Stack(cdk.App(), "Released")
    released = ec2.CfnLaunchTemplate(Construct(stack, f"{group}LaunchTemplate"), "Resource", launch_template_data={})
    assert released_logical_id(f"{group}LaunchTemplate/Resource") == stack.get_logical_id(released)


def test_a_group_that_wants_a_placement_group_gets_one_of_its_own(scope):
    """`placement_group` defaults to true for on-demand groups (the cluster file's rule) and false for capacity
    blocks; a library user who passes no `placement_groups` still gets one where the group wants it."""
    stack, required = scope
    PcsSlurmCluster(stack, "Slurm", **required, compute_groups=[GPU, {**BLOCK, "name": "block"}], job_hook=None)
    template = assertions.Template.from_stack(stack)
    template.resource_count_is("AWS::EC2::PlacementGroup", 1)
    templates = template.find_resources("AWS::EC2::LaunchTemplate")
    placed = {k: v["Properties"]["LaunchTemplateData"].get("Placement") for k, v in templates.items()}
    assert sorted(k.startswith("SlurmgpuLaunchTemplate") for k, v in placed.items() if v) == [True]


def test_hand_made_node_groups_can_take_the_node_bundle(scope):
    stack, required = scope
    cluster = PcsSlurmCluster(stack, "Slurm", **required)
    assert cluster.node_bundle is None  # nothing to read until a node asks for it
    uri = cluster.node_bundle_uri()
    assert cluster.node_bundle is not None and uri == cluster.node_bundle_uri()
    policy = json.dumps(assertions.Template.from_stack(stack).find_resources("AWS::IAM::Policy"))
    assert "s3:GetObject*" in policy


def test_without_a_file_system_no_node_watches_for_the_image(scope):
    """image-watch.sh imports the image into /fsx; with nothing mounted there it has nowhere to put it."""
    stack, required = scope
    cluster = PcsSlurmCluster(stack, "Slurm", **required, compute_groups=[GPU], login_instance_type="m5.xlarge")
    user_data = json.dumps(assertions.Template.from_stack(stack).find_resources("AWS::EC2::LaunchTemplate"))
    assert "image-uri" not in user_data and set(cluster.node_groups) == {"gpu", "login"}


def test_node_groups_wait_for_the_policy_that_lets_nodes_register(block, b300):
    """Nodes call pcs:RegisterComputeNodeGroupInstance at boot (AWS PCS user guide, the node IAM instance profile);
    the node group must not launch them before the policy holding it exists."""
    for template in (block, b300):
        resources = template["Resources"]
        (policy_id,) = [
            logical_id for logical_id, r in resources.items() if r["Type"] == "AWS::IAM::Policy"
            and any("pcs:RegisterComputeNodeGroupInstance" in json.dumps(s["Action"])
                    for s in r["Properties"]["PolicyDocument"]["Statement"])
        ]  # fmt: skip
        groups = [r for r in resources.values() if r["Type"] == "AWS::PCS::ComputeNodeGroup"]
        assert groups and all(policy_id in group.get("DependsOn", []) for group in groups)


def test_a_named_placement_group_is_used_and_a_scaling_group_spans_min_to_max(scope):
    """Library use: the group's own placement group name reaches the launch template (no AWS::EC2::PlacementGroup),
    and `min_count` below `count` becomes PCS's ScalingConfiguration with the group's idle time in seconds."""
    stack, required = scope
    odcr = {**GPU, "capacity": "odcr", "reservation_id": "cr-0123456789abcdef0", "placement_group": "odcr-pg"}
    cpu = {"name": "cpu", "instance_type": "c6i.4xlarge", "count": 6, "min_count": 1, "scale_down_idle_minutes": 15}
    PcsSlurmCluster(stack, "Slurm", **required, compute_groups=[odcr, cpu], job_hook=None)
    template = assertions.Template.from_stack(stack)
    template.resource_count_is("AWS::EC2::PlacementGroup", 0)
    template.has_resource_properties(
        "AWS::EC2::LaunchTemplate",
        {"LaunchTemplateData": {"InstanceType": "p5.48xlarge", "Placement": {"GroupName": "odcr-pg"}}},
    )
    template.has_resource_properties(
        "AWS::PCS::ComputeNodeGroup",
        {
            "Name": "cpu",
            "ScalingConfiguration": {"MinInstanceCount": 1, "MaxInstanceCount": 6},
            "SlurmConfiguration": {"ScaleDownIdleTimeInSeconds": 900},
        },
    )


def test_managed_accounting_is_on_by_default_as_the_schema_spells_it(block, b300):
    """cfn-lint's AWS::PCS::Cluster schema: Accounting {Mode: STANDARD | NONE, DefaultPurgeTimeInDays -1..10000,
    -1 = never purge}; botocore pcs AccountingRequest: "0 isn't a valid value"."""
    schema = next(
        json.loads(path.read_text())
        for path in (Path(cfnlint.__file__).parent / "data/schemas/resources").glob("*.json")
        if '"AWS::PCS::Cluster"' in path.read_text()
    )
    accounting = schema["definitions"]["Accounting"]["properties"]
    for template in (block, b300):
        (cluster,) = props(template, "AWS::PCS::Cluster")
        given = cluster["SlurmConfiguration"]["Accounting"]
        assert given == {"Mode": "STANDARD", "DefaultPurgeTimeInDays": -1}
        assert given["Mode"] in accounting["Mode"]["enum"]
        assert accounting["DefaultPurgeTimeInDays"]["minimum"] <= -1 <= accounting["DefaultPurgeTimeInDays"]["maximum"]


def test_accounting_false_leaves_it_out(tmp_path):
    data = yaml.safe_load((REPO / "examples/p5-capacity-block.yaml").read_text())
    data["orchestrator"]["accounting"] = False
    result = synthesize(REPO / "examples/p5-capacity-block.yaml", tmp_path, parse(data))
    (cluster,) = props(result.templates["llm-pretrain-cluster"], "AWS::PCS::Cluster")
    assert "Accounting" not in cluster["SlurmConfiguration"]


def test_cluster_users_are_created_by_a_required_action_on_every_node_after_their_parameter_exists(tmp_path):
    """The users step (fmcluster.node_files.STEPS: required, so onError TERMINATE) reads /fmcluster/<cluster>/users,
    which the cluster stack writes; every node group waits for it (a node booting first would fail the step)."""
    data = yaml.safe_load((REPO / "examples/p5-capacity-block.yaml").read_text())
    data["users"] = [{"name": "alice", "uid": 2001, "admin": True}, {"name": "bob", "uid": 2002}]
    data["orchestrator"]["accounting_enforce"] = True  # opt-in (off by default: pcs_rules.ACCOUNTING_ENFORCE)
    result = synthesize(REPO / "examples/p5-capacity-block.yaml", tmp_path, parse(data))
    template = result.templates["llm-pretrain-cluster"]
    (parameter_id,) = [
        logical_id
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == "AWS::SSM::Parameter"
        and resource["Properties"]["Name"] == "/fmcluster/llm-pretrain/users"
    ]
    for name, steps in lifecycle(template).items():
        assert steps["users"] == "users install /fmcluster/llm-pretrain/users --home-base /fsx/home", name
        (users,) = [action for action in actions(template)[name] if action["Name"] == "users"]
        assert users["OnError"] == "TERMINATE"
    groups = [r for r in template["Resources"].values() if r["Type"] == "AWS::PCS::ComputeNodeGroup"]
    assert groups and all(parameter_id in group.get("DependsOn", []) for group in groups)
    # the users' Slurm associations: only on the login node, the node of a PCS cluster that reaches its managed
    # accounting (PCS user guide, "Slurm accounting in AWS PCS"), from a timer (slurm-accounting.sh install), since
    # the nodeBootstrapped stage runs before Slurm (botocore pcs NodeLifecycleStages); warn-only (CONTINUE)
    with_accounting = {name for name, steps in lifecycle(template).items() if "accounting" in steps}
    assert with_accounting == {"login"}
    assert lifecycle(template)["login"]["accounting"] == "accounting install /fmcluster/llm-pretrain/users llm-pretrain"
    (accounting,) = [action for action in actions(template)["login"] if action["Name"] == "accounting"]
    assert accounting["OnError"] == "CONTINUE"
    names = [action["Name"] for action in actions(template)["login"]]
    assert names.index("accounting") == names.index("users") + 1
    # asked for, with users (and accounting, and the login node to make their associations): the cluster enforces
    (cluster,) = props(template, "AWS::PCS::Cluster")
    settings = {s["ParameterName"]: s["ParameterValue"] for s in cluster["SlurmConfiguration"]["SlurmCustomSettings"]}
    assert settings["AccountingStorageEnforce"] == "associations,limits,qos"
    assert set(settings) <= PCS_CLUSTER_SETTINGS
    # the shapes the API takes them in (botocore pcs SlurmCustomSetting: parameterName, parameterValue), at creation
    # and in the update CloudFormation makes when the first users arrive
    custom = [{"parameterName": name, "parameterValue": value} for name, value in settings.items()]
    model = botocore.session.get_session().get_service_model("pcs")
    validate_parameters({"clusterName": "llm-pretrain", "scheduler": {"type": "SLURM", "version": "26.05"},
                         "size": "SMALL", "networking": {"subnetIds": ["subnet-0123456789abcdef0"]},
                         "slurmConfiguration": {"slurmCustomSettings": custom}},
                        model.operation_model("CreateCluster").input_shape)  # fmt: skip
    validate_parameters({"clusterIdentifier": "pcs_abc1234567", "slurmConfiguration": {"slurmCustomSettings": custom}},
                        model.operation_model("UpdateCluster").input_shape)  # fmt: skip
    assert (result.nag, result.guard_findings) == ([], [])
    assert result.lint()["llm-pretrain-cluster"] == []


def test_instance_health_checks_are_applied_by_a_custom_resource_until_cloudformation_has_them(synthesized):
    """pcs-cpu-and-gpu's gpu group asks for PCS instance health checks: cfn-lint's AWS::PCS::ComputeNodeGroup schema
    has no such property, so a custom resource (fmcluster/lambdas/pcs_health_checks) calls UpdateComputeNodeGroup with
    the group's ids and the request, which botocore's pcs model takes; its role reaches only the cluster and the
    group."""
    assert not {"InstanceHealthChecks", "HealthChecks"} & set(PCS_SCHEMA["properties"])
    template = synthesized["pcs-cpu-and-gpu"].templates["pcs-mixed-cluster"]
    resources = template["Resources"]
    (checks,) = [r for r in resources.values() if r["Type"] == "Custom::PcsInstanceHealthChecks"]
    properties = checks["Properties"]
    groups = {r["Properties"]["Name"]: key for key, r in resources.items() if r["Type"] == "AWS::PCS::ComputeNodeGroup"}
    assert properties["ComputeNodeGroupId"] == {"Fn::GetAtt": [groups["gpu"], "Id"]}
    assert properties["InstanceHealthChecks"] == {
        "healthMonitoring": {"mode": "STANDARD"},
        "deepHealthChecks": {"onStart": {"profile": "QUICK", "repairAction": "REPLACE"}},
    }
    shape = botocore.session.get_session().get_service_model("pcs").operation_model("UpdateComputeNodeGroup")
    validate_parameters({"clusterIdentifier": "pcs_abc1234567", "computeNodeGroupIdentifier": "pcs_def8901234",
                         "instanceHealthChecks": properties["InstanceHealthChecks"]}, shape.input_shape)  # fmt: skip
    statements = [
        statement
        for r in resources.values()
        if r["Type"] == "AWS::IAM::Policy"
        for statement in r["Properties"]["PolicyDocument"]["Statement"]
        if "pcs:UpdateComputeNodeGroup" in statement["Action"]
    ]
    ((statement,),) = [statements]
    assert statement["Action"] == ["pcs:GetComputeNodeGroup", "pcs:UpdateComputeNodeGroup"]
    assert {"Fn::GetAtt": [groups["gpu"], "Arn"]} in statement["Resource"]
    assert not any(isinstance(arn, str) and "*" in arn for arn in statement["Resource"])
    # the rest of UpdateComputeNodeGroup's row (AWS PCS user guide, "Minimum permissions for AWS PCS")
    granted = {action: statement["Resource"] for statement in role_statements(template, statements_of=resources,
               handler_statement=statement) for action in statement["Action"]}  # fmt: skip
    minimum = ["ec2:DescribeVpcs", "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups", "ec2:DescribeLaunchTemplates",
               "ec2:DescribeLaunchTemplateVersions", "ec2:DescribeInstanceTypes", "ec2:DescribeInstanceTypeOfferings",
               "ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateTags", "iam:PassRole",
               "iam:GetInstanceProfile"]  # fmt: skip
    assert set(minimum) <= set(granted), sorted(set(minimum) - set(granted))
    assert granted["iam:PassRole"] != "*" and granted["iam:GetInstanceProfile"] != "*"


def role_statements(template, *, statements_of, handler_statement):
    """Every statement of the policy that holds `handler_statement` (the health-checks function's role policy)."""
    (policy,) = [r for r in statements_of.values() if r["Type"] == "AWS::IAM::Policy"
                 and handler_statement in r["Properties"]["PolicyDocument"]["Statement"]]  # fmt: skip
    return [{**s, "Action": [s["Action"]] if isinstance(s["Action"], str) else s["Action"]}
            for s in policy["Properties"]["PolicyDocument"]["Statement"]]  # fmt: skip
