"""An existing FSx for Lustre file system (examples/hyperpod-own-file-system.yaml): mounted, never created."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template

from fmcluster.constructs.lustre import ExistingFileSystemAccess

pytestmark = pytest.mark.synth

FS = "fs-0a1b2c3d4e5f60718"
DNS = f"{FS}.fsx.us-east-1.amazonaws.com"
FS_GROUP = "sg-0a1b2c3d4e5f60718"


@pytest.fixture(scope="module")
def own_fs(synthesized):
    return synthesized["hyperpod-own-file-system"]


def test_no_file_system_nor_anything_of_it_is_created(own_fs):
    made = {resource["Type"] for template in own_fs.templates.values() for resource in template["Resources"].values()}
    assert not made & {"AWS::FSx::FileSystem", "AWS::FSx::DataRepositoryAssociation", "AWS::EC2::VPC"}
    assert "hp-own-fs-data-links" not in own_fs.templates


def test_hyperpod_mounts_the_file_system_of_the_file(own_fs):
    cluster = own_fs.templates["hp-own-fs-cluster"]
    (hyperpod,) = [r for r in cluster["Resources"].values() if r["Type"] == "AWS::SageMaker::Cluster"]
    mounts = [
        config["FsxLustreConfig"]
        for group in hyperpod["Properties"]["InstanceGroups"]
        for config in group.get("InstanceStorageConfigs", [])
        if "FsxLustreConfig" in config
    ]
    assert mounts and all(m["DnsName"] == DNS and m["MountName"] == "abcdef12" for m in mounts)


def test_the_nodes_and_the_file_systems_group_reach_each_other_on_lustres_ports_only(own_fs):
    storage = own_fs.templates["hp-own-fs-storage"]
    rules = [r["Properties"] for r in storage["Resources"].values() if r["Type"] == "AWS::EC2::SecurityGroupEgress"]
    # FSx for Lustre user guide, "File system access control with Amazon VPC": TCP 988 and 1018-1023
    assert sorted((r["IpProtocol"], r["FromPort"], r["ToPort"]) for r in rules) == [
        ("tcp", 988, 988),
        ("tcp", 1018, 1023),
    ]
    assert all(r["DestinationSecurityGroupId"] == FS_GROUP for r in rules)
    # the same guide: the file system's servers connect to their clients too (inbound and outbound, both groups)
    inbound = [r["Properties"] for r in storage["Resources"].values() if r["Type"] == "AWS::EC2::SecurityGroupIngress"]
    assert sorted((r["IpProtocol"], r["FromPort"], r["ToPort"]) for r in inbound) == [
        ("tcp", 988, 988),
        ("tcp", 1018, 1023),
    ]
    assert all(r["SourceSecurityGroupId"] == FS_GROUP for r in inbound)


def test_outputs_name_the_existing_file_system(own_fs):
    outputs = own_fs.templates["hp-own-fs-storage"]["Outputs"]
    assert {str(o["Value"]) for o in outputs.values()} >= {FS, DNS, "abcdef12"}


def test_no_dashboard_or_alarm_watches_a_file_system_of_unknown_size(own_fs):
    assert FS not in str(own_fs.templates["hp-own-fs-observability"])


def test_an_efa_enabled_file_system_is_reached_on_all_traffic():
    stack = cdk.Stack(cdk.App(), "S")
    vpc = ec2.Vpc.from_vpc_attributes(stack, "Vpc", vpc_id="vpc-0a1b2c3d4e5f60718", availability_zones=["use1-az6"])
    nodes = ec2.SecurityGroup(stack, "Nodes", vpc=vpc, allow_all_outbound=False)
    ExistingFileSystemAccess(stack, "Lustre", clients=nodes, file_system_security_group_id=FS_GROUP, efa=True)
    rules = Template.from_stack(stack).find_resources("AWS::EC2::SecurityGroupEgress")
    # FSx for Lustre user guide, EFA-enabled file systems: all traffic between clients and the file system
    assert [rule["Properties"]["IpProtocol"] for rule in rules.values()] == ["-1"]
    inbound = Template.from_stack(stack).find_resources("AWS::EC2::SecurityGroupIngress")
    assert [rule["Properties"]["IpProtocol"] for rule in inbound.values()] == ["-1"]
