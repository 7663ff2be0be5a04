"""LustreStorage and the storage stack: defaults, every option, S3 links, security groups, removal policies,
prop errors for library users, cdk-nag and cfn-lint.

A library user's app, built and synthesized once for the module (tests/support.py), holds three file systems side
by side (defaults; every option; every numeric prop a token). The storage stacks come from the session's examples
(tests/conftest.py `synthesized`): the quickstart (retain_on_delete true) and the isolated B300 example (false).
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_s3 as s3

from fmcluster.config import Repository
from fmcluster.constructs.buckets import ProjectBuckets
from fmcluster.constructs.lustre import DataRepositoryLinks, LustreStorage
from fmcluster.constructs.network import TrainingNetwork
from fmcluster.stacks.network import NetworkStack
from fmcluster.stacks.storage import StorageStack
from tests import support
from tests.conftest import SynthesizedExample
from tests.support import of_type

ENV = cdk.Environment(account="123456789012", region="us-east-1")
REPOSITORIES = (
    Repository(path="/datasets"),
    {"path": "/checkpoints", "import": [], "export": ["new", "changed", "deleted"]},
    Repository(path="/external/c4", s3_uri="s3://my-datasets/c4/"),
    {"path": "/scratch", "s3_uri": "s3://my-scratch/runs", "import": [], "export": []},
)

pytestmark = pytest.mark.synth
TCP_988 = ("tcp", 988, 988)
TCP_1018_1023 = ("tcp", 1018, 1023)
ALL_TRAFFIC = ("-1", None, None)
STATEFUL = ("AWS::FSx::FileSystem", "AWS::S3::Bucket", "AWS::KMS::Key", "AWS::Logs::LogGroup")


@dataclass
class Library:
    built: support.Synthesized
    stack: cdk.Stack
    network: TrainingNetwork
    buckets: ProjectBuckets
    default: LustreStorage
    full: LustreStorage
    tokens: LustreStorage
    login: ec2.SecurityGroup

    @property
    def template(self) -> dict:
        return self.built.templates[self.stack.stack_name]

    def logical_id(self, element: cdk.CfnElement) -> str:
        return self.stack.resolve(self.stack.get_logical_id(element))

    def ref(self, value: str) -> object:
        return self.stack.resolve(value)

    def file_system(self, lustre: LustreStorage) -> dict:
        return self.template["Resources"][self.logical_id(lustre.file_system)]


@pytest.fixture(scope="module")
def lib(tmp_path_factory) -> Library:
    app = support.app(tmp_path_factory.mktemp("lustre-library"))
    stack = cdk.Stack(app, "LustreLibrary", env=ENV)
    network = TrainingNetwork(stack, "Network", availability_zone_id="use1-az6")
    buckets = ProjectBuckets(stack, "Buckets")
    placement = {"vpc": network.vpc, "subnet": network.compute_subnet}
    default = LustreStorage(stack, "Defaults", **placement, client_security_groups=[network.efa_security_group])
    full = LustreStorage(
        stack,
        "Full",
        **placement,
        client_security_groups=[network.efa_security_group],
        capacity_gib=19200,
        throughput_per_tib=250,
        efa=True,
        compression="none",
        metadata_iops=12000,
        repositories=REPOSITORIES,
        data_bucket=buckets.data_bucket,
        kms_key=buckets.key,
        removal_policy=cdk.RemovalPolicy.DESTROY,
    )
    tokens = LustreStorage(
        stack,
        "Tokens",
        **placement,
        client_security_groups=[],
        efa=True,
        capacity_gib=cdk.CfnParameter(stack, "Capacity", type="Number", default=2400).value_as_number,
        throughput_per_tib=cdk.CfnParameter(stack, "Throughput", type="Number", default=125).value_as_number,
        compression=cdk.CfnParameter(stack, "Compression", default="LZ4").value_as_string,
        metadata_iops=cdk.CfnParameter(stack, "MetadataIops", type="Number", default=1500).value_as_number,
    )
    login = ec2.SecurityGroup(stack, "Login", vpc=network.vpc, allow_all_outbound=False)
    tokens.allow_clients(login)
    return Library(
        built=support.synthesize(app, [stack]),
        stack=stack,
        network=network,
        buckets=buckets,
        default=default,
        full=full,
        tokens=tokens,
        login=login,
    )


@dataclass
class StorageExample:
    """An example's storage stack (its file system, buckets and key), its network stack, and the session's synth."""

    example: SynthesizedExample

    @property
    def storage(self) -> StorageStack:
        return self.example.built.storage

    @property
    def network(self) -> NetworkStack:
        return self.example.built.network

    @property
    def template(self) -> dict:
        return self.example.templates[self.storage.stack_name]


@pytest.fixture(scope="module")
def clusters(synthesized) -> dict[str, StorageExample]:
    """`keep`: the quickstart (retain_on_delete by default, 1200 GiB, /datasets and /checkpoints in the data bucket);
    `drop`: the isolated B300 example (retain_on_delete: false, an EFA-enabled file system, two repositories)."""
    return {"keep": StorageExample(synthesized["quickstart"]), "drop": StorageExample(synthesized["p6-b300-isolated"])}


# --- the file system ------------------------------------------------------------------------------


def test_defaults_build_a_persistent_2_ssd_file_system_with_automatic_metadata(lib):
    resource = lib.file_system(lib.default)
    props = resource["Properties"]
    assert {
        key: props[key] for key in ("FileSystemType", "FileSystemTypeVersion", "StorageType", "StorageCapacity")
    } == {
        "FileSystemType": "LUSTRE",
        "FileSystemTypeVersion": "2.15",
        "StorageType": "SSD",
        "StorageCapacity": 4800,
    }
    lustre = dict(props["LustreConfiguration"])
    assert lustre.pop("LogConfiguration")["Level"] == "WARN_ERROR"
    assert lustre == {
        "DeploymentType": "PERSISTENT_2",
        "PerUnitStorageThroughput": 250,
        "DataCompressionType": "LZ4",
        "MetadataConfiguration": {"Mode": "AUTOMATIC"},
        "EfaEnabled": False,
    }
    assert props["SubnetIds"] == [lib.ref(lib.network.compute_subnet.subnet_id)]
    assert props["SecurityGroupIds"] == [lib.ref(lib.default.security_group.security_group_id)]
    assert (resource["DeletionPolicy"], resource["UpdateReplacePolicy"]) == ("Retain", "Retain")


def test_defaults_encrypt_with_a_customer_key_of_their_own_with_rotation(lib):
    key = lib.default.node.try_find_child("Key")
    assert key is not None and lib.default.kms_key is key
    props = lib.file_system(lib.default)["Properties"]
    assert props["KmsKeyId"] == lib.ref(lib.default.kms_key.key_arn)
    resource = lib.template["Resources"][lib.logical_id(key.node.default_child)]
    assert resource["Properties"]["EnableKeyRotation"] is True
    assert (resource["DeletionPolicy"], resource["UpdateReplacePolicy"]) == ("Retain", "Retain")


def test_errors_and_warnings_go_to_a_log_group_under_aws_fsx(lib):
    group_id = lib.logical_id(lib.default.log_group.node.default_child)
    group = lib.template["Resources"][group_id]
    # /aws/fsx/lustre/<construct's unique name>-<the stack's UUID>
    assert group["Properties"]["LogGroupName"] == {
        "Fn::Join": [
            "",
            [
                "/aws/fsx/lustre/LustreLibraryDefaultsE87447B7-",
                {"Fn::Select": [2, {"Fn::Split": ["/", {"Ref": "AWS::StackId"}]}]},
            ],
        ]
    }
    assert group["Properties"]["RetentionInDays"] == 365
    assert group["DeletionPolicy"] == "Retain"
    destination = lib.file_system(lib.default)["Properties"]["LustreConfiguration"]["LogConfiguration"]["Destination"]
    assert destination == {"Fn::Join": ["", ["arn:aws:logs:us-east-1:123456789012:log-group:", {"Ref": group_id}]]}


def test_every_option_reaches_the_file_system(lib):
    resource = lib.file_system(lib.full)
    props = resource["Properties"]
    assert props["StorageCapacity"] == 19200
    assert props["KmsKeyId"] == lib.ref(lib.buckets.key.key_arn)
    assert lib.full.kms_key is lib.buckets.key and lib.full.node.try_find_child("Key") is None
    lustre = props["LustreConfiguration"]
    assert lustre["PerUnitStorageThroughput"] == 250
    assert lustre["DataCompressionType"] == "NONE"
    assert lustre["MetadataConfiguration"] == {"Mode": "USER_PROVISIONED", "Iops": 12000}
    assert lustre["EfaEnabled"] is True
    assert (resource["DeletionPolicy"], resource["UpdateReplacePolicy"]) == ("Delete", "Delete")
    group = lib.template["Resources"][lib.logical_id(lib.full.log_group.node.default_child)]
    assert group["DeletionPolicy"] == "Delete"


def test_unresolved_tokens_are_skipped_by_validation_and_passed_through(lib):
    lustre = lib.file_system(lib.tokens)["Properties"]["LustreConfiguration"]
    assert lib.file_system(lib.tokens)["Properties"]["StorageCapacity"] == {"Ref": "Capacity"}
    assert lustre["PerUnitStorageThroughput"] == {"Ref": "Throughput"}
    assert lustre["DataCompressionType"] == {"Ref": "Compression"}
    assert lustre["MetadataConfiguration"] == {"Mode": "USER_PROVISIONED", "Iops": {"Ref": "MetadataIops"}}
    assert lustre["EfaEnabled"] is True


def test_exposes_mount_attributes_and_connections(lib):
    file_system_id = lib.logical_id(lib.default.file_system)
    assert lib.ref(lib.default.dns_name) == {"Fn::GetAtt": [file_system_id, "DNSName"]}
    assert lib.ref(lib.default.mount_name) == {"Fn::GetAtt": [file_system_id, "LustreMountName"]}
    assert lib.ref(lib.default.file_system_id) == {"Ref": file_system_id}
    assert lib.default.connections.security_groups == [lib.default.security_group]
    assert lib.ref(lib.default.connections.default_port.to_string()) == "988"


# --- security groups ------------------------------------------------------------------------------


def group_rules(template: dict, group: object) -> set[tuple]:
    """(direction, other group, protocol, from, to) of every standalone rule of `group` or pointing at it."""
    found = set()
    for rule in of_type(template, "AWS::EC2::SecurityGroupIngress").values():
        p = rule["Properties"]
        if group in (p["GroupId"], p.get("SourceSecurityGroupId")):
            found.add(
                (
                    "in",
                    json.dumps(p["GroupId"]),
                    json.dumps(p.get("SourceSecurityGroupId")),
                    p["IpProtocol"],
                    p.get("FromPort"),
                    p.get("ToPort"),
                )
            )
    for rule in of_type(template, "AWS::EC2::SecurityGroupEgress").values():
        p = rule["Properties"]
        if group in (p["GroupId"], p.get("DestinationSecurityGroupId")):
            found.add(
                (
                    "out",
                    json.dumps(p["GroupId"]),
                    json.dumps(p.get("DestinationSecurityGroupId")),
                    p["IpProtocol"],
                    p.get("FromPort"),
                    p.get("ToPort"),
                )
            )
    return found


def both_ways(a: object, b: object, ports: tuple[tuple, ...]) -> set[tuple]:
    """Rules that let `a` and `b` talk on `ports` in both directions, as both groups record them."""
    a, b = json.dumps(a), json.dumps(b)
    pairs = {(a, b), (b, a)} if a != b else {(a, a)}
    return {(direction, group, other, *port) for group, other in pairs for direction in ("in", "out") for port in ports}


def test_lustre_ports_open_both_ways_between_the_file_system_and_its_clients_only(lib):
    fs = lib.ref(lib.default.security_group.security_group_id)
    efa = lib.ref(lib.network.efa_security_group.security_group_id)
    ports = (TCP_988, TCP_1018_1023)
    assert group_rules(lib.template, fs) == both_ways(fs, fs, ports) | both_ways(fs, efa, ports)


def test_efa_file_system_also_allows_all_traffic_with_itself_and_its_clients(lib):
    fs = lib.ref(lib.full.security_group.security_group_id)
    efa = lib.ref(lib.network.efa_security_group.security_group_id)
    ports = (TCP_988, TCP_1018_1023, ALL_TRAFFIC)
    assert group_rules(lib.template, fs) == both_ways(fs, fs, ports) | both_ways(fs, efa, ports)


def test_allow_clients_later_opens_the_same_ports_for_another_group(lib):
    fs = lib.ref(lib.tokens.security_group.security_group_id)
    login = lib.ref(lib.login.security_group_id)
    ports = (TCP_988, TCP_1018_1023, ALL_TRAFFIC)  # the Tokens file system is EFA-enabled
    assert group_rules(lib.template, fs) == both_ways(fs, fs, ports) | both_ways(fs, login, ports)


@pytest.mark.parametrize("name", ["default", "full", "tokens"])
def test_file_system_group_has_no_cidr_rule_and_no_default_egress(lib, name):
    lustre: LustreStorage = getattr(lib, name)
    group = lib.template["Resources"][lib.logical_id(lustre.security_group.node.default_child)]["Properties"]
    assert group.get("SecurityGroupIngress", []) == []
    # Only CDK's match-nothing placeholder, which keeps EC2 from adding its allow-all egress default.
    assert group["SecurityGroupEgress"] == [
        {
            "CidrIp": "255.255.255.255/32",
            "Description": "Disallow all traffic",
            "FromPort": 252,
            "IpProtocol": "icmp",
            "ToPort": 86,
        }
    ]
    fs = lib.ref(lustre.security_group.security_group_id)
    for kind in ("AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress"):
        for rule in of_type(lib.template, kind).values():
            if fs in rule["Properties"].values():
                assert not {"CidrIp", "CidrIpv6"} & set(rule["Properties"]), rule


def test_file_system_is_created_after_every_rule_of_its_group(lib):
    for lustre in (lib.default, lib.full, lib.tokens):
        fs = lib.ref(lustre.security_group.security_group_id)
        own_rules = {
            name
            for kind in ("AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress")
            for name, rule in of_type(lib.template, kind).items()
            if rule["Properties"]["GroupId"] == fs
        }
        assert own_rules and own_rules <= set(lib.file_system(lustre)["DependsOn"])


# --- data repository associations -----------------------------------------------------------------


def test_each_repository_becomes_one_association_keyed_by_its_path(lib):
    associations = of_type(lib.template, "AWS::FSx::DataRepositoryAssociation")
    assert len(associations) == len(REPOSITORIES)
    assert list(lib.full.repositories) == ["/datasets", "/checkpoints", "/external/c4", "/scratch"]
    for path, association in lib.full.repositories.items():
        assert lib.logical_id(association).startswith("FullRepository" + path.replace("/", ""))
    assert lib.default.repositories == {} and lib.tokens.repositories == {}


def test_association_paths_events_and_metadata_import(lib):
    data_bucket = lib.ref(lib.buckets.data_bucket.bucket_name)
    every_event = ["NEW", "CHANGED", "DELETED"]
    expected = {
        "/datasets": (
            {"Fn::Join": ["", ["s3://", data_bucket, "/datasets/"]]},
            {"AutoImportPolicy": {"Events": every_event}},
        ),
        "/checkpoints": (
            {"Fn::Join": ["", ["s3://", data_bucket, "/checkpoints/"]]},
            {"AutoExportPolicy": {"Events": every_event}},
        ),
        "/external/c4": ("s3://my-datasets/c4/", {"AutoImportPolicy": {"Events": every_event}}),
        "/scratch": ("s3://my-scratch/runs", None),
    }
    file_system = {"Ref": lib.logical_id(lib.full.file_system)}
    for path, association in lib.full.repositories.items():
        props = lib.template["Resources"][lib.logical_id(association)]["Properties"]
        assert props["FileSystemId"] == file_system
        assert props["FileSystemPath"] == path
        assert props["BatchImportMetaDataOnCreate"] is True
        assert (props["DataRepositoryPath"], props.get("S3")) == expected[path], path


def test_associations_are_created_one_after_another(lib):
    ids = [lib.logical_id(association) for association in lib.full.repositories.values()]
    resources = lib.template["Resources"]
    assert "DependsOn" not in resources[ids[0]]
    for earlier, later in itertools.pairwise(ids):
        assert resources[later]["DependsOn"] == [earlier]


def test_fsx_s3_role_may_use_the_data_bucket_key_through_s3_only(lib):
    statements = lib.template["Resources"][lib.logical_id(lib.buckets.key.node.default_child)]["Properties"][
        "KeyPolicy"
    ]["Statement"]
    fsx = [s for s in statements if s.get("Sid") == "FsxForLustreS3LinksUseTheKeyThroughS3"]
    assert fsx == [
        {
            "Sid": "FsxForLustreS3LinksUseTheKeyThroughS3",
            "Effect": "Allow",
            "Principal": {"AWS": "*"},
            "Action": [
                "kms:Decrypt",
                "kms:DescribeKey",
                "kms:Encrypt",
                "kms:GenerateDataKey*",
                "kms:ReEncrypt*",
            ],
            "Resource": "*",
            "Condition": {
                "StringEquals": {
                    "kms:CallerAccount": "123456789012",
                    "kms:ViaService": {"Fn::Join": ["", ["s3.us-east-1.", {"Ref": "AWS::URLSuffix"}]]},
                },
                "StringLike": {
                    "aws:PrincipalArn": "arn:aws:iam::123456789012:role/aws-service-role/"
                    "s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_fs-*",
                },
            },
        }
    ]
    own_key = lib.template["Resources"][lib.logical_id(lib.default.kms_key.node.default_child)]
    own_sids = [statement.get("Sid") for statement in own_key["Properties"]["KeyPolicy"]["Statement"]]
    assert "FsxForLustreS3LinksUseTheKeyThroughS3" not in own_sids  # no S3 links, no FSx statement


# --- props a library user gets wrong --------------------------------------------------------------


@pytest.fixture(scope="module")
def scope():
    """A stack to construct into; bad props fail before anything is added to it."""
    app = cdk.App(context=support.CDK_JSON_CONTEXT)
    stack = cdk.Stack(app, "Errors", env=ENV)
    network = TrainingNetwork(stack, "Network", availability_zone_id="use1-az6")
    bucket = s3.Bucket.from_bucket_name(stack, "Existing", "existing-bucket")
    placement = {
        "vpc": network.vpc,
        "subnet": network.compute_subnet,
        "client_security_groups": [network.efa_security_group],
    }
    return stack, placement, bucket


EXISTING = object()  # stands for the existing bucket of the `scope` fixture
BAD_PROPS = [
    (
        {"capacity_gib": 1000},
        "capacity_gib: must be 1200, 2400 or a multiple of 2400 GiB; got 1000 (nearest: 1200)",
    ),
    (
        {"capacity_gib": 3600},
        "capacity_gib: must be 1200, 2400 or a multiple of 2400 GiB; got 3600 (nearest: 2400 or 4800)",
    ),
    ({"capacity_gib": "4800"}, "capacity_gib: must be a whole number; got '4800'"),
    ({"throughput_per_tib": 200}, "throughput_per_tib: must be 125, 250, 500 or 1000; got 200"),
    (
        {"efa": True, "capacity_gib": 4800},
        "capacity_gib: an EFA-enabled file system at 250 MB/s/TiB needs a multiple of 19200 GiB; got 4800 "
        "(use 19200, or throughput_per_tib: 1000 for steps of 4800)",
    ),
    ({"efa": "yes"}, "efa: must be true or false; got 'yes'"),
    ({"compression": "zstd"}, "compression: must be 'lz4' or 'none'; got 'zstd'"),
    (
        {"metadata_iops": 5000},
        "metadata_iops: must be 1500, 3000, 6000, 12000 or a multiple of 12000 up to 192000; got 5000",
    ),
    (
        {"metadata_iops": 204000},
        "metadata_iops: must be 1500, 3000, 6000, 12000 or a multiple of 12000 up to 192000; got 204000",
    ),
    (
        {"repositories": [Repository(path=f"/d{index}") for index in range(9)], "data_bucket": EXISTING},
        "repositories: must have at most 8 entries; got 9",
    ),
    (
        {"repositories": [{"path": "datasets"}], "data_bucket": EXISTING},
        "repositories[0].path: must be an absolute Lustre path like /datasets; got 'datasets'",
    ),
    (
        {"repositories": [{"path": "/"}], "data_bucket": EXISTING},
        "repositories[0].path: must not be '/': link a directory such as /datasets, not the file system's root",
    ),
    (
        {"repositories": [{"path": "/x", "import": ["created"]}], "data_bucket": EXISTING},
        "repositories[0].import[0]: must be 'new', 'changed' or 'deleted'; got 'created'",
    ),
    (
        {"repositories": [{"path": "/x", "s3_uri": "http://bucket/x"}]},
        "repositories[0].s3_uri: must be an S3 URI like s3://my-bucket/prefix/ with a valid bucket name; "
        "got 'http://bucket/x'",
    ),
    (
        {"repositories": [{"path": "/x", "colour": "red"}], "data_bucket": EXISTING},
        "repositories[0].colour: unknown key",
    ),
    (
        {"repositories": [Repository(path="/data"), Repository(path="/data/c4")], "data_bucket": EXISTING},
        "repositories[1].path: '/data/c4' and repositories[0].path '/data' nest; one path may not lie inside another",
    ),
    (
        {"repositories": [Repository(path="/data"), {"path": "/data/"}], "data_bucket": EXISTING},
        "repositories[1].path: '/data' repeats repositories[0].path",
    ),
    (
        {
            "repositories": [
                Repository(path="/a", s3_uri="s3://bucket/x/"),
                Repository(path="/b", s3_uri="s3://bucket/x/y/"),
            ]
        },
        "repositories[1].s3_uri: 's3://bucket/x/y/' overlaps repositories[0].s3_uri 's3://bucket/x/'; "
        "FSx links each S3 prefix to one path only",
    ),
    (
        {"repositories": [Repository(path="/datasets")]},
        "repositories[0].s3_uri: required when no data_bucket is given; "
        "pass data_bucket= to link '/datasets' to a "
        "prefix of it, or give an S3 URI like s3://my-bucket/prefix/",
    ),
]


@pytest.mark.parametrize(("props", "message"), BAD_PROPS, ids=[message.split(":")[0] for _, message in BAD_PROPS])
def test_bad_props_are_rejected_with_the_cluster_files_message(scope, props, message):
    stack, placement, bucket = scope
    props = {key: bucket if value is EXISTING else value for key, value in props.items()}
    with pytest.raises(ValueError) as error:
        LustreStorage(stack, "Bad", **placement, **props)
    assert str(error.value) == f"LustreStorage: {message}"
    assert stack.node.try_find_child("Bad") is None  # nothing half-built is left behind


def test_every_problem_is_reported_at_once(scope):
    stack, placement, _ = scope
    with pytest.raises(ValueError) as error:
        LustreStorage(
            stack,
            "Bad",
            **placement,
            capacity_gib=1000,
            compression="zstd",
            repositories=[Repository(path="/a"), Repository(path="/a/b")],
        )
    assert str(error.value).splitlines() == [
        "LustreStorage: capacity_gib: must be 1200, 2400 or a multiple of 2400 GiB; got 1000 (nearest: 1200)",
        "LustreStorage: compression: must be 'lz4' or 'none'; got 'zstd'",
        "LustreStorage: repositories[1].path: '/a/b' and repositories[0].path '/a' nest; "
        "one path may not lie inside another",
        "LustreStorage: repositories[0].s3_uri: required when no data_bucket is given; "
        "pass data_bucket= to link "
        "'/a' to a prefix of it, or give an S3 URI like s3://my-bucket/prefix/",
        "LustreStorage: repositories[1].s3_uri: required when no data_bucket is given; "
        "pass data_bucket= to link "
        "'/a/b' to a prefix of it, or give an S3 URI like s3://my-bucket/prefix/",
    ]


def test_a_token_is_skipped_but_the_other_props_are_still_checked(scope):
    stack, placement, _ = scope
    capacity = cdk.Token.as_number(cdk.Fn.ref("Capacity"))
    throughput = cdk.Token.as_number(cdk.Fn.ref("Throughput"))
    with pytest.raises(ValueError) as error:
        LustreStorage(stack, "Bad", **placement, capacity_gib=capacity, compression="zstd")
    assert str(error.value) == "LustreStorage: compression: must be 'lz4' or 'none'; got 'zstd'"
    with pytest.raises(ValueError) as error:  # the EFA step is unknown while the tier is a token...
        LustreStorage(stack, "Bad", **placement, throughput_per_tib=throughput, efa=True, capacity_gib=3600)
    assert str(error.value) == (  # ...but the capacity itself must still be a valid size
        "LustreStorage: capacity_gib: must be 1200, 2400 or a multiple of 2400 GiB; got 3600 (nearest: 2400 or 4800)"
    )


# --- the storage stack ----------------------------------------------------------------------------


def without_cdk_singleton_logs(resources: dict[str, dict]) -> dict[str, dict]:
    """The resources but the log groups of CDK's singleton functions, which always go with the stack (CDK's
    housekeeping, not data: fmcluster.constructs.keys.log_cdk_singletons)."""
    singletons = {name for name in resources if name.startswith(("AutoDeleteObjectsLogs", "BucketNotificationsLogs"))}
    assert singletons and all(resources[name]["DeletionPolicy"] == "Delete" for name in singletons)
    return {name: r for name, r in resources.items() if name not in singletons}


def test_retain_on_delete_protects_the_stack_and_retains_every_stateful_resource(clusters):
    keep = clusters["keep"]
    assert keep.example.config.storage.retain_on_delete is True
    assert keep.storage.termination_protection is True
    stateful = without_cdk_singleton_logs(
        {name: r for kind in STATEFUL for name, r in of_type(keep.template, kind).items()}
    )
    assert sorted(r["Type"] for r in stateful.values()) == sorted(
        ["AWS::FSx::FileSystem", "AWS::KMS::Key"] + ["AWS::Logs::LogGroup"] * 5 + ["AWS::S3::Bucket"] * 3
    )  # the log groups: the file system's, the nccl-tests results function's, and the artifact mirror's three (its
    # CodeBuild job, its deploy-time handler and that handler's provider framework)
    for name, resource in stateful.items():
        assert (resource.get("DeletionPolicy"), resource.get("UpdateReplacePolicy")) == (
            "Retain",
            "Retain",
        ), name
    assert of_type(keep.template, "Custom::S3AutoDeleteObjects") == {}  # nothing empties a retained bucket


def test_retain_on_delete_false_deletes_everything_with_the_stack(clusters):
    drop = clusters["drop"]
    assert drop.example.config.storage.retain_on_delete is False
    assert drop.storage.termination_protection is False
    stateful = without_cdk_singleton_logs(
        {name: r for kind in STATEFUL for name, r in of_type(drop.template, kind).items()}
    )
    assert len(stateful) == 10
    for name, resource in stateful.items():
        assert (resource.get("DeletionPolicy"), resource.get("UpdateReplacePolicy")) == (
            "Delete",
            "Delete",
        ), name
    assert len(of_type(drop.template, "Custom::S3AutoDeleteObjects")) == 3  # buckets are emptied, then deleted


def test_storage_stack_builds_the_file_system_from_the_cluster_file(clusters):
    keep = clusters["keep"]
    lustre_file = keep.example.config.storage.lustre
    (props,) = [r["Properties"] for r in of_type(keep.template, "AWS::FSx::FileSystem").values()]
    assert props["StorageCapacity"] == lustre_file.capacity_gib == 1200
    assert props["KmsKeyId"] == keep.storage.resolve(keep.storage.buckets.key.key_arn)
    assert props["LustreConfiguration"]["EfaEnabled"] is False
    # the S3 link is in a stack of its own, beside the cluster: nodes need not wait for it
    assert of_type(keep.template, "AWS::FSx::DataRepositoryAssociation") == {}
    links = keep.example.templates["quickstart-data-links"]
    associations = of_type(links, "AWS::FSx::DataRepositoryAssociation")
    by_path = {a["Properties"]["FileSystemPath"]: (name, a) for name, a in associations.items()}
    assert sorted(by_path) == ["/checkpoints", "/datasets"]  # datasets in, the first job's checkpoints out
    for lustre_path, (_, association) in by_path.items():
        path = association["Properties"]["DataRepositoryPath"]["Fn::Join"][1]
        assert (path[0], path[2]) == ("s3://", f"{lustre_path}/")
        assert "quickstart-storage" in json.dumps(path[1])
    checkpoints = by_path["/checkpoints"][1]
    assert checkpoints["Properties"]["S3"] == {"AutoExportPolicy": {"Events": ["NEW", "CHANGED", "DELETED"]}}
    assert checkpoints["DependsOn"] == [by_path["/datasets"][0]]  # one after another
    assert "FsxForLustreS3LinksUseTheKeyThroughS3" in json.dumps(keep.template)

    drop = clusters["drop"]
    lustre_file = drop.example.config.storage.lustre
    (resource,) = of_type(drop.template, "AWS::FSx::FileSystem").values()
    lustre = resource["Properties"]["LustreConfiguration"]
    assert (lustre["EfaEnabled"], lustre["PerUnitStorageThroughput"], lustre["DataCompressionType"]) == (
        True,
        1000,
        "NONE",
    )
    assert (lustre_file.efa, lustre_file.throughput_per_tib, lustre_file.compression) == (True, 1000, "none")


def test_data_repository_links_check_their_repositories_like_the_cluster_file(scope):
    stack, placement, _ = scope
    lustre = LustreStorage(stack, "Linked", **placement, capacity_gib=1200)
    with pytest.raises(ValueError) as error:
        DataRepositoryLinks(
            stack,
            "Links",
            file_system=lustre,
            repositories=[{"path": "/a"}, {"path": "/a/b", "s3_uri": "s3://my-data/y/"}],
        )
    assert str(error.value).splitlines() == [
        "DataRepositoryLinks: repositories[1].path: '/a/b' and repositories[0].path '/a' nest; one path may not "
        "lie inside another",
        "DataRepositoryLinks: repositories[0].s3_uri: required when no data_bucket is given; pass data_bucket= to "
        "link '/a' to a prefix of it, or give an S3 URI like s3://my-bucket/prefix/",
    ]


def test_storage_stack_admits_the_network_stacks_efa_group(clusters):
    for name, example in clusters.items():
        storage, network = example.storage, example.network.network
        assert storage.lustre.connections.security_groups[0] is storage.lustre.security_group
        efa = storage.resolve(network.efa_security_group.security_group_id)  # a reference across stacks
        fs = storage.resolve(storage.lustre.security_group.security_group_id)
        ports = (TCP_988, TCP_1018_1023, *((ALL_TRAFFIC,) if name == "drop" else ()))
        rules = group_rules(example.template, fs)
        assert rules == both_ways(fs, fs, ports) | both_ways(fs, efa, ports)
        assert storage.dependencies == [example.network]


# --- gates ----------------------------------------------------------------------------------------


def test_cdk_nag_and_cfn_lint_find_nothing_and_nothing_is_acknowledged(lib, clusters):
    """The examples pass cdk-nag and cfn-lint in tests/gates/test_templates.py; the library stack here."""
    assert lib.built.nag == []
    assert lib.built.lint() == {lib.stack.stack_name: []}
    # neither the file system nor the buckets need any AwsSolutions finding acknowledged
    for app in (lib.built.app, *(example.example.app for example in clusters.values())):
        acknowledged = [
            (construct.node.path, rule)
            for construct in app.node.find_all()
            for entry in construct.node.metadata
            if entry.type == cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY
            for rule in entry.data
            if "AwsSolutions" in rule and any(part in construct.node.path for part in ("/Lustre", "/Buckets"))
        ]
        assert acknowledged == []
