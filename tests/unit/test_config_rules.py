"""Every rule of the cluster-file contract (the key table in docs/cluster-file.md), one change to a valid file per case.

Each case starts from a minimal valid file (like examples/quickstart.yaml), applies one change through
`changed()` and asserts the exact lines `fmcluster validate` would print.
"""

from __future__ import annotations

import copy
import itertools
import re

import pytest
from pydantic import ValidationError

from fmcluster import catalog
from fmcluster.config import ClusterConfig, ConfigError, parse
from fmcluster.config.regions import REGIONS, az_id_prefix
from fmcluster.config.service_models import service_data

SOURCE = "cluster.yaml"
RES = "cr-0123456789abcdef0"
OTHER_RES = "cr-0fedcba9876543210"
VPC = "vpc-0123456789abcdef0"
SUBNET = "subnet-0123456789abcdef0"
OWN_VPC = {"network.vpc_id": VPC, "network.subnet_id": SUBNET}
FS_ID = "fs-0123456789abcdef0"
FS_REQUIRED = "required with storage.lustre.file_system_id (what a mount needs: aws fsx describe-file-systems shows it)"
FS_CREATED_ONLY = "only for a file system fmcluster creates; an existing one (file_system_id) is mounted as it is"


def existing_fs(**keys: str) -> dict[str, str]:
    mount = {
        "file_system_id": FS_ID,
        "dns_name": f"{FS_ID}.fsx.us-east-1.amazonaws.com",
        "mount_name": "abcdef12",
        "security_group_id": "sg-0123456789abcdef0",
        **keys,
    }
    return {f"storage.lustre.{key}": value for key, value in mount.items()}


ARN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/my-plan"
DELETE = object()

BASE: dict = {
    "name": "quickstart",
    "region": "us-east-1",
    "availability_zone_id": "use1-az6",
    "compute": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2}],
}

NOT_EC2 = "EC2 offers no such type (botocore ec2 InstanceType)"
EFA_TYPES = ", ".join(name for name, row in catalog.CATALOG.items() if row.efa_cards)
LUSTRE_EFA_CLIENTS = ", ".join(name for name, row in catalog.CATALOG.items() if row.lustre_efa_client)
TOP_KEYS = (
    "name, region, account, availability_zone_id, secondary_availability_zone_id, network, orchestrator, "
    "compute, storage, training, nccl, image, observability, compliance, users, tags"
)
GROUP_KEYS = (
    "name, instance_type, count, capacity, reservation_id, training_plan_arn, placement_group, root_volume_gib, efa, "
    "deep_health_checks, min_count, scale_down_idle_minutes, drain_before_end_minutes, health_checks"
)

_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def changed(changes: dict[str, object] | None = None) -> dict:
    """A deep copy of BASE with each 'a.b[0].c' path set to its value (DELETE removes the key)."""
    data = copy.deepcopy(BASE)
    for path, value in (changes or {}).items():
        keys: list[str | int] = [int(index) if index else key for key, index in _TOKEN.findall(path)]
        target = data
        for key, following in itertools.pairwise(keys):
            if isinstance(key, str) and key not in target:
                target[key] = [] if isinstance(following, int) else {}
            target = target[key]
        if value is DELETE:
            target.pop(keys[-1], None)
        else:
            target[keys[-1]] = copy.deepcopy(value)
    return data


def lines_for(changes: dict[str, object]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse(changed(changes), source=SOURCE)
    return caught.value.lines()


def valid(changes: dict[str, object] | None = None) -> ClusterConfig:
    return parse(changed(changes), source=SOURCE)


def group(name: str, instance_type: str = "p5.48xlarge", count: int = 1, **keys: object) -> dict:
    return {"name": name, "instance_type": instance_type, "count": count, **keys}


def repos(*entries: dict) -> dict[str, object]:
    return {"storage.lustre.repositories": list(entries)}


def rendered(expected: list[str]) -> list[str]:
    return [f"{SOURCE}: {line}" for line in expected]


PCS = {"orchestrator.type": "pcs"}
US_EAST_2 = {"region": "us-east-2", "availability_zone_id": "use2-az3"}
US_WEST_2 = {"region": "us-west-2", "availability_zone_id": "usw2-az4"}
CAPACITY_BLOCK = {**PCS, "compute[0].capacity": "capacity-block", "compute[0].reservation_id": RES}
ODCR = {**PCS, "compute[0].capacity": "odcr", "compute[0].reservation_id": RES}
TRAINING_PLAN = {"compute[0].capacity": "training-plan", "compute[0].training_plan_arn": ARN}

NAME_RULE = (
    "must be 2-24 characters of lowercase letters, digits and '-', starting with a letter and ending with a "
    "letter or digit; got "
)
GROUP_NAME_RULE = "must start with a lowercase letter, then up to 19 lowercase letters, digits or '-'; got "
AZ_NAME_RULE = (
    "is an AZ name; give the AZ ID (like {prefix}-az1): names map to different zones in each account, IDs do "
    "not (aws ec2 describe-availability-zones lists both)"
)
CIDR_FORMAT = "must be an IPv4 block like 10.0.0.0/16 with no host bits set; got "
CIDR_PRIVATE = "must be a private (RFC 1918) block in 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16; got "
RESERVATION_FORMAT = "must be a capacity reservation id like cr-0123456789abcdef0 ('cr-' and 17 hex digits); got "
ARN_FORMAT = (
    "must be a SageMaker training plan ARN like arn:aws:sagemaker:us-east-1:123456789012:training-plan/my-plan; got "
)
NO_FS_RULE = (
    "must be the file system's settings (a mapping), or 'none' for a cluster without a shared file system; got "
)
SUBNET_WITHOUT_VPC = "only with network.vpc_id: a subnet of a VPC of your own (without it fmcluster creates one)"
ML_PREFIX = "HyperPod's 'ml.' prefix is added for you"
CAPACITY_RULE = "must be 1200, 2400 or a multiple of 2400 GiB; got "
IOPS_RULE = "must be 1500, 3000, 6000, 12000 or a multiple of 12000 up to 192000; got "
PATH_PLAIN = "must be a plain absolute path of letters, digits, '.', '_', '-' and '/'; got "
PATH_ROOT = "must not be '/': link a directory such as /datasets, not the file system's root"
S3_FORMAT = "must be an S3 URI like s3://my-bucket/prefix/ with a valid bucket name; got "
NCCL_KEY = "is not an NCCL or libfabric variable; keys must match ^(NCCL|FI|OFI_NCCL)_[A-Z0-9_]+$"
NCCL_BOOL = "must be a string or a whole number; got {value} (quote it: YAML reads yes/no/true as booleans)"
LUSTRE_NO_CLIENT = (
    "an EFA-enabled file system needs a compute group with efa: true on a type that can mount it over EFA "
    f"({LUSTRE_EFA_CLIENTS}); none has one, so set efa: false"
)
EFA_LUSTRE_1000 = {
    "storage.lustre.efa": True,
    "storage.lustre.throughput_per_tib": 1000,
    "storage.lustre.capacity_gib": 4800,
}


def _p(changes: dict[str, object], expected: list[str], id: str):
    return pytest.param(changes, expected, id=id)


INVALID = [
    # --- name -------------------------------------------------------------------------------------------
    _p({"name": DELETE}, ["name: required"], "name-missing"),
    _p({"name": "a"}, ["name: " + NAME_RULE + "'a'"], "name-too-short"),
    _p({"name": "a" * 25}, ["name: " + NAME_RULE + repr("a" * 25)], "name-too-long"),
    _p({"name": "llm-"}, ["name: " + NAME_RULE + "'llm-'"], "name-trailing-dash"),
    _p({"name": "1llm"}, ["name: " + NAME_RULE + "'1llm'"], "name-starts-with-digit"),
    _p({"name": "-llm"}, ["name: " + NAME_RULE + "'-llm'"], "name-starts-with-dash"),
    _p({"name": "Llm"}, ["name: " + NAME_RULE + "'Llm'"], "name-uppercase"),
    _p({"name": "llm_pretrain"}, ["name: " + NAME_RULE + "'llm_pretrain'"], "name-underscore"),
    _p({"name": 12}, ["name: must be a string (quote it); got 12"], "name-number"),
    # --- region -----------------------------------------------------------------------------------------
    _p({"region": DELETE}, ["region: required"], "region-missing"),
    _p(
        {"region": "us-east-9"},
        ["region: must be an AWS region code like us-east-1; got 'us-east-9'"],
        "region-unknown",
    ),
    _p(
        {"region": "US-EAST-1"},
        ["region: must be an AWS region code like us-east-1; got 'US-EAST-1'"],
        "region-uppercase",
    ),
    _p(
        {"region": "us-east-1a"},
        [
            "region: must be an AWS region code like us-east-1; got 'us-east-1a' "
            "(that is an availability zone name; the region is 'us-east-1')"
        ],
        "region-is-az-name",
    ),
    _p({"region": 1}, ["region: must be a string (quote it); got 1"], "region-number"),
    # --- account ----------------------------------------------------------------------------------------
    _p(
        {"account": 123456789012},
        ['account: must be a quoted string of 12 digits, e.g. "012345678901" (YAML drops leading zeros of numbers)'],
        "account-unquoted-number",
    ),
    _p({"account": "12345"}, ["account: must be 12 digits; got '12345'"], "account-too-short"),
    _p({"account": "1234567890123"}, ["account: must be 12 digits; got '1234567890123'"], "account-too-long"),
    _p({"account": "12345678901a"}, ["account: must be 12 digits; got '12345678901a'"], "account-not-digits"),
    _p({"account": True}, ["account: must be a string (quote it); got True"], "account-bool"),
    # --- availability zones -----------------------------------------------------------------------------
    _p({"availability_zone_id": DELETE}, ["availability_zone_id: required"], "az-missing"),
    _p(
        {"availability_zone_id": "us-east-1a"},
        ["availability_zone_id: 'us-east-1a' " + AZ_NAME_RULE.format(prefix="use1")],
        "az-name-not-id",
    ),
    _p(
        {"region": "us-west-2", "availability_zone_id": "us-west-2b"},
        ["availability_zone_id: 'us-west-2b' " + AZ_NAME_RULE.format(prefix="usw2")],
        "az-name-not-id-west",
    ),
    _p(
        {"availability_zone_id": "usw2-az1"},
        ["availability_zone_id: 'usw2-az1' is in us-west-2, not in region us-east-1 (its AZ IDs start with use1-)"],
        "az-of-another-region",
    ),
    _p(
        {"region": "eu-west-1", "availability_zone_id": "use1-az6"},
        ["availability_zone_id: 'use1-az6' is in us-east-1, not in region eu-west-1 (its AZ IDs start with euw1-)"],
        "az-of-another-region-eu",
    ),
    _p(
        {"availability_zone_id": "xyz9-az1"},
        [
            "availability_zone_id: 'xyz9-az1' belongs to no known region, not in region us-east-1 "
            "(its AZ IDs start with use1-)"
        ],
        "az-of-unknown-region",
    ),
    _p(
        {"availability_zone_id": "az6"},
        ["availability_zone_id: must be an AZ ID like use1-az6; got 'az6'"],
        "az-junk",
    ),
    _p({"availability_zone_id": 6}, ["availability_zone_id: must be a string (quote it); got 6"], "az-number"),
    _p(
        {"secondary_availability_zone_id": "use1-az6"},
        ["secondary_availability_zone_id: must differ from availability_zone_id; both are 'use1-az6'"],
        "secondary-az-same-as-primary",
    ),
    _p(
        {"secondary_availability_zone_id": "usw2-az2"},
        [
            "secondary_availability_zone_id: 'usw2-az2' is in us-west-2, not in region us-east-1 "
            "(its AZ IDs start with use1-)"
        ],
        "secondary-az-of-another-region",
    ),
    _p(
        {"secondary_availability_zone_id": "us-east-1b"},
        ["secondary_availability_zone_id: 'us-east-1b' " + AZ_NAME_RULE.format(prefix="use1")],
        "secondary-az-name-not-id",
    ),
    # --- network ----------------------------------------------------------------------------------------
    _p(
        {"network.vpc_cidr": "10.0.0.0/15"},
        ["network.vpc_cidr: must be a /16 to /20 block; got /15"],
        "cidr-too-large",
    ),
    _p(
        {"network.vpc_cidr": "10.0.0.0/21"},
        ["network.vpc_cidr: must be a /16 to /20 block; got /21"],
        "cidr-too-small",
    ),
    _p(
        {"network.vpc_cidr": "8.0.0.0/16"},
        ["network.vpc_cidr: " + CIDR_PRIVATE + "'8.0.0.0/16'"],
        "cidr-public",
    ),
    _p(
        {"network.vpc_cidr": "172.15.0.0/16"},
        ["network.vpc_cidr: " + CIDR_PRIVATE + "'172.15.0.0/16'"],
        "cidr-just-outside-172-16",
    ),
    _p(
        {"network.vpc_cidr": "10.0.0.1/16"},
        ["network.vpc_cidr: " + CIDR_FORMAT + "'10.0.0.1/16'"],
        "cidr-host-bits",
    ),
    _p({"network.vpc_cidr": "banana"}, ["network.vpc_cidr: " + CIDR_FORMAT + "'banana'"], "cidr-junk"),
    _p({"network.vpc_cidr": "fd00::/16"}, ["network.vpc_cidr: " + CIDR_FORMAT + "'fd00::/16'"], "cidr-ipv6"),
    _p({"network.egress": "igw"}, ["network.egress: must be 'nat' or 'none'; got 'igw'"], "egress-enum"),
    _p({"network": []}, ["network: must be a mapping of keys; got a list"], "network-not-mapping"),
    # an existing file system: id formats from botocore's fsx model (FileSystemId ^(fs-[0-9a-f]{8,})$, 11-21
    # characters; SecurityGroupId ^(sg-[0-9a-f]{8,})$, 11-20; DNSName; LustreFileSystemMountName 1-8 [A-Za-z0-9_-])
    _p(
        {**OWN_VPC, **existing_fs(file_system_id="fs-123")},
        ["storage.lustre.file_system_id: must be an FSx file system id like fs-0123456789abcdef0; got 'fs-123'"],
        "fs-id-short",
    ),
    _p(
        {**OWN_VPC, **existing_fs(file_system_id="fsx-0123456789abcdef0")},
        [
            "storage.lustre.file_system_id: must be an FSx file system id like fs-0123456789abcdef0; got "
            "'fsx-0123456789abcdef0'"
        ],
        "fs-id-prefix",
    ),
    _p(
        {**OWN_VPC, **existing_fs(security_group_id="sg-12")},
        ["storage.lustre.security_group_id: must be a security group id like sg-0123456789abcdef0; got 'sg-12'"],
        "fs-security-group-id",
    ),
    # no file system: said with 'none'; YAML's off/no/false are booleans, not that word
    _p({"storage.lustre": False}, ["storage.lustre: " + NO_FS_RULE + "False"], "lustre-false"),
    _p({"storage.lustre": "None"}, ["storage.lustre: " + NO_FS_RULE + "'None'"], "lustre-none-capitalised"),
    _p({"storage.lustre": []}, ["storage.lustre: " + NO_FS_RULE + "[]"], "lustre-list"),
    _p(
        {**OWN_VPC, **existing_fs(dns_name="lustre.example.com")},
        [
            "storage.lustre.dns_name: must be an FSx DNS name like fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com; "
            "got 'lustre.example.com'"
        ],
        "fs-dns-name",
    ),
    _p(  # botocore fsx DNSName takes any character after the id; a mount source needs a host name
        {**OWN_VPC, **existing_fs(dns_name="fs-0123456789abcdef0.fsx us-east-1;reboot")},
        [
            "storage.lustre.dns_name: must be an FSx DNS name like fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com; "
            "got 'fs-0123456789abcdef0.fsx us-east-1;reboot'"
        ],
        "fs-dns-name-not-a-host-name",
    ),
    _p(
        {**OWN_VPC, **existing_fs(mount_name="abcdefghi")},
        ["storage.lustre.mount_name: must be an FSx mount name of 1-8 letters, digits, '_' or '-'; got 'abcdefghi'"],
        "fs-mount-name",
    ),
    _p(
        {**OWN_VPC, "storage.lustre.file_system_id": FS_ID},
        [f"storage.lustre.{key}: " + FS_REQUIRED for key in ("dns_name", "mount_name", "security_group_id")],
        "fs-id-without-mount-keys",
    ),
    _p(
        {**OWN_VPC, **existing_fs(), "storage.lustre.capacity_gib": 2400, **repos({"path": "/datasets"})},
        [
            "storage.lustre.capacity_gib: " + FS_CREATED_ONLY,
            "storage.lustre.repositories: " + FS_CREATED_ONLY,
        ],
        "fs-id-with-created-keys",
    ),
    _p(
        {"storage.lustre.mount_name": "abcdef12"},
        ["storage.lustre.mount_name: only with storage.lustre.file_system_id"],
        "mount-name-without-fs-id",
    ),
    _p(
        existing_fs(),
        [
            "storage.lustre.file_system_id: needs network.vpc_id and network.subnet_id: an existing file system "
            "lives in a VPC of its own, and the VPC fmcluster would create has no route to it"
        ],
        "fs-id-without-own-vpc",
    ),
    # a VPC of your own: id formats from botocore's fsx model (VpcId ^(vpc-[0-9a-f]{8,})$, 12-21 characters;
    # SubnetId ^(subnet-[0-9a-f]{8,})$, 15-24 characters)
    _p(
        {"network.vpc_id": "vpc-123", "network.subnet_id": SUBNET},
        ["network.vpc_id: must be a VPC id like vpc-0123456789abcdef0; got 'vpc-123'"],
        "vpc-id-short",
    ),
    _p(
        {"network.vpc_id": "vpc-0123456789ABCDEF0", "network.subnet_id": SUBNET},
        ["network.vpc_id: must be a VPC id like vpc-0123456789abcdef0; got 'vpc-0123456789ABCDEF0'"],
        "vpc-id-upper",
    ),
    _p(
        {"network.vpc_id": VPC, "network.subnet_id": "subnet-0123456789abcdef01"},
        ["network.subnet_id: must be a subnet id like subnet-0123456789abcdef0; got 'subnet-0123456789abcdef01'"],
        "subnet-id-long",
    ),
    _p(
        {"network.vpc_id": VPC, "network.subnet_id": "sn-01234567"},
        ["network.subnet_id: must be a subnet id like subnet-0123456789abcdef0; got 'sn-01234567'"],
        "subnet-id-prefix",
    ),
    _p(
        {"network.vpc_id": VPC},
        ["network.subnet_id: required with network.vpc_id: the subnet (in availability_zone_id) the nodes go in"],
        "vpc-id-without-subnet",
    ),
    _p(
        {"network.subnet_id": SUBNET},
        ["network.subnet_id: " + SUBNET_WITHOUT_VPC],
        "subnet-id-without-vpc",
    ),
    _p(
        {"network.vpc_id": VPC, "network.subnet_id": SUBNET, "network.vpc_cidr": "10.0.0.0/16"},
        ["network.vpc_cidr: only without network.vpc_id: fmcluster creates no VPC in one of your own"],
        "vpc-cidr-with-vpc-id",
    ),
    _p(
        {"network.vpc_id": VPC, "network.subnet_id": SUBNET, "secondary_availability_zone_id": "use1-az4"},
        [
            "secondary_availability_zone_id: only without network.vpc_id: it places a second subnet (for the "
            "interface endpoints) in the VPC fmcluster creates; in a VPC of your own the endpoints are yours"
        ],
        "secondary-az-with-vpc-id",
    ),
    _p(
        {"compliance": "soc2"},
        ["compliance: must be 'baseline' or 'control-tower'; got 'soc2'"],
        "compliance-enum",
    ),
    # --- compute (the list) -----------------------------------------------------------------------------
    _p({"compute": DELETE}, ["compute: required"], "compute-missing"),
    _p({"compute": []}, ["compute: must have at least 1 entry; got 0"], "compute-empty"),
    _p(
        {"compute": [group(f"g{i}") for i in range(17)]},
        ["compute: must have at most 16 entries; got 17"],
        "compute-17-groups",
    ),
    _p({"compute": {"name": "gpu"}}, ["compute: must be a list; got a mapping"], "compute-mapping"),
    _p({"compute": ["gpu"]}, ["compute[0]: must be a mapping of keys; got 'gpu'"], "compute-item-string"),
    # --- compute[].name ---------------------------------------------------------------------------------
    _p({"compute[0].name": DELETE}, ["compute[0].name: required"], "group-name-missing"),
    _p({"compute[0].name": "GPU"}, ["compute[0].name: " + GROUP_NAME_RULE + "'GPU'"], "group-name-uppercase"),
    _p(
        {"compute[0].name": "1gpu"},
        ["compute[0].name: " + GROUP_NAME_RULE + "'1gpu'"],
        "group-name-digit-first",
    ),
    _p(
        {"compute[0].name": "a" * 21},
        ["compute[0].name: " + GROUP_NAME_RULE + repr("a" * 21)],
        "group-name-too-long",
    ),
    _p(
        {"compute[0].name": "gpu_a"},
        ["compute[0].name: " + GROUP_NAME_RULE + "'gpu_a'"],
        "group-name-underscore",
    ),
    _p(
        {"compute[0].name": "gpu-"},
        ["compute[0].name: must end with a letter or digit (HyperPod and Slurm reject a trailing '-'); got 'gpu-'"],
        "group-name-trailing-dash",
    ),
    _p(
        {"compute[0].name": "controller"},
        ["compute[0].name: 'controller' is reserved for the cluster's own controller nodes; choose another name"],
        "group-name-controller-reserved",
    ),
    _p(
        {"compute[0].name": "login"},
        ["compute[0].name: 'login' is reserved for the cluster's own login nodes; choose another name"],
        "group-name-login-reserved",
    ),
    _p(
        {"compute[0].name": "head"},
        ["compute[0].name: 'head' is reserved for the cluster's own head nodes; choose another name"],
        "group-name-head-reserved",
    ),
    _p(
        {"compute": [group("a"), group("b"), group("a")]},
        ["compute[2].name: 'a' is already the name of compute[0]; group names must be unique"],
        "group-names-duplicate",
    ),
    _p(
        {"compute": [group("a"), group("a"), group("a")]},
        [
            "compute[1].name: 'a' is already the name of compute[0]; group names must be unique",
            "compute[2].name: 'a' is already the name of compute[0]; group names must be unique",
        ],
        "group-names-triplicate",
    ),
    # --- compute[].instance_type ------------------------------------------------------------------------
    _p({"compute[0].instance_type": DELETE}, ["compute[0].instance_type: required"], "instance-type-missing"),
    _p(
        {"compute[0].instance_type": "m9.huge"},
        [f"compute[0].instance_type: unknown instance type 'm9.huge': {NOT_EC2}"],
        "instance-type-unknown",
    ),
    _p(
        {"compute[0].instance_type": "p5.48xlarg"},
        [f"compute[0].instance_type: unknown instance type 'p5.48xlarg': {NOT_EC2}; did you mean 'p5.48xlarge'?"],
        "instance-type-typo",
    ),
    # the did-you-mean comes from EC2's own list (botocore ec2 InstanceType), not from the catalog's GPU types
    _p(
        {**PCS, "compute[0].instance_type": "c6i.4xlage"},
        [f"compute[0].instance_type: unknown instance type 'c6i.4xlage': {NOT_EC2}; did you mean 'c6i.4xlarge'?"],
        "instance-type-cpu-typo",
    ),
    _p(
        {"compute[0].instance_type": "ml.m5.2xlarge"},
        [f"compute[0].instance_type: give the EC2 name 'm5.2xlarge'; {ML_PREFIX}"],
        "instance-type-ml-prefix-cpu",
    ),
    _p(
        {"compute[0].instance_type": "ml.p5.48xlarge"},
        [f"compute[0].instance_type: give the EC2 name 'p5.48xlarge'; {ML_PREFIX}"],
        "instance-type-ml-prefix",
    ),
    _p(
        {"compute[0].instance_type": "ml.m9.huge"},
        [f"compute[0].instance_type: unknown instance type 'ml.m9.huge': {NOT_EC2}"],
        "instance-type-ml-prefix-unknown",
    ),
    # --- compute[].count --------------------------------------------------------------------------------
    _p({"compute[0].count": DELETE}, ["compute[0].count: required"], "count-missing"),
    _p({"compute[0].count": -1}, ["compute[0].count: must be at least 0; got -1"], "count-negative"),
    _p({"compute[0].count": 6759}, ["compute[0].count: must be at most 6758; got 6759"], "count-too-large"),
    _p({"compute[0].count": "2"}, ["compute[0].count: must be a whole number; got '2'"], "count-string"),
    _p({"compute[0].count": 2.5}, ["compute[0].count: must be a whole number; got 2.5"], "count-float"),
    _p({"compute[0].count": True}, ["compute[0].count: must be a whole number; got True"], "count-bool"),
    # --- compute[].min_count and scale_down_idle_minutes (scale to zero) ---------------------------------
    _p(
        {**PCS, "compute[0].min_count": 3},
        ["compute[0].min_count: must be at most count (the most nodes the group runs), 2; got 3"],
        "min-count-above-count",
    ),
    _p({**PCS, "compute[0].min_count": -1}, ["compute[0].min_count: must be at least 0; got -1"], "min-count-negative"),
    _p({**PCS, "compute[0].min_count": "0"}, ["compute[0].min_count: must be a whole number; got '0'"], "min-count-s"),
    # capacity paid whether nodes run or not: scaling down saves nothing
    _p(
        {**CAPACITY_BLOCK, "compute[0].placement_group": False, "compute[0].min_count": 0},
        [
            "compute[0].min_count: must equal count (2) with capacity 'capacity-block': a capacity block is paid up "
            "front for its whole term (EC2 Capacity Blocks for ML), so idle nodes cost the same as running ones; "
            "remove min_count"
        ],
        "min-count-capacity-block",
    ),
    _p(
        {**ODCR, "compute[0].min_count": 1},
        [
            "compute[0].min_count: must equal count (2) with capacity 'odcr': an On-Demand Capacity Reservation is "
            "billed whether instances run in it or not (EC2 user guide, Capacity Reservation pricing and billing), so "
            "idle nodes cost the same as running ones; remove min_count"
        ],
        "min-count-odcr",
    ),
    _p(
        {"compute[0].min_count": 0},
        [
            "compute[0].min_count: must equal count (2) with hyperpod-slurm: HyperPod Slurm instance groups do not "
            "scale with the queue (HyperPod's autoscaling is for EKS-orchestrated clusters: SageMaker developer "
            "guide, Autoscaling on SageMaker HyperPod EKS; MinInstanceCount only sets how many nodes must start before "
            "a group is InService, botocore sagemaker ClusterInstanceGroupSpecification); scaling to zero is for "
            "orchestrator.type: pcs"
        ],
        "min-count-hyperpod",
    ),
    _p(
        {**PCS, "compute[0].scale_down_idle_minutes": 30},
        [
            "compute[0].scale_down_idle_minutes: only for a group that scales (min_count below count): a static "
            "group never scales down"
        ],
        "scale-down-static-group",
    ),
    # botocore pcs ComputeNodeGroupSlurmConfigurationRequest: 10,000,000 s at most (166,666 whole minutes)
    _p(
        {**PCS, "compute[0].min_count": 0, "compute[0].scale_down_idle_minutes": 166_667},
        [
            "compute[0].scale_down_idle_minutes: must be 1-166,666 minutes (AWS PCS scaleDownIdleTimeInSeconds is at "
            "most 10,000,000 s, botocore pcs); got 166667"
        ],
        "scale-down-too-long",
    ),
    _p(
        {**PCS, "compute[0].min_count": 0, "compute[0].scale_down_idle_minutes": 0},
        [
            "compute[0].scale_down_idle_minutes: must be 1-166,666 minutes (AWS PCS scaleDownIdleTimeInSeconds is at "
            "most 10,000,000 s, botocore pcs); got 0"
        ],
        "scale-down-zero",
    ),
    # "Requires Slurm version 25.11 or later" (botocore pcs ComputeNodeGroupSlurmConfigurationRequest)
    _p(
        {
            **PCS,
            "orchestrator.slurm_version": "25.05",
            "compute[0].min_count": 0,
            "compute[0].scale_down_idle_minutes": 30,
        },
        [
            "compute[0].scale_down_idle_minutes: a node group's own idle scale-down time needs Slurm 25.11 or later "
            "(botocore pcs ComputeNodeGroupSlurmConfigurationRequest); orchestrator.slurm_version is 25.05: remove it "
            "(idle nodes then stop after PCS's cluster-wide 10 minutes) or use 25.11 or later"
        ],
        "scale-down-old-slurm",
    ),
    _p(
        {"compute[0].placement_group": "odcr-pg"},
        [
            "compute[0].placement_group: a placement group name is for orchestrator.type: pcs: HyperPod places its "
            "nodes itself and its instance groups take no placement group (botocore sagemaker "
            "ClusterInstanceGroupSpecification)"
        ],
        "placement-group-name-hyperpod",
    ),
    # --- compute[].capacity and reservations ------------------------------------------------------------
    _p(
        {"compute[0].capacity": "spot"},
        ["compute[0].capacity: must be 'on-demand', 'capacity-block', 'odcr' or 'training-plan'; got 'spot'"],
        "capacity-enum",
    ),
    _p(
        # AWS PCS user guide, "Using Amazon EC2 Capacity Blocks for ML with AWS PCS", Limitations: P6-B300, P6-B200,
        # P5en, P5e, P5 and P4d families only (EC2 sells trn1 blocks too)
        {**CAPACITY_BLOCK, "compute[0].instance_type": "trn1.32xlarge", "orchestrator.ami_id": "ami-0123456789abcdef0"},
        [
            "compute[0].capacity: AWS PCS takes Capacity Blocks of the P6-B300, P6-B200, P5en, P5e, P5 and P4d "
            "families only (AWS PCS user guide, Capacity Blocks, Limitations); trn1.32xlarge is not one: use "
            "hyperpod-slurm with a training plan, or an odcr"
        ],
        "pcs-capacity-block-of-an-unsupported-family",
    ),
    _p(
        {**CAPACITY_BLOCK, "compute[0].reservation_id": DELETE},
        ["compute[0].reservation_id: required when capacity is 'capacity-block'"],
        "capacity-block-needs-reservation",
    ),
    _p(
        {**ODCR, "compute[0].reservation_id": DELETE},
        ["compute[0].reservation_id: required when capacity is 'odcr'"],
        "odcr-needs-reservation",
    ),
    _p(
        {"compute[0].reservation_id": RES},
        [
            "compute[0].reservation_id: only for capacity 'capacity-block' or 'odcr'; "
            "this group's capacity is 'on-demand'"
        ],
        "reservation-forbidden-on-demand",
    ),
    _p(
        {**TRAINING_PLAN, "compute[0].reservation_id": RES},
        [
            "compute[0].reservation_id: only for capacity 'capacity-block' or 'odcr'; "
            "this group's capacity is 'training-plan'"
        ],
        "reservation-forbidden-training-plan",
    ),
    _p(
        {**CAPACITY_BLOCK, "compute[0].reservation_id": "cr-123"},
        ["compute[0].reservation_id: " + RESERVATION_FORMAT + "'cr-123'"],
        "reservation-id-short",
    ),
    _p(
        {**CAPACITY_BLOCK, "compute[0].reservation_id": "cr-0123456789ABCDEF0"},
        ["compute[0].reservation_id: " + RESERVATION_FORMAT + "'cr-0123456789ABCDEF0'"],
        "reservation-id-uppercase",
    ),
    _p(
        {**CAPACITY_BLOCK, "compute[0].reservation_id": "cb-0123456789abcdef0"},
        ["compute[0].reservation_id: " + RESERVATION_FORMAT + "'cb-0123456789abcdef0'"],
        "reservation-id-prefix",
    ),
    _p(
        {**CAPACITY_BLOCK, "compute[0].placement_group": True},
        [
            "compute[0].placement_group: must be false with capacity 'capacity-block': capacity blocks are "
            "already "
            "placed inside an EC2 UltraCluster and reject a placement group"
        ],
        "capacity-block-placement-group-true",
    ),
    _p(
        {**ODCR, "compute[0].placement_group": True},
        [
            "compute[0].placement_group: must be false or the name of the cluster placement group the reservation "
            "was created in, with capacity 'odcr': a reservation serves a placement group only if it was made in it, "
            "and true makes a new one"
        ],
        "odcr-placement-group-true",
    ),
    _p(
        {**CAPACITY_BLOCK, "compute[0].placement_group": "my-group"},
        [
            "compute[0].placement_group: must be false with capacity 'capacity-block': capacity blocks are "
            "already placed inside an EC2 UltraCluster and reject a placement group"
        ],
        "capacity-block-placement-group-name",
    ),
    _p(
        {"compute[0].placement_group": 3},
        ["compute[0].placement_group: must be true, false or the name of an existing placement group; got 3"],
        "placement-group-number",
    ),
    # EC2's rule for a placement group name: "Up to 255 ASCII characters" (botocore ec2 CreatePlacementGroup GroupName)
    _p(
        {"compute[0].placement_group": "p" * 256},
        [
            "compute[0].placement_group: must be true, false or the name of an existing placement group: 1-255 "
            f"printable ASCII characters (botocore ec2 CreatePlacementGroup GroupName); got {'p' * 256!r}"
        ],
        "placement-group-name-too-long",
    ),
    _p(
        {"compute[0].placement_group": ""},
        [
            "compute[0].placement_group: must be true, false or the name of an existing placement group: 1-255 "
            "printable ASCII characters (botocore ec2 CreatePlacementGroup GroupName); got ''"
        ],
        "placement-group-name-empty",
    ),
    _p(
        {"compute[0].placement_group": "gruppé"},
        [
            "compute[0].placement_group: must be true, false or the name of an existing placement group: 1-255 "
            "printable ASCII characters (botocore ec2 CreatePlacementGroup GroupName); got 'gruppé'"
        ],
        "placement-group-name-not-ascii",
    ),
    _p(
        {
            **PCS,
            "compute": [
                group("gpa", capacity="capacity-block", reservation_id=RES),
                group("gpb", "p5en.48xlarge", capacity="capacity-block", reservation_id=RES),
            ],
        },
        [
            f"compute[1].reservation_id: {RES} also serves compute[0] (p5.48xlarge); a reservation holds one "
            "instance type, so it cannot also serve p5en.48xlarge"
        ],
        "reservation-shared-by-two-types",
    ),
    _p(
        {
            **PCS,
            "compute": [
                group("gpa", capacity="odcr", reservation_id=RES),
                group("gpb", "p4d.24xlarge", capacity="capacity-block", reservation_id=RES),
            ],
        },
        [
            f"compute[1].reservation_id: {RES} also serves compute[0] (p5.48xlarge); a reservation holds one "
            "instance type, so it cannot also serve p4d.24xlarge"
        ],
        "reservation-shared-odcr-and-block",
    ),
    # --- compute[].drain_before_end_minutes ---------------------------------------------------------------
    *(
        _p(
            {**CAPACITY_BLOCK, "compute[0].drain_before_end_minutes": minutes},
            [
                "compute[0].drain_before_end_minutes: must be 0 (never drain) or 35 to 1440 minutes: EC2 begins "
                "terminating a block's instances 30 minutes before its end, and the drain check runs every 5 "
                f"minutes; got {minutes}"
            ],
            f"drain-before-end-{minutes}",
        )
        for minutes in (30, 34, 1441)
    ),
    _p(
        {**ODCR, "compute[0].drain_before_end_minutes": 60},
        [
            "compute[0].drain_before_end_minutes: only for capacity 'capacity-block' or 'training-plan'; this group's "
            "capacity is 'odcr'"
        ],
        "drain-before-end-odcr",
    ),
    _p(
        {"compute[0].drain_before_end_minutes": 60},
        [
            "compute[0].drain_before_end_minutes: only for capacity 'capacity-block' or 'training-plan'; this group's "
            "capacity is 'on-demand'"
        ],
        "drain-before-end-on-demand",
    ),
    # --- compute[].training_plan_arn --------------------------------------------------------------------
    _p(
        {**TRAINING_PLAN, "compute[0].training_plan_arn": DELETE},
        ["compute[0].training_plan_arn: required when capacity is 'training-plan'"],
        "training-plan-needs-arn",
    ),
    _p(
        {"compute[0].training_plan_arn": ARN},
        ["compute[0].training_plan_arn: only for capacity 'training-plan'; this group's capacity is 'on-demand'"],
        "arn-forbidden-on-demand",
    ),
    _p(
        {**CAPACITY_BLOCK, "compute[0].training_plan_arn": ARN},
        ["compute[0].training_plan_arn: only for capacity 'training-plan'; this group's capacity is 'capacity-block'"],
        "arn-forbidden-capacity-block",
    ),
    _p(
        {**TRAINING_PLAN, "compute[0].training_plan_arn": "arn:x"},
        ["compute[0].training_plan_arn: " + ARN_FORMAT + "'arn:x'"],
        "arn-junk",
    ),
    _p(
        {**TRAINING_PLAN, "compute[0].training_plan_arn": ARN.replace("sagemaker", "ec2")},
        ["compute[0].training_plan_arn: " + ARN_FORMAT + repr(ARN.replace("sagemaker", "ec2"))],
        "arn-wrong-service",
    ),
    _p(
        {**TRAINING_PLAN, "compute[0].training_plan_arn": ARN.replace("123456789012", "1234")},
        ["compute[0].training_plan_arn: " + ARN_FORMAT + repr(ARN.replace("123456789012", "1234"))],
        "arn-short-account",
    ),
    _p(
        {**TRAINING_PLAN, "compute[0].training_plan_arn": ARN.replace("training-plan/", "cluster/")},
        ["compute[0].training_plan_arn: " + ARN_FORMAT + repr(ARN.replace("training-plan/", "cluster/"))],
        "arn-wrong-resource",
    ),
    _p(
        {**TRAINING_PLAN, "compute[0].training_plan_arn": ARN.replace("my-plan", "p" * 65)},
        ["compute[0].training_plan_arn: " + ARN_FORMAT + repr(ARN.replace("my-plan", "p" * 65))],
        "arn-name-65",
    ),
    _p(
        {**TRAINING_PLAN, "compute[0].training_plan_arn": ARN.replace("us-east-1", "us-west-2")},
        [
            "compute[0].training_plan_arn: the training plan is in us-west-2, the cluster in us-east-1; "
            "a plan serves only its own region"
        ],
        "arn-other-region",
    ),
    _p(
        {**TRAINING_PLAN, "account": "210987654321"},
        [
            "compute[0].training_plan_arn: the training plan belongs to account 123456789012, "
            "the cluster to 210987654321"
        ],
        "arn-other-account",
    ),
    _p(
        {
            **TRAINING_PLAN,
            "account": "210987654321",
            "compute[0].training_plan_arn": ARN.replace("us-east-1", "us-west-2"),
        },
        [
            "compute[0].training_plan_arn: the training plan is in us-west-2, the cluster in us-east-1; "
            "a plan serves only its own region",
            "compute[0].training_plan_arn: the training plan belongs to account 123456789012, "
            "the cluster to 210987654321",
        ],
        "arn-other-region-and-account",
    ),
    # --- capacity against orchestrator ------------------------------------------------------------------
    _p(
        {**TRAINING_PLAN, **PCS},
        [
            "compute[0].capacity: 'training-plan' needs orchestrator.type: hyperpod-slurm (training plans "
            "reserve "
            "SageMaker capacity); with pcs use 'capacity-block' or 'odcr'"
        ],
        "training-plan-with-pcs",
    ),
    _p(
        {**CAPACITY_BLOCK, "orchestrator.type": "hyperpod-slurm"},
        [
            "compute[0].capacity: 'capacity-block' needs orchestrator.type: pcs (EC2 reservations are "
            "consumed "
            "through launch templates); HyperPod takes reserved capacity as capacity: training-plan with "
            "training_plan_arn"
        ],
        "capacity-block-with-hyperpod",
    ),
    _p(
        {**ODCR, "orchestrator": DELETE},
        [
            "compute[0].capacity: 'odcr' needs orchestrator.type: pcs (EC2 reservations are consumed "
            "through launch templates); HyperPod takes reserved capacity as capacity: training-plan with "
            "training_plan_arn"
        ],
        "odcr-with-default-hyperpod",
    ),
    # --- compute[].deep_health_checks (HyperPod's DeepHealthCheckType; InstanceConnectivity: FACTS.md) ----
    _p(
        {"compute[0].deep_health_checks": ["Stress"]},
        ["compute[0].deep_health_checks[0]: must be 'InstanceStress' or 'InstanceConnectivity'; got 'Stress'"],
        "deep-health-check-unknown",
    ),
    _p(
        {"compute[0].deep_health_checks": "InstanceStress"},
        ["compute[0].deep_health_checks: must be a list; got 'InstanceStress'"],
        "deep-health-checks-not-a-list",
    ),
    _p(
        {"compute[0].deep_health_checks": ["InstanceStress", "InstanceStress"]},
        ["compute[0].deep_health_checks: lists 'InstanceStress' more than once"],
        "deep-health-check-repeated",
    ),
    _p(
        {"compute[0].count": 1, "compute[0].deep_health_checks": ["InstanceConnectivity"]},
        [
            "compute[0].deep_health_checks: InstanceConnectivity tests EFA between nodes: it needs count of 2 or "
            "more and efa: true; got count 1, efa true (keep InstanceStress alone)"
        ],
        "instance-connectivity-one-node",
    ),
    _p(
        {"compute[0].efa": False, "compute[0].deep_health_checks": ["InstanceStress", "InstanceConnectivity"]},
        [
            "compute[0].deep_health_checks: InstanceConnectivity tests EFA between nodes: it needs count of 2 or "
            "more and efa: true; got count 2, efa false (keep InstanceStress alone)"
        ],
        "instance-connectivity-without-efa",
    ),
    _p(
        {**PCS, "compute[0].deep_health_checks": ["InstanceStress"]},
        [
            "compute[0].deep_health_checks: are SageMaker HyperPod's on-start checks: they need orchestrator.type: "
            "hyperpod-slurm; remove them with pcs"
        ],
        "deep-health-checks-with-pcs",
    ),
    # --- compute[].root_volume_gib and efa --------------------------------------------------------------
    _p(
        {"compute[0].root_volume_gib": 99},
        ["compute[0].root_volume_gib: must be at least 100; got 99"],
        "root-volume-too-small",
    ),
    _p(
        {"compute[0].root_volume_gib": 16385},
        ["compute[0].root_volume_gib: must be at most 16384; got 16385"],
        "root-volume-too-large",
    ),
    # botocore sagemaker ClusterEbsVolumeConfig: with RootVolume, "You can't specify the VolumeSizeInGB field. The
    # size of the root volume is determined for you"; the extra volume it sizes is mounted at /opt/sagemaker
    _p(
        {"compute[0].root_volume_gib": 512},
        [
            "compute[0].root_volume_gib: HyperPod sizes each node's root volume itself (SageMaker API "
            'ClusterEbsVolumeConfig: for the root volume "you can\'t specify the VolumeSizeInGB field"); '
            "root_volume_gib sizes AWS PCS nodes' root volumes: remove it with hyperpod-slurm"
        ],
        "root-volume-with-hyperpod",
    ),
    # AWS PCS's controller is part of the service: CreateCluster takes a Size, no instance type (botocore pcs)
    _p(
        {**PCS, "orchestrator.controller_instance_type": "m5.4xlarge"},
        [
            "orchestrator.controller_instance_type: AWS PCS runs the Slurm controller itself (a managed service; "
            "orchestrator.size picks its capacity), so no instance type is used; remove it with pcs"
        ],
        "controller-type-with-pcs",
    ),
    _p(
        {"compute[0].instance_type": "g5.4xlarge", "compute[0].efa": True},
        [f"compute[0].efa: g5.4xlarge has no EFA; set efa: false or use an EFA type ({EFA_TYPES})"],
        "efa-on-type-without-efa",
    ),
    _p({"compute[0].efa": "yes"}, ["compute[0].efa: must be true or false; got 'yes'"], "efa-not-bool"),
    # --- nodes against the compute subnet ---------------------------------------------------------------
    _p(
        {"network.vpc_cidr": "10.0.0.0/20", "compute[0].count": 1788},
        [
            "compute: 1788 nodes do not fit the compute subnet 10.0.0.0/21 of network.vpc_cidr 10.0.0.0/20, "
            "which holds 1787; use a larger block (a /16 holds 32507) or fewer nodes"
        ],
        "nodes-exceed-small-vpc",
    ),
    _p(
        {"network.vpc_cidr": "10.0.0.0/20", "compute": [group("a", count=1000), group("b", count=788)]},
        [
            "compute: 1788 nodes do not fit the compute subnet 10.0.0.0/21 of network.vpc_cidr 10.0.0.0/20, "
            "which holds 1787; use a larger block (a /16 holds 32507) or fewer nodes"
        ],
        "nodes-of-two-groups-exceed-small-vpc",
    ),
    _p(
        {"compute": [group(f"g{i}", count=6758) for i in range(5)]},
        [
            "compute: 33790 nodes do not fit the compute subnet 10.0.0.0/17 of network.vpc_cidr 10.0.0.0/16, "
            "which holds 32507; use a larger block (a /16 holds 32507) or fewer nodes"
        ],
        "nodes-exceed-16",
    ),
    # --- orchestrator -----------------------------------------------------------------------------------
    _p(
        {"orchestrator.type": "slurm"},
        ["orchestrator.type: must be 'hyperpod-slurm' or 'pcs'; got 'slurm'"],
        "orchestrator-enum",
    ),
    _p(  # no orchestrator's rules are judged against an unknown type (its keys are neither refused nor checked)
        {"orchestrator.type": "slurm", "orchestrator.image_refresh": "x", "orchestrator.slurm_version": "23.11"},
        ["orchestrator.type: must be 'hyperpod-slurm' or 'pcs'; got 'slurm'"],
        "orchestrator-enum-alone",
    ),
    _p(
        {"orchestrator.controller_instance_type": "ml.m5.4xlarge"},
        [f"orchestrator.controller_instance_type: give the EC2 name 'm5.4xlarge'; {ML_PREFIX}"],
        "controller-ml-prefix",
    ),
    _p(
        {"orchestrator.controller_instance_type": "m5"},
        ["orchestrator.controller_instance_type: must be an EC2 instance type like m5.4xlarge; got 'm5'"],
        "controller-not-a-type",
    ),
    _p(
        {"orchestrator.login_instance_type": "ml.m5.xlarge"},
        [f"orchestrator.login_instance_type: give the EC2 name 'm5.xlarge'; {ML_PREFIX}"],
        "login-ml-prefix",
    ),
    _p(
        {"orchestrator.login_instance_type": "M5.large"},
        ["orchestrator.login_instance_type: must be an EC2 instance type like m5.4xlarge; got 'M5.large'"],
        "login-not-a-type",
    ),
    # --- storage.lustre ---------------------------------------------------------------------------------
    _p(
        {"storage.lustre.capacity_gib": 1000},
        [f"storage.lustre.capacity_gib: {CAPACITY_RULE}1000 (nearest: 1200)"],
        "capacity-below-1200",
    ),
    _p(
        {"storage.lustre.capacity_gib": 1300},
        [f"storage.lustre.capacity_gib: {CAPACITY_RULE}1300 (nearest: 1200 or 2400)"],
        "capacity-1300",
    ),
    _p(
        {"storage.lustre.capacity_gib": 3600},
        [f"storage.lustre.capacity_gib: {CAPACITY_RULE}3600 (nearest: 2400 or 4800)"],
        "capacity-3600",
    ),
    _p(
        {"storage.lustre.capacity_gib": 7000},
        [f"storage.lustre.capacity_gib: {CAPACITY_RULE}7000 (nearest: 4800 or 7200)"],
        "capacity-7000",
    ),
    _p(
        {"storage.lustre.capacity_gib": 0},
        [f"storage.lustre.capacity_gib: {CAPACITY_RULE}0 (nearest: 1200)"],
        "capacity-zero",
    ),
    _p(
        {"storage.lustre.capacity_gib": "4800"},
        ["storage.lustre.capacity_gib: must be a whole number; got '4800'"],
        "capacity-string",
    ),
    _p(
        {"storage.lustre.throughput_per_tib": 300},
        ["storage.lustre.throughput_per_tib: must be 125, 250, 500 or 1000; got 300"],
        "throughput-enum",
    ),
    _p(
        {"storage.lustre.compression": "zstd"},
        ["storage.lustre.compression: must be 'lz4' or 'none'; got 'zstd'"],
        "compression-enum",
    ),
    _p(
        {"storage.lustre.efa": "yes"},
        ["storage.lustre.efa: must be true or false; got 'yes'"],
        "lustre-efa-not-bool",
    ),
    _p(
        {"storage.retain_on_delete": "no"},
        ["storage.retain_on_delete: must be true or false; got 'no'"],
        "retain-on-delete-not-bool",
    ),
    # EFA-enabled Lustre: capacity steps per throughput tier, and a client group
    _p(
        {"storage.lustre.efa": True, "storage.lustre.capacity_gib": 4800},
        [
            "storage.lustre.capacity_gib: an EFA-enabled file system at 250 MB/s/TiB needs a multiple of "
            "19200 GiB; "
            "got 4800 (use 19200, or throughput_per_tib: 1000 for steps of 4800)"
        ],
        "efa-lustre-250-step",
    ),
    _p(
        {
            "storage.lustre.efa": True,
            "storage.lustre.throughput_per_tib": 125,
            "storage.lustre.capacity_gib": 19200,
        },
        [
            "storage.lustre.capacity_gib: an EFA-enabled file system at 125 MB/s/TiB needs a multiple of "
            "38400 GiB; "
            "got 19200 (use 38400, or throughput_per_tib: 1000 for steps of 4800)"
        ],
        "efa-lustre-125-step",
    ),
    _p(
        {
            "storage.lustre.efa": True,
            "storage.lustre.throughput_per_tib": 500,
            "storage.lustre.capacity_gib": 14400,
        },
        [
            "storage.lustre.capacity_gib: an EFA-enabled file system at 500 MB/s/TiB needs a multiple of "
            "9600 GiB; "
            "got 14400 (use 19200, or throughput_per_tib: 1000 for steps of 4800)"
        ],
        "efa-lustre-500-step",
    ),
    # At 1000 MB/s/TiB the hint must not suggest the tier the file system already has.
    _p(
        {**EFA_LUSTRE_1000, "storage.lustre.capacity_gib": 7200},
        [
            "storage.lustre.capacity_gib: an EFA-enabled file system at 1000 MB/s/TiB needs a multiple of "
            "4800 GiB; "
            "got 7200 (use 9600)"
        ],
        "efa-lustre-1000-step",
    ),
    _p(
        {**EFA_LUSTRE_1000, "storage.lustre.capacity_gib": 1200},
        [
            "storage.lustre.capacity_gib: an EFA-enabled file system at 1000 MB/s/TiB needs a multiple of "
            "4800 GiB; "
            "got 1200 (use 4800)"
        ],
        "efa-lustre-1000-below-minimum",
    ),
    _p(
        {**EFA_LUSTRE_1000, "compute[0].instance_type": "g5.48xlarge"},
        ["storage.lustre.efa: " + LUSTRE_NO_CLIENT],
        "efa-lustre-no-client-type",
    ),
    _p(
        # HyperPod offers trn2 only in us-east-2 (cfn-lint's HyperPod instance-type list, FACTS.md Service truth)
        {**EFA_LUSTRE_1000, "compute[0].instance_type": "trn2.48xlarge", **US_EAST_2},
        ["storage.lustre.efa: " + LUSTRE_NO_CLIENT],
        "efa-lustre-trn2-not-a-client",
    ),
    _p(
        {**EFA_LUSTRE_1000, "compute[0].efa": False},
        ["storage.lustre.efa: " + LUSTRE_NO_CLIENT],
        "efa-lustre-client-group-without-efa",
    ),
    # metadata_iops
    *[
        _p(
            {"storage.lustre.metadata_iops": iops},
            [f"storage.lustre.metadata_iops: {IOPS_RULE}{iops}"],
            f"metadata-iops-{iops}",
        )
        for iops in (0, 1000, 2000, 18000, 204000, -12000)
    ],
    _p(
        {"storage.lustre.metadata_iops": "6000"},
        ["storage.lustre.metadata_iops: must be a whole number; got '6000'"],
        "metadata-iops-string",
    ),
    # repositories
    _p(
        repos(*[{"path": f"/d{i}"} for i in range(9)]),
        ["storage.lustre.repositories: must have at most 8 entries; got 9"],
        "repositories-9",
    ),
    _p(
        repos({"s3_uri": "s3://my-datasets/c4/"}),
        ["storage.lustre.repositories[0].path: required"],
        "repository-path-missing",
    ),
    _p(
        repos({"path": "datasets"}),
        ["storage.lustre.repositories[0].path: must be an absolute Lustre path like /datasets; got 'datasets'"],
        "repository-path-relative",
    ),
    _p(repos({"path": "/"}), ["storage.lustre.repositories[0].path: " + PATH_ROOT], "repository-path-root"),
    _p(
        repos({"path": "//"}),
        ["storage.lustre.repositories[0].path: " + PATH_ROOT],
        "repository-path-root-twice",
    ),
    _p(
        repos({"path": "/a/../b"}),
        ["storage.lustre.repositories[0].path: " + PATH_PLAIN + "'/a/../b'"],
        "repository-path-dotdot",
    ),
    _p(
        repos({"path": "/a/./b"}),
        ["storage.lustre.repositories[0].path: " + PATH_PLAIN + "'/a/./b'"],
        "repository-path-dot",
    ),
    _p(
        repos({"path": "/a b"}),
        ["storage.lustre.repositories[0].path: " + PATH_PLAIN + "'/a b'"],
        "repository-path-space",
    ),
    _p(
        repos({"path": "/a//b"}),
        ["storage.lustre.repositories[0].path: " + PATH_PLAIN + "'/a//b'"],
        "repository-path-double-slash",
    ),
    _p(
        repos({"path": "/datasets"}, {"path": "/datasets"}),
        ["storage.lustre.repositories[1].path: '/datasets' repeats repositories[0].path"],
        "repository-path-repeats",
    ),
    _p(
        repos({"path": "/datasets"}, {"path": "/datasets/"}),
        ["storage.lustre.repositories[1].path: '/datasets' repeats repositories[0].path"],
        "repository-path-repeats-with-slash",
    ),
    _p(
        repos({"path": "/data"}, {"path": "/data/c4"}),
        [
            "storage.lustre.repositories[1].path: '/data/c4' and repositories[0].path '/data' nest; "
            "one path may not lie inside another"
        ],
        "repository-path-nested",
    ),
    _p(
        repos({"path": "/data/c4"}, {"path": "/data"}),
        [
            "storage.lustre.repositories[1].path: '/data' and repositories[0].path '/data/c4' nest; "
            "one path may not lie inside another"
        ],
        "repository-path-contains-earlier",
    ),
    _p(
        repos({"path": "/a", "s3_uri": "https://bucket/x/"}),
        ["storage.lustre.repositories[0].s3_uri: " + S3_FORMAT + "'https://bucket/x/'"],
        "s3-uri-scheme",
    ),
    _p(
        repos({"path": "/a", "s3_uri": "s3://My-Bucket/x/"}),
        ["storage.lustre.repositories[0].s3_uri: " + S3_FORMAT + "'s3://My-Bucket/x/'"],
        "s3-uri-uppercase",
    ),
    _p(
        repos({"path": "/a", "s3_uri": "s3://my..bucket/x/"}),
        ["storage.lustre.repositories[0].s3_uri: " + S3_FORMAT + "'s3://my..bucket/x/'"],
        "s3-uri-double-dot",
    ),
    _p(
        repos({"path": "/a", "s3_uri": "s3://ab/x/"}),
        ["storage.lustre.repositories[0].s3_uri: " + S3_FORMAT + "'s3://ab/x/'"],
        "s3-uri-short-bucket",
    ),
    _p(
        repos({"path": "/a", "s3_uri": "s3://bucket/a b/"}),
        ["storage.lustre.repositories[0].s3_uri: " + S3_FORMAT + "'s3://bucket/a b/'"],
        "s3-uri-space",
    ),
    _p(
        repos({"path": "/a", "s3_uri": "s3://bkt/x/"}, {"path": "/b", "s3_uri": "s3://bkt/x/y/"}),
        [
            "storage.lustre.repositories[1].s3_uri: 's3://bkt/x/y/' overlaps repositories[0].s3_uri "
            "'s3://bkt/x/'; "
            "FSx links each S3 prefix to one path only"
        ],
        "s3-uri-nested-prefix",
    ),
    _p(
        repos({"path": "/a", "s3_uri": "s3://bkt/x/"}, {"path": "/b", "s3_uri": "s3://bkt/x"}),
        [
            "storage.lustre.repositories[1].s3_uri: 's3://bkt/x' overlaps repositories[0].s3_uri "
            "'s3://bkt/x/'; "
            "FSx links each S3 prefix to one path only"
        ],
        "s3-uri-same-prefix",
    ),
    _p(
        repos({"path": "/a", "s3_uri": "s3://bkt"}, {"path": "/b", "s3_uri": "s3://bkt/x/"}),
        [
            "storage.lustre.repositories[1].s3_uri: 's3://bkt/x/' overlaps repositories[0].s3_uri "
            "'s3://bkt'; "
            "FSx links each S3 prefix to one path only"
        ],
        "s3-uri-inside-whole-bucket",
    ),
    _p(
        repos({"path": "/a", "s3_uri": "s3://bkt/x/"}, {"path": "/a", "s3_uri": "s3://bkt/x/"}),
        [
            "storage.lustre.repositories[1].path: '/a' repeats repositories[0].path",
            "storage.lustre.repositories[1].s3_uri: 's3://bkt/x/' overlaps repositories[0].s3_uri "
            "'s3://bkt/x/'; "
            "FSx links each S3 prefix to one path only",
        ],
        "repository-repeated-whole",
    ),
    _p(
        repos({"path": "/a", "import": ["create"]}),
        ["storage.lustre.repositories[0].import[0]: must be 'new', 'changed' or 'deleted'; got 'create'"],
        "import-unknown-event",
    ),
    _p(
        repos({"path": "/a", "export": ["new", "NEW"]}),
        ["storage.lustre.repositories[0].export[1]: must be 'new', 'changed' or 'deleted'; got 'NEW'"],
        "export-unknown-event",
    ),
    _p(
        repos({"path": "/a", "import": "new"}),
        ["storage.lustre.repositories[0].import: must be a list; got 'new'"],
        "import-not-a-list",
    ),
    _p(
        repos({"path": "/a", "import": ["new", "new"]}),
        ["storage.lustre.repositories[0].import: lists 'new' more than once"],
        "import-repeats",
    ),
    _p(
        repos({"path": "/a", "export": ["new", "new", "changed", "changed"]}),
        ["storage.lustre.repositories[0].export: lists 'changed', 'new' more than once"],
        "export-repeats",
    ),
    # --- training ---------------------------------------------------------------------------------------
    _p({"training": {}}, ["training.model_parameters: required"], "model-parameters-missing"),
    _p(
        {"training.model_parameters": "lots"},
        ["training.model_parameters: must be a parameter count like 7B, 70B, 1.5T or 7e9; got 'lots'"],
        "model-parameters-word",
    ),
    _p(
        {"training.model_parameters": "70 GB"},
        ["training.model_parameters: must be a parameter count like 7B, 70B, 1.5T or 7e9; got '70 GB'"],
        "model-parameters-unit",
    ),
    _p(
        {"training.model_parameters": 0},
        ["training.model_parameters: must be more than 0; got 0"],
        "model-parameters-zero",
    ),
    _p(
        {"training.model_parameters": -7},
        ["training.model_parameters: must be more than 0; got -7"],
        "model-parameters-negative",
    ),
    _p(
        {"training.model_parameters": True},
        ["training.model_parameters: must be a number; got True"],
        "model-parameters-bool",
    ),
    _p(
        {"training.model_parameters": [70]},
        ["training.model_parameters: must be a number; got a list"],
        "model-parameters-list",
    ),
    _p(
        {"training.model_parameters": "7B", "training.checkpoint_write_seconds": 0},
        ["training.checkpoint_write_seconds: must be at least 1; got 0"],
        "checkpoint-seconds-zero",
    ),
    _p(
        {"training.model_parameters": "7B", "training.checkpoint_write_seconds": "2m"},
        ["training.checkpoint_write_seconds: must be a whole number; got '2m'"],
        "checkpoint-seconds-string",
    ),
    # --- nccl -------------------------------------------------------------------------------------------
    _p(
        {"nccl.env": {"nccl_debug": "WARN"}},
        [f"nccl.env.nccl_debug: 'nccl_debug' {NCCL_KEY}"],
        "nccl-key-lowercase",
    ),
    _p(
        {"nccl.env": {"CUDA_VISIBLE_DEVICES": "0"}},
        [f"nccl.env.CUDA_VISIBLE_DEVICES: 'CUDA_VISIBLE_DEVICES' {NCCL_KEY}"],
        "nccl-key-other-library",
    ),
    _p({"nccl.env": {"NCCL_": "1"}}, [f"nccl.env.NCCL_: 'NCCL_' {NCCL_KEY}"], "nccl-key-bare-prefix"),
    _p(
        {"nccl.env": {"NCCL_DEBUG": True}},
        ["nccl.env.NCCL_DEBUG: " + NCCL_BOOL.format(value="True")],
        "nccl-value-true",
    ),
    _p(
        {"nccl.env": {"FI_EFA_USE_HUGE_PAGE": False}},
        ["nccl.env.FI_EFA_USE_HUGE_PAGE: " + NCCL_BOOL.format(value="False")],
        "nccl-value-false",
    ),
    _p(
        {"nccl.env": {"NCCL_DEBUG": ["WARN"]}},
        ["nccl.env.NCCL_DEBUG: must be a string (quote it); got a list"],
        "nccl-value-list",
    ),
    _p(
        {"nccl.env": ["NCCL_DEBUG=WARN"]},
        ["nccl.env: must be a mapping of keys; got a list"],
        "nccl-env-list",
    ),
    # --- observability ----------------------------------------------------------------------------------
    _p(
        {"observability.prometheus": "self-hosted"},
        ["observability.prometheus: must be 'managed' or 'none'; got 'self-hosted'"],
        "prometheus-enum",
    ),
    _p(
        {"observability.grafana": "yes"},
        ["observability.grafana: must be 'self-hosted', 'managed' or 'none'; got 'yes'"],
        "grafana-enum",
    ),
    _p(
        {"observability.alarm_email": "ops"},
        ["observability.alarm_email: must be an email address like ops@example.com; got 'ops'"],
        "email-no-at",
    ),
    _p(
        {"observability.alarm_email": "ops@example"},
        ["observability.alarm_email: must be an email address like ops@example.com; got 'ops@example'"],
        "email-no-domain",
    ),
    _p(
        {"observability.alarm_email": "ops team@example.com"},
        ["observability.alarm_email: must be an email address like ops@example.com; got 'ops team@example.com'"],
        "email-space",
    ),
    _p(
        {"observability.prometheus": "none"},
        [
            "observability.grafana: 'self-hosted' needs prometheus: managed as its data source; "
            "set grafana: none or prometheus: managed"
        ],
        "grafana-default-without-prometheus",
    ),
    _p(
        {"observability.prometheus": "none", "observability.grafana": "managed"},
        [
            "observability.grafana: 'managed' needs prometheus: managed as its data source; "
            "set grafana: none or prometheus: managed"
        ],
        "grafana-managed-without-prometheus",
    ),
    # --- tags -------------------------------------------------------------------------------------------
    _p(
        {"tags": {"aws:team": "ml"}},
        ["tags.aws:team: 'aws:team': tag keys starting with 'aws:' are reserved by AWS"],
        "tag-aws-prefix",
    ),
    _p(
        {"tags": {"AWS:team": "ml"}},
        ["tags.AWS:team: 'AWS:team': tag keys starting with 'aws:' are reserved by AWS"],
        "tag-aws-prefix-upper",
    ),
    _p(
        {"tags": {f"k{i}": "v" for i in range(41)}},
        ["tags: at most 40 tags (AWS allows 50 per resource and fmcluster adds its own); got 41"],
        "tags-41",
    ),
    _p(
        {"tags": {"cost-center": 42}},
        ["tags.cost-center: must be a string (quote it); got 42"],
        "tag-value-number",
    ),
    _p({"tags": {"prod": True}}, ["tags.prod: must be a string (quote it); got True"], "tag-value-bool"),
    _p(
        {"tags": {"owner": None}},
        ["tags.owner: must be a string (quote it); got nothing (null)"],
        "tag-value-null",
    ),
    _p(
        {"tags": {"a#b": "v"}},
        ["tags.a#b: 'a#b': tag keys are 1-128 letters, digits, spaces and _.:/=+-@"],
        "tag-key-character",
    ),
    _p(
        {"tags": {"k" * 129: "v"}},
        [f"tags.{'k' * 129}: {'k' * 129!r}: tag keys are 1-128 letters, digits, spaces and _.:/=+-@"],
        "tag-key-too-long",
    ),
    _p(
        {"tags": {"team": "a\nb"}},
        ["tags.team: tag values are 0-256 letters, digits, spaces and _.:/=+-@; got 'a\\nb'"],
        "tag-value-character",
    ),
    _p(
        {"tags": {"team": "v" * 257}},
        [f"tags.team: tag values are 0-256 letters, digits, spaces and _.:/=+-@; got {'v' * 257!r}"],
        "tag-value-too-long",
    ),
    _p({"tags": ["team=ml"]}, ["tags: must be a mapping of keys; got a list"], "tags-list"),
    # --- unknown keys -----------------------------------------------------------------------------------
    _p({"nmae": "x"}, ["nmae: unknown key; did you mean 'name'?"], "unknown-top-typo"),
    _p(
        {"availability_zone": "use1-az6"},
        ["availability_zone: unknown key; did you mean 'availability_zone_id'?"],
        "unknown-top-az",
    ),
    _p({"vpc": {}}, [f"vpc: unknown key; allowed here: {TOP_KEYS}"], "unknown-top-no-match"),
    _p(
        {"network.cidr": "10.0.0.0/16"},
        ["network.cidr: unknown key; did you mean 'vpc_cidr'?"],
        "unknown-network-typo",
    ),
    _p(
        {"compute[0].instance": "p5.48xlarge"},
        ["compute[0].instance: unknown key; did you mean 'instance_type'?"],
        "unknown-compute-typo",
    ),
    _p(
        {"compute[0].zzz": 1},
        [f"compute[0].zzz: unknown key; allowed here: {GROUP_KEYS}"],
        "unknown-compute-no-match",
    ),
    _p(
        {"orchestrator.kind": "pcs"},
        [
            "orchestrator.kind: unknown key; allowed here: type, controller_instance_type, login_instance_type, "
            "slurm_version, ami_id, image_refresh, node_image, node_image_version, size, accounting, accounting_enforce"
        ],
        "unknown-orchestrator",
    ),
    _p({"storage.lustr": {}}, ["storage.lustr: unknown key; did you mean 'lustre'?"], "unknown-storage-typo"),
    _p(
        {"storage.lustre.capcity_gib": 4800},
        ["storage.lustre.capcity_gib: unknown key; did you mean 'capacity_gib'?"],
        "unknown-lustre-typo",
    ),
    _p(
        repos({"path": "/a", "imports": []}),
        ["storage.lustre.repositories[0].imports: unknown key; did you mean 'import'?"],
        "unknown-repository-typo",
    ),
    _p(
        repos({"path": "/a", "import_": []}),
        ["storage.lustre.repositories[0].import_: unknown key; did you mean 'import'?"],
        "unknown-repository-python-name",
    ),
    _p(
        {"training.model_params": "7B"},
        [
            "training.model_parameters: required",
            "training.model_params: unknown key; did you mean 'model_parameters'?",
        ],
        "unknown-training-typo",
    ),
    _p({"nccl.environment": {}}, ["nccl.environment: unknown key; allowed here: env"], "unknown-nccl-typo"),
    _p(
        {"observability.grafna": "none"},
        ["observability.grafna: unknown key; did you mean 'grafana'?"],
        "unknown-observability-typo",
    ),
]


@pytest.mark.parametrize(("changes", "expected"), INVALID)
def test_invalid_file_is_reported_line_by_line(changes: dict[str, object], expected: list[str]) -> None:
    assert lines_for(changes) == rendered(expected)


def test_several_groups_report_each_of_their_problems() -> None:
    compute = [group("GPU"), group("ok", count=-1), group("b", "p5.48xlarg", capacity="spot")]
    assert lines_for({"compute": compute}) == rendered(
        [
            "compute[0].name: " + GROUP_NAME_RULE + "'GPU'",
            "compute[1].count: must be at least 0; got -1",
            f"compute[2].instance_type: unknown instance type 'p5.48xlarg': {NOT_EC2}; did you mean 'p5.48xlarge'?",
            "compute[2].capacity: must be 'on-demand', 'capacity-block', 'odcr' or 'training-plan'; got 'spot'",
        ]
    )


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        _p(
            {"name": "Bad", "observability.prometheus": "none"},
            [
                "name: " + NAME_RULE + "'Bad'",
                "observability.grafana: 'self-hosted' needs prometheus: managed as its data source; "
                "set grafana: none or prometheus: managed",
            ],
            "bad-name-and-grafana-without-prometheus",
        ),
        _p(
            {"tags": {"aws:team": "ml"}, "compute": [group("a"), group("a")]},
            [
                "tags.aws:team: 'aws:team': tag keys starting with 'aws:' are reserved by AWS",
                "compute[1].name: 'a' is already the name of compute[0]; group names must be unique",
            ],
            "aws-tag-and-duplicate-group-names",
        ),
        _p(
            {"compute[0].capacity": "capacity-block"},
            [
                "compute[0].reservation_id: required when capacity is 'capacity-block'",
                "compute[0].capacity: 'capacity-block' needs orchestrator.type: pcs (EC2 reservations are "
                "consumed "
                "through launch templates); HyperPod takes reserved capacity as capacity: training-plan with "
                "training_plan_arn",
            ],
            "capacity-block-on-hyperpod-without-reservation",
        ),
    ],
)
def test_key_problems_and_cross_section_problems_are_reported_together(
    changes: dict[str, object], expected: list[str]
) -> None:
    """The contract: all problems in the file are reported in one run, not only the first."""
    assert sorted(lines_for(changes)) == sorted(rendered(expected))


def test_infinite_model_parameters_are_rejected() -> None:
    """'.inf' (or '1e400') is no parameter count; accepting it crashes the sizing behind `validate`."""
    with pytest.raises(ConfigError) as caught:
        parse(changed({"training.model_parameters": float("inf")}), source=SOURCE)
    assert len(caught.value.lines()) == 1
    assert caught.value.lines()[0].startswith(f"{SOURCE}: training.model_parameters: ")


def test_a_clean_config_error_names_the_source() -> None:
    with pytest.raises(ConfigError) as caught:
        parse(changed({"name": "a"}), source="other.yaml")
    assert caught.value.lines() == ["other.yaml: name: " + NAME_RULE + "'a'"]
    assert str(caught.value) == "other.yaml: name: " + NAME_RULE + "'a'"


# --- valid values ---------------------------------------------------------------------------------------

VALID = [
    pytest.param({}, id="minimal"),
    pytest.param({"name": "ab"}, id="name-2-chars"),
    pytest.param({"name": "a" * 24}, id="name-24-chars"),
    pytest.param({"name": "llm-pretrain-2"}, id="name-dashes-digits"),
    pytest.param({"account": "012345678901"}, id="account-leading-zero"),
    pytest.param({"region": "us-west-2", "availability_zone_id": "usw2-az4"}, id="region-us-west-2"),
    pytest.param({"region": "ap-northeast-1", "availability_zone_id": "apne1-az4"}, id="region-ap-northeast-1"),
    pytest.param({"region": "eu-central-1", "availability_zone_id": "euc1-az2"}, id="region-eu-central-1"),
    pytest.param({**PCS, "region": "us-gov-west-1", "availability_zone_id": "usgw1-az1"}, id="region-govcloud-pcs"),
    pytest.param({"region": "ca-central-1", "availability_zone_id": "cac1-az1"}, id="region-ca-central-1"),
    pytest.param({"secondary_availability_zone_id": "use1-az4"}, id="secondary-az"),
    pytest.param({**PCS, "compute[0].root_volume_gib": 1024}, id="root-volume-with-pcs"),
    pytest.param({"orchestrator.controller_instance_type": "m5.8xlarge"}, id="controller-type-with-hyperpod"),
    pytest.param({"network.vpc_cidr": "10.0.0.0/20"}, id="cidr-20"),
    pytest.param({"network.vpc_id": VPC, "network.subnet_id": SUBNET}, id="own-vpc"),
    pytest.param({**CAPACITY_BLOCK, "compute[0].instance_type": "p6-b200.48xlarge"}, id="pcs-capacity-block-p6-b200"),
    pytest.param({**OWN_VPC, **existing_fs()}, id="existing-file-system"),
    pytest.param({**OWN_VPC, **existing_fs(), "storage.lustre.efa": True}, id="existing-efa-file-system"),
    pytest.param(
        # an existing EFA-enabled file system is mounted over TCP by groups that are no EFA clients (per group
        # lustre_efa), and validate --live needs efa to say what the file system is: the client rule is not for it
        {**OWN_VPC, **existing_fs(), "storage.lustre.efa": True, "compute[0].efa": False},
        id="existing-efa-file-system-without-efa-clients",
    ),
    pytest.param({"network.vpc_id": "vpc-01234567", "network.subnet_id": "subnet-01234567"}, id="own-vpc-short-ids"),
    pytest.param({"network.vpc_cidr": "172.16.0.0/16"}, id="cidr-172-16"),
    pytest.param({"network.vpc_cidr": "192.168.0.0/16"}, id="cidr-192-168"),
    pytest.param({"network.egress": "none"}, id="egress-none"),
    pytest.param({"compliance": "control-tower"}, id="compliance-control-tower"),
    pytest.param({"network.vpc_cidr": "10.0.0.0/20", "compute[0].count": 1787}, id="nodes-fill-small-vpc"),
    pytest.param({"compute": [group(f"g{i}") for i in range(16)]}, id="compute-16-groups"),
    pytest.param({"compute[0].name": "a"}, id="group-name-1-char"),
    pytest.param({"compute[0].name": "a" * 20}, id="group-name-20-chars"),
    pytest.param({"compute[0].name": "gpu-h100-2"}, id="group-name-dashes"),
    pytest.param({"compute[0].count": 0}, id="count-0"),
    pytest.param({"compute[0].count": 6758}, id="count-6758"),
    pytest.param({**PCS, "compute[0].root_volume_gib": 100}, id="root-volume-100"),
    pytest.param({**PCS, "compute[0].root_volume_gib": 16384}, id="root-volume-16384"),
    pytest.param({"compute[0].efa": False}, id="efa-off-on-efa-type"),
    pytest.param({"compute[0].instance_type": "g5.4xlarge", "compute[0].efa": False}, id="efa-false-no-efa-type"),
    pytest.param({"compute[0].placement_group": False}, id="placement-group-off"),
    pytest.param({"compute[0].deep_health_checks": ["InstanceStress", "InstanceConnectivity"]}, id="deep-health-both"),
    pytest.param({"compute[0].count": 1, "compute[0].deep_health_checks": ["InstanceStress"]}, id="deep-health-stress"),
    pytest.param({"compute[0].deep_health_checks": []}, id="deep-health-none"),
    pytest.param(CAPACITY_BLOCK, id="capacity-block-on-pcs"),
    pytest.param({**CAPACITY_BLOCK, "compute[0].placement_group": False}, id="capacity-block-placement-false"),
    pytest.param(ODCR, id="odcr-on-pcs"),
    pytest.param(TRAINING_PLAN, id="training-plan-on-hyperpod"),
    pytest.param({**TRAINING_PLAN, "account": "123456789012"}, id="training-plan-same-account"),
    pytest.param(
        {
            **PCS,
            "compute": [
                group("gpa", capacity="capacity-block", reservation_id=RES),
                group("gpb", capacity="capacity-block", reservation_id=RES),
            ],
        },
        id="reservation-shared-by-one-type",
    ),
    pytest.param(
        {
            **PCS,
            "compute": [
                group("gpa", capacity="capacity-block", reservation_id=RES),
                group("gpb", "p5en.48xlarge", capacity="capacity-block", reservation_id=OTHER_RES),
            ],
        },
        id="two-reservations-two-types",
    ),
    pytest.param({**PCS, "orchestrator.login_instance_type": "m5.xlarge"}, id="pcs-with-login"),
    pytest.param({"orchestrator.controller_instance_type": "m7i.8xlarge"}, id="controller-type"),
    *[pytest.param({"storage.lustre.capacity_gib": gib}, id=f"capacity-{gib}") for gib in (1200, 2400, 4800, 9600)],
    *[pytest.param({"storage.lustre.throughput_per_tib": tier}, id=f"throughput-{tier}") for tier in (125, 500, 1000)],
    pytest.param({"storage.lustre.compression": "none"}, id="compression-none"),
    pytest.param({"storage.retain_on_delete": False}, id="retain-false"),
    *[
        pytest.param(
            {
                "storage.lustre.efa": True,
                "storage.lustre.throughput_per_tib": tier,
                "storage.lustre.capacity_gib": step,
            },
            id=f"efa-lustre-{tier}-{step}",
        )
        for tier, step in ((1000, 4800), (1000, 9600), (500, 9600), (250, 19200), (125, 38400), (250, 38400))
    ],
    pytest.param(
        {**EFA_LUSTRE_1000, "compute": [group("cpu", "g5.4xlarge"), group("gpu")]},
        id="efa-lustre-one-client-group-is-enough",
    ),
    *[
        pytest.param({"storage.lustre.metadata_iops": iops}, id=f"metadata-iops-{iops}")
        for iops in (1500, 3000, 6000, 12000, 24000, 192000)
    ],
    pytest.param(repos(*[{"path": f"/d{i}"} for i in range(8)]), id="repositories-8"),
    pytest.param(repos({"path": "/data"}, {"path": "/datasets"}), id="repository-sibling-paths"),
    pytest.param(repos({"path": "/a/b.c_d-e"}), id="repository-path-characters"),
    pytest.param(
        repos({"path": "/a", "s3_uri": "s3://bkt/x"}, {"path": "/b", "s3_uri": "s3://bkt/xy"}),
        id="s3-sibling-prefixes",
    ),
    pytest.param(
        repos({"path": "/a", "s3_uri": "s3://bkt-1/x/"}, {"path": "/b", "s3_uri": "s3://bkt-2/x/"}),
        id="s3-two-buckets",
    ),
    pytest.param(repos({"path": "/a", "s3_uri": "s3://my.bucket"}), id="s3-whole-bucket-with-dot"),
    pytest.param(repos({"path": "/a", "import": [], "export": ["new", "changed", "deleted"]}), id="events-export-all"),
    pytest.param(repos({"path": "/a", "import": ["deleted"]}), id="events-subset"),
    pytest.param({"training.model_parameters": "70B"}, id="training-70B"),
    pytest.param({"training.model_parameters": 7e9, "training.checkpoint_write_seconds": 1}, id="training-number"),
    pytest.param(
        {"nccl.env": {"NCCL_DEBUG": "WARN", "FI_EFA_USE_HUGE_PAGE": "0", "OFI_NCCL_PROTOCOL": "RDMA"}},
        id="nccl-prefixes",
    ),
    pytest.param({"observability.prometheus": "none", "observability.grafana": "none"}, id="observability-off"),
    pytest.param(
        {"observability.grafana": "managed", "observability.alarm_email": "ops@example.com"},
        id="grafana-managed-email",
    ),
    pytest.param({"tags": {f"k{i}": "v" for i in range(40)}}, id="tags-40"),
    pytest.param({"tags": {"team": "ml-platform", "cost center": "a/b:c=d+e@f.g", "empty": ""}}, id="tags-chars"),
    pytest.param({"tags": {"awsome": "yes"}}, id="tag-starting-with-aws-not-colon"),
    pytest.param({"storage.lustre": "none"}, id="no-file-system-hyperpod"),
    pytest.param({**PCS, "storage.lustre": "none", "storage.retain_on_delete": False}, id="no-file-system-pcs"),
    pytest.param({"storage.lustre": None}, id="lustre-null-is-the-default"),
    # botocore sagemaker TrainingPlanName: 1-64 characters (the rule once stopped at 63)
    pytest.param({**TRAINING_PLAN, "compute[0].training_plan_arn": ARN.replace("my-plan", "p" * 64)}, id="arn-name-64"),
]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [({**CAPACITY_BLOCK}, 60), ({**CAPACITY_BLOCK, "compute[0].drain_before_end_minutes": 0}, 0),
     ({**CAPACITY_BLOCK, "compute[0].drain_before_end_minutes": 35}, 35),
     ({**CAPACITY_BLOCK, "compute[0].drain_before_end_minutes": 1440}, 1440), ({**ODCR}, None), ({}, None),
     ({**TRAINING_PLAN}, 60), ({**TRAINING_PLAN, "compute[0].drain_before_end_minutes": 0}, 0)],
)  # fmt: skip
def test_drain_before_end_default_and_bounds(changes: dict[str, object], expected: int | None) -> None:
    assert parse(changed(changes), source=SOURCE).compute[0].drain_before_end_minutes == expected


@pytest.mark.parametrize("changes", VALID)
def test_valid_values_pass(changes: dict[str, object]) -> None:
    assert isinstance(valid(changes), ClusterConfig)


# --- defaults -------------------------------------------------------------------------------------------


def test_defaults_resolve_as_config_md_says() -> None:
    config = valid()
    assert config.account is None
    assert config.secondary_availability_zone_id is None
    assert (config.network.vpc_cidr, config.network.egress) == ("10.0.0.0/16", "nat")
    assert config.orchestrator.type == "hyperpod-slurm"
    assert config.orchestrator.controller_instance_type == "m5.4xlarge"
    assert config.orchestrator.login_instance_type is None
    assert config.compliance == "baseline"
    gpu = config.compute[0]
    assert gpu.capacity == "on-demand"
    assert gpu.reservation_id is None
    assert gpu.training_plan_arn is None
    assert gpu.placement_group is True
    assert gpu.root_volume_gib == 512
    assert gpu.efa is True
    assert gpu.deep_health_checks == ()
    assert config.storage.retain_on_delete is True
    assert config.training is None
    assert dict(config.nccl.env) == {}
    assert config.observability.prometheus == "managed"
    assert config.observability.grafana == "self-hosted"
    assert config.observability.alarm_email is None
    assert dict(config.tags) == {}


def test_lustre_defaults() -> None:
    lustre = valid().storage.lustre
    assert lustre.capacity_gib == 4800
    assert lustre.throughput_per_tib == 250
    assert lustre.efa is False
    assert lustre.compression == "lz4"
    assert lustre.metadata_iops is None
    assert lustre.repositories == ()


def test_repository_defaults() -> None:
    repository = valid(repos({"path": "/datasets/"})).storage.lustre.repositories[0]
    assert repository.path == "/datasets"
    assert repository.s3_uri is None
    assert repository.import_ == ("new", "changed", "deleted")
    assert repository.export == ()


def test_repository_events_as_given() -> None:
    repository = valid(repos({"path": "/ckpt", "import": [], "export": ["new", "changed", "deleted"]}))
    assert repository.storage.lustre.repositories[0].import_ == ()
    assert repository.storage.lustre.repositories[0].export == ("new", "changed", "deleted")


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        pytest.param({}, True, id="on-demand"),
        pytest.param(TRAINING_PLAN, True, id="training-plan"),
        pytest.param(CAPACITY_BLOCK, False, id="capacity-block"),
        pytest.param(ODCR, False, id="odcr"),
        pytest.param({"compute[0].placement_group": False}, False, id="on-demand-explicit-false"),
        pytest.param({"compute[0].placement_group": None}, True, id="on-demand-explicit-null"),
    ],
)
def test_placement_group_default(changes: dict[str, object], expected: bool) -> None:
    assert valid(changes).compute[0].placement_group is expected


def test_a_general_purpose_group_has_no_efa_and_no_placement_group_by_default() -> None:
    gpu = valid({**PCS, "compute[0].instance_type": "c6i.4xlarge"}).compute[0]
    assert (gpu.efa, gpu.placement_group, gpu.instance.cataloged) == (False, False, False)


def test_an_existing_placement_group_is_used_as_it_is_with_an_odcr() -> None:
    """The ODCR-in-a-cluster-placement-group case: the reservation serves only the group it was made in."""
    gpu = valid({**ODCR, "compute[0].placement_group": "odcr-pg"}).compute[0]
    assert (gpu.existing_placement_group, gpu.new_placement_group) == ("odcr-pg", False)


@pytest.mark.parametrize(
    ("changes", "min_count", "scales"),
    [
        pytest.param({**PCS}, 2, False, id="default-static"),
        pytest.param({**PCS, "compute[0].min_count": 0}, 0, True, id="to-zero"),
        pytest.param({**PCS, "compute[0].min_count": 2}, 2, False, id="explicit-static"),
        pytest.param({**ODCR, "compute[0].min_count": 2}, 2, False, id="odcr-static"),
    ],
)
def test_min_count_defaults_to_count(changes: dict[str, object], min_count: int, scales: bool) -> None:
    gpu = valid(changes).compute[0]
    assert (gpu.min_count, gpu.scales) == (min_count, scales)


@pytest.mark.parametrize("instance_type", list(catalog.CATALOG))
def test_efa_default_follows_the_catalog(instance_type: str) -> None:
    # On PCS in a region whose EC2 offers the type (cfn-lint's regional EC2 list; HyperPod offers some nowhere)
    lists = service_data()["ec2_instance_types"]
    offered = [r for r in ("us-east-1", *sorted(REGIONS)) if instance_type in lists.get(r, ())]
    region = offered[0] if offered else "us-east-1"  # a type the list knows nowhere is not judged
    where = {"region": region, "availability_zone_id": f"{az_id_prefix(region)}-az1"}
    neuron = catalog.CATALOG[instance_type].accelerator.startswith("AWS Trainium")
    image = {"orchestrator.ami_id": "ami-0123456789abcdef0"} if neuron else {}  # an image of its own on PCS
    config = valid({**PCS, **where, **image, "compute[0].instance_type": instance_type})
    assert config.compute[0].efa is bool(catalog.CATALOG[instance_type].efa_cards)


def test_efa_default_per_group() -> None:
    config = valid({"compute": [group("gpu"), group("cpu", "g5.4xlarge")]})
    assert [g.efa for g in config.compute] == [True, False]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        pytest.param("7B", 7e9, id="7B"),
        pytest.param("70B", 7e10, id="70B"),
        pytest.param("405B", 4.05e11, id="405B"),
        pytest.param("1.5T", 1.5e12, id="1.5T"),
        pytest.param("7e9", 7e9, id="7e9-string"),
        pytest.param("125M", 1.25e8, id="125M"),
        pytest.param(" 8 B ", 8e9, id="spaces"),
        pytest.param(7_000_000_000, 7e9, id="int"),
        pytest.param(7e9, 7e9, id="float"),
    ],
)
def test_model_parameters_parse(given: object, expected: float) -> None:
    training = valid({"training.model_parameters": given}).training
    assert training is not None
    assert training.model_parameters == pytest.approx(expected)
    assert training.checkpoint_write_seconds == 120


def test_nccl_whole_number_becomes_a_string() -> None:
    assert dict(valid({"nccl.env": {"NCCL_MIN_NCHANNELS": 8}}).nccl.env) == {"NCCL_MIN_NCHANNELS": "8"}


def test_total_nodes_sums_groups() -> None:
    assert valid({"compute": [group("a", count=3), group("b", count=4)]}).total_nodes == 7


def test_parse_does_not_modify_its_input() -> None:
    data = changed(repos({"path": "/datasets"}))
    before = copy.deepcopy(data)
    parse(data, source=SOURCE)
    assert data == before


@pytest.mark.parametrize(
    ("target", "attribute", "value"),
    [
        pytest.param(lambda c: c, "name", "other", id="cluster"),
        pytest.param(lambda c: c.network, "egress", "none", id="network"),
        pytest.param(lambda c: c.orchestrator, "type", "pcs", id="orchestrator"),
        pytest.param(lambda c: c.compute[0], "count", 3, id="compute-group"),
        pytest.param(lambda c: c.storage, "retain_on_delete", False, id="storage"),
        pytest.param(lambda c: c.storage.lustre, "capacity_gib", 9600, id="lustre"),
        pytest.param(lambda c: c.storage.lustre.repositories[0], "path", "/other", id="repository"),
        pytest.param(lambda c: c.observability, "grafana", "none", id="observability"),
    ],
)
def test_models_are_frozen(target, attribute: str, value: object) -> None:
    config = valid(repos({"path": "/datasets"}))
    with pytest.raises(ValidationError):
        setattr(target(config), attribute, value)


def test_lists_become_tuples() -> None:
    config = valid(repos({"path": "/datasets"}))
    assert isinstance(config.compute, tuple)
    assert isinstance(config.storage.lustre.repositories, tuple)
    assert isinstance(config.storage.lustre.repositories[0].import_, tuple)


@pytest.mark.parametrize("section", ["network", "orchestrator", "storage", "training", "nccl", "observability", "tags"])
def test_an_optional_section_left_empty_means_its_defaults(section: str) -> None:
    config = parse(changed({section: None}), source="cluster.yaml")
    assert getattr(config, section) == ClusterConfig.model_fields[section].get_default(call_default_factory=True)


def test_a_required_key_left_empty_is_still_required() -> None:
    assert lines_for({"name": None}) == rendered(["name: must be a string (quote it); got nothing (null)"])


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        pytest.param(
            {**PCS, "orchestrator.slurm_version": "23.11"},
            [
                "orchestrator.slurm_version: must be a Slurm version AWS PCS supports (24.11, 25.05, 25.11, 26.05); "
                "got '23.11'"
            ],
            id="slurm-version-unsupported",
        ),
        pytest.param(
            {"orchestrator.slurm_version": "25.11"},
            ["orchestrator.slurm_version: only for orchestrator.type: pcs (HyperPod runs the Slurm version it ships)"],
            id="slurm-version-on-hyperpod",
        ),
        pytest.param(
            {**PCS, "orchestrator.ami_id": "ami-123"},
            ["orchestrator.ami_id: must be an AMI id like ami-0123456789abcdef0; got 'ami-123'"],
            id="ami-id-format",
        ),
        pytest.param(
            {"orchestrator.ami_id": "ami-0123456789abcdef0"},
            ["orchestrator.ami_id: only for orchestrator.type: pcs (HyperPod nodes run SageMaker's HyperPod image)"],
            id="ami-id-on-hyperpod",
        ),
        pytest.param(
            {
                **PCS,
                "network.vpc_cidr": "10.0.0.0/16",
                "compute[0].count": 2048,
                "orchestrator.login_instance_type": "m5.xlarge",
            },
            [
                "compute: 2049 nodes (with the head node) exceed the 2,048 instances an AWS PCS cluster manages "
                "(size large); split the cluster or use orchestrator.type: hyperpod-slurm"
            ],
            id="pcs-too-many-nodes",
        ),
        pytest.param(
            {
                **PCS,
                "orchestrator.ami_id": "ami-0123456789abcdef0",
                "compute[0].instance_type": "p6e-gb200.36xlarge",
                "orchestrator.login_instance_type": "m5.4xlarge",
            },
            [
                "orchestrator.ami_id: one image serves every node group, but p6e-gb200.36xlarge is arm64, "
                "m5.4xlarge is x86_64; omit ami_id to get the matching AWS PCS image per architecture, or keep "
                "the groups to one architecture"
            ],
            id="ami-id-mixed-architectures",
        ),
        pytest.param(  # no login node: the metrics head node is an m5.xlarge (x86_64) on the same image
            {
                **PCS,
                "orchestrator.ami_id": "ami-0123456789abcdef0",
                "compute[0].instance_type": "p6e-gb200.36xlarge",
                "observability.prometheus": "managed",
            },
            [
                "orchestrator.ami_id: one image serves every node group, but p6e-gb200.36xlarge is arm64, "
                "m5.xlarge is x86_64; omit ami_id to get the matching AWS PCS image per architecture, or keep "
                "the groups to one architecture"
            ],
            id="ami-id-arm64-groups-with-the-x86-head-node",
        ),
        pytest.param(  # DLAMI Base (Ubuntu 24.04) release notes: the NVIDIA driver, CUDA and EFA, no Neuron driver
            {**PCS, "compute[0].instance_type": "trn1.32xlarge"},
            [
                "orchestrator.ami_id: required for trn1.32xlarge (AWS Trainium): the default PCS node image (the "
                "PCS-Ready DLAMI) carries the NVIDIA driver and CUDA, not the AWS Neuron driver these accelerators "
                "need; give an image with Neuron (for example one built from a Neuron DLAMI with AWS's PCS software "
                "installers)"
            ],
            id="trainium-on-the-pcs-ready-dlami",
        ),
        pytest.param(
            {**PCS, "orchestrator.image_refresh": "2026-12-01", "orchestrator.ami_id": "ami-0123456789abcdef0"},
            [
                "orchestrator.image_refresh: only without orchestrator.ami_id: it re-resolves the default PCS-Ready "
                "DLAMI, not an image of yours"
            ],
            id="image-refresh-with-an-ami-id",
        ),
        pytest.param(
            {**PCS, "orchestrator.image_refresh": "next week"},
            [
                "orchestrator.image_refresh: must be 1-64 letters, digits, '.', '_' or '-' (a label such as "
                "2026-12-01); got 'next week'"
            ],
            id="image-refresh-not-a-label",
        ),
        pytest.param(
            {"orchestrator.image_refresh": "1"},
            [
                "orchestrator.image_refresh: only for orchestrator.type: pcs (HyperPod nodes run SageMaker's "
                "HyperPod image)"
            ],
            id="image-refresh-on-hyperpod",
        ),
        pytest.param(
            {"orchestrator.node_image": "baked"},
            [
                "orchestrator.node_image: baked is only for orchestrator.type: pcs for now: fmcluster builds no "
                "HyperPod image yet. AWS documents the Slurm base "
                "(/aws/service/sagemaker-hyperpod/ami/x86_64/slurm-ubuntu-22.04/latest/ami-id, SageMaker developer "
                "guide 'Build a custom AMI') and its roll-out (UpdateClusterSoftware with ImageId, 'Cluster "
                "management with custom AMIs'), not an arm64 base, the AMI's root device, nor what a CloudFormation "
                "update of a group's ImageId does to its running nodes; use boot"
            ],
            id="node-image-baked-on-hyperpod",
        ),
        pytest.param(
            {**PCS, "orchestrator.node_image": "baked", "orchestrator.ami_id": "ami-0123456789abcdef0"},
            [
                "orchestrator.node_image: baked builds from the PCS-Ready DLAMI: remove orchestrator.ami_id, or bake "
                "your own image"
            ],
            id="node-image-baked-with-an-ami-id",
        ),
        pytest.param(
            {**PCS, "orchestrator.node_image": "prebuilt"},
            ["orchestrator.node_image: must be 'boot' or 'baked'; got 'prebuilt'"],
            id="node-image-unknown",
        ),
        pytest.param(
            {**PCS, "orchestrator.node_image_version": "2"},
            [
                "orchestrator.node_image_version: only with orchestrator.node_image: baked: it labels the baked "
                "image's build"
            ],
            id="node-image-version-without-baked",
        ),
        pytest.param(
            {**PCS, "orchestrator.node_image": "baked", "orchestrator.node_image_version": "v 2"},
            [
                "orchestrator.node_image_version: must be 1-64 letters, digits, '.', '_' or '-' (a label such as "
                "2026-12-01); got 'v 2'"
            ],
            id="node-image-version-not-a-label",
        ),
    ],
)
def test_pcs_orchestrator_rules(changes: dict[str, object], expected: list[str]) -> None:
    assert lines_for(changes) == rendered(expected)


def test_pcs_defaults_and_yaml_number_versions() -> None:
    # the newest of botocore pcs SchedulerRequest.version's valid values
    assert parse(changed(PCS), source="cluster.yaml").orchestrator.slurm_version == "26.05"
    assert parse(changed({**PCS, "orchestrator.slurm_version": "26.05"}), source="c").orchestrator.slurm_version == (
        "26.05"
    )
    assert (
        parse(changed({**PCS, "orchestrator.slurm_version": 25.05}), source="c").orchestrator.slurm_version == "25.05"
    )
    assert parse(changed({}), source="cluster.yaml").orchestrator.slurm_version is None


# --- image: the training image's base and versions ------------------------------------------------------------------
CUDA_128_BASE = "nvcr.io/nvidia/cuda:12.8.1-devel-ubuntu24.04"
CUDA_118_BASE = "nvcr.io/nvidia/cuda:11.8.0-devel-ubuntu22.04"
IMAGE_KEYS = "base_image, cuda, pytorch, efa_installer, aws_ofi_nccl, nccl"
IMAGE_REFERENCE_RULE = (
    "must be a container image reference with a tag or digest, like "
    "public.ecr.aws/deep-learning-containers/base:13.0.0-gpu-py312-cu130-ubuntu22.04-ec2 or "
    "nvcr.io/nvidia/cuda:13.0.2-devel-ubuntu24.04; got "
)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        pytest.param(
            {"image.cuda": 12.85},
            [
                'image.cuda: YAML read 12.85 as a number; quote the version (major.minor, e.g. "13.0"): numbers drop '
                "trailing zeros (13.10 becomes 13.1)"
            ],
            id="cuda-number-with-two-decimals",
        ),
        pytest.param(
            {"image.pytorch": 2.1},
            [
                'image.pytorch: YAML read 2.1 as a number; quote the version (major.minor.patch, e.g. "2.14.1"): '
                "numbers drop trailing zeros (2.10 becomes 2.1)"
            ],
            id="pytorch-number",
        ),
        pytest.param(
            {"image.nccl": 2},
            [
                'image.nccl: must be a quoted version, major.minor.patch with an optional -N, e.g. "2.31.2"; got the '
                "number 2"
            ],
            id="nccl-whole-number",
        ),
        pytest.param(
            {"image.efa_installer": "1.50"},
            ["image.efa_installer: must be a version of the form major.minor.patch, e.g. \"1.50.0\"; got '1.50'"],
            id="efa-installer-two-parts",
        ),
        pytest.param(
            {"image.aws_ofi_nccl": "v1.21.1"},
            ["image.aws_ofi_nccl: must be a version of the form major.minor.patch, e.g. \"1.21.1\"; got 'v1.21.1'"],
            id="plugin-leading-v",
        ),
        pytest.param(
            {"image.nccl": "2.31.2-aws"},
            [
                'image.nccl: must be a version of the form major.minor.patch with an optional -N, e.g. "2.31.2"; '
                "got '2.31.2-aws'"
            ],
            id="nccl-suffix",
        ),
        pytest.param({"image.cuda": True}, ["image.cuda: must be a string (quote it); got True"], id="cuda-boolean"),
        pytest.param(
            {"image.base_image": "ubuntu"}, ["image.base_image: " + IMAGE_REFERENCE_RULE + "'ubuntu'"], id="base-no-tag"
        ),
        pytest.param(
            {"image.base_image": "Nvidia/CUDA:12.8"},
            ["image.base_image: " + IMAGE_REFERENCE_RULE + "'Nvidia/CUDA:12.8'"],
            id="base-uppercase",
        ),
        pytest.param(
            {"image.cuda": "12.8"},
            [
                "image.cuda: '12.8' differs from the CUDA 13.0 of base_image "
                "public.ecr.aws/deep-learning-containers/base:13.0.0-gpu-py312-cu130-ubuntu22.04-ec2; "
                'set cuda: "13.0" or a base image of CUDA 12.8'
            ],
            id="cuda-differs-from-base",
        ),
        pytest.param(
            {"image.pytorch": "2.8.0"},
            [
                "image.pytorch: PyTorch 2.8.0 has no wheels for CUDA 13.0; CUDA 13.0 and later need PyTorch 2.9 or "
                'later (e.g. "2.14.1")'
            ],
            id="pytorch-too-old-for-cuda-13",
        ),
        pytest.param(
            {"image.base_image": CUDA_128_BASE, "image.cuda": "12.8", "image.pytorch": "2.6.0"},
            [
                "image.pytorch: PyTorch 2.6.0 has no wheels for CUDA 12.8; CUDA 12.8 and later need PyTorch 2.7 or "
                'later (e.g. "2.14.1")'
            ],
            id="pytorch-too-old-for-cuda-12-8",
        ),
        pytest.param(
            {"image.nccl": "2.27.3"},
            [
                "image.nccl: NCCL 2.27.3 does not build with CUDA 13.0; CUDA 13 needs NCCL 2.27.7 or later "
                '(e.g. "2.31.2")'
            ],
            id="nccl-too-old-for-cuda-13",
        ),
        pytest.param(
            {"image.aws_ofi_nccl": "1.5.0", "compute[0].instance_type": "p4d.24xlarge"},
            [
                "image.aws_ofi_nccl: the training image builds aws-ofi-nccl 1.6.0 or later (older plugins need "
                "FI_PROVIDER=efa and NCCL_PROTO=simple set by hand); got '1.5.0', use \"1.21.1\""
            ],
            id="plugin-older-than-the-image-builds",
        ),
        pytest.param(
            {
                "image.base_image": CUDA_118_BASE,
                "image.cuda": "11.8",
                "image.nccl": "2.17.1",
                "image.aws_ofi_nccl": "1.7.1",
                "image.efa_installer": "1.28.0",
            },
            # aws-ofi-nccl doc/efa-env-var.md, "p5.48xlarge": cuda>=12.0, "nccl>=2.18.0 (recommend at least 2.18.5)",
            # "aws-ofi-nccl>=1.7.2 (recommend at least 1.7.3)", efa-installer>=1.29.0: below the requirement, refused
            [
                "image.cuda: '11.8' is older than the 12.0.0 that P5-class instances (p5.48xlarge) need; use 12.0.0 "
                'or later (default "13.0")',
                "image.nccl: P5-class instances (p5*, p6*) need 2.18.0 or later; got '2.17.1' (below 2.18.5 the "
                "plugin disables NVLS on NVLink Switch platforms; aws-ofi-nccl doc/efa-env-var.md)",
                "image.aws_ofi_nccl: P5-class instances (p5*, p6*) need 1.7.2 or later; got '1.7.1' (aws-ofi-nccl "
                "doc/efa-env-var.md, p5.48xlarge)",
                "image.efa_installer: P5-class instances (p5*, p6*) need 1.29.0 or later; got '1.28.0' (older EFA "
                "installers make NCCL >= 2.19 raise libfabric errors; aws-ofi-nccl doc/efa-env-var.md)",
            ],
            id="p5-version-floors",
        ),
        pytest.param(
            {
                **US_WEST_2,  # where HyperPod offers both (its regional instance-type list)
                "compute": [group("b200", "p6-b200.48xlarge"), group("b300", "p6-b300.48xlarge")],
                "image.base_image": "nvcr.io/nvidia/cuda:12.6.3-devel-ubuntu24.04",
                "image.cuda": "12.6",
            },
            [
                "image.cuda: '12.6' cannot build for Blackwell GPUs (p6-b200.48xlarge, p6-b300.48xlarge): they need "
                'CUDA 12.8 or later; use "13.0" (with a base image of that CUDA)'
            ],
            id="blackwell-needs-cuda-12-8",
        ),
        pytest.param(
            {"image.cudnn": "9.13"}, ["image.cudnn: unknown key; did you mean 'cuda'?"], id="image-unknown-key-close"
        ),
        pytest.param(
            {"image.tensorflow": "2.20.0"},
            [f"image.tensorflow: unknown key; allowed here: {IMAGE_KEYS}"],
            id="image-unknown-key",
        ),
        pytest.param(
            {"name": "Bad", "image.aws_ofi_nccl": "1.7.1"},
            [
                "name: " + NAME_RULE + "'Bad'",
                "image.aws_ofi_nccl: P5-class instances (p5*, p6*) need 1.7.2 or later; got '1.7.1' (aws-ofi-nccl "
                "doc/efa-env-var.md, p5.48xlarge)",
            ],
            id="image-floors-reported-with-other-problems",
        ),
    ],
)
def test_image_rules(changes: dict[str, object], expected: list[str]) -> None:
    assert lines_for(changes) == rendered(expected)


@pytest.mark.parametrize(
    ("changes", "key", "value"),
    [
        pytest.param({"image.base_image": CUDA_128_BASE, "image.cuda": 12.8}, "cuda", "12.8", id="cuda-number"),
        pytest.param({"image.cuda": 13.0}, "cuda", "13.0", id="cuda-number-trailing-zero-kept"),
        pytest.param({"image.cuda": "13.0.2"}, "cuda", "13.0.2", id="cuda-with-patch"),
        pytest.param({"image.nccl": "2.31.2-1"}, "nccl", "2.31.2-1", id="nccl-release-suffix"),
        pytest.param(
            {"image.base_image": "public.ecr.aws/deep-learning-containers/base@sha256:" + "0" * 64},
            "base_image",
            "public.ecr.aws/deep-learning-containers/base@sha256:" + "0" * 64,
            id="base-by-digest",
        ),
        pytest.param(
            {
                "compute[0].instance_type": "p4d.24xlarge",
                "image.base_image": CUDA_118_BASE,
                "image.cuda": "11.8",
                "image.nccl": "2.18.3",
                "image.aws_ofi_nccl": "1.7.2",
                "image.efa_installer": "1.28.0",
                "image.pytorch": "2.5.1",
            },
            "nccl",
            "2.18.3",
            id="p4d-needs-no-p5-floors",
        ),
        pytest.param({"image": None}, "nccl", "2.31.2", id="image-left-empty"),
        # aws-ofi-nccl doc/efa-env-var.md, "p5.48xlarge": 2.18.0 / 1.7.2 are the requirements (2.18.5 / 1.7.3 only
        # recommended): the file is valid, `fmcluster validate` warns (tests/unit/test_advice.py)
        pytest.param(
            {
                "image.base_image": CUDA_128_BASE,
                "image.cuda": "12.8",
                "image.nccl": "2.18.0",
                "image.aws_ofi_nccl": "1.7.2",
            },
            "nccl",
            "2.18.0",
            id="p5-at-the-requirement",
        ),
    ],
)
def test_image_values_pass(changes: dict[str, object], key: str, value: str) -> None:
    assert getattr(valid(changes).image, key) == value


def test_image_defaults_serve_every_instance_type() -> None:
    from fmcluster.config.models import Image

    config = valid()
    assert config.image == Image()
    assert (config.image.cuda, config.image.pytorch, config.image.nccl) == ("13.0", "2.14.1", "2.31.2")
    assert (config.image.efa_installer, config.image.aws_ofi_nccl) == ("1.50.0", "1.21.1")
    assert config.image.base_image == (
        "public.ecr.aws/deep-learning-containers/base:13.0.0-gpu-py312-cu130-ubuntu22.04-ec2"
    )
    assert Image().problems_for(catalog.CATALOG) == {}
    explicit = valid({"compute[0].instance_type": "p6-b300.48xlarge", "image": {}})
    assert explicit.image == Image()


def test_no_file_system_is_said_with_none_and_leaves_no_lustre_settings() -> None:
    """`storage.lustre: none` is no file system; a file without `storage.lustre` keeps the default one (see
    `fmcluster.config.models.NO_FILE_SYSTEM` for why absence does not mean none)."""
    storage = valid({"storage.lustre": "none"}).storage
    assert (storage.lustre, storage.creates_file_system, storage.repositories) == (None, False, ())
    assert valid({"storage.lustre": None}).storage.creates_file_system
    assert valid().storage.lustre == valid({"storage.lustre": {}}).storage.lustre


def test_no_file_system_keeps_other_problems_and_skips_the_file_system_rules() -> None:
    """A file with another bad key: the rules read the sections one by one, and none of them reads a Lustre of
    `none` as the default file system (whose rules, such as EFA clients, would then fire)."""
    assert lines_for({"name": "A", "storage.lustre": "none"}) == rendered(["name: " + NAME_RULE + "'A'"])
