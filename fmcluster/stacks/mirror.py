"""The mirror stack: the artifact mirror every node installs from, in a bucket of its own, filled at deploy."""

from __future__ import annotations

import aws_cdk as cdk
import aws_cdk.aws_s3 as s3
from constructs import Construct

from fmcluster.config import ClusterConfig
from fmcluster.constructs.acknowledgments import acknowledge_findings
from fmcluster.constructs.buckets import (
    REPLACED_VERSION_EXPIRATION,
    S3_LOGS_USE_BUCKET_POLICY,
    access_logs_bucket,
    acknowledge_no_object_lock,
    private_bucket,
    quiet_auto_delete_provider,
)
from fmcluster.constructs.keys import customer_key, encrypt_log_groups
from fmcluster.constructs.mirror import ArtifactMirror
from fmcluster.stacks.outputs import add_output


def mirror_has_own_stack(config: ClusterConfig) -> bool:
    """Where the artifact mirror lives follows `orchestrator.node_image`: with `baked`, in the mirror stack, so the
    image build waits for the mirror job only and runs beside the storage stack; with `boot` (the default, and every
    cluster deployed before the mirror stack existed), in the storage stack under the data bucket, as it always was,
    so an fmcluster upgrade changes no node group's lifecycle arguments (its URI) and no node is replaced for it.
    Switching node_image replaces every node's image anyway, so the mirror's move then costs nothing more.

    >>> from fmcluster.config import load
    >>> mirror_has_own_stack(load("examples/quickstart.yaml")), mirror_has_own_stack(load("examples/pcs-own-vpc.yaml"))
    (False, True)
    """
    return config.orchestrator.node_image == "baked"


class MirrorStack(cdk.Stack):
    """`ArtifactMirror` in its own bucket (KMS key, access-log bucket), depending on no other stack; only with
    `orchestrator.node_image: baked` (`mirror_has_own_stack`: with `boot` the storage stack holds the mirror).

    A stack of its own so that what installs from the mirror waits only for the mirror job (minutes): the node-image
    build runs beside the storage stack (FSx creation, the long pole), not after it (DESIGN.md, Flow: storage and the
    image builds never wait for each other). The cluster stacks give `mirror.uri` to the nodes and attach
    `mirror.read_policy` to the node roles; the node-image stack does the same for its build instances. The bucket
    holds copies of public release files only, each checked against the digest pinned in the package, which the job
    can always copy again; it is kept or deleted with `storage.retain_on_delete`, like every bucket of the cluster.
    """

    def __init__(self, scope: Construct, construct_id: str, *, config: ClusterConfig, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        removal_policy = cdk.RemovalPolicy.RETAIN if config.storage.retain_on_delete else cdk.RemovalPolicy.DESTROY
        self.node.set_context(S3_LOGS_USE_BUCKET_POLICY, True)  # log delivery by bucket policy, never by ACL
        self.key = customer_key(
            self, "Key", removal_policy=removal_policy, description=f"fmcluster {construct_id}: the artifact mirror"
        )
        """Encrypts the mirror bucket and the log groups of this stack and the node-image stack."""
        logs_bucket = access_logs_bucket(self, "LogsBucket", removal_policy)
        self.bucket = private_bucket(
            self,
            "Bucket",
            self.key,
            removal_policy,
            logs_bucket=logs_bucket,
            log_prefix="mirror/",
            versioned=True,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-replaced-versions",
                    noncurrent_version_expiration=REPLACED_VERSION_EXPIRATION,
                    abort_incomplete_multipart_upload_after=cdk.Duration.days(1),
                )
            ],
        )
        for bucket in (logs_bucket, self.bucket):
            acknowledge_no_object_lock(bucket)
            acknowledge_findings(
                bucket,
                controls=["s3_event_notifications_enabled_check"],
                reason="Nothing consumes this bucket's object events: the mirror job writes it at deploy, nodes "
                "read it at boot",
            )
        if removal_policy == cdk.RemovalPolicy.DESTROY:
            quiet_auto_delete_provider(self)
        self.mirror = ArtifactMirror(self, "Mirror", bucket=self.bucket, key=self.key, removal_policy=removal_policy)
        """Every file a node installs, copied in by a job outside the VPC at deploy."""
        encrypt_log_groups(self, self.key)
        add_output(self, "mirror", "MirrorUri", self.mirror.uri)
