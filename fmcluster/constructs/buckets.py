"""ProjectBuckets: the project's KMS key and its data, checkpoint and server-access-log buckets."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from fmcluster.constructs.acknowledgments import (
    acknowledge_deploy_time_functions,
    acknowledge_findings,
    acknowledge_wildcards,
)
from fmcluster.constructs.functions import quiet_redundant_depends_on
from fmcluster.constructs.keys import AUTO_DELETE_PROVIDER, customer_key

NONCURRENT_CHECKPOINT_TRANSITION = cdk.Duration.days(30)
"""Old checkpoint versions move to Glacier Instant Retrieval after this long (still read in milliseconds)."""
NONCURRENT_CHECKPOINT_EXPIRATION = cdk.Duration.days(365)
"""Old checkpoint versions are deleted after this long (Glacier IR bills at least 90 days; 335 remain)."""
INCOMPLETE_UPLOAD_EXPIRATION = cdk.Duration.days(7)
REPLACED_VERSION_EXPIRATION = cdk.Duration.days(30)
"""Old versions of datasets and access logs (overwritten or deleted objects) are deleted after this long."""
ACCESS_LOG_EXPIRATION = cdk.Duration.days(365)
"""Server access logs are kept for a year, as the project's log groups are."""
"""Parts of multipart uploads that never completed (a crashed checkpoint writer) go after this long."""
S3_LOGS_USE_BUCKET_POLICY = "@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy"
"""The CDK feature flag that grants S3 log delivery by bucket policy instead of the bucket's ACL."""
NODE_DATA_ACTIONS = ("s3:GetObject",)
"""Nodes only read the data bucket: datasets and, with `orchestrator.node_image: boot`, the artifact mirror."""
NODE_CHECKPOINT_ACTIONS = (
    "s3:GetObject",
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
)
"""Nodes read, write and prune checkpoints and upload nccl-tests logs (fmcluster/node/nccl-tests.sbatch); large
objects go up in multipart uploads, which s3:PutObject authorizes (S3 user guide, "Multipart upload and
permissions")."""
"""The id CDK gives, in each stack, to the custom-resource provider behind `auto_delete_objects`."""


class ProjectBuckets(Construct):
    """The project's S3 buckets: datasets, checkpoints, and the server-access logs of both.

    The data and checkpoint buckets are encrypted with a customer-managed KMS key (with S3 Bucket Keys, so
    a job reading millions of objects makes no KMS request per object, for cost and KMS quotas), accept TLS
    only, block every form of public access and write server access logs to the logs bucket. Checkpoints are
    versioned: an overwritten or deleted checkpoint stays recoverable; its old versions move to Glacier
    Instant Retrieval after 30 days and are deleted after a year. Both buckets drop the parts of
    multipart uploads that never completed after 7 days. The logs bucket uses S3-managed keys, because S3
    server access logging cannot deliver to a bucket encrypted with a KMS key; its policy lets only the S3
    logging service write, only for those two buckets, and its ACLs stay disabled whatever the app's
    feature flags.

    With `removal_policy=RETAIN` (the default) the key and every bucket survive `cdk destroy` and nothing
    else is created. With `DESTROY` the buckets are emptied and deleted (through CDK's auto-delete custom
    resource) and a key created here is scheduled for deletion.

    Example::

        buckets = ProjectBuckets(stack, "Buckets")
        buckets.grant_node_access(node_role)
        LustreStorage(stack, "Lustre", ..., data_bucket=buckets.data_bucket, kms_key=buckets.key)

    Args:
        key: the KMS key for the data and checkpoint buckets; omitted: a new customer-managed key with
            yearly automatic rotation, kept or deleted with `removal_policy`.
        removal_policy: what `cdk destroy` does to the key and the buckets; omitted: RETAIN.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        key: kms.IKey | None = None,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, construct_id)
        # Grant S3 log delivery through the logs bucket's policy, never through its ACL (ACLs stay disabled),
        # whether or not the app turned this feature flag on.
        self.node.set_context(S3_LOGS_USE_BUCKET_POLICY, True)
        destroy = removal_policy == cdk.RemovalPolicy.DESTROY
        if key is None:
            key = customer_key(
                self,
                "Key",
                removal_policy=removal_policy,
                description=f"fmcluster {cdk.Stack.of(self).stack_name}: datasets, checkpoints, Lustre",
            )
        self.key: kms.IKey = key
        """Encrypts the data and checkpoint buckets (and, in the storage stack, the file system)."""

        self.logs_bucket = access_logs_bucket(self, "LogsBucket", removal_policy)
        """Server access logs of the data and checkpoint buckets (S3-managed encryption, as logging needs); versioned,
        kept one year."""

        abort_incomplete_uploads = s3.LifecycleRule(
            id="abort-incomplete-multipart-uploads",
            abort_incomplete_multipart_upload_after=INCOMPLETE_UPLOAD_EXPIRATION,
        )
        self.data_bucket = private_bucket(
            self,
            "DataBucket",
            key,
            removal_policy,
            logs_bucket=self.logs_bucket,
            log_prefix="data/",
            versioned=True,
            lifecycle_rules=[
                abort_incomplete_uploads,
                s3.LifecycleRule(
                    id="expire-replaced-dataset-versions", noncurrent_version_expiration=REPLACED_VERSION_EXPIRATION
                ),
            ],
        )
        """Datasets; FSx for Lustre repositories without an `s3_uri` link to prefixes of this bucket. Versioned: an
        overwritten or deleted object stays recoverable for 30 days."""

        self.checkpoints_bucket = private_bucket(
            self,
            "CheckpointsBucket",
            key,
            removal_policy,
            logs_bucket=self.logs_bucket,
            log_prefix="checkpoints/",
            versioned=True,
            lifecycle_rules=[
                abort_incomplete_uploads,
                s3.LifecycleRule(
                    id="age-out-old-checkpoint-versions",
                    noncurrent_version_transitions=[
                        s3.NoncurrentVersionTransition(
                            storage_class=s3.StorageClass.GLACIER_INSTANT_RETRIEVAL,
                            transition_after=NONCURRENT_CHECKPOINT_TRANSITION,
                        )
                    ],
                    noncurrent_version_expiration=NONCURRENT_CHECKPOINT_EXPIRATION,
                ),
            ],
        )
        """Checkpoints: versioned; old versions go to Glacier Instant Retrieval at 30 days, expire at 365."""
        if destroy:
            quiet_auto_delete_provider(cdk.Stack.of(self))
        for bucket in (self.logs_bucket, self.data_bucket):
            acknowledge_findings(
                bucket,
                controls=["s3_event_notifications_enabled_check"],
                reason="Nothing consumes this bucket's object events: FSx for Lustre imports through its own data "
                "repository association, not through notifications",
            )
        acknowledge_findings(
            self.checkpoints_bucket,
            controls=["s3_event_notifications_enabled_check"],
            reason="The bucket's notification (nccl-tests/ uploads to the function that judges them) is set by CDK's "
            "notifications custom resource from the stack that holds the function (NcclValidation), so it is not in "
            "the bucket's own template",
        )
        for bucket in (self.logs_bucket, self.data_bucket, self.checkpoints_bucket):
            acknowledge_no_object_lock(bucket)

    def node_access_statements(self) -> list[iam.PolicyStatement]:
        """What a cluster node may do with the project's data, decided here once for every cluster.

        Read the data bucket (`NODE_DATA_ACTIONS`); read, write and prune the checkpoints bucket
        (`NODE_CHECKPOINT_ACTIONS`); list both; use the key only through S3 in this region.
        """
        stack = cdk.Stack.of(self)
        data, checkpoints = self.data_bucket, self.checkpoints_bucket
        return [
            iam.PolicyStatement(actions=["s3:ListBucket"], resources=[data.bucket_arn, checkpoints.bucket_arn]),
            iam.PolicyStatement(actions=list(NODE_DATA_ACTIONS), resources=[data.arn_for_objects("*")]),
            iam.PolicyStatement(actions=list(NODE_CHECKPOINT_ACTIONS), resources=[checkpoints.arn_for_objects("*")]),
            iam.PolicyStatement(
                actions=["kms:Decrypt", "kms:GenerateDataKey"],
                resources=[self.key.key_arn],
                conditions={"StringEquals": {"kms:ViaService": f"s3.{stack.region}.{stack.url_suffix}"}},
            ),
        ]

    def grant_node_access(self, grantee: iam.IGrantable) -> None:
        """Give cluster nodes (their role) `node_access_statements`, the one place node access is decided."""
        for statement in self.node_access_statements():
            grantee.grant_principal.add_to_principal_policy(statement)
        self.acknowledge_node_access(grantee.grant_principal)

    def acknowledge_node_access(self, construct: object) -> None:
        """cdk-nag's wildcard finding on `construct` (a role or policy holding `node_access_statements`)."""
        if isinstance(construct, Construct):
            acknowledge_wildcards(
                construct,
                resources=[self.data_bucket.arn_for_objects("*"), self.checkpoints_bucket.arn_for_objects("*")],
                reason="Nodes read datasets anywhere in the project's data bucket and write checkpoints and "
                "nccl-tests results anywhere in its checkpoints bucket; object keys are chosen per job",
            )


def access_logs_bucket(scope: Construct, construct_id: str, removal_policy: cdk.RemovalPolicy) -> s3.Bucket:
    """A bucket for the server access logs of buckets in `scope`: S3-managed encryption (S3 server access logging
    cannot deliver to a bucket with a KMS key), TLS only, private, versioned, logs kept one year. Set
    `S3_LOGS_USE_BUCKET_POLICY` on `scope` first, so S3 log delivery is granted by bucket policy, never by ACL."""
    bucket = s3.Bucket(
        scope,
        construct_id,
        encryption=s3.BucketEncryption.S3_MANAGED,
        enforce_ssl=True,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        versioned=True,
        lifecycle_rules=[
            s3.LifecycleRule(
                id="expire-access-logs",
                expiration=ACCESS_LOG_EXPIRATION,
                noncurrent_version_expiration=REPLACED_VERSION_EXPIRATION,
                abort_incomplete_multipart_upload_after=INCOMPLETE_UPLOAD_EXPIRATION,
            )
        ],
        removal_policy=removal_policy,
        auto_delete_objects=removal_policy == cdk.RemovalPolicy.DESTROY,
    )
    acknowledge_findings(
        bucket,
        checkov=["CKV_AWS_145"],
        controls=["s3_bucket_default_encryption_kms_check"],
        reason="S3 server access logging delivers only to buckets with S3-managed keys (SSE-S3), not SSE-KMS "
        "(S3 user guide, 'Enabling Amazon S3 server access logging')",
    )
    acknowledge_findings(
        bucket,
        checkov=["CKV_AWS_18"],
        controls=["s3_bucket_logging_enabled_check"],
        reason="The access-log bucket itself: logging it into itself would log every delivery, without end; "
        "its policy lets only the S3 logging service write",
    )
    return bucket


def private_bucket(
    scope: Construct,
    construct_id: str,
    key: kms.IKey,
    removal_policy: cdk.RemovalPolicy,
    *,
    logs_bucket: s3.IBucket,
    log_prefix: str,
    lifecycle_rules: list[s3.LifecycleRule],
    versioned: bool = False,
) -> s3.Bucket:
    """A bucket as fmcluster keeps its data: encrypted with `key` (with an S3 Bucket Key), TLS only, private, its
    server access logs under `log_prefix` of `logs_bucket`; emptied and deleted with the stack when `removal_policy`
    is DESTROY."""
    return s3.Bucket(
        scope,
        construct_id,
        encryption=s3.BucketEncryption.KMS,
        encryption_key=key,
        bucket_key_enabled=True,
        enforce_ssl=True,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        server_access_logs_bucket=logs_bucket,
        server_access_logs_prefix=log_prefix,
        versioned=versioned,
        lifecycle_rules=lifecycle_rules,
        removal_policy=removal_policy,
        auto_delete_objects=removal_policy == cdk.RemovalPolicy.DESTROY,
    )


def acknowledge_no_object_lock(bucket: s3.Bucket) -> None:
    """The Control Tower rule that wants Object Lock, acknowledged: fmcluster's buckets age objects out."""
    acknowledge_findings(
        bucket,
        controls=["s3_bucket_object_lock_enabled_check"],
        reason="Object Lock keeps object versions from deletion; datasets, checkpoints, mirrored files and logs age "
        "out by lifecycle rules and FSx for Lustre exports overwrite objects, and `ObjectLockEnabled` can only be "
        "set when a bucket is created (a retained bucket would have to be replaced)",
    )


def quiet_auto_delete_provider(stack: cdk.Stack) -> None:
    """Tell cfn-lint that the DependsOn CDK writes on its auto-delete handler is deliberate.

    CDK's custom-resource provider (one per stack, created by `auto_delete_objects`) makes its Lambda depend
    on its role explicitly as well as through `GetAtt`, which cfn-lint reports as W3005 (redundant DependsOn).
    The template is CDK's own; the redundancy is harmless.
    """
    provider = stack.node.try_find_child(AUTO_DELETE_PROVIDER)
    handler = provider.node.try_find_child("Handler") if provider is not None else None
    if isinstance(handler, cdk.CfnResource):
        quiet_redundant_depends_on(handler)
        acknowledge_deploy_time_functions(
            handler, "empties a bucket that `cdk destroy` deletes (S3 only)", resource_type="AWS::Lambda::Function"
        )
