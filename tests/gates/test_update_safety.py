"""Updates as users make them, judged for every resource type by `fmcluster.update_plan`: growing compute must
replace or delete nothing; what would replace the file system or the PCS cluster is refused with the reason.

Replacement is read from CloudFormation's resource schemas (`createOnlyProperties` in cfn-lint's package data; the
shipped cut equals it, tests/unit/test_service_data.py) plus the FSx settings the schema leaves out (FSx API
reference). Each example is synthesized a second time with the change; the first synthesis is the session's.
"""

from __future__ import annotations

import copy

import pytest

from fmcluster.config import load, parse
from fmcluster.config.models import CLUSTER_TAG
from fmcluster.update_plan import compare, create_only, refusal, refusals, stale_readers
from tests.conftest import EXAMPLES, REPO, synthesize

pytestmark = pytest.mark.synth


def grown(example: str, change) -> dict:
    data = load(REPO / "examples" / f"{example}.yaml").model_dump(by_alias=True, exclude_none=True, exclude_unset=True)
    change(data)
    return data


def synthesized_from(data: dict, tmp_path):
    result = synthesize(tmp_path / "cluster.yaml", tmp_path, parse(copy.deepcopy(data)), guard=False)
    assert result.nag == []
    return result.templates


def more_nodes_and_a_group(data: dict) -> None:
    data["compute"] = [{**group, "count": group["count"] * 2 + 1} for group in data["compute"]]
    data["compute"].append({**data["compute"][0], "name": "extra", "count": 3})


@pytest.mark.parametrize("example", [path.stem for path in EXAMPLES])
def test_growing_compute_replaces_and_deletes_nothing(synthesized, example, tmp_path):
    changes = compare(
        synthesized[example].templates, synthesized_from(grown(example, more_nodes_and_a_group), tmp_path)
    )
    assert [change.line() for change in changes if change.action in ("replace", "delete")] == []
    assert any(change.action == "add" for change in changes)  # the added group shows up


def test_p5_capacity_block_grows_from_16_to_41_nodes_in_place(synthesized, tmp_path):
    def to_41(data: dict) -> None:
        data["compute"][0]["count"] = 41

    changes = compare(
        synthesized["p5-capacity-block"].templates, synthesized_from(grown("p5-capacity-block", to_41), tmp_path)
    )
    assert [(c.stack, c.resource_type, c.action, c.properties) for c in changes] == [
        ("llm-pretrain-cluster", "AWS::PCS::ComputeNodeGroup", "modify", ("ScalingConfiguration",)),
    ]


def test_outgrowing_the_pcs_size_is_refused_with_how_to_migrate(synthesized, tmp_path):
    def to_300(data: dict) -> None:
        data["compute"][0]["count"] = 300  # 301 nodes: the default doubles past MEDIUM's 512 instances

    old = synthesized["p5-capacity-block"].templates
    changes = compare(old, synthesized_from(grown("p5-capacity-block", to_300), tmp_path))
    refused = [change for change in changes if change.protected]
    assert [(c.resource_type, c.reason) for c in refused] == [("AWS::PCS::Cluster", "Size is create-only")]
    follows = {c.resource_type for c in changes if c.reason == f"follows {refused[0].logical_id}, replaced"}
    assert follows == {"AWS::PCS::ComputeNodeGroup", "AWS::PCS::Queue"}  # ClusterId is create-only for both
    problem = refusal(refused[0], old)
    path, message = problem.path, problem.message
    assert path == "orchestrator.size"
    assert message.split(". ")[1] == (
        "Set orchestrator.size: medium to keep it (it must still hold every node), or deploy the file under a new "
        "name, move the work, then delete the old cluster"
    )


def test_enabling_efa_on_the_file_system_is_refused(synthesized, tmp_path):
    def efa(data: dict) -> None:
        data["storage"]["lustre"]["efa"] = True  # 19200 GiB at 500 MB/s/TiB: a multiple of the 9600 GiB EFA step

    changes = compare(
        synthesized["p5-capacity-block"].templates, synthesized_from(grown("p5-capacity-block", efa), tmp_path)
    )
    refused = [(c.resource_type, c.reason) for c in changes if c.protected]
    # FSx API reference, CreateFileSystemLustreConfiguration.EfaEnabled: set at creation only (not in the schema)
    assert ("AWS::FSx::FileSystem", "LustreConfiguration/EfaEnabled is create-only") in refused
    # and the nodes mount it over EFA now: their lustre lifecycle action changes, which drains and replaces the groups
    # (PCS user guide, node lifecycle actions)
    assert {kind for kind, _ in refused} == {"AWS::FSx::FileSystem", "AWS::PCS::ComputeNodeGroup"}


def test_a_replaced_file_system_leaves_the_cluster_stack_unchanged_and_the_plan_says_so(synthesized, tmp_path):
    """Weak cross-stack references (cdk.json `@aws-cdk/core:defaultCrossStackReferences: weak`) are
    `Fn::GetStackOutput`, resolved when the reading stack deploys. Replacing the file system changes the storage
    stack only: the cluster stack's template text stays the same, so `cdk deploy --all` may skip it and HyperPod keeps
    mounting the old file system's DNS name (the old one is retained, so nothing fails: the data just diverges).
    fmcluster's answer is refusal: the plan refuses the replacement (exit 2) and names every stale reader."""

    def efa(data: dict) -> None:
        data["storage"]["lustre"].update(efa=True, throughput_per_tib=1000, capacity_gib=4800)

    old = synthesized["quickstart"].templates
    new = synthesized_from(grown("quickstart", efa), tmp_path)
    changes = compare(old, new)
    (replaced,) = [c for c in changes if c.protected]
    assert (replaced.stack, replaced.resource_type) == ("quickstart-storage", "AWS::FSx::FileSystem")
    assert new["quickstart-cluster"] == old["quickstart-cluster"]  # nothing tells the CLI to deploy it again
    readers = stale_readers(changes, new)
    assert {(r.stack, old[r.stack]["Resources"][r.logical_id]["Type"]) for r in readers} >= {
        ("quickstart-cluster", "AWS::SageMaker::Cluster")
    }


def _s3_uri(data: dict) -> None:
    data["storage"]["lustre"]["repositories"][0]["s3_uri"] = "s3://my-datasets/c4/"


def _vpc_cidr(data: dict) -> None:
    data.setdefault("network", {})["vpc_cidr"] = "10.1.0.0/16"


def _not_retained(data: dict) -> None:
    data["storage"]["retain_on_delete"] = False


def _metadata_iops(value: int | None):
    def change(data: dict) -> None:
        lustre = data["storage"]["lustre"]
        lustre.pop("metadata_iops")
        if value is not None:
            lustre["metadata_iops"] = value

    return change


def _tags(data: dict) -> None:
    data["tags"] = {**data.get("tags", {}), "team": "research"}


def _without_dev(data: dict) -> None:
    data["compute"] = [group for group in data["compute"] if group["name"] != "dev"]


def _account(data: dict) -> None:
    data["account"] = "123456789012"


def _nodes_get(data: dict) -> None:
    data["compute"][0]["root_volume_gib"] = 1024
    data.setdefault("nccl", {}).setdefault("env", {})["NCCL_DEBUG"] = "INFO"


def _instance_type(data: dict) -> None:
    data["compute"][0]["instance_type"] = "p5en.48xlarge"


NETWORK_SHARED = [
    f"quickstart-network.{key}"
    for key in ("NetworkComputeSubnet29CD7B13", "NetworkEfaSecurityGroup3744DDDC", "NetworkVpcFAC8F4A5")
]
"""What other stacks read of the quickstart's network: the compute subnet, the EFA security group and the VPC."""
RETAINED = 10
"""The quickstart's retained stateful resources: the file system, 3 buckets, 4 KMS keys (network logs, storage, image,
alarms), the ECR repository and the Prometheus workspace."""

FILE_PAIRS = [
    # (example, change, refusal key paths without --allow-replacement, with it; the rule's source)
    # FileSystemPath/DataRepositoryPath create-only, no replacementStrategy (cfn-lint schema); one link per path
    # (botocore fsx CreateDataRepositoryAssociation.FileSystemPath)
    ("quickstart", _s3_uri, ["storage.lustre.repositories"], ["storage.lustre.repositories"]),
    # VPC CidrBlock create-only; the storage and cluster stacks read subnet, security group and VPC through
    # Fn::GetStackOutput and do not change (cdk.json defaultCrossStackReferences: weak)
    ("quickstart", _vpc_cidr, NETWORK_SHARED, NETWORK_SHARED),
    # DeletionPolicy/UpdateReplacePolicy Retain -> Delete on stateful types (CloudFormation DeletionPolicy attribute)
    ("quickstart", _not_retained, ["storage.retain_on_delete"] * RETAINED, []),
    # botocore fsx UpdateFileSystemLustreMetadataConfiguration: Iops never lower; Mode AUTOMATIC refused above it
    ("p5-capacity-block", _metadata_iops(6000), ["storage.lustre.metadata_iops"], ["storage.lustre.metadata_iops"]),
    ("p5-capacity-block", _metadata_iops(None), ["storage.lustre.metadata_iops"], ["storage.lustre.metadata_iops"]),
    # AWS::EC2::PlacementGroup Tags create-only (cfn-lint schema): placement groups carry no user tags
    ("p6-b300-isolated", _tags, [], []),
    # botocore ec2 DeletePlacementGroup: "You must terminate all instances in the placement group"
    ("p6-b300-isolated", _without_dev, ["b300-isolated-network.devPlacementGroup9BC0BD20"], []),
    # Ref AWS::AccountId and the literal account resolve the same: no change at all
    ("quickstart", _account, [], []),
    # launch template versions and the NCCL parameter: new nodes only (PCS user guide; nccl_env handler)
    ("p6-b300-isolated", _nodes_get, [], []),
    # HyperPod group instance type: what happens to its running nodes is unconfirmed, so it needs the flag
    ("quickstart", _instance_type, ["quickstart-cluster.HyperPodCluster11759092"], []),
]


@pytest.mark.parametrize(
    ("example", "change", "refused", "refused_when_allowed"),
    FILE_PAIRS,
    ids=[f"{e}-{c.__name__}" for e, c, *_ in FILE_PAIRS],
)
def test_update_pairs(synthesized, tmp_path, example, change, refused, refused_when_allowed):
    data = grown(example, change)
    old, new = synthesized[example].templates, synthesized_from(data, tmp_path)
    account = data.get("account") or synthesized[example].config.account
    changes = compare(old, new, {"AWS::AccountId": account} if account else None)
    assert [problem.path for problem in refusals(changes, old, new)] == refused
    assert [problem.path for problem in refusals(changes, old, new, allow_replacement=True)] == refused_when_allowed
    assert not [c.line() for c in changes if c.resource_type == "AWS::EC2::PlacementGroup" and c.action == "replace"]
    if change is _account:
        assert changes == []
    if change is _nodes_get:
        effects = [effect for c in changes for effect in c.effects]
        assert any("read by Slurmb300NodeGroup966AB0EB: new nodes only" in effect for effect in effects)
        assert any("running nodes keep the old variables" in effect for effect in effects)


def test_a_security_group_reworded_by_an_upgrade_is_refused(synthesized):
    """The EFA security group's description is a literal in constructs/network.py and create-only (cfn-lint schema of
    AWS::EC2::SecurityGroup): an fmcluster release that rewords it replaces the group while the storage and cluster
    stacks keep the old one (its all-traffic self rules go in cleanup). No file key changes it, so the pair is the
    quickstart's templates with the description edited."""
    old = synthesized["quickstart"].templates
    new = copy.deepcopy(old)
    group = new["quickstart-network"]["Resources"]["NetworkEfaSecurityGroup3744DDDC"]["Properties"]
    group["GroupDescription"] += " (reworded)"
    changes = compare(old, new)
    assert [problem.path for problem in refusals(changes, old, new, allow_replacement=True)] == [
        "quickstart-network.NetworkEfaSecurityGroup3744DDDC"
    ]


@pytest.mark.parametrize("example", [path.stem for path in EXAMPLES])
def test_no_create_only_tags_carry_the_files_tags(synthesized, example):
    """Tags are create-only on some types (cfn-lint's createOnlyProperties): those carry only the cluster tag, so a
    new `tags:` value replaces nothing."""
    config = synthesized[example].config
    for template in synthesized[example].templates.values():
        for resource in template["Resources"].values():
            if "/properties/Tags" in (create_only(resource["Type"]) or ()):
                keys = {tag["Key"] for tag in resource.get("Properties", {}).get("Tags", [])}
                assert keys <= {CLUSTER_TAG}, (resource["Type"], keys & set(config.tags))


def test_dropping_the_sagemaker_endpoint_from_a_running_pcs_vpc_is_a_plain_delete(synthesized):
    """Earlier releases gave every `egress: none` VPC a SageMaker API endpoint; PCS nodes never call it, so this one
    drops it. The pair is the isolated PCS example's network template with the endpoint put back as it was: the update
    deletes only it (an interface endpoint holds no data and nothing else reads it) and refuses nothing."""
    new = synthesized["p6-b300-isolated"].templates
    old = copy.deepcopy(new)
    resources = old["b300-isolated-network"]["Resources"]
    sts = next(key for key in resources if key.startswith("NetworkStsEndpoint"))
    endpoint = copy.deepcopy(resources[sts])
    endpoint["Properties"]["ServiceName"] = "com.amazonaws.us-west-2.sagemaker.api"
    resources["NetworkSageMakerApiEndpoint6ACB68AD"] = endpoint
    changes = compare(old, new)
    assert [(change.logical_id, change.action) for change in changes] == [
        ("NetworkSageMakerApiEndpoint6ACB68AD", "delete")
    ]
    assert refusals(changes, old, new) == []


@pytest.mark.parametrize("enforce", [False, True], ids=["users", "users-enforced"])
def test_the_first_users_of_a_pcs_cluster_change_their_parameter_and_enforcement_in_place(
    synthesized, tmp_path, enforce
):
    """docs/operations.md, "Adding or removing a user later": the users parameter exists from the first deploy, so the
    first users change only it; with orchestrator.accounting_enforce also the cluster's AccountingStorageEnforce
    (SlurmConfiguration is not create-only in cfn-lint's AWS::PCS::Cluster schema), whose effect on pending jobs the
    plan names. Nothing is replaced, no node group's lifecycle changes."""

    def with_users(data: dict) -> None:
        data["users"] = [{"name": "alice", "uid": 2001}]
        if enforce:
            data["orchestrator"]["accounting_enforce"] = True

    after = synthesized_from(grown("p5-capacity-block", with_users), tmp_path)
    changes = compare(synthesized["p5-capacity-block"].templates, after)
    expected = [("AWS::SSM::Parameter", "modify", ("Value",))]
    if enforce:
        expected.insert(0, ("AWS::PCS::Cluster", "modify", ("SlurmConfiguration",)))
    assert sorted((c.resource_type, c.action, c.properties) for c in changes) == expected
    for cluster in (c for c in changes if c.resource_type == "AWS::PCS::Cluster"):
        assert (cluster.risk, cluster.failure) == ("", "")
        assert any("Reason=InvalidAccount" in effect for effect in cluster.effects)
    assert refusals(changes, synthesized["p5-capacity-block"].templates, after) == []
