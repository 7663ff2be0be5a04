"""An existing FSx for Lustre file system, against stubbed FSx and EC2 responses (shapes: botocore's fsx and ec2
models, checked by the `stubs` fixture; FileSystemNotFound and InvalidGroup.NotFound are the models' or EC2's
documented error codes)."""

from __future__ import annotations

from fmcluster.live.file_system import check_file_system, check_security_group, file_system_checks
from tests.live.conftest import QUICKSTART, config_of

FS = "fs-0a1b2c3d4e5f60718"
DNS = f"{FS}.fsx.us-east-1.amazonaws.com"
VPC = "vpc-0a1b2c3d4e5f60718"
SUBNET = "subnet-0a1b2c3d4e5f60718"
GROUP = "sg-0a1b2c3d4e5f60718"
OWN = {"network": {"vpc_id": VPC, "subnet_id": SUBNET}}
STORAGE = {"lustre": {"file_system_id": FS, "dns_name": DNS, "mount_name": "abcdef12", "security_group_id": GROUP}}


def config(**lustre):
    return config_of(QUICKSTART, **OWN, storage={"lustre": {**STORAGE["lustre"], **lustre}})


def file_system(**changes):
    system = {
        "FileSystemId": FS,
        "FileSystemType": "LUSTRE",
        "Lifecycle": "AVAILABLE",
        "VpcId": VPC,
        "DNSName": DNS,
        "LustreConfiguration": {"MountName": "abcdef12", "EfaEnabled": False},
    }
    return {"FileSystems": [{**system, **changes}]}


def render(problems):
    return [problem.render("cluster.yaml") for problem in problems]


def test_only_an_existing_file_system_is_checked():
    assert file_system_checks(config_of(QUICKSTART), None) == []
    assert [check.path for check in file_system_checks(config(), None)] == [
        "storage.lustre.file_system_id",
        "storage.lustre.security_group_id",
    ]


def test_the_file_system_of_the_file_passes(stubs):
    stub = stubs().ok("fsx", "DescribeFileSystems", file_system(), {"FileSystemIds": [FS]})
    assert check_file_system(config(), stub.aws()) == []


def test_a_missing_file_system(stubs):
    stub = stubs().error("fsx", "DescribeFileSystems", "FileSystemNotFound", params={"FileSystemIds": [FS]})
    assert render(check_file_system(config(), stub.aws())) == [
        f"cluster.yaml: storage.lustre.file_system_id: file system {FS} does not exist in us-east-1"
    ]


def test_another_vpc_other_names_and_efa(stubs):
    other = file_system(
        VpcId="vpc-0fedcba9876543210",
        Lifecycle="MISCONFIGURED",
        DNSName=f"{FS}.fsx.us-west-2.amazonaws.com",
        LustreConfiguration={"MountName": "zz", "EfaEnabled": True},
    )
    stub = stubs().ok("fsx", "DescribeFileSystems", other, {"FileSystemIds": [FS]})
    assert render(check_file_system(config(), stub.aws())) == [
        f"cluster.yaml: storage.lustre.file_system_id: {FS} is MISCONFIGURED, not AVAILABLE",
        f"cluster.yaml: storage.lustre.file_system_id: {FS} is in vpc-0fedcba9876543210, not in network.vpc_id {VPC}",
        f"cluster.yaml: storage.lustre.dns_name: {FS}'s is {FS}.fsx.us-west-2.amazonaws.com, not {DNS}",
        f"cluster.yaml: storage.lustre.mount_name: {FS}'s is zz, not abcdef12",
        f"cluster.yaml: storage.lustre.efa: {FS} is EFA-enabled; set efa: true",
    ]


def group(ingress, egress):
    return {
        "SecurityGroups": [{"GroupId": GROUP, "VpcId": VPC, "IpPermissions": ingress, "IpPermissionsEgress": egress}]
    }


def tcp(low, high, cidr):
    return {"IpProtocol": "tcp", "FromPort": low, "ToPort": high, "IpRanges": [{"CidrIp": cidr}]}


SUBNETS = {"Subnets": [{"SubnetId": SUBNET, "VpcId": VPC, "CidrBlock": "10.1.0.0/20"}]}


def group_messages(stubs, response):
    stub = stubs()
    stub.ok("ec2", "DescribeSecurityGroups", response, {"GroupIds": [GROUP]})
    stub.ok("ec2", "DescribeSubnets", SUBNETS, {"SubnetIds": [SUBNET]})
    return render(check_security_group(config(), stub.aws()))


def test_a_group_open_to_the_vpc_block_both_ways_passes(stubs):
    rules = [tcp(988, 988, "10.1.0.0/16"), tcp(1018, 1023, "10.1.0.0/16")]
    all_out = [{"IpProtocol": "-1", "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}]
    assert group_messages(stubs, group(rules, all_out)) == []


def test_a_group_that_admits_only_itself_and_part_of_the_ports(stubs):
    itself = {"IpProtocol": "tcp", "FromPort": 988, "ToPort": 988, "UserIdGroupPairs": [{"GroupId": GROUP}]}
    narrow = tcp(1018, 1020, "10.1.0.0/20")
    assert group_messages(stubs, group([itself, narrow], [tcp(988, 1023, "10.1.0.0/24")])) == [
        f"cluster.yaml: storage.lustre.security_group_id: security group {GROUP} lets no Lustre traffic (TCP 988, "
        "1018-1023) in from the nodes' subnet 10.1.0.0/20; add a rule for that block (the nodes' own group is made "
        "by the deploy, so no rule can name it before)",
        f"cluster.yaml: storage.lustre.security_group_id: security group {GROUP} lets no Lustre traffic (TCP 988, "
        "1018-1023) out to the nodes' subnet 10.1.0.0/20; add a rule for that block (the nodes' own group is made "
        "by the deploy, so no rule can name it before)",
    ]


def test_a_missing_group(stubs):
    stub = stubs().error("ec2", "DescribeSecurityGroups", "InvalidGroup.NotFound", params={"GroupIds": [GROUP]})
    assert render(check_security_group(config(), stub.aws())) == [
        f"cluster.yaml: storage.lustre.security_group_id: security group {GROUP} does not exist in us-east-1"
    ]
