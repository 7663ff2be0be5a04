"""A cluster without a shared file system (`storage.lustre: none`), on both orchestrators: no FSx, no mount, no image
import into /fsx, no FSx dashboards; what then works differently is a warning (tests/unit/test_advice.py).

Two small inline files (CPU groups only: no example is added, since each costs a full synthesis with the Control
Tower rules in the suite). What HyperPod mounts is its `InstanceStorageConfigs[].FsxLustreConfig` (botocore sagemaker
ClusterInstanceStorageConfig); what a PCS node runs is its node group's `NodeLifecycleActions` (CloudFormation schema
AWS::PCS::ComputeNodeGroup)."""

from __future__ import annotations

import pytest

from fmcluster.config import parse
from fmcluster.constructs.hyperpod.lifecycle import LIFECYCLE_ENV
from tests.conftest import synthesize
from tests.support import of_type

pytestmark = pytest.mark.synth

FILES = {
    "pcs": {"orchestrator": {"type": "pcs"}, "compute": [{"name": "cpu", "instance_type": "c6i.4xlarge", "count": 2}]},
    "hyperpod": {"compute": [{"name": "cpu", "instance_type": "m5.2xlarge", "count": 2}]},
}


@pytest.fixture(scope="module", params=sorted(FILES))
def no_fs(request, tmp_path_factory):
    data = {"name": f"nofs-{request.param}", "region": "us-east-1", "availability_zone_id": "use1-az6",
            "storage": {"lustre": "none"}, **FILES[request.param]}  # fmt: skip
    outdir = tmp_path_factory.mktemp(request.param)
    return request.param, synthesize(outdir / "cluster.yaml", outdir, parse(data), guard=False)


def test_nothing_of_a_file_system_is_made_and_the_app_is_clean(no_fs):
    _, result = no_fs
    assert result.nag == []
    made = {resource["Type"] for template in result.templates.values() for resource in template["Resources"].values()}
    assert not {kind for kind in made if kind.startswith("AWS::FSx::")}
    outputs = {key for template in result.templates.values() for key in template.get("Outputs", {})}
    assert not outputs & {"FileSystemId", "FileSystemDnsName", "FileSystemMountName"}
    assert all(not findings for findings in result.lint().values()), result.lint()


def test_no_node_mounts_or_imports_into_fsx(no_fs):
    orchestrator, result = no_fs
    cluster = result.templates[f"nofs-{orchestrator}-cluster"]
    if orchestrator == "hyperpod":
        (hyperpod,) = of_type(cluster, "AWS::SageMaker::Cluster").values()
        storage = [c for g in hyperpod["Properties"]["InstanceGroups"] for c in g.get("InstanceStorageConfigs", [])]
        assert storage and not [config for config in storage if "FsxLustreConfig" in config]  # the controller's EBS
        (settings,) = [path for path in result.outdir.glob(f"asset.*/{LIFECYCLE_ENV}")]
        assert "FMCLUSTER_FSX_MOUNT=\n" in settings.read_text()  # on_create.sh: "step image: skipped, since ..."
    else:
        steps = [
            action["Name"]
            for group in of_type(cluster, "AWS::PCS::ComputeNodeGroup").values()
            for stage in group["Properties"]["NodeLifecycleActions"]["Stages"].values()
            for action in stage
        ]
        assert "install" in steps and not {"lustre", "shared-dirs", "image-watch"} & set(steps)


def test_no_fsx_dashboard_or_alarm_is_made(no_fs):
    orchestrator, result = no_fs
    observability = result.templates[f"nofs-{orchestrator}-observability"]
    assert "AWS/FSx" not in str(observability)
