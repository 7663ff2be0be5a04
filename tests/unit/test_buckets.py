"""ProjectBuckets: the KMS key, the data, checkpoint and server-access-log buckets, RETAIN vs DESTROY,
cdk-nag and cfn-lint. One app with a stack per variant, built and synthesized once for the module."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_kms as kms

from fmcluster.constructs.buckets import ProjectBuckets
from tests import support

pytestmark = pytest.mark.synth

ENV = cdk.Environment(account="123456789012", region="us-east-1")
TLS_ONLY = {"Bool": {"aws:SecureTransport": "false"}}


@dataclass
class Variant(support.StackTemplate):
    buckets: ProjectBuckets | None = None


@dataclass
class Built:
    synthesized: support.Synthesized
    variants: dict[str, Variant]


def synthesize(outdir: Path, context: dict, variants: dict[str, dict]) -> Built:
    """One stack per variant, each with ProjectBuckets(**props); nag-checked and synthesized into `outdir`."""
    app = support.app(outdir, context)
    stacks, made = {}, {}
    for name, props in variants.items():
        stacks[name] = cdk.Stack(app, f"Buckets{name.title()}", env=ENV)
        if props.get("key") == "given":
            props = {**props, "key": kms.Key(stacks[name], "SharedKey", enable_key_rotation=True)}
        made[name] = ProjectBuckets(stacks[name], "Buckets", **props)
    synthesized = support.synthesize(app, list(stacks.values()))
    return Built(
        synthesized=synthesized,
        variants={name: Variant(**vars(synthesized.view(stacks[name])), buckets=made[name]) for name in variants},
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    return synthesize(
        tmp_path_factory.mktemp("buckets"),
        support.CDK_JSON_CONTEXT,
        {"kept": {}, "dropped": {"removal_policy": cdk.RemovalPolicy.DESTROY}, "given": {"key": "given"}},
    )


@pytest.fixture(scope="module")
def unflagged(tmp_path_factory) -> Built:
    """A library user's app: none of cdk.json's feature flags."""
    return synthesize(tmp_path_factory.mktemp("buckets-unflagged"), {}, {"unflagged": {}})


@pytest.fixture(scope="module")
def kept(built) -> Variant:
    return built.variants["kept"]


@pytest.fixture(scope="module")
def dropped(built) -> Variant:
    return built.variants["dropped"]


def bucket_policy(variant: Variant, bucket) -> list[dict]:
    return variant.props(bucket.policy)["PolicyDocument"]["Statement"]


def test_a_customer_key_with_rotation_is_created_and_retained(kept):
    key = kept.buckets.key
    assert isinstance(key, kms.Key) and key.node.scope is kept.buckets
    resource = kept.resource(key)
    assert resource["Properties"]["EnableKeyRotation"] is True
    assert (resource["DeletionPolicy"], resource["UpdateReplacePolicy"]) == ("Retain", "Retain")


def test_a_given_key_is_used_and_no_other_is_created(built):
    given = built.variants["given"]
    assert given.buckets.key.node.id == "SharedKey"
    assert len(given.of_type("AWS::KMS::Key")) == 1
    for bucket in (given.buckets.data_bucket, given.buckets.checkpoints_bucket):
        encryption = given.props(bucket)["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
        assert encryption["ServerSideEncryptionByDefault"]["KMSMasterKeyID"] == given.ref(given.buckets.key.key_arn)


@pytest.mark.parametrize("name", ["data_bucket", "checkpoints_bucket"])
def test_data_and_checkpoints_use_the_key_with_bucket_keys_tls_only_and_log_access(kept, name):
    bucket = getattr(kept.buckets, name)
    props = kept.props(bucket)
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"] == [
        {
            "BucketKeyEnabled": True,
            "ServerSideEncryptionByDefault": {
                "SSEAlgorithm": "aws:kms",
                "KMSMasterKeyID": kept.ref(kept.buckets.key.key_arn),
            },
        }
    ]
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert props["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    prefix = {"data_bucket": "data/", "checkpoints_bucket": "checkpoints/"}[name]
    assert props["LoggingConfiguration"] == {
        "DestinationBucketName": kept.ref(kept.buckets.logs_bucket.bucket_name),
        "LogFilePrefix": prefix,
    }
    deny = [s for s in bucket_policy(kept, bucket) if s["Effect"] == "Deny"]
    assert [(s["Action"], s["Principal"], s["Condition"]) for s in deny] == [("s3:*", {"AWS": "*"}, TLS_ONLY)]


def test_checkpoints_are_versioned_and_old_versions_age_out(kept):
    props = kept.props(kept.buckets.checkpoints_bucket)
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert props["LifecycleConfiguration"]["Rules"] == [
        {
            "Id": "abort-incomplete-multipart-uploads",
            "Status": "Enabled",
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7},
        },
        {
            "Id": "age-out-old-checkpoint-versions",
            "Status": "Enabled",
            "NoncurrentVersionTransitions": [{"StorageClass": "GLACIER_IR", "TransitionInDays": 30}],
            "NoncurrentVersionExpiration": {"NoncurrentDays": 365},
        },
    ]


def test_data_bucket_drops_incomplete_uploads_and_keeps_replaced_versions_30_days(kept):
    # CT.S3.PR.11 (versioning) and CT.S3.PR.3 (versioning with a lifecycle policy), cdk-validator-cfnguard 0.0.62
    props = kept.props(kept.buckets.data_bucket)
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert props["LifecycleConfiguration"]["Rules"] == [
        {
            "Id": "abort-incomplete-multipart-uploads",
            "Status": "Enabled",
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7},
        },
        {
            "Id": "expire-replaced-dataset-versions",
            "Status": "Enabled",
            "NoncurrentVersionExpiration": {"NoncurrentDays": 30},
        },
    ]


def test_logs_bucket_uses_s3_managed_keys_and_admits_only_the_logging_service(kept):
    logs = kept.buckets.logs_bucket
    props = kept.props(logs)
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"] == [
        {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
    ]
    assert props["PublicAccessBlockConfiguration"]["RestrictPublicBuckets"] is True
    assert "LoggingConfiguration" not in props
    statements = bucket_policy(kept, logs)
    assert [s["Condition"] for s in statements if s["Effect"] == "Deny"] == [TLS_ONLY]
    writers = [s for s in statements if s["Effect"] == "Allow"]
    assert {json.dumps(s["Principal"]) for s in writers} == {json.dumps({"Service": "logging.s3.amazonaws.com"})}
    assert {s["Action"] for s in writers} == {"s3:PutObject"}
    sources = {json.dumps(s["Condition"]["ArnLike"]["aws:SourceArn"]) for s in writers}
    assert sources == {
        json.dumps(kept.ref(bucket.bucket_arn))
        for bucket in (kept.buckets.data_bucket, kept.buckets.checkpoints_bucket)
    }


def test_retain_keeps_key_and_buckets_and_adds_no_auto_delete_machinery(kept):
    for kind in ("AWS::S3::Bucket", "AWS::KMS::Key"):
        for name, resource in kept.of_type(kind).items():
            assert (resource["DeletionPolicy"], resource["UpdateReplacePolicy"]) == ("Retain", "Retain"), name
    assert len(kept.of_type("AWS::S3::Bucket")) == 3
    for kind in ("Custom::S3AutoDeleteObjects", "AWS::Lambda::Function", "AWS::IAM::Role"):
        assert kept.of_type(kind) == {}, kind


def test_destroy_empties_and_deletes_buckets_and_schedules_the_key_for_deletion(dropped):
    for kind in ("AWS::S3::Bucket", "AWS::KMS::Key"):
        for name, resource in dropped.of_type(kind).items():
            assert (resource["DeletionPolicy"], resource["UpdateReplacePolicy"]) == ("Delete", "Delete"), name
    custom = dropped.of_type("Custom::S3AutoDeleteObjects").values()
    buckets = (dropped.buckets.data_bucket, dropped.buckets.checkpoints_bucket, dropped.buckets.logs_bucket)
    assert sorted(json.dumps(r["Properties"]["BucketName"]) for r in custom) == sorted(
        json.dumps(dropped.ref(bucket.bucket_name)) for bucket in buckets
    )
    (handler,) = dropped.of_type("AWS::Lambda::Function").values()
    assert handler["Metadata"]["cfn-lint"] == {"config": {"ignore_checks": ["W3005"]}}


def test_nothing_is_acknowledged(built):
    # The logs bucket has no access logs of its own, but cdk-nag accepts a bucket that is the access-log
    # destination of others (AwsSolutions-S1), so even that needs no acknowledgment.
    acknowledged = [
        (construct.node.path, rule)
        for construct in built.synthesized.app.node.find_all()
        for entry in construct.node.metadata
        if entry.type == cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY
        for rule in entry.data
        if rule.startswith("AwsSolutions-")  # the Control Tower acknowledgments are held by tests/gates
    ]
    assert acknowledged == []


def test_log_delivery_is_granted_by_bucket_policy_even_without_the_feature_flag(unflagged):
    variant = unflagged.variants["unflagged"]
    logs = variant.props(variant.buckets.logs_bucket)
    assert "AccessControl" not in logs
    assert logs["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    writers = [s for s in bucket_policy(variant, variant.buckets.logs_bucket) if s["Effect"] == "Allow"]
    assert [s["Principal"] for s in writers] == [{"Service": "logging.s3.amazonaws.com"}] * 2


def test_cdk_nag_finds_nothing_unacknowledged(built, unflagged):
    assert built.synthesized.nag == []
    assert unflagged.synthesized.nag == []


def test_cfn_lint_reports_no_error_and_no_warning(built, unflagged):
    for result in (built, unflagged):
        assert result.synthesized.lint() == {name: [] for name in result.synthesized.stacks}


def test_node_access_reads_data_and_writes_only_checkpoints():
    """The one decision on what nodes may do: the data bucket is read-only (nodes read datasets and the
    observability mirror; nothing on a node writes there), checkpoints are read, written and pruned (nccl-tests
    logs too), and the key is usable only through S3 in the stack's region (kms:ViaService, AWS KMS developer
    guide, "kms:ViaService")."""
    from aws_cdk import aws_iam as iam
    from aws_cdk.assertions import Template

    stack = cdk.Stack(cdk.App(), "Grant", env=ENV)
    buckets = ProjectBuckets(stack, "Buckets")
    role = iam.Role(stack, "NodeRole", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    buckets.grant_node_access(role)
    (policy,) = Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
    statements = {
        json.dumps(stack.resolve(s["Resource"]), sort_keys=True): (s["Action"], s.get("Condition"))
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
    }

    def arn(bucket, suffix=""):
        return json.dumps({"Fn::Join": ["", [stack.resolve(bucket.bucket_arn), suffix]]} if suffix else
                          stack.resolve(bucket.bucket_arn), sort_keys=True)  # fmt: skip

    assert statements[arn(buckets.data_bucket, "/*")] == ("s3:GetObject", None)
    assert statements[arn(buckets.checkpoints_bucket, "/*")] == (
        ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
        None,
    )
    assert statements[json.dumps([stack.resolve(buckets.data_bucket.bucket_arn),
                                  stack.resolve(buckets.checkpoints_bucket.bucket_arn)], sort_keys=True)] == (
        "s3:ListBucket", None)  # fmt: skip
    kms_actions, kms_condition = statements[json.dumps(stack.resolve(buckets.key.key_arn), sort_keys=True)]
    assert kms_actions == ["kms:Decrypt", "kms:GenerateDataKey"]
    assert kms_condition == {
        "StringEquals": {"kms:ViaService": {"Fn::Join": ["", ["s3.us-east-1.", {"Ref": "AWS::URLSuffix"}]]}}
    }
    assert len(statements) == 4
