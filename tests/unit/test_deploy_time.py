"""fmcluster.deploy_time: the deploy's critical path, from a cloud assembly's stack and resource dependency graph.

Two kinds of check. Hand-made templates with weights of the test's own choosing pin the arithmetic: CloudFormation
creates a resource once everything it names (DependsOn, Ref, Fn::GetAtt, Fn::Sub) exists, so a stack takes its
longest weighted chain; a stack starts when the stacks manifest.json says it depends on are done. Then real
synthesized apps show that the graph, not a constant, sets the numbers: more S3 links lengthen only the links stack,
and a cluster stack made to depend on the image stack again (as before issue 15) waits for the image build.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fmcluster.config import load
from fmcluster.deploy_time import Weights, estimate_assembly, estimate_template, resource_dependencies
from tests import support
from tests.conftest import REPO

WEIGHTS = Weights.load(
    {
        "default": {"minutes": 1},
        "stack_overhead": {"minutes": 0},
        "types": {"Slow": {"minutes": 10}, "Custom::TrainingImage": {"minutes": 40}},
        "deep_health_checks": {"InstanceStress": {"minutes": 90}, "InstanceConnectivity": {"minutes": 30}},
        "image_import": {"minutes": 10},
    }
)

pytestmark = pytest.mark.synth


def test_every_weight_has_a_source_or_says_it_is_an_estimate():
    data = yaml.safe_load((REPO / "fmcluster" / "deploy_times.yaml").read_text())
    entries = [data["default"], data["stack_overhead"], data["image_import"], *data["types"].values()]
    entries += [*data["deep_health_checks"].values(), *data["node_boot"].values()]
    assert set(data["node_boot"]) == {"boot", "baked"}  # orchestrator.node_image's values
    for entry in entries:
        assert entry["minutes"] >= 0
        assert ("source" in entry) != ("estimate" in entry), entry
        assert len(entry.get("source") or entry.get("estimate")) > 20, entry


def test_edges_come_from_depends_on_ref_get_att_and_sub():
    template = {
        "Resources": {
            "A": {"Type": "X"},
            "B": {"Type": "X", "DependsOn": "A"},
            "C": {"Type": "X", "Properties": {"P": {"Ref": "B"}, "Q": {"Ref": "AWS::Region"}}},
            "D": {"Type": "X", "Properties": {"P": [{"Fn::GetAtt": ["C", "Arn"]}, {"Fn::GetAtt": "A.Id"}]}},
            "E": {"Type": "X", "Properties": {"P": {"Fn::Sub": "arn:${AWS::Partition}:x:${D}:${C.Arn}"}}},
            "F": {"Type": "X", "Properties": {"P": {"Fn::Sub": ["${x}", {"x": {"Ref": "E"}}]}}},
            "G": {"Type": "X", "DependsOn": ["A", "Missing"], "Properties": {"P": {"Fn::GetStackOutput": {}}}},
        }
    }
    assert resource_dependencies(template) == {
        "A": set(), "B": {"A"}, "C": {"B"}, "D": {"C", "A"}, "E": {"D", "C"}, "F": {"E"}, "G": {"A"},
    }  # fmt: skip


def test_a_stack_takes_its_longest_chain_not_the_sum_of_its_resources():
    template = {
        "Resources": {
            "Fast1": {"Type": "X"},
            "Fast2": {"Type": "X", "DependsOn": "Fast1"},
            "Slow": {"Type": "Slow"},  # 10, in parallel with the fast chain
            "After": {"Type": "X", "Properties": {"P": {"Ref": "Slow"}}},
        }
    }
    estimate = estimate_template("s", template, WEIGHTS)
    assert (estimate.minutes, estimate.chain) == (11, ["Slow", "After"])


def test_deep_health_checks_add_the_slowest_groups_checks_to_a_hyperpod_cluster():
    cluster = {
        "Type": "AWS::SageMaker::Cluster",
        "Properties": {
            "InstanceGroups": [
                {"OnStartDeepHealthChecks": ["InstanceStress"]},
                {"OnStartDeepHealthChecks": ["InstanceStress", "InstanceConnectivity"]},
                {},
            ]
        },
    }
    estimate = estimate_template("c", {"Resources": {"Cluster": cluster}}, WEIGHTS)
    assert (estimate.minutes, estimate.deep_health_minutes) == (1 + 120, 120)


def write_assembly(outdir: Path, stacks: dict[str, tuple[list[str], dict]]) -> Path:
    """A cloud assembly of `stacks`: name -> (the stacks it depends on, its template)."""
    artifacts = {}
    for name, (depends_on, template) in stacks.items():
        (outdir / f"{name}.template.json").write_text(json.dumps(template))
        artifacts[name] = {
            "type": "aws:cloudformation:stack",
            "properties": {"templateFile": f"{name}.template.json"},
            "dependencies": [*depends_on, f"{name}.assets"],  # asset artifacts are no stacks
        }
        artifacts[f"{name}.assets"] = {"type": "cdk:asset-manifest"}
    (outdir / "manifest.json").write_text(json.dumps({"version": "48.0.0", "artifacts": artifacts}))
    return outdir


def slow(count: int) -> dict:
    return {"Resources": {f"R{i}": {"Type": "Slow"} for i in range(count)}}


def test_stacks_start_when_their_dependencies_are_done_and_the_longest_chain_is_the_total(tmp_path):
    assembly = write_assembly(
        tmp_path,
        {
            "c-network": ([], slow(1)),
            "c-storage": (["c-network"], slow(1)),
            "c-image": ([], {"Resources": {"Image": {"Type": "Custom::TrainingImage"}}}),
            "c-cluster": (["c-network", "c-storage"], {"Resources": {"Nodes": {"Type": "AWS::PCS::Cluster"}}}),
        },
    )
    estimate = estimate_assembly(assembly, WEIGHTS)
    assert estimate.finish == {"c-network": 10, "c-storage": 20, "c-image": 40, "c-cluster": 21}
    assert estimate.critical == ["c-image"]
    assert estimate.first_job == 21
    assert estimate.first_container_job == 40 + 10  # the image built, then imported
    assert estimate.sequential == 10 + 10 + 40 + 1
    assert estimate.summary() == "deploy ~40 min: image 40; network 10, storage 10, cluster 1 in parallel"


NODE_IMAGE_WEIGHTS = Weights.load(
    {
        "default": {"minutes": 1},
        "stack_overhead": {"minutes": 0},
        "types": {"Slow": {"minutes": 10}, "AWS::ImageBuilder::Image": {"minutes": 40}},
        "deep_health_checks": {},
        "image_import": {"minutes": 10},
        "node_boot": {"boot": {"minutes": 10}, "baked": {"minutes": 3}},
    }
)


def pcs_cluster(*, baked: bool) -> dict:
    group = {"Type": "AWS::PCS::ComputeNodeGroup", "DependsOn": "Nodes", "Properties": {}}
    if baked:
        group["Properties"]["Tags"] = {"fmcluster:node-image": "0123456789ab"}
    return {"Resources": {"Nodes": {"Type": "AWS::PCS::Cluster"}, "Gpu": group}}


def test_time_to_first_job_by_node_image_puts_the_image_build_beside_storage_and_swaps_the_node_boot(tmp_path):
    """A boot file (no node-image stack, the mirror in the storage stack): boot is what the graph gives (cluster 1 +
    node group 1 + boot 10 after storage 20); baked moves the mirror to a stack of its own (its job: 1) and puts the
    40-minute build after it and the network (10), beside storage, as `fmcluster.stacks.build` does, and boots each
    node in 3: 10 + 40 + 1 + 1 + 3, not storage's 20 + 40 + ..."""
    mirror = {"Resources": {"Mirror": {"Type": "Custom::ArtifactMirror"}, **slow(1)["Resources"]}}
    stacks = {
        "c-network": ([], slow(1)),
        "c-storage": (["c-network"], mirror),
        "c-cluster": (["c-network", "c-storage"], pcs_cluster(baked=False)),
    }
    estimate = estimate_assembly(write_assembly(tmp_path, stacks), NODE_IMAGE_WEIGHTS)
    assert estimate.first_job == 20 + 1 + 1 + 10
    assert estimate.first_job_with("boot") == estimate.first_job
    assert estimate.first_job_with("baked") == 10 + 40 + 1 + 1 + 3
    line = estimate.node_image_times()
    assert line.startswith("time to first job by orchestrator.node_image (this file: boot): boot ~32 min, each node ")
    assert "baked ~55 min, the image build ~40 min (estimate) beside the storage stack" in line


def test_a_baked_file_knows_its_boot_alternative(tmp_path):
    """With boot the mirror and node-image stacks go (the storage stack holds the mirror, beside FSx)."""
    bake = {"Resources": {"Image": {"Type": "AWS::ImageBuilder::Image"}}}
    stacks = {
        "c-network": ([], slow(1)),
        "c-mirror": ([], {"Resources": {"Mirror": {"Type": "Custom::ArtifactMirror"}}}),
        "c-storage": (["c-network"], slow(1)),
        "c-node-image": (["c-network", "c-mirror"], bake),
        "c-cluster": (["c-network", "c-storage", "c-mirror", "c-node-image"], pcs_cluster(baked=True)),
    }
    estimate = estimate_assembly(write_assembly(tmp_path, stacks), NODE_IMAGE_WEIGHTS)
    assert estimate.first_job == estimate.first_job_with("baked") == 10 + 40 + 1 + 1 + 3
    assert estimate.first_job_with("boot") == 20 + 1 + 1 + 10
    assert "(this file: baked)" in estimate.node_image_times()


def test_without_pcs_node_groups_there_is_no_node_image_line(tmp_path):
    stacks = {"c-cluster": ([], {"Resources": {"Nodes": {"Type": "AWS::SageMaker::Cluster"}}})}
    assert estimate_assembly(write_assembly(tmp_path, stacks), NODE_IMAGE_WEIGHTS).node_image_times() is None


# --- real apps: the graph sets the number ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def variants(tmp_path_factory) -> dict[str, object]:
    """The quickstart three ways, in one app (one synth): as it is, with 8 S3 links, and with its cluster stack made
    to wait for the image stack as it did before issue 15."""
    from fmcluster.stacks import build

    outdir = tmp_path_factory.mktemp("variants")
    data = yaml.safe_load((REPO / "examples" / "quickstart.yaml").read_text())
    app = support.app(outdir)
    for name in ("base", "links", "waits"):
        variant = {**data, "name": name}
        if name == "links":
            variant["storage"] = {
                "lustre": {**data["storage"]["lustre"], "repositories": [{"path": f"/d{i}"} for i in range(8)]}
            }
        path = outdir / f"{name}.yaml"
        path.write_text(yaml.safe_dump(variant))
        stacks = build(app, load(path))
        if name == "waits":
            stacks.cluster.add_dependency(stacks.image)
    app.synth()
    return {"estimate": estimate_assembly(outdir), "weights": Weights.load()}


def finish(variants, stack: str) -> float:
    return variants["estimate"].finish[stack]


def test_eight_s3_links_lengthen_the_links_stack_but_not_the_time_to_the_nodes(variants):
    weights = variants["weights"]
    dra = weights.types["AWS::FSx::DataRepositoryAssociation"]
    two, eight = variants["estimate"].stacks["base-data-links"], variants["estimate"].stacks["links-data-links"]
    assert eight.minutes - two.minutes == pytest.approx(6 * dra)  # created one after another (the quickstart has 2)
    assert finish(variants, "links-cluster") == finish(variants, "base-cluster")


def test_a_cluster_that_waits_for_the_image_starts_after_the_image_build(variants):
    estimate = variants["estimate"]
    cluster = estimate.stacks["base-cluster"].minutes
    assert "base-image" not in estimate.stacks["base-cluster"].depends_on
    assert finish(variants, "base-cluster") == pytest.approx(finish(variants, "base-storage") + cluster)
    assert finish(variants, "waits-cluster") == pytest.approx(finish(variants, "waits-image") + cluster)
    assert finish(variants, "waits-cluster") > finish(variants, "base-cluster") + 10


def test_the_quickstarts_critical_path_runs_through_storage_to_the_cluster(synthesized):
    estimate = estimate_assembly(synthesized["quickstart"].outdir)
    assert [name.removeprefix("quickstart-") for name in estimate.critical] == [
        "network", "storage", "cluster", "observability",
    ]  # fmt: skip
    assert estimate.summary().startswith(f"deploy ~{estimate.total:.0f} min: network ")
    assert estimate.summary().endswith("; data-links 10, image 42 in parallel")  # /datasets and /checkpoints


def test_a_baked_files_image_build_runs_beside_the_storage_stack(synthesized):
    """DESIGN.md, Flow: storage (FSx, the long pole) and the image builds never wait for each other. The node-image
    stack of examples/pcs-own-vpc.yaml waits for the network (its subnet and security group) and the mirror (what it
    installs) only; the storage stack is in parallel, and the cluster waits for both."""
    estimate = estimate_assembly(synthesized["pcs-own-vpc"].outdir)
    stacks = {name.removeprefix("pcs-own-vpc-"): stack for name, stack in estimate.stacks.items()}
    finish = {name.removeprefix("pcs-own-vpc-"): minutes for name, minutes in estimate.finish.items()}
    assert sorted(d.removeprefix("pcs-own-vpc-") for d in stacks["node-image"].depends_on) == ["mirror", "network"]
    starts = max(finish["network"], finish["mirror"])
    assert finish["node-image"] == pytest.approx(starts + stacks["node-image"].minutes)
    assert finish["node-image"] < finish["storage"] + stacks["node-image"].minutes  # it does not start after storage
    assert "storage" not in [name.removeprefix("pcs-own-vpc-") for name in estimate.critical]
    assert ", storage 21," in estimate.summary()  # listed in parallel
