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
OTHER_GROUP = "sg-0fedcba9876543210"
ENI = "eni-0a1b2c3d4e5f60718"
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
        "SubnetIds": [SUBNET],
        "NetworkInterfaceIds": [ENI],
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
        SubnetIds=["subnet-0fedcba9876543210"],
    )
    stub = stubs().ok("fsx", "DescribeFileSystems", other, {"FileSystemIds": [FS]})
    assert render(check_file_system(config(), stub.aws())) == [
        f"cluster.yaml: storage.lustre.file_system_id: {FS} is MISCONFIGURED, not AVAILABLE",
        f"cluster.yaml: storage.lustre.file_system_id: {FS} is in vpc-0fedcba9876543210, not in network.vpc_id {VPC}",
        f"cluster.yaml: storage.lustre.dns_name: {FS}'s is {FS}.fsx.us-west-2.amazonaws.com, not {DNS}",
        f"cluster.yaml: storage.lustre.mount_name: {FS}'s is zz, not abcdef12",
        f"cluster.yaml: storage.lustre.efa: {FS} is EFA-enabled; set efa: true",
        "cluster.yaml: storage.lustre.efa: warning: fs-0a1b2c3d4e5f60718 is in subnet-0fedcba9876543210, not in "
        f"network.subnet_id {SUBNET}: EFA traffic does not cross subnets (EC2 user guide, EFA limitations), so the "
        "nodes reach it over TCP at best (unconfirmed what LNet does then)",
    ]


def group(ingress, egress, group_id=GROUP):
    return {"GroupId": group_id, "VpcId": VPC, "IpPermissions": ingress, "IpPermissionsEgress": egress}


def tcp(low, high, cidr):
    return {"IpProtocol": "tcp", "FromPort": low, "ToPort": high, "IpRanges": [{"CidrIp": cidr}]}


SUBNETS = {"Subnets": [{"SubnetId": SUBNET, "VpcId": VPC, "CidrBlock": "10.1.0.0/20"}]}


def interfaces(*group_ids):
    """DescribeNetworkInterfaces (botocore ec2 NetworkInterface.Groups: GroupIdentifier GroupId, GroupName)."""
    groups = [{"GroupId": group_id, "GroupName": group_id} for group_id in group_ids]
    return {"NetworkInterfaces": [{"NetworkInterfaceId": ENI, "VpcId": VPC, "Groups": groups}]}


def group_messages(stubs, *groups, carried=(GROUP,), efa=False, **lustre):
    stub = stubs().ok("fsx", "DescribeFileSystems", file_system(), {"FileSystemIds": [FS]})
    stub.ok("ec2", "DescribeNetworkInterfaces", interfaces(*carried), {"NetworkInterfaceIds": [ENI]})
    ids = sorted({*carried, GROUP})
    stub.ok("ec2", "DescribeSecurityGroups", {"SecurityGroups": list(groups)}, {"GroupIds": ids})
    stub.ok("ec2", "DescribeSubnets", SUBNETS, {"SubnetIds": [SUBNET]})
    return render(check_security_group(config(efa=efa, **lustre), stub.aws()))


LUSTRE_IN = [tcp(988, 988, "10.1.0.0/16"), tcp(1018, 1023, "10.1.0.0/16")]
ALL_OUT = [{"IpProtocol": "-1", "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}]


def test_a_group_open_to_the_vpc_block_both_ways_passes(stubs):
    assert group_messages(stubs, group(LUSTRE_IN, ALL_OUT)) == []


def test_a_group_that_admits_only_itself_and_part_of_the_ports(stubs):
    """A rule naming the file system's own group admits nothing: the nodes do not carry it."""
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


def test_the_rules_of_all_the_file_systems_groups_count_together(stubs):
    """The file system carries two groups: one admits in, the other lets out; together they pass."""
    assert (
        group_messages(stubs, group(LUSTRE_IN, []), group([], ALL_OUT, OTHER_GROUP), carried=(GROUP, OTHER_GROUP)) == []
    )


def test_a_group_the_file_system_does_not_carry(stubs):
    """botocore fsx FileSystem.NetworkInterfaceIds -> ec2 DescribeNetworkInterfaces Groups: the named group is judged
    only as one of the file system's; the rules of the groups it carries are judged."""
    assert group_messages(stubs, group([], []), group(LUSTRE_IN, ALL_OUT, OTHER_GROUP), carried=(OTHER_GROUP,)) == [
        f"cluster.yaml: storage.lustre.security_group_id: {FS}'s network interfaces carry {OTHER_GROUP}, not {GROUP}: "
        "name one of the file system's own groups"
    ]


def test_rules_by_another_group_or_a_prefix_list_are_unchecked(stubs):
    by_group = {"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": "sg-0eeeeeeeeeeeeeee5"}]}
    by_list = {"IpProtocol": "-1", "PrefixListIds": [{"PrefixListId": "pl-0123"}]}
    assert group_messages(stubs, group([by_group], [by_list])) == [
        f"cluster.yaml: storage.lustre.security_group_id: warning: security group {GROUP} lets Lustre traffic in from "
        "the nodes' subnet 10.1.0.0/20 only through sg-0eeeeeeeeeeeeeee5, unchecked: a security group admits the "
        "nodes only if they carry it (their own group is made by the deploy), and a prefix list's entries are not read",
        f"cluster.yaml: storage.lustre.security_group_id: warning: security group {GROUP} lets Lustre traffic out to "
        "the nodes' subnet 10.1.0.0/20 only through pl-0123, unchecked: a security group admits the nodes only if "
        "they carry it (their own group is made by the deploy), and a prefix list's entries are not read",
    ]


def test_an_efa_file_system_needs_all_traffic_with_the_nodes_group(stubs):
    """FSx for Lustre user guide (EFA-enabled file systems): its security group allows all traffic to and from itself
    and the clients' group; the nodes' group exists only after the deploy, so this is a warning."""
    assert group_messages(stubs, group(LUSTRE_IN, ALL_OUT), efa=True) == [
        f"cluster.yaml: storage.lustre.security_group_id: warning: {FS} is EFA-enabled: FSx asks its security group "
        "to allow all traffic to and from itself and the clients' security group; the nodes' group is made by the "
        f"deploy, so after it add all-traffic rules both ways between {GROUP} and the nodes' EFA security group "
        "(fmcluster adds the nodes' side)"
    ]


def test_a_missing_group(stubs):
    stub = stubs().ok("fsx", "DescribeFileSystems", file_system(), {"FileSystemIds": [FS]})
    stub.ok("ec2", "DescribeNetworkInterfaces", interfaces(GROUP), {"NetworkInterfaceIds": [ENI]})
    stub.error("ec2", "DescribeSecurityGroups", "InvalidGroup.NotFound", params={"GroupIds": [GROUP]})
    assert render(check_security_group(config(), stub.aws())) == [
        f"cluster.yaml: storage.lustre.security_group_id: security group {GROUP} does not exist in us-east-1"
    ]
