"""Warnings for valid files: printed by `fmcluster validate` and `cdk synth`, never failing them."""

from __future__ import annotations

import pytest

from fmcluster.advice import warnings
from fmcluster.cli import main
from fmcluster.config import parse

BASE = {"name": "warn", "region": "us-east-1", "availability_zone_id": "use1-az6", "orchestrator": {"type": "pcs"}}

CUDA_12 = {"base_image": "nvcr.io/nvidia/cuda:12.8.1-devel-ubuntu24.04", "cuda": "12.8"}
"""NCCL 2.18 does not build with CUDA 13 (the default), so the floor tests use a CUDA 12.8 image."""


def config(**keys):
    return parse({**BASE, "compute": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2}], **keys})


def test_a_clean_file_gets_no_warning():
    assert warnings(config()) == []


def test_obsolete_nccl_variables_are_named_with_the_reason():
    lines = [
        (w.path, f"{w.level}: {w.message}")
        for w in warnings(config(nccl={"env": {"FI_EFA_USE_DEVICE_RDMA": "1", "NCCL_DEBUG": "WARN"}}))
    ]
    assert lines == [
        (
            "nccl.env.FI_EFA_USE_DEVICE_RDMA",
            "warning: remove it; aws-ofi-nccl >= 1.7.0 with libfabric >= 1.18 enables GPUDirect RDMA itself "
            "(aws-ofi-nccl doc/efa-env-var.md)",
        )
    ]


def test_p5_versions_between_requirement_and_recommendation_are_warned():
    # aws-ofi-nccl doc/efa-env-var.md, "p5.48xlarge": "nccl>=2.18.0 (recommend at least 2.18.5)",
    # "aws-ofi-nccl>=1.7.2 (recommend at least 1.7.3)"; below the requirement the file is refused (test_config_rules)
    image = {**CUDA_12, "nccl": "2.18.3", "aws_ofi_nccl": "1.7.2"}
    lines = [(w.path, f"{w.level}: {w.message}") for w in warnings(config(image=image))]
    assert lines == [
        (
            "image.nccl",
            "warning: aws-ofi-nccl recommends 2.18.5 or later on P5-class instances (p5*, p6*); got '2.18.3' "
            "(below 2.18.5 the plugin disables NVLS on NVLink Switch platforms; aws-ofi-nccl doc/efa-env-var.md)",
        ),
        (
            "image.aws_ofi_nccl",
            "warning: aws-ofi-nccl recommends 1.7.3 or later on P5-class instances (p5*, p6*); got '1.7.2' "
            "(aws-ofi-nccl doc/efa-env-var.md, p5.48xlarge)",
        ),
    ]


def test_p4d_gets_no_p5_floor_warning():
    compute = [{"name": "p4d", "instance_type": "p4d.24xlarge", "count": 2}]
    assert warnings(config(compute=compute, image={**CUDA_12, "nccl": "2.18.3", "aws_ofi_nccl": "1.7.2"})) == []


def test_arm64_groups_are_told_the_image_is_x86():
    compute = [{"name": "gb200", "instance_type": "p6e-gb200.36xlarge", "count": 1}]
    (warning,) = warnings(config(compute=compute))
    assert warning.path == "compute[0].instance_type"
    assert f"{warning.level}: {warning.message}".startswith("warning: p6e-gb200.36xlarge is arm64 (Grace)")


def test_validate_prints_warnings_to_stderr_and_still_succeeds(tmp_path, capsys):
    path = tmp_path / "cluster.yaml"
    path.write_text(
        "name: warn\nregion: us-east-1\navailability_zone_id: use1-az6\n"
        "compute: [{name: p5, instance_type: p5.48xlarge, count: 2}]\nnccl: {env: {NCCL_PROTO: simple}}\n"
    )
    assert main(["validate", str(path)]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"{path}: nccl.env.NCCL_PROTO: warning: remove it; NCCL_PROTO=simple was for aws-ofi-nccl")


NO_FILE_SYSTEM = (
    "warning: no shared file system: nothing is mounted at /fsx (HyperPod gets no FsxLustreConfig, PCS nodes no lustre "
    "step), so users' homes are local to each node (/home), the training image is not imported into /fsx (every job "
    "pulls it from ECR), checkpoints must go to S3 (the checkpoints bucket) or storage of your own, nccl-tests.sbatch "
    "and examples/jobs/train.sbatch need FMCLUSTER_SHARED_DIR set to a directory every node of a job shares to run on "
    "more than one node, and there is no CloudWatch FSx dashboard or free-space alarm (Grafana's FSx dashboard stays "
    "empty); omit storage.lustre for the default file system, or give storage.lustre.file_system_id to mount your own"
)
"""Each clause from the node side: users.sh (home base /home without /fsx), hyperpod/on_create.sh (image step
skipped), nccl-tests.sbatch (ECR credentials in a directory every node reads), train.sbatch (container mount)."""


def no_file_system_file(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text(
        "name: nofs\nregion: us-east-1\navailability_zone_id: use1-az6\n"
        "compute: [{name: cpu, instance_type: c6i.4xlarge, count: 2}]\nstorage: {lustre: none}\n"
    )
    return path


def test_a_cluster_without_a_file_system_is_told_what_works_differently(tmp_path, capsys):
    assert [(w.path, f"{w.level}: {w.message}") for w in warnings(config(storage={"lustre": "none"}))] == [
        ("storage.lustre", NO_FILE_SYSTEM)
    ]
    path = no_file_system_file(tmp_path)
    assert main(["validate", str(path)]) == 0
    assert capsys.readouterr().err == f"{path}: storage.lustre: {NO_FILE_SYSTEM}\n"


@pytest.mark.synth  # the plan synthesizes the app for its deploy time
def test_the_plan_of_a_cluster_without_a_file_system_says_what_works_differently(tmp_path, capsys):
    path = no_file_system_file(tmp_path)
    assert main(["plan", str(path)]) == 0
    out = capsys.readouterr().out
    assert "storage: no shared file system (storage.lustre: none): the storage.lustre warning says what differs" in out
    assert "min (image built and then pulled from ECR by each job: no /fsx to import it into)" in out


USERS = [{"name": "alice", "uid": 2001}]


def test_users_get_a_note_on_what_their_equal_shares_do_on_each_orchestrator():
    """slurm.conf(5) (Slurm 24.11.5 and 26.05.5): PriorityWeightFairshare defaults to 0; neither service's API gives
    fmcluster a way to set it (botocore sagemaker ClusterOrchestratorSlurmConfig; PCS: unconfirmed)."""
    hyperpod = parse({**BASE, "orchestrator": {"type": "hyperpod-slurm"}, "users": USERS,
                      "compute": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2}]})  # fmt: skip
    pcs = config(users=USERS, orchestrator={"type": "pcs", "login_instance_type": "m5.xlarge"})
    enforcing = config(users=USERS, orchestrator={"type": "pcs", "login_instance_type": "m5.xlarge",
                                                  "accounting_enforce": True})  # fmt: skip
    for file, because, enforcement in (
        (
            hyperpod,
            "HyperPod's slurm.conf is HyperPod's: its cluster agent rewrites it",
            "nor does it set AccountingStorageEnforce, for the same reason",
        ),
        (
            pcs,
            "whether PCS takes it among its cluster-level custom settings is unconfirmed",
            "it sets no AccountingStorageEnforce (orchestrator.accounting_enforce is false), so Slurm runs jobs "
            "outside an association too and applies no association or QoS limit; the associations still record "
            "usage for sacct and sshare",
        ),
        (
            enforcing,
            "whether PCS takes it among its cluster-level custom settings is unconfirmed",
            "orchestrator.accounting_enforce sets AccountingStorageEnforce=associations,limits,qos, which PCS takes at "
            "cluster level: a job of anyone without an association (the image's login user, e.g. ubuntu, or "
            "ssm-user) is refused at submission, as is a user's first job until the head node's timer has made their "
            "association (3 minutes after that node boots; within 10 minutes of a deploy that adds the user); "
            "whether PCS's slurmctld, which cannot see the nodes' accounts, accepts the users' own jobs is "
            "unconfirmed (check with sbatch --test-only first: docs/operations.md)",
        ),
    ):
        (found,) = warnings(file)
        assert (found.path, found.level) == ("users", "note")
        assert found.message.startswith(
            "each user gets an association in Slurm account 'warn' with an equal share (Fairshare=1) and QoS normal; "
            "the shares order jobs only once slurm.conf sets PriorityWeightFairshare above its default 0"
        )
        assert because in found.message and found.message.endswith("(docs/operations.md, 'Fair-share and QoS')")
        assert enforcement in found.message


def test_pcs_users_without_a_node_that_makes_their_associations_are_warned():
    no_head = config(users=USERS, observability={"prometheus": "none", "grafana": "none"})
    no_accounting = config(users=USERS, orchestrator={"type": "pcs", "login_instance_type": "m5.xlarge",
                                                      "accounting": False})  # fmt: skip
    assert [(w.path, w.text) for w in warnings(no_head)] == [
        (
            "users",
            "warning: no node makes the users' Slurm associations: they are made on the login node (or the head node "
            "that observability.prometheus: managed adds); set orchestrator.login_instance_type",
        )
    ]
    assert [(w.path, w.text) for w in warnings(no_accounting)] == [
        (
            "users",
            "warning: orchestrator.accounting is false: the users get no Slurm associations, fair share or QoS (PCS "
            "keeps no accounting database)",
        )
    ]
