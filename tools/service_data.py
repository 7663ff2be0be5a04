"""Regenerate fmcluster/config/service_data.json.gz from cfn-lint's package data (a dev dependency).

    python tools/service_data.py        # after upgrading cfn-lint; tests/unit/test_service_data.py checks it

What ships is what `fmcluster validate` and `fmcluster plan` need at run time, cut from cfn-lint's data:
- per region (cfn-lint `data/schemas/providers/<region>.json`): which of `RESOURCE_TYPES` CloudFormation offers;
- per region, the EC2 instance types (`extensions/aws_ec2_instance/instancetype_enum.json`, cfn-lint's E3628, which
  judges launch templates; CDK's synth-time engine judges only AWS::EC2::Instance, which fmcluster does not make);
- per region, SageMaker HyperPod's types (`extensions/aws_sagemaker_cluster/instancetype_enum.json`, E3644), less
  every type that CDK's own synth-time engine rejects there: `cdk synth` runs `@aws/cloudformation-validate` (bundled
  in aws-cdk-lib) when `@aws-cdk/core:validateAgainstDefaultRules` is on, and its E3644 data is stricter than
  cfn-lint's (1.12.1 in aws-cdk-lib 2.275.0 rejects ml.p6-b200.48xlarge in us-east-1, cfn-lint 1.58.0 accepts it).
  The engine is asked through node, type by type, region by region; a region missing from both is not judged;
- each type's `createOnlyProperties` (`data/schemas/resources/*.json`), which decide what an update replaces;
- from botocore's API models (a run-time dependency, but slow to import and parse): the shapes of `API_SHAPES`.
cfn-lint itself (and its schema set) is not a run-time dependency: the cut is ~40x smaller and changes only when
cfn-lint's pin does.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
import tarfile
import tempfile
from importlib.metadata import version
from importlib.resources import files
from pathlib import Path

import botocore.loaders

from fmcluster.config.regions import REGIONS

OUTPUT = Path(__file__).resolve().parents[1] / "fmcluster" / "config" / "service_data.json.gz"
RESOURCE_TYPES = (
    "AWS::APS::RuleGroupsNamespace",
    "AWS::APS::Workspace",
    "AWS::CloudWatch::Alarm",
    "AWS::CloudWatch::Dashboard",
    "AWS::CodeBuild::Project",
    "AWS::EC2::EIP",
    "AWS::EC2::FlowLog",
    "AWS::EC2::InternetGateway",
    "AWS::EC2::LaunchTemplate",
    "AWS::EC2::NatGateway",
    "AWS::EC2::PlacementGroup",
    "AWS::EC2::Route",
    "AWS::EC2::RouteTable",
    "AWS::EC2::SecurityGroup",
    "AWS::EC2::SecurityGroupEgress",
    "AWS::EC2::SecurityGroupIngress",
    "AWS::EC2::Subnet",
    "AWS::EC2::SubnetRouteTableAssociation",
    "AWS::EC2::VPC",
    "AWS::EC2::VPCEndpoint",
    "AWS::EC2::VPCGatewayAttachment",
    "AWS::ECR::Repository",
    "AWS::Events::Rule",
    "AWS::FSx::DataRepositoryAssociation",
    "AWS::FSx::FileSystem",
    "AWS::Grafana::Workspace",
    "AWS::IAM::InstanceProfile",
    "AWS::ImageBuilder::Component",
    "AWS::ImageBuilder::DistributionConfiguration",
    "AWS::ImageBuilder::Image",
    "AWS::ImageBuilder::ImageRecipe",
    "AWS::ImageBuilder::InfrastructureConfiguration",
    "AWS::IAM::ManagedPolicy",
    "AWS::IAM::Policy",
    "AWS::IAM::Role",
    "AWS::KMS::Alias",
    "AWS::KMS::Key",
    "AWS::Lambda::EventInvokeConfig",
    "AWS::Lambda::Function",
    "AWS::Lambda::LayerVersion",
    "AWS::Lambda::Permission",
    "AWS::Logs::LogGroup",
    "AWS::PCS::Cluster",
    "AWS::PCS::ComputeNodeGroup",
    "AWS::PCS::Queue",
    "AWS::S3::Bucket",
    "AWS::S3::BucketPolicy",
    "AWS::SNS::Subscription",
    "AWS::SNS::Topic",
    "AWS::SNS::TopicPolicy",
    "AWS::SSM::Parameter",
    "AWS::SageMaker::Cluster",
    "AWS::StepFunctions::StateMachine",
)
"""Every CloudFormation type fmcluster's stacks contain (a test keeps this complete over the examples)."""
API_SHAPES = {
    "ec2": ("InstanceType",),
    "pcs": ("ClusterName", "ComputeNodeGroupName", "PurchaseOption", "QueueName", "Size"),
    "sagemaker": (
        "ClusterInstanceGroupName",
        "ClusterInstanceType",
        "ClusterName",
        "ClusterNodeRecovery",
        "ClusterPartitionName",
        "ClusterSlurmNodeType",
        "DeepHealthCheckType",
        "TrainingPlanArn",
    ),
}
"""The botocore shapes fmcluster judges names and types by (`service_models.shape`) and the service-truth gate reads:
cut here so that `fmcluster validate` neither imports botocore nor parses SageMaker's 3,000-shape model (nor EC2's,
whose InstanceType enum is every type EC2 offers: what an AWS PCS compute group may run)."""


def _json(path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _api_shapes(service: str) -> dict[str, dict]:
    return botocore.loaders.Loader().load_service_model(service, "service-2")["shapes"]


def _regional_enum(path) -> dict[str, list[str]]:
    return {region: sorted(entry["enum"]) for region, entry in _json(path).items() if isinstance(entry, dict)}


ENGINE = "package/node_modules/@aws/cloudformation-validate/"
"""Where aws-cdk-lib's jsii bundle keeps the engine `cdk synth` validates templates with."""
ASK_ENGINE = """
const validate = require(process.argv[1]);
const engine = new validate.CompositeEngine({});
const answer = {};
for (const region of JSON.parse(process.argv[2])) {
  answer[region] = [];
  for (const file of JSON.parse(process.argv[3])) {
    const options = {detailLevel: "STANDARD", pseudoParameterOverrides: {region}, severityLevel: "ERROR"};
    const report = engine.validateTemplate(new validate.TemplateFile(file), options);
    for (const found of report.diagnostics) if (found.ruleId === "E3644") answer[region].push(found.message);
  }
}
console.log(JSON.stringify(answer));
"""


def cdk_engine_rejections(types: list[str], regions: list[str]) -> dict[str, set[str]]:
    """Per region, the HyperPod types CDK's synth-time engine rejects (E3644), asked through node."""
    bundle = next((files("aws_cdk") / "_jsii").glob("aws-cdk-lib@*.jsii.tgz"))
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node is not on PATH: run `make setup` and put node_modules/.bin first on PATH")
    with tempfile.TemporaryDirectory() as work, tarfile.open(bundle) as archive:
        members = [m for m in archive.getmembers() if m.name.startswith(ENGINE)]
        archive.extractall(work, members=members, filter="data")
        templates = []
        for start in range(0, len(types), 50):
            groups = [
                {
                    "InstanceGroupName": f"g{index}",
                    "InstanceType": name,
                    "InstanceCount": 1,
                    "ExecutionRole": "arn:aws:iam::123456789012:role/probe",
                    "LifeCycleConfig": {"OnCreate": "on_create.sh", "SourceS3Uri": "s3://sagemaker-probe/"},
                }
                for index, name in enumerate(types[start : start + 50])
            ]
            template = Path(work) / f"probe{start}.json"
            cluster = {"Type": "AWS::SageMaker::Cluster", "Properties": {"InstanceGroups": groups}}
            template.write_text(json.dumps({"Resources": {"Probe": cluster}}))
            templates.append(str(template))
        answer = subprocess.run(
            [node, "-e", ASK_ENGINE, str(Path(work) / ENGINE), json.dumps(regions), json.dumps(templates)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    return {
        region: {re.match(r"'([^']+)'", message)[1] for message in messages}  # type: ignore[index]
        for region, messages in json.loads(answer).items()
    }


def generate() -> dict:
    """The shipped data, from the installed cfn-lint."""
    schemas = files("cfnlint") / "data" / "schemas"
    providers = schemas / "providers"
    regions = sorted(p.name.removesuffix(".json") for p in providers.iterdir() if p.name.endswith(".json"))
    offered = {}
    for region in regions:
        index = _json(providers / f"{region}.json")
        offered[region] = [name for name in RESOURCE_TYPES if name in index]
    reference = _json(providers / "us-east-1.json")
    create_only = {
        name: _json(schemas / "resources" / f"{reference[name]}.json").get("createOnlyProperties", [])
        for name in RESOURCE_TYPES
    }
    extensions = schemas / "extensions"
    hyperpod = _regional_enum(extensions / "aws_sagemaker_cluster" / "instancetype_enum.json")
    api_shapes = {
        service: {name: _api_shapes(service)[name] for name in names} for service, names in API_SHAPES.items()
    }
    rejected = cdk_engine_rejections(sorted(api_shapes["sagemaker"]["ClusterInstanceType"]["enum"]), sorted(REGIONS))
    if any(rejected[region] for region in REGIONS if region not in hyperpod):
        raise RuntimeError("CDK's engine judges HyperPod types in a region cfn-lint has no list for: extend generate()")
    return {
        "source": (
            f"cfn-lint {version('cfn-lint')} package data (cfnlint/data/schemas); HyperPod types also judged by "
            f"@aws/cloudformation-validate in aws-cdk-lib {version('aws-cdk-lib')}"
        ),
        "resource_types": offered,
        "ec2_instance_types": _regional_enum(extensions / "aws_ec2_instance" / "instancetype_enum.json"),
        "hyperpod_instance_types": {
            region: [name for name in types if name not in rejected.get(region, set())]
            for region, types in hyperpod.items()
        },
        "create_only_properties": create_only,
        "api_shapes": api_shapes,
    }


def encode(data: dict) -> bytes:
    """Deterministic bytes (no gzip timestamp), so a regeneration without a data change changes nothing."""
    return gzip.compress(json.dumps(data, sort_keys=True, separators=(",", ":")).encode(), mtime=0)


if __name__ == "__main__":
    OUTPUT.write_bytes(encode(generate()))
    print(f"wrote {OUTPUT}")
