"""The AMI, dataset buckets and the CDK bootstrap stack, against stubbed EC2, S3 and CloudFormation responses."""

from __future__ import annotations

from fmcluster.live.bootstrap import check_bootstrap
from fmcluster.live.data import check_bucket
from fmcluster.live.images import check_image
from fmcluster.live.instances import InstanceTypes
from tests.live.conftest import QUICKSTART, config_of
from tests.live.responses import (
    ACCOUNT,
    bootstrap_stack,
    bucket_encryption,
    head_bucket,
    image,
    instance_types,
    listing,
)

AMI = "ami-0123456789abcdef0"
PCS_AMI = f"""\
name: b300
region: us-west-2
availability_zone_id: usw2-az2
compute:
  - {{name: b300, instance_type: p6-b300.48xlarge, count: 4}}
orchestrator: {{type: pcs, ami_id: {AMI}, login_instance_type: m5.4xlarge}}
storage:
  lustre:
    repositories:
      - {{path: /datasets, s3_uri: "s3://my-datasets/tokenized/"}}
"""


def render(problems):
    return [p.render("cluster.yaml") for p in problems]


def image_messages(stubs, response=None, error=None, arm64=()):
    config = config_of(PCS_AMI)
    stub = stubs("us-west-2")
    if error:
        stub.error("ec2", "DescribeImages", error, f"The image id '[{AMI}]' does not exist", params={"ImageIds": [AMI]})
    else:
        stub.ok("ec2", "DescribeImages", response, {"ImageIds": [AMI]})
        names = ["m5.4xlarge", "p6-b300.48xlarge"]
        stub.ok("ec2", "DescribeInstanceTypes", instance_types(*names, arm64=arm64), {"InstanceTypes": names})
    aws = stub.aws()
    return render(check_image(config, aws, InstanceTypes(aws, ["p6-b300.48xlarge", "m5.4xlarge"]), AMI))


def test_an_available_x86_image(stubs):
    assert image_messages(stubs, image(AMI)) == []


def test_a_missing_image(stubs):
    assert image_messages(stubs, error="InvalidAMIID.NotFound") == [
        "cluster.yaml: orchestrator.ami_id: ami-0123456789abcdef0 not found in us-west-2, or not shared with this "
        "account (AMIs are regional: copy it with aws ec2 copy-image)"
    ]


def test_an_arm64_image_for_x86_nodes_that_is_not_available(stubs):
    assert image_messages(stubs, image(AMI, architecture="arm64", state="deregistered")) == [
        "cluster.yaml: orchestrator.ami_id: ami-0123456789abcdef0 is deregistered, not available",
        "cluster.yaml: orchestrator.ami_id: ami-0123456789abcdef0 is arm64, but p6-b300.48xlarge, m5.4xlarge run "
        "x86_64; use an x86_64 image",
    ]


BUCKET = {"Bucket": "my-datasets"}
LIST = {"Bucket": "my-datasets", "Prefix": "tokenized/", "MaxKeys": 1}


def bucket_messages(stubs, *, region="us-west-2", keys=1, encryption=None, head_error=None, list_denied=False):
    stub = stubs("us-west-2")
    if head_error:
        stub.error("s3", "HeadBucket", head_error, "", status=int(head_error), params=BUCKET)
    else:
        stub.ok("s3", "HeadBucket", head_bucket(region), BUCKET)
        if list_denied:
            stub.error("s3", "ListObjectsV2", "AccessDenied", "Access Denied", status=403, params=LIST)
        else:
            stub.ok("s3", "ListObjectsV2", listing("my-datasets", "tokenized/", keys), LIST)
        stub.ok("s3", "GetBucketEncryption", encryption or bucket_encryption(), BUCKET)
    return render(check_bucket(config_of(PCS_AMI), stub.aws(), 0, "s3://my-datasets/tokenized/"))


def test_a_readable_bucket_in_the_region(stubs):
    assert bucket_messages(stubs) == []


def test_a_missing_bucket(stubs):
    assert bucket_messages(stubs, head_error="404") == [
        "cluster.yaml: storage.lustre.repositories[0].s3_uri: bucket my-datasets does not exist"
    ]


def test_a_bucket_the_caller_may_not_list(stubs):
    assert bucket_messages(stubs, head_error="403") == [
        "cluster.yaml: storage.lustre.repositories[0].s3_uri: warning: bucket my-datasets exists but this caller may "
        "not list it (s3:ListBucket denied); FSx reads it with its own service-linked role "
        "(AWSServiceRoleForFSxS3Access_fs-*), which the bucket policy must allow"
    ]


def test_a_bucket_in_another_region_with_an_empty_prefix_and_a_kms_key(stubs):
    key = f"arn:aws:kms:us-east-1:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    assert bucket_messages(stubs, region="us-east-1", keys=0, encryption=bucket_encryption("aws:kms", key)) == [
        "cluster.yaml: storage.lustre.repositories[0].s3_uri: warning: bucket my-datasets is in us-east-1, not "
        "us-west-2: every read crosses Regions (slower, billed as inter-Region transfer); FSx support for linking a "
        "bucket of another Region is (unconfirmed): copy the data to us-west-2 if the deploy fails",
        "cluster.yaml: storage.lustre.repositories[0].s3_uri: warning: nothing under s3://my-datasets/tokenized/ yet; "
        "/fsx shows what is there when the link is created (and imports what arrives later)",
        f"cluster.yaml: storage.lustre.repositories[0].s3_uri: note: bucket my-datasets is encrypted with KMS key "
        f"{key}: its key policy must let FSx's service-linked role (AWSServiceRoleForFSxS3Access_fs-*) use it "
        "(kms:Decrypt; kms:GenerateDataKey for export)",
    ]


def test_a_listing_denied_names_the_action(stubs):
    assert bucket_messages(stubs, list_denied=True) == [
        "cluster.yaml: storage.lustre.repositories[0].s3_uri: not checked: listing s3://my-datasets/tokenized/: "
        "access denied to s3:ListBucket (the read-only policy in fmcluster's README grants it)"
    ]


STACK = {"StackName": "CDKToolkit"}


def bootstrap_messages(stubs, response=None, error=None):
    stub = stubs()
    if error:
        stub.error("cloudformation", "DescribeStacks", "ValidationError", error, params=STACK)
    else:
        stub.ok("cloudformation", "DescribeStacks", response, STACK)
    return render(check_bootstrap(config_of(QUICKSTART), stub.aws(), ACCOUNT))


def test_a_bootstrapped_account(stubs):
    assert bootstrap_messages(stubs, bootstrap_stack()) == []


def test_an_account_never_bootstrapped(stubs):
    assert bootstrap_messages(stubs, error="Stack with id CDKToolkit does not exist") == [
        "cluster.yaml: region: account 123456789012 is not bootstrapped for CDK in us-east-1 (no CDKToolkit stack); "
        "run `cdk bootstrap aws://123456789012/us-east-1`"
    ]


def test_a_failed_or_old_bootstrap_stack(stubs):
    assert bootstrap_messages(stubs, bootstrap_stack(status="ROLLBACK_COMPLETE")) == [
        "cluster.yaml: region: the CDK bootstrap stack CDKToolkit is ROLLBACK_COMPLETE; fix or delete it, then run "
        "`cdk bootstrap aws://123456789012/us-east-1`"
    ]
    assert bootstrap_messages(stubs, bootstrap_stack(version="5")) == [
        "cluster.yaml: region: the CDK bootstrap stack is version 5; fmcluster's templates need 6 or later: run "
        "`cdk bootstrap aws://123456789012/us-east-1`"
    ]


def test_a_bootstrap_stack_without_a_version_is_not_checked_never_passed(stubs):
    """CDK developer guide, Bootstrapping: the stack's output BootstrapVersion carries the version; without it the
    version is unknown, which is not ok."""
    stack = bootstrap_stack()
    stack["Stacks"][0]["Outputs"] = stack["Stacks"][0]["Outputs"][:1]
    assert bootstrap_messages(stubs, stack) == [
        "cluster.yaml: region: not checked: the version of the CDK bootstrap stack CDKToolkit: it has no numeric "
        "BootstrapVersion output (None); run `cdk bootstrap aws://123456789012/us-east-1` to update it"
    ]
