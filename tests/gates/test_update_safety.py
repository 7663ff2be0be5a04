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
from fmcluster.update_plan import compare, refusal, stale_readers
from tests.conftest import EXAMPLES, REPO, synthesize


def grown(example: str, change) -> dict:
    data = load(REPO / "examples" / f"{example}.yaml").model_dump(by_alias=True, exclude_none=True, exclude_unset=True)
    change(data)
    return data


def synthesized_from(data: dict, tmp_path):
    result = synthesize(tmp_path / "cluster.yaml", tmp_path, parse(copy.deepcopy(data)))
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
    path, message = refusal(refused[0], old)
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
    assert refused == [("AWS::FSx::FileSystem", "LustreConfiguration/EfaEnabled is create-only")]


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
