"""The nodes' boot path, over every example's synthesized assembly (manifest.json, the CDK CLI's deploy order).

Nodes need the network, the file system and its security groups at boot. They do not need the training image (it
reaches them when it is published, see image-watch.sh) nor the S3 links (data appears under each path as its link
completes). So the cluster stack must not depend, directly or through another stack, on the image stack or on the
stack holding the data repository associations, and no stack it depends on may hold an association.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import EXAMPLES

EXAMPLE_IDS = [path.stem for path in EXAMPLES]


def stack_graph(outdir) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Stack -> the stacks it depends on (manifest.json), and stack -> the resource types of its template."""
    artifacts = json.loads((outdir / "manifest.json").read_text())["artifacts"]
    stacks = {name: a for name, a in artifacts.items() if a["type"] == "aws:cloudformation:stack"}
    depends = {name: {d for d in a.get("dependencies", []) if d in stacks} for name, a in stacks.items()}
    types = {
        name: {
            r["Type"] for r in json.loads((outdir / a["properties"]["templateFile"]).read_text())["Resources"].values()
        }
        for name, a in stacks.items()
    }
    return depends, types


def upstream(depends: dict[str, set[str]], stack: str) -> set[str]:
    found: set[str] = set()
    todo = [stack]
    while todo:
        for dep in depends[todo.pop()] - found:
            found.add(dep)
            todo.append(dep)
    return found


@pytest.mark.parametrize("example", EXAMPLE_IDS)
def test_the_cluster_waits_for_network_and_file_system_only(synthesized, example):
    depends, types = stack_graph(synthesized[example].outdir)
    (cluster,) = [n for n, t in types.items() if t & {"AWS::SageMaker::Cluster", "AWS::PCS::Cluster"}]
    before = upstream(depends, cluster)
    created = {t for ts in types.values() for t in ts}
    # an existing file system (storage.lustre.file_system_id) is not a resource of the app: nothing to wait for
    wanted = {"AWS::EC2::SecurityGroup"} | ({"AWS::FSx::FileSystem"} & created)
    assert {t for n in before for t in types[n]} >= wanted
    for name in before:
        assert "Custom::TrainingImage" not in types[name], f"{cluster} waits for the image build in {name}"
        assert "AWS::FSx::DataRepositoryAssociation" not in types[name], f"{cluster} waits for S3 links in {name}"


@pytest.mark.parametrize("example", EXAMPLE_IDS)
def test_the_s3_links_are_created_beside_the_cluster(synthesized, example):
    depends, types = stack_graph(synthesized[example].outdir)
    links = [n for n, t in types.items() if "AWS::FSx::DataRepositoryAssociation" in t]
    for name in links:
        assert types[name] == {"AWS::FSx::DataRepositoryAssociation"}, name  # nothing else waits with them
        assert not any(name in upstream(depends, other) for other in depends), f"a stack waits for {name}"
