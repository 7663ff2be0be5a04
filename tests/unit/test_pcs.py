"""The AWS PCS cluster stack, read from the session's synthesized examples:
p5-capacity-block (16 x p5 on a capacity block, login node) and p6-b300-isolated (on-demand p6-b300 in a
placement group plus a g5 group, EFA-enabled Lustre, no internet path). One test synthesizes p5-capacity-block again
with `observability.prometheus: none`."""

from __future__ import annotations

import json
import re
import zipfile

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from aws_cdk import aws_ec2 as ec2

from fmcluster import node_scripts
from fmcluster.config import load, parse
from fmcluster.constructs.pcs import PcsSlurmCluster, cluster_size
from tests.conftest import REPO, synthesize


def of_type(template: dict, kind: str) -> dict[str, dict]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


def props(template: dict, kind: str) -> list[dict]:
    return [r["Properties"] for r in of_type(template, kind).values()]


@pytest.fixture(scope="module")
def block(synthesized) -> dict:
    return synthesized["p5-capacity-block"].templates["llm-pretrain-cluster"]


@pytest.fixture(scope="module")
def b300(synthesized) -> dict:
    return synthesized["p6-b300-isolated"].templates["b300-isolated-cluster"]


def test_cluster_runs_slurm_25_11_sized_for_its_nodes(block):
    (cluster,) = props(block, "AWS::PCS::Cluster")
    assert cluster["Name"] == "llm-pretrain"
    assert cluster["Scheduler"] == {"Type": "SLURM", "Version": "25.11"}
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


def test_root_volume_maps_to_the_amazon_linux_root_device(block):
    for resource in of_type(block, "AWS::EC2::LaunchTemplate").values():
        (volume,) = resource["Properties"]["LaunchTemplateData"]["BlockDeviceMappings"]
        assert volume["DeviceName"] == "/dev/xvda"
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
    ssm = [s for s in statements if s["Action"] == "ssm:GetParameter"]
    # this cluster's own parameters: the NCCL environment, the image URI and the image build's status
    assert [s["Resource"] for s in ssm] == ["arn:aws:ssm:us-east-1:123456789012:parameter/fmcluster/llm-pretrain/*"]


def test_without_ami_id_nodes_run_the_sample_image_looked_up_at_deploy_time(block, b300):
    lookups = props(block, "Custom::PcsSampleImage")
    assert lookups == [{"ServiceToken": lookups[0]["ServiceToken"], "SlurmVersion": "25.11", "Architecture": "x86_64"}]
    for group in props(b300, "AWS::PCS::ComputeNodeGroup"):
        assert group["AmiId"]["Fn::GetAtt"][1] == "ImageId"
    functions = props(block, "AWS::Lambda::Function")
    assert any(f.get("Runtime") == "python3.14" and f["Handler"] == "handler.on_event" for f in functions)


def test_user_data_mounts_lustre_over_efa_only_where_the_node_can(b300):
    templates = {k: r["Properties"]["LaunchTemplateData"] for k, r in of_type(b300, "AWS::EC2::LaunchTemplate").items()}
    user_data = {key[:4]: str(data["UserData"]) for key, data in templates.items()}
    assert "--lustre-efa" in user_data["b300"]
    assert "--lustre-efa" not in user_data["devL"]


@pytest.mark.parametrize(
    ("nodes", "size"),
    # botocore pcs Size (SMALL, MEDIUM, LARGE) and the PCS API reference's limits 32 / 512 / 2,048 instances; the
    # default leaves room to double, then settles for the smallest size that fits.
    [(1, "SMALL"), (16, "SMALL"), (17, "MEDIUM"), (256, "MEDIUM"), (257, "LARGE"), (513, "LARGE"), (2048, "LARGE")],
)
def test_cluster_size_follows_the_node_count(nodes, size):
    assert cluster_size(nodes) == size


def test_library_users_get_clear_errors():
    stack = cdk.Stack(cdk.App(), "Lib")
    vpc = ec2.Vpc(stack, "Vpc", max_azs=1, nat_gateways=0)
    with pytest.raises(ValueError, match=r"^PcsSlurmCluster: 2049 nodes exceed the 2,048 an AWS PCS cluster manages$"):
        cluster_size(2049)
    with pytest.raises(
        ValueError, match=r"^PcsSlurmCluster: slurm_version must be one of 24.11, 25.05, 25.11; got '23.11'$"
    ):
        PcsSlurmCluster(
            stack,
            "Old",
            cluster_name="x",
            subnet=vpc.isolated_subnets[0],
            security_groups=[ec2.SecurityGroup(stack, "Sg", vpc=vpc)],
            slurm_version="23.11",
        )
    with pytest.raises(ValueError, match=r"^PcsSlurmCluster: security_groups needs at least one group"):
        PcsSlurmCluster(stack, "NoSg", cluster_name="x", subnet=vpc.isolated_subnets[0], security_groups=[])
    with pytest.raises(ValueError) as short:
        PcsSlurmCluster(
            stack,
            "Short",
            cluster_name="x",
            subnet=vpc.isolated_subnets[0],
            security_groups=[ec2.SecurityGroup(stack, "Sg3", vpc=vpc)],
        )
    # botocore pcs 2023-02-10, ClusterName: 3-40 characters
    assert str(short.value) == (
        "PcsSlurmCluster: cluster_name: AWS PCS takes 3-40 characters matching (?!pcs_)^[A-Za-z][A-Za-z0-9-]+ "
        "(botocore pcs ClusterName); got 'x'"
    )
    cluster = PcsSlurmCluster(
        stack,
        "Ok",
        cluster_name="llm",
        subnet=vpc.isolated_subnets[0],
        security_groups=[ec2.SecurityGroup(stack, "Sg2", vpc=vpc)],
    )
    with pytest.raises(ValueError) as underscore:
        cluster.add_node_group(
            "my_head", instance_type="m5.xlarge", count=1, launch_template_id="lt-1", launch_template_version="1"
        )
    # botocore pcs ComputeNodeGroupName: the pattern allows no underscore (the old head group was 'fmcluster_head')
    assert str(underscore.value).startswith("PcsSlurmCluster: name: AWS PCS takes 3-25 characters matching")
    with pytest.raises(
        ValueError, match=r"^PcsSlurmCluster: ami_id must look like ami-0123456789abcdef0; got 'ubuntu'$"
    ):
        cluster.add_node_group(
            "gpu",
            instance_type="p5.48xlarge",
            count=1,
            launch_template_id="lt-1",
            launch_template_version="1",
            ami_id="ubuntu",
        )
    cluster.add_node_group(
        "gpu",
        instance_type="p5.48xlarge",
        count=1,
        launch_template_id="lt-1",
        launch_template_version="1",
        ami_id="ami-0123456789abcdef0",
    )
    with pytest.raises(ValueError, match=r"^PcsSlurmCluster: a node group named 'gpu' exists already$"):
        cluster.add_node_group(
            "gpu",
            instance_type="p5.48xlarge",
            count=1,
            launch_template_id="lt-1",
            launch_template_version="1",
            ami_id="ami-0123456789abcdef0",
        )


# -- the node bundle and observability --------------------------------------------------------------------------

BUNDLE = re.compile(r"--bundle '?(s3://cdk-hnb659fds-assets-[^/]+/([0-9a-f]{64})\.zip)")


def user_data(template: dict) -> dict[str, str]:
    """Each launch template's user data, by the start of its logical id, as one string (tokens as their JSON)."""
    found = {}
    for key, resource in of_type(template, "AWS::EC2::LaunchTemplate").items():
        value = resource["Properties"]["LaunchTemplateData"]["UserData"]
        found[key[:4]] = "".join(p if isinstance(p, str) else json.dumps(p) for p in _parts(value))
    return found


def _parts(value: object) -> list[object]:
    if isinstance(value, dict) and "Fn::Base64" in value:
        return _parts(value["Fn::Base64"])
    if isinstance(value, dict) and "Fn::Join" in value:
        return [q for part in value["Fn::Join"][1] for q in _parts(part)]
    if isinstance(value, dict) and isinstance(value.get("Fn::Sub"), str):
        return [value["Fn::Sub"]]
    return [value]


def test_every_node_unpacks_the_same_node_bundle_from_a_cdk_asset(block, b300, synthesized):
    examples = (("p5-capacity-block", block, "us-east-1"), ("p6-b300-isolated", b300, "us-west-2"))
    for example, template, region in examples:
        bundles = {BUNDLE.search(text).groups() for text in user_data(template).values()}
        ((uri, digest),) = bundles  # one bundle for compute and login nodes alike
        assert uri.startswith("s3://cdk-hnb659fds-assets-") and f"-{region}/" in uri  # the stack's bootstrap bucket
        asset = synthesized[example].outdir / f"asset.{digest}.zip"
        assert asset.read_bytes() == node_scripts.bundle_archive()
        with zipfile.ZipFile(asset) as archive:
            assert {"node/observability.sh", "dashboards/agent.yml", "nccl-tests.sbatch"} <= set(archive.namelist())


def test_compute_nodes_run_observability_and_the_login_node_is_the_head_node(block):
    scripts = user_data(block)
    endpoint = "--endpoint-parameter /fmcluster/llm-pretrain/observability/prometheus-endpoint"
    gpu, login = scripts["gpuL"], scripts["logi"]
    assert gpu.index("--bundle ") < gpu.index("--observability --cluster llm-pretrain --region ")
    assert gpu.rstrip().endswith(endpoint + "\n--+AWS+CDK+User+Data+Separator==--")
    assert endpoint + " --head-node --grafana\n" in login  # observability.grafana defaults to self-hosted
    assert "--mirror" not in gpu + login  # egress: nat, so the public release sites


def test_isolated_nodes_take_observability_downloads_from_the_data_bucket_mirror(b300):
    storage_output = json.dumps(
        {"Fn::GetStackOutput": {"StackName": "b300-isolated-storage", "Region": "us-west-2",
                                "OutputName": "PublishOutputRefBucketsDataBucket44451DC7409EC6A1"}}
    )  # fmt: skip
    texts = user_data(b300)
    for text in texts.values():
        assert f"--mirror 's3://{storage_output}/fmcluster-mirror'" in text
        assert "--grafana" not in text  # observability.grafana: none
    heads = [key for key, text in texts.items() if "--head-node" in text]
    assert heads == ["logi"]  # the head node template (no login node here: a head node group of its own)


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
    data = load(path).model_dump(by_alias=True, exclude_none=True)
    data["observability"] = {**data.get("observability", {}), "prometheus": "none", "grafana": "none"}
    result = synthesize(path, tmp_path, parse(data))
    assert result.nag == []
    scripts = user_data(result.templates["llm-pretrain-cluster"])
    assert set(scripts) == {"gpuL", "logi"}
    for text in scripts.values():
        assert BUNDLE.search(text) and "--observability" not in text


def test_compliance_control_tower_turns_on_detailed_monitoring_without_an_acknowledgment(tmp_path):
    # CT.EC2.PR.10 (ct-ec2-pr-10.guard in cdklabs.cdk-validator-cfnguard 0.0.62): LaunchTemplateData.Monitoring.Enabled
    path = REPO / "examples" / "p5-capacity-block.yaml"
    data = load(path).model_dump(by_alias=True, exclude_none=True)
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
    hook = "/opt/fmcluster/node/slurm/gpu-job-map.sh"  # where the node bundle unpacks it (node_scripts.BUNDLE_DIR)
    assert settings == {"Prolog": hook, "Epilog": hook}
    assert f"node/{hook.rsplit('/node/', 1)[1]}" in {f"node/{s}" for s in node_scripts.BUNDLE_SCRIPTS}


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
