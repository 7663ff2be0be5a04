"""TrainingImage: the PyTorch training image built by CodeBuild into ECR, its URI (pinned by digest) in SSM.

The image is fmcluster/image/Dockerfile built with fmcluster/image/buildspec.yml from the versions of an
`fmcluster.config.models.Image` (the cluster file's `image` section). A Lambda-backed custom resource (CDK Provider
framework, fmcluster/lambdas/image_build) starts a build when the image specification changes, waits for it, fails
the deploy with the build's log location when the build fails, and writes `<repository-uri>@sha256:<digest>` to the
SSM String parameter `/fmcluster/<cluster>/image-uri`, which the nodes read.
"""

from __future__ import annotations

import hashlib
import json
from importlib.resources import files

import aws_cdk as cdk
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import custom_resources as cr
from constructs import Construct

from fmcluster import names
from fmcluster.config.models import Image
from fmcluster.config.value_rules import cluster_name_problem
from fmcluster.constructs.acknowledgments import (
    acknowledge_deploy_time_functions,
    acknowledge_findings,
    acknowledge_wildcards,
    codebuild_default_grants,
    nag_form,
)
from fmcluster.constructs.functions import LAMBDA_RUNTIME, lambda_code, quiet_redundant_depends_on
from fmcluster.constructs.keys import customer_key
from fmcluster.deploy_time import Weights
from fmcluster.problems import Problem, raise_if_any
from fmcluster.tokens import is_token

"""The newest Python runtime in aws-cdk-lib's `Runtime.ALL`: what cdk-nag's AwsSolutions-L1 accepts."""
IMAGE_SOURCE = files("fmcluster") / "image"
"""Package data: the Dockerfile and buildspec.yml, uploaded as the CodeBuild project's source."""
SPEC_HASH_LENGTH = 16
"""Hex digits of the specification hash (64 bits): the image tag, short enough to read, never repeated in practice."""

CUSTOM_RESOURCE_TIMEOUT = cdk.Duration.minutes(60)
"""CloudFormation waits at most one hour for a custom resource (ServiceTimeout is 1-3600 s), so an image build cannot
make a deploy wait longer: the whole build has to fit in that hour."""
PROVIDER_TIMEOUT = cdk.Duration.minutes(55)
"""How long the Provider framework polls; below CloudFormation's hour, so the deploy fails with the framework's
message (and the build's logs) rather than CloudFormation's bare timeout."""
QUERY_INTERVAL = cdk.Duration.seconds(30)
"""Between two is_complete calls: 110 polls in 55 minutes, each a cheap BatchGetBuilds."""
QUEUED_TIMEOUT = cdk.Duration.minutes(5)
"""A build that cannot start within 5 minutes is ended by CodeBuild (and reported) instead of running out the clock."""
MAX_BUILD_TIMEOUT = PROVIDER_TIMEOUT.minus(QUEUED_TIMEOUT)
"""Queue plus build time stays within the Provider's window, so is_complete always sees the build end."""
EXPECTED_BUILD_MINUTES = round(Weights.load().types["Custom::TrainingImage"])
"""What nodes announce while the image builds ("ready in about N min"): the plan's figure (deploy_times.yaml)."""
DEFAULT_BUILD_TIMEOUT = cdk.Duration.minutes(45)
"""The build takes about 30 minutes on X_LARGE (EFA installer, NCCL and nccl-tests for four GPU architectures,
PyTorch, a push of ~15 GB)."""


def image_spec_hash(image: Image) -> str:
    """The hash of everything that decides the image: base image, versions, Dockerfile and buildspec.

    It is the image's tag and a property of the custom resource, so CloudFormation asks for a build exactly when one
    of these changes.
    """
    material = {
        "versions": image.model_dump(mode="json"),
        "Dockerfile": hashlib.sha256(IMAGE_SOURCE.joinpath("Dockerfile").read_bytes()).hexdigest(),
        "buildspec.yml": hashlib.sha256(IMAGE_SOURCE.joinpath("buildspec.yml").read_bytes()).hexdigest(),
    }
    canonical = json.dumps(material, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:SPEC_HASH_LENGTH]


def parameter_name(cluster_name: str) -> str:
    """The SSM parameter with the training image's URI (what the nodes read)."""
    return names.image_parameter_name(cluster_name)


def build_parameter_name(cluster_name: str) -> str:
    """The SSM parameter with the running build (id, start, expected minutes, logs): what nodes say while waiting."""
    return names.image_build_parameter_name(cluster_name)


REPOSITORY_TAG = "fmcluster:training-image"
"""Tag of the image repository, whose value is the cluster name. `grant_image_pull` matches it with the condition key
ecr:ResourceTag/<key> (AWS ECR user guide, "Using Tag-Based Access Control", whose example conditions
ecr:BatchGetImage and ecr:GetDownloadUrlForLayer on it), so a node role pulls without naming the repository."""
ECR_PULL_ACTIONS = ("ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer")


def grant_image_pull(grantee: iam.IGrantable, cluster_name: str, *, sign_in: bool = True) -> None:
    """Let `grantee` pull the cluster's training image, knowing only the cluster name.

    Nothing of the `TrainingImage` is referenced, so a stack granting this does not depend on the image's stack: its
    nodes boot while the image builds. The pull statement names ECR repositories of this account and region tagged
    `REPOSITORY_TAG=<cluster>`; with `sign_in`, ecr:GetAuthorizationToken too (leave it out where the role has it).
    The nodes also read `/fmcluster/<cluster>/image-uri` and `image-build`: grant ssm:GetParameter on them (both
    cluster stacks grant their nodes `/fmcluster/<cluster>/*`).

    Example::

        grant_image_pull(node_role, "llm-pretrain")
    """
    principal = grantee.grant_principal
    stack = cdk.Stack.of(principal)  # type: ignore[arg-type]
    repositories = stack.format_arn(service="ecr", resource="repository", resource_name="*")
    principal.add_to_principal_policy(
        iam.PolicyStatement(
            actions=list(ECR_PULL_ACTIONS),
            resources=[repositories],
            conditions={"StringEquals": {f"ecr:ResourceTag/{REPOSITORY_TAG}": cluster_name}},
        )
    )
    if sign_in:
        principal.add_to_principal_policy(iam.PolicyStatement(actions=["ecr:GetAuthorizationToken"], resources=["*"]))
    if isinstance(principal, Construct):
        acknowledge_wildcards(
            principal,
            resources=[repositories, "*"] if sign_in else [repositories],
            reason="Pulls only from repositories tagged as this cluster's training image (condition "
            f"ecr:ResourceTag/{REPOSITORY_TAG}), whose name the cluster stack does not reference so that it need not "
            "wait for the image build; ecr:GetAuthorizationToken has no resource-level permissions",
        )


class TrainingImage(Construct):
    """The training image of one cluster: ECR repository, CodeBuild project, and a build on every specification change.

    - ECR repository: scan on push, immutable tags, encrypted with the customer-managed `key`, lifecycle rule keeping
      the newest `max_image_count` images; kept by `cdk destroy` unless `removal_policy` is DESTROY (then emptied).
      Tags are specification hashes, so an image is never overwritten and a rollback finds its image again.
    - CodeBuild project: Linux, `aws/codebuild/standard:8.0`, privileged (Docker builds need the Docker daemon),
      `compute_type` (X_LARGE: 36 vCPUs, 72 GB, 256 GB disk), `build_timeout`, a 5-minute queue timeout, logs to its
      own log group, artifacts encrypted with `key`; source = fmcluster/image (Dockerfile, buildspec.yml) as an S3
      asset.
    - Custom resource (Custom::TrainingImage): properties are the specification hash (`spec_hash`), the versions and
      what the handler needs; on Create/Update it builds unless `<repository>:<spec_hash>` exists, polls the build
      every 30 s for up to 55 minutes, fails the deploy naming the build's failed phase and its logs, and publishes
      `<repository-uri>@<digest>` to the SSM String parameter `/fmcluster/<cluster_name>/image-uri`
      (`parameter_name`); `image_uri` is the same value as a deploy-time token. Delete removes the parameter only.

    CloudFormation gives a custom resource one hour: `build_timeout` may be at most 50 minutes (the Provider polls
    for 55 minutes, the queue may take 5).

    Example::

        image = TrainingImage(stack, "Image", cluster_name="llm-pretrain", image=config.image, key=key)
        image.grant_pull(node_role)  # ECR pull and ssm:GetParameter on the image parameter

    Args:
        cluster_name: the cluster's name (2-24 lowercase letters, digits, '-'); names the SSM parameter.
        image: base image and versions. Omitted: fmcluster's defaults (`Image()`).
        key: KMS key for the repository and the build's artifacts. Omitted: a new customer-managed key with yearly
            rotation, kept or deleted with `removal_policy`.
        removal_policy: what `cdk destroy` does to the repository (and a key created here). Omitted: RETAIN.
        max_image_count: how many images the lifecycle rule keeps (1-1000). Omitted: 10.
        compute_type: the CodeBuild machine. Omitted: X_LARGE.
        build_timeout: CodeBuild's limit for one build, 10 to 50 minutes. Omitted: 45 minutes.
        log_retention: how long build and handler logs are kept. Omitted: one year.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster_name: str,
        image: Image | None = None,
        key: kms.IKey | None = None,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
        max_image_count: int = 10,
        compute_type: codebuild.ComputeType = codebuild.ComputeType.X_LARGE,
        build_timeout: cdk.Duration = DEFAULT_BUILD_TIMEOUT,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
    ) -> None:
        image = Image() if image is None else image
        _validated(cluster_name, image, max_image_count, build_timeout)
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        destroy = removal_policy == cdk.RemovalPolicy.DESTROY

        self.image = image
        """The base image and versions built."""
        self.spec_hash = image_spec_hash(image)
        """The image specification's hash: the image tag and the custom resource's SpecHash property."""
        self.parameter_name = parameter_name(cluster_name)
        """The SSM String parameter holding `<repository-uri>@<digest>`."""
        self.parameter_arn = stack.format_arn(
            service="ssm", resource="parameter", resource_name=self.parameter_name.lstrip("/")
        )
        self.build_parameter_arn = stack.format_arn(
            service="ssm", resource="parameter", resource_name=build_parameter_name(cluster_name).lstrip("/")
        )
        """The SSM parameter `/fmcluster/<cluster>/image-build`: the running (or failed) build, for the nodes."""
        if key is None:
            key = customer_key(
                self,
                "Key",
                removal_policy=removal_policy,
                description=f"fmcluster {cluster_name}: training image repository and builds",
            )
        self.key: kms.IKey = key
        """Encrypts the repository and the build's artifacts."""

        self.repository = ecr.Repository(
            self,
            "Repository",
            image_scan_on_push=True,
            image_tag_mutability=ecr.TagMutability.IMMUTABLE,
            encryption=ecr.RepositoryEncryption.KMS,
            encryption_key=key,
            lifecycle_rules=[
                ecr.LifecycleRule(
                    description=f"Keep the newest {max_image_count} training images",
                    max_image_count=max_image_count,
                    tag_status=ecr.TagStatus.ANY,
                )
            ],
            removal_policy=removal_policy,
            empty_on_delete=destroy,
        )
        """The training images, tagged with their specification hash."""
        cdk.Tags.of(self.repository).add(REPOSITORY_TAG, cluster_name)

        self.build_log_group = logs.LogGroup(self, "BuildLogs", retention=log_retention, removal_policy=removal_policy)
        """The image builds' logs (one stream per build)."""
        source = s3_assets.Asset(self, "Source", path=str(IMAGE_SOURCE), exclude=["__pycache__", "*.pyc"])
        self.project = codebuild.Project(
            self,
            "Build",
            description=f"fmcluster {cluster_name}: builds the training image and pushes it to ECR",
            source=codebuild.Source.s3(bucket=source.bucket, path=source.s3_object_key),
            build_spec=codebuild.BuildSpec.from_source_filename("buildspec.yml"),
            environment=codebuild.BuildEnvironment(
                build_image=codebuild.LinuxBuildImage.STANDARD_8_0, compute_type=compute_type, privileged=True
            ),
            environment_variables={
                "REPOSITORY_URI": codebuild.BuildEnvironmentVariable(value=self.repository.repository_uri)
            },
            timeout=build_timeout,
            queued_timeout=QUEUED_TIMEOUT,
            encryption_key=key,
            logging=codebuild.LoggingOptions(
                cloud_watch=codebuild.CloudWatchLoggingOptions(log_group=self.build_log_group)
            ),
        )
        """The CodeBuild project that builds and pushes the image."""
        self._grant_build()

        self.provider = self._provider(cluster_name, log_retention, removal_policy)
        self.resource = cdk.CustomResource(
            self,
            "Resource",
            service_token=self.provider.service_token,
            resource_type="Custom::TrainingImage",
            service_timeout=CUSTOM_RESOURCE_TIMEOUT,
            properties={
                "ProjectName": self.project.project_name,
                "RepositoryName": self.repository.repository_name,
                "RepositoryUri": self.repository.repository_uri,
                "ParameterName": self.parameter_name,
                "SpecHash": self.spec_hash,
                "BaseImage": image.base_image,
                "Cuda": image.cuda,
                "Pytorch": image.pytorch,
                "EfaInstaller": image.efa_installer,
                "AwsOfiNccl": image.aws_ofi_nccl,
                "Nccl": image.nccl,
                "ExpectedBuildMinutes": str(EXPECTED_BUILD_MINUTES),
            },
        )
        """Builds (when needed) and publishes the image; its Delete removes the SSM parameter."""
        self.resource.node.add_dependency(self.project.role)  # the build may push before the resource starts it
        self.image_uri = self.resource.get_att_string("ImageUri")
        """`<repository-uri>@sha256:<digest>` of the built image (a deploy-time token)."""

    def grant_pull(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let `grantee` (a node role) read the image parameter and pull the image."""
        self.repository.grant_pull(grantee)
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=["ssm:GetParameter"], resource_arns=[self.parameter_arn]
        )

    def _grant_build(self) -> None:
        role = self.project.role
        assert role is not None  # CodeBuild projects always have one
        self.repository.grant_pull_push(role)
        self.repository.grant(role, "ecr:DescribeImages")
        # Signing in to ECR Public (the default base image's registry) raises its pull quotas; both actions have no
        # resource-level permissions.
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["ecr-public:GetAuthorizationToken", "sts:GetServiceBearerToken"], resources=["*"]
            )
        )
        cdk.Validations.of(role).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="ecr:GetAuthorizationToken, ecr-public:GetAuthorizationToken and sts:GetServiceBearerToken have "
                "no resource-level permissions (Service Authorization Reference); they only issue registry sign-in "
                "tokens, and pushes are limited to this repository",
            ),
            *(
                cdk.Acknowledgment(
                    id=f"AwsSolutions-IAM5[Action::{action}]",
                    reason="aws-cdk-lib's read grant on the build's source: these actions apply to the one S3 asset "
                    "object (Dockerfile and buildspec) and its bucket only",
                )
                for action in ("s3:GetBucket*", "s3:GetObject*", "s3:List*")
            ),
            *(
                cdk.Acknowledgment(
                    id=f"AwsSolutions-IAM5[Action::{action}]",
                    reason="aws-cdk-lib's grant on the project's encryption key (build artifacts and cache): limited "
                    "to this one customer-managed key",
                )
                for action in ("kms:GenerateDataKey*", "kms:ReEncrypt*")
            ),
            *codebuild_default_grants(self, self.project.project_name),
        )
        privileged = (
            "Privileged mode runs the Docker daemon that builds the training image (docker build and push); the build "
            "runs only fmcluster's own buildspec and Dockerfile from its S3 asset"
        )
        cdk.Validations.of(self.project).acknowledge(cdk.Acknowledgment(id="AwsSolutions-CB3", reason=privileged))
        acknowledge_findings(
            self.project, controls=["codebuild_project_environment_privileged_check"], reason=privileged
        )
        acknowledge_findings(
            role.node.find_child("DefaultPolicy"),
            checkov=["CKV_AWS_107"],
            reason="ecr:GetAuthorizationToken, ecr-public:GetAuthorizationToken and sts:GetServiceBearerToken issue "
            "registry sign-in tokens, which docker login needs to push the image; they have no resource-level "
            "permissions, and pushes reach this repository only",
        )

    def _provider(
        self, cluster_name: str, log_retention: logs.RetentionDays, removal_policy: cdk.RemovalPolicy
    ) -> cr.Provider:
        code = lambda_code("image_build")
        on_event = self._function(
            "OnEvent",
            "handler.on_event",
            code,
            f"fmcluster {cluster_name}: starts a training-image build when the image specification changes",
            log_retention,
            removal_policy,
        )
        on_event.add_to_role_policy(
            iam.PolicyStatement(actions=["codebuild:StartBuild"], resources=[self.project.project_arn])
        )
        on_event.add_to_role_policy(
            iam.PolicyStatement(
                actions=["ssm:DeleteParameter"], resources=[self.parameter_arn, self.build_parameter_arn]
            )
        )
        on_event.add_to_role_policy(
            iam.PolicyStatement(actions=["ssm:PutParameter"], resources=[self.build_parameter_arn])
        )
        self.repository.grant(on_event, "ecr:DescribeImages")
        is_complete = self._function(
            "IsComplete",
            "handler.is_complete",
            code,
            f"fmcluster {cluster_name}: waits for the training-image build and publishes the image URI to SSM",
            log_retention,
            removal_policy,
        )
        is_complete.add_to_role_policy(
            iam.PolicyStatement(actions=["codebuild:BatchGetBuilds"], resources=[self.project.project_arn])
        )
        is_complete.add_to_role_policy(
            iam.PolicyStatement(actions=["ssm:PutParameter"], resources=[self.parameter_arn, self.build_parameter_arn])
        )
        is_complete.add_to_role_policy(
            iam.PolicyStatement(actions=["ssm:DeleteParameter"], resources=[self.build_parameter_arn])
        )
        self.repository.grant(is_complete, "ecr:DescribeImages")
        self.on_event_function, self.is_complete_function = on_event, is_complete

        framework_logs = logs.LogGroup(self, "ProviderLogs", retention=log_retention, removal_policy=removal_policy)
        on_event_role = _lambda_role(
            self, "ProviderOnEventRole", "custom-resource framework (on event)", framework_logs
        )
        waiter_role = _lambda_role(self, "ProviderWaiterRole", "custom-resource framework (waiter)", framework_logs)
        provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=on_event,
            is_complete_handler=is_complete,
            query_interval=QUERY_INTERVAL,
            total_timeout=PROVIDER_TIMEOUT,
            framework_on_event_role=on_event_role,
            framework_complete_and_timeout_role=waiter_role,
            log_group=framework_logs,
        )
        for name in ("framework-onEvent", "framework-isComplete", "framework-onTimeout", "waiter-state-machine"):
            quiet_redundant_depends_on(provider.node.find_child(name))
        self._acknowledge_provider(provider, on_event, is_complete, on_event_role, waiter_role)
        return provider

    def _function(
        self,
        construct_id: str,
        handler: str,
        code: lambda_.Code,
        description: str,
        log_retention: logs.RetentionDays,
        removal_policy: cdk.RemovalPolicy,
    ) -> lambda_.Function:
        log_group = logs.LogGroup(self, f"{construct_id}Logs", retention=log_retention, removal_policy=removal_policy)
        function = lambda_.Function(
            self,
            construct_id,
            runtime=LAMBDA_RUNTIME,
            handler=handler,
            code=code,
            role=_lambda_role(self, f"{construct_id}Role", description, log_group),
            log_group=log_group,
            timeout=cdk.Duration.seconds(60),
            memory_size=256,
            description=description[:256],
        )
        quiet_redundant_depends_on(function)
        return function

    def _acknowledge_provider(
        self,
        provider: cr.Provider,
        on_event: lambda_.Function,
        is_complete: lambda_.Function,
        on_event_role: iam.Role,
        waiter_role: iam.Role,
    ) -> None:
        handler_versions = [nag_form(self, function.function_arn) for function in (on_event, is_complete)]
        for role in (on_event_role, waiter_role):
            cdk.Validations.of(role).acknowledge(
                *(
                    cdk.Acknowledgment(
                        id=f"AwsSolutions-IAM5[Resource::{arn}:*]",
                        reason="CDK's Provider framework invokes the image handlers (on_event, is_complete) and may "
                        "invoke any of their versions; the wildcard covers versions of these two functions only",
                    )
                    for arn in handler_versions
                )
            )
        state_machine = provider.node.find_child("waiter-state-machine")
        framework = [
            nag_form(self, provider.node.find_child(name).function_arn)  # type: ignore[attr-defined]
            for name in ("framework-isComplete", "framework-onTimeout")
        ]
        cdk.Validations.of(state_machine).acknowledge(
            *(
                cdk.Acknowledgment(
                    id=f"AwsSolutions-IAM5[Resource::{arn}:*]",
                    reason="The Provider framework's waiter invokes its own isComplete and onTimeout functions and may "
                    "invoke any of their versions; the wildcard covers versions of these two functions only",
                )
                for arn in framework
            ),
            cdk.Acknowledgment(
                id="AwsSolutions-SF1",
                reason="The waiter only calls is_complete every 30 s; each call logs the build's status as JSON to the "
                "is_complete function's log group, and Step Functions keeps the execution history for 90 days",
            ),
            cdk.Acknowledgment(
                id="AwsSolutions-SF2",
                reason="The Provider framework offers no tracing option for its waiter; a single-step polling loop "
                "gains nothing from X-Ray, and every poll is logged by is_complete",
            ),
        )
        cdk.Validations.of(provider).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-L1",
                reason="The Provider framework's runtime is chosen and updated by aws-cdk-lib, not by this project",
            ),
        )
        acknowledge_deploy_time_functions(
            on_event, "starts the image build (codebuild:StartBuild) and checks the repository (ecr:DescribeImages)"
        )
        acknowledge_deploy_time_functions(
            is_complete, "polls the build (codebuild:BatchGetBuilds) and writes the image URI to SSM"
        )
        acknowledge_deploy_time_functions(
            provider, "invokes the image handlers and waits for the build", resource_type="AWS::Lambda::Function"
        )
        acknowledge_findings(
            state_machine,
            controls=["step_functions_state_machine_logging_enabled_check"],
            reason="The Provider framework's waiter only calls is_complete every 30 s; each call logs the build's "
            "status to the is_complete function's (encrypted) log group, and Step Functions keeps the execution "
            "history for 90 days",
        )
        acknowledge_findings(
            state_machine,
            controls=["step_functions_state_machine_tracing_enabled_check"],
            reason="The Provider framework offers no tracing option for its waiter; a single-step polling loop gains "
            "nothing from X-Ray, and every poll is logged by is_complete",
        )


def _lambda_role(scope: Construct, construct_id: str, description: str, log_group: logs.ILogGroup) -> iam.Role:
    """A role for one function: it writes to its own log group and nothing else until granted more."""
    role = iam.Role(
        scope, construct_id, assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"), description=description[:1000]
    )
    log_group.grant_write(role)
    return role


def _validated(cluster_name: str, image: object, max_image_count: int, build_timeout: cdk.Duration) -> None:
    problems: list[Problem] = []
    if not is_token(cluster_name) and (problem := cluster_name_problem(cluster_name)):
        problems.append(Problem("cluster_name", problem))
    if not isinstance(image, Image):
        problems.append(
            Problem(
                "image",
                f"must be an fmcluster.config.models.Image (e.g. Image(cuda='12.8', ...)); got {type(image).__name__}",
            )
        )
    if not isinstance(max_image_count, int) or isinstance(max_image_count, bool) or not 1 <= max_image_count <= 1000:
        problems.append(Problem("max_image_count", f"must be a whole number from 1 to 1000; got {max_image_count!r}"))
    minutes = build_timeout.to_seconds() / 60 if isinstance(build_timeout, cdk.Duration) else None
    if minutes is None or not 10 <= minutes <= MAX_BUILD_TIMEOUT.to_minutes():
        shown = f"{minutes:g} minutes" if minutes is not None else repr(build_timeout)
        problems.append(
            Problem(
                "build_timeout",
                f"must be a Duration of 10 to {MAX_BUILD_TIMEOUT.to_minutes()} minutes (CloudFormation "
                f"waits at most an hour for the image); got {shown}",
            )
        )
    raise_if_any("TrainingImage", problems)
