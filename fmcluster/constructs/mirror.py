"""ArtifactMirror: the project's in-account copy of every file a node installs (`fmcluster.mirror`).

A CodeBuild project without a VPC configuration (so it reaches the upstream release hosts, which the nodes never do)
runs fmcluster/mirror/job.py over fmcluster/mirror/artifacts.json: each pinned artifact is downloaded, checked against
the SHA-256 kept in the package and copied to `s3://<bucket>/fmcluster-mirror/<name>/<version>/<file>`. A custom
resource (Provider framework, fmcluster/lambdas/artifact_mirror) starts the build at deploy and waits for it, so a
stack that reads `uri` (the cluster stacks give it to every node) deploys only once the mirror is filled; its only
property that changes is the list's hash, so an unchanged list runs nothing on update. `read_policy` is what a node
(or an image build) in another stack needs to install from it: a managed policy of the mirror's own stack, which
those roles attach, so its grant and its acknowledgment name the bucket as this stack does.
"""

from __future__ import annotations

from functools import cached_property
from importlib.resources import files

import aws_cdk as cdk
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from fmcluster import mirror
from fmcluster.constructs.acknowledgments import codebuild_default_grants, nag_form
from fmcluster.constructs.functions import provider_with_handler

BUILD_TIMEOUT = cdk.Duration.minutes(12)
"""The job copies ~1 GB at most (every artifact of the list, both architectures); the handler waits 13 minutes."""


class ArtifactMirror(Construct):
    """The mirror job and its deploy-time run, writing into `bucket` under `fmcluster-mirror/`.

    Example::

        mirror = ArtifactMirror(stack, "Mirror", bucket=bucket, key=key)
        node_role.add_managed_policy(mirror.read_policy)  # a role of another stack
        PcsSlurmCluster(..., artifact_mirror=mirror.uri)  # nodes install from it only

    Args:
        bucket: the bucket the mirror lives in, under `fmcluster-mirror/` (the project's data bucket with
            `node_image: boot`, the mirror stack's own bucket with `baked`).
        key: the bucket's KMS key (the job encrypts what it uploads with it, `read_policy` decrypts through S3).
            Omitted: the bucket is not KMS-encrypted.
        log_retention: how long the job's logs are kept. Omitted: one year.
        removal_policy: what `cdk destroy` does to the job's log groups. Omitted: RETAIN.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bucket: s3.IBucket,
        key: kms.IKey | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, construct_id)
        target = f"s3://{bucket.bucket_name}/{mirror.MIRROR_PREFIX}"
        source = s3_assets.Asset(
            self, "Source", path=str(files("fmcluster") / "mirror"), exclude=["__pycache__", "*.pyc"]
        )
        self.log_group = logs.LogGroup(self, "Logs", retention=log_retention)
        self.project = codebuild.Project(
            self,
            "Job",
            description="fmcluster: copies the pinned node artifacts (enroot, pyxis, exporters) into the mirror",
            source=codebuild.Source.s3(bucket=source.bucket, path=source.s3_object_key),
            build_spec=codebuild.BuildSpec.from_source_filename("buildspec.yml"),
            environment=codebuild.BuildEnvironment(
                build_image=codebuild.LinuxBuildImage.STANDARD_8_0, compute_type=codebuild.ComputeType.SMALL
            ),
            environment_variables={"MIRROR_URI": codebuild.BuildEnvironmentVariable(value=target)},
            timeout=BUILD_TIMEOUT,
            encryption_key=key,
            logging=codebuild.LoggingOptions(cloud_watch=codebuild.CloudWatchLoggingOptions(log_group=self.log_group)),
        )
        role = self.project.role
        assert role is not None
        objects = bucket.arn_for_objects(f"{mirror.MIRROR_PREFIX}/*")
        role.add_to_principal_policy(iam.PolicyStatement(actions=["s3:GetObject", "s3:PutObject"], resources=[objects]))
        if key is not None:
            key.grant_encrypt_decrypt(role)
        self._acknowledge(role, objects)

        handler, provider = provider_with_handler(
            self,
            "RunJob",
            "Provider",
            code="artifact_mirror",
            timeout=cdk.Duration.minutes(14),
            description="Runs the artifact mirror job (CodeBuild) at deploy and waits for it",
            calls="starts and polls the mirror job (codebuild:StartBuild, codebuild:BatchGetBuilds)",
        )
        handler.add_to_role_policy(
            iam.PolicyStatement(
                actions=["codebuild:StartBuild", "codebuild:BatchGetBuilds"], resources=[self.project.project_arn]
            )
        )
        self.resource = cdk.CustomResource(
            self,
            "Resource",
            service_token=provider.service_token,
            resource_type="Custom::ArtifactMirror",
            properties={"ProjectName": self.project.project_name, "MirrorUri": target, "ListHash": mirror.list_hash()},
        )
        self.resource.node.add_dependency(role)
        for child in self.node.find_all():  # the job's, its handler's and the provider framework's
            if isinstance(child, logs.LogGroup):
                child.apply_removal_policy(removal_policy)
        self.uri = self.resource.get_att_string("Uri")
        """s3://<bucket>/fmcluster-mirror, available once the job has filled it (a deploy-time token)."""
        self._objects, self._key = objects, key

    @cached_property
    def read_policy(self) -> iam.ManagedPolicy:
        """Read the mirror (and decrypt it through S3): attach it to the roles of nodes and image builds in other
        stacks. Made on first use only, so a mirror whose readers already read its bucket otherwise (the storage
        stack's `node_data_policy`, with `orchestrator.node_image: boot`) adds no policy."""
        stack, objects, key = cdk.Stack.of(self), self._objects, self._key
        statements = [iam.PolicyStatement(actions=["s3:GetObject"], resources=[objects])]
        if key is not None:
            statements.append(
                iam.PolicyStatement(
                    actions=["kms:Decrypt"],
                    resources=[key.key_arn],
                    conditions={"StringEquals": {"kms:ViaService": f"s3.{stack.region}.{stack.url_suffix}"}},
                )
            )
        policy = iam.ManagedPolicy(
            self,
            "ReadPolicy",
            description="fmcluster: read the artifact mirror (what nodes and node-image builds install)",
            statements=statements,
        )
        cdk.Validations.of(policy).acknowledge(
            cdk.Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::{nag_form(self, objects)}]",
                reason="Nodes and image builds read only the mirror's own prefix (fmcluster-mirror/) of its bucket, "
                "each file under a key its name and version choose (fmcluster/mirror/artifacts.json)",
            )
        )
        return policy

    def _acknowledge(self, role: iam.IRole, objects: str) -> None:
        cdk.Validations.of(role).acknowledge(
            cdk.Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::{nag_form(self, objects)}]",
                reason="The job reads and writes only the mirror's own prefix (fmcluster-mirror/) of its bucket",
            ),
            *(
                cdk.Acknowledgment(
                    id=f"AwsSolutions-IAM5[Action::{action}]",
                    reason="aws-cdk-lib's read grant on the job's source asset (job.py, artifacts.json, buildspec) "
                    "and the KMS grant on the bucket's key: limited to that one object and that one key",
                )
                for action in ("s3:GetBucket*", "s3:GetObject*", "s3:List*", "kms:GenerateDataKey*", "kms:ReEncrypt*")
            ),
            *codebuild_default_grants(self, self.project.project_name),
        )
