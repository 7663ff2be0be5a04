"""The lifecycle of a HyperPod cluster's nodes: the scripts, the bucket they live in, and the settings they read."""

from __future__ import annotations

import hashlib
from importlib import resources

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy

from fmcluster.config.regions import REGIONS
from fmcluster.constructs.acknowledgments import acknowledge_deploy_time_functions, nag_form
from fmcluster.constructs.functions import BASIC_EXECUTION_ROLE, quiet_redundant_depends_on
from fmcluster.names import CONTROLLER_GROUP
from fmcluster.node_files import EXECUTABLE, node_tree
from fmcluster.node_scripts import archive_path, zip_archive
from fmcluster.tokens import is_token

LIFECYCLE_PREFIX = "fmcluster-lifecycle"
"""Key prefix of the lifecycle scripts in the lifecycle bucket; `SourceS3Uri` points here."""
REPLACED_SCRIPTS_EXPIRATION = cdk.Duration.days(30)
"""Lifecycle scripts replaced or removed by a deploy stay in the bucket as old versions for this long."""
ON_CREATE = "on_create.sh"
"""Entry script, run as `OnInitComplete` (HyperPod's Extended mode): after HyperPod has installed and
configured its own software, Slurm from the API-driven configuration included. `OnCreate` (Customer Managed
mode) would leave setting up Slurm to the scripts, as the older provisioning_parameters.json model did."""
LIFECYCLE_ENV = "fmcluster.env"
"""The cluster's settings for the lifecycle scripts, written next to them (KEY=value lines)."""
ON_CREATE_SOURCE = "node/hyperpod/on_create.sh"
"""on_create.sh in the package; the archive puts it at the top, beside the node files' tree."""
SAGEMAKER_BUCKET_PREFIX = "sagemaker-"
"""HyperPod's managed instance policy reaches only such buckets (SageMaker API reference, ClusterLifeCycleConfig)."""
MAX_BUCKET_NAME = 63
ACCOUNT_ID_LENGTH = 12
MAX_REGION_LENGTH = max(len(region) for region in REGIONS)


def lifecycle_bucket_name(cluster_name: str, account: str, region: str) -> str:
    """`sagemaker-<cluster>-<account>-<region>` (lowercase), shortened with a hash to fit S3's 63 characters.

    `account` and `region` may be tokens; the room left for the cluster name then assumes the longest region. A
    cluster name that is itself a token is used as it is (it must then be lowercase and short enough).
    """
    if is_token(cluster_name):
        return f"{SAGEMAKER_BUCKET_PREFIX}{cluster_name}-{account}-{region}"
    region_length = MAX_REGION_LENGTH if is_token(region) else len(region)
    room = MAX_BUCKET_NAME - len(SAGEMAKER_BUCKET_PREFIX) - ACCOUNT_ID_LENGTH - region_length - 2
    name = cluster_name.lower()
    if len(name) > room:
        digest = hashlib.sha256(cluster_name.encode()).hexdigest()[:8]
        name = f"{name[: room - len(digest) - 1].rstrip('-')}-{digest}"
    return f"{SAGEMAKER_BUCKET_PREFIX}{name}-{account}-{region}"


def lifecycle_settings(
    *,
    cluster_name: str,
    region: str,
    nccl_parameter_prefix: str,
    image_parameter_name: str,
    mount_path: str,
    prometheus: str = "none",
    grafana: str = "none",
    endpoint_parameter_name: str = "",
    artifact_mirror: str = "",
    users_parameter: str = "",
    fabric: str = "",
    training_plans: str = "",
) -> str:
    """The `fmcluster.env` the lifecycle scripts read: KEY=value lines (values may be deploy-time tokens).

    `prometheus`, `grafana` and `endpoint_parameter_name` are what on_create.sh's observability step needs (it runs
    only when `prometheus` is "managed"); `artifact_mirror` is the artifact mirror (`fmcluster.mirror`) every step
    installs from (mirror.sh: enroot-pyxis.sh, observability.sh); an empty
    `users_parameter` means no users step; `fabric` is every compute group's fabric check (`GROUP=EFA,GPUS,FLOOR`
    words, `fmcluster.fabric.FabricExpectation.setting`), empty for none; `training_plans` the plans the controller
    drains before their end (`fmcluster.drains.plan_words`, space-separated), empty for none.
    """
    settings = {
        "FMCLUSTER_CLUSTER": cluster_name,
        "FMCLUSTER_REGION": region,
        "FMCLUSTER_NCCL_PREFIX": nccl_parameter_prefix,
        "FMCLUSTER_IMAGE_PARAMETER": image_parameter_name,
        "FMCLUSTER_CONTROLLER_GROUP": CONTROLLER_GROUP,
        "FMCLUSTER_FSX_MOUNT": mount_path,
        "FMCLUSTER_PROMETHEUS": prometheus,
        "FMCLUSTER_GRAFANA": grafana,
        "FMCLUSTER_ENDPOINT_PARAMETER": endpoint_parameter_name,
        "FMCLUSTER_ARTIFACT_MIRROR": artifact_mirror,
        "FMCLUSTER_USERS_PARAMETER": users_parameter,
        "FMCLUSTER_FABRIC": fabric,
        "FMCLUSTER_TRAINING_PLANS": training_plans,
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def lifecycle_files() -> dict[str, tuple[bytes, int]]:
    """The lifecycle archive's files: `on_create.sh` at the top and every node file (`fmcluster.node_files.node_tree`,
    with its `manifest`) laid out as /opt/fmcluster is, so on_create.sh installs the same tree as a PCS node's.

    Modes are recorded for the zip, but S3 keeps none: the manifest carries them to the node (run-step.sh install),
    and HyperPod runs on_create.sh with bash (unconfirmed whether it would run an object without the execute bit)."""
    entry = resources.files("fmcluster").joinpath(ON_CREATE_SOURCE).read_bytes()
    return {ON_CREATE: (entry, EXECUTABLE), **node_tree()}


def lifecycle_archive() -> bytes:
    """`lifecycle_files()` as one reproducible zip.

    One archive is one asset for the BucketDeployment to stage and hash at synth, where a source per file cost an
    asset each; the deployment unpacks it under `LIFECYCLE_PREFIX`, so the objects are the same.
    """
    return zip_archive(lifecycle_files())


def lifecycle_archive_path() -> str:
    """The lifecycle archive written for `s3deploy.Source.asset` (see `fmcluster.node_scripts.archive_path`)."""
    return archive_path(lifecycle_archive(), "fmcluster-lifecycle")


def acknowledge_deployment_findings(deployment: s3deploy.BucketDeployment, bucket: s3.IBucket) -> None:
    """cdk-nag findings of CDK's BucketDeployment function (one per stack), each with its reason."""
    function = deployment.handler_role.node.scope
    assert function is not None  # the role's scope: the deployment's function
    stack = cdk.Stack.of(deployment)
    policy = deployment.handler_role.node.try_find_child("DefaultPolicy")
    statements = stack.resolve(policy.document.to_json())["Statement"] if isinstance(policy, iam.Policy) else []
    ours = stack.resolve(bucket.arn_for_objects("*"))
    acknowledgments = [
        cdk.Acknowledgment(
            id=BASIC_EXECUTION_ROLE,
            reason="CDK's BucketDeployment function writes only its own CloudWatch logs with this policy",
        ),
        cdk.Acknowledgment(
            id="AwsSolutions-L1",
            reason="The BucketDeployment function's runtime is chosen and updated by aws-cdk-lib, not by this project",
        ),
        *(
            cdk.Acknowledgment(
                id=f"AwsSolutions-IAM5[Action::{action}]",
                reason="CDK's bucket grants to the BucketDeployment function: read the staged assets, copy them "
                "into the destination prefix and prune what is no longer shipped",
            )
            for action in ("s3:GetObject*", "s3:GetBucket*", "s3:List*", "s3:DeleteObject*", "s3:Abort*")
        ),
    ]
    for statement in statements:
        listed = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        for resource in listed:
            if "*" not in str(resource):
                continue
            reason = (
                "The function replaces the lifecycle scripts, whose object keys follow the package's files"
                if resource == ours
                else "The function reads the staged script assets, named by content hash, from the CDK assets bucket"
            )
            acknowledgments.append(
                cdk.Acknowledgment(id=f"AwsSolutions-IAM5[Resource::{nag_form(function, resource)}]", reason=reason)
            )
    cdk.Validations.of(function).acknowledge(*acknowledgments)
    quiet_redundant_depends_on(function)
    acknowledge_deploy_time_functions(
        function, "copies the lifecycle scripts into their bucket (S3 only)", resource_type="AWS::Lambda::Function"
    )
