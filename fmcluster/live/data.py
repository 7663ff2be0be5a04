"""Dataset buckets named by `storage.lustre.repositories[].s3_uri`: they exist, where they are, whether the caller
can list them, and which KMS key encrypts them.

Sources: S3 API reference (HeadBucket: 404 for a missing bucket, 403 without s3:ListBucket, BucketRegion;
ListObjectsV2; GetBucketEncryption: SSEAlgorithm, KMSMasterKeyID); FSx for Lustre user guide, "Linking your file
system to an S3 bucket" (FSx reads and writes the bucket with its service-linked role, which must be allowed to
use the bucket's KMS key).
"""

from __future__ import annotations

from functools import partial

from botocore.exceptions import ClientError

from fmcluster.config import ClusterConfig
from fmcluster.config.models import S3_URI_PATTERN
from fmcluster.live.aws import Aws, Denied, error_code
from fmcluster.live.runner import Check, denied
from fmcluster.problems import Problem, note, warning

MISSING_CODES = ("404", "NoSuchBucket")
FSX_ROLE = "AWSServiceRoleForFSxS3Access_fs-*"


def data_checks(config: ClusterConfig, aws: Aws) -> list[Check]:
    return [
        Check(
            f"bucket of {repository.s3_uri}",
            f"storage.lustre.repositories[{index}].s3_uri",
            partial(check_bucket, config, aws, index, repository.s3_uri),
        )
        for index, repository in enumerate(config.storage.repositories)
        if repository.s3_uri
    ]


def check_bucket(config: ClusterConfig, aws: Aws, index: int, uri: str) -> list[Problem]:
    path = f"storage.lustre.repositories[{index}].s3_uri"
    match = S3_URI_PATTERN.match(uri)
    assert match  # the file's own validation checked the URI
    bucket, prefix = match["bucket"], (match["prefix"] or "/").lstrip("/")
    try:
        head = aws.call("s3", "HeadBucket", Bucket=bucket)
    except ClientError as error:
        if error_code(error) in MISSING_CODES:
            return [Problem(path, f"bucket {bucket} does not exist")]
        raise
    except Denied:
        return [
            warning(
                path,
                f"bucket {bucket} exists but this caller may not list it (s3:ListBucket "
                f"denied); FSx reads it with its own service-linked role ({FSX_ROLE}), which the bucket "
                "policy must allow",
            )
        ]
    problems = []
    region = head.get("BucketRegion")
    if region and region != config.region:
        problems.append(
            warning(
                path,
                f"bucket {bucket} is in {region}, not {config.region}: every read "
                "crosses Regions (slower, billed as inter-Region transfer); FSx support for "
                "linking a bucket of another Region is (unconfirmed): copy the data to "
                f"{config.region} if the deploy fails",
            )
        )
    try:
        listing = aws.call("s3", "ListObjectsV2", Bucket=bucket, Prefix=prefix, MaxKeys=1)
        if not listing.get("KeyCount") and prefix:
            problems.append(
                warning(
                    path,
                    f"nothing under {uri} yet; /fsx shows what is there when the "
                    "link is created (and imports what arrives later)",
                )
            )
    except Denied as error:
        problems.append(denied(path, f"listing {uri}", error.action))
    try:
        rules = aws.call("s3", "GetBucketEncryption", Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"]
    except Denied as error:
        return [*problems, denied(path, f"encryption of bucket {bucket}", error.action)]
    for rule in rules:
        default = rule.get("ApplyServerSideEncryptionByDefault", {})
        if default.get("SSEAlgorithm", "").startswith("aws:kms"):
            key = default.get("KMSMasterKeyID") or "the AWS managed key aws/s3"
            problems.append(
                note(
                    path,
                    f"bucket {bucket} is encrypted with KMS key {key}: its key policy "
                    f"must let FSx's service-linked role ({FSX_ROLE}) use it (kms:Decrypt; "
                    "kms:GenerateDataKey for export)",
                )
            )
    return problems
