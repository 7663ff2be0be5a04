"""File-level problems of a cluster file, read through `fmcluster.config.load(path)`."""

from __future__ import annotations

from pathlib import Path

import pytest

from fmcluster.config import ClusterConfig, ConfigError, load

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart.yaml"

VALID_TEXT = """\
name: quickstart
region: us-east-1
availability_zone_id: use1-az6
compute:
  - name: gpu
    instance_type: p5.48xlarge
    count: 2
"""


def write(tmp_path: Path, text: str | bytes, name: str = "cluster.yaml") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def load_lines(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load(path)
    return caught.value.lines()


def test_quickstart_loads() -> None:
    config = load(QUICKSTART)
    assert isinstance(config, ClusterConfig)
    assert config.name == "quickstart"
    assert config.compute[0].instance_type == "p5.48xlarge"


def test_load_accepts_a_string_path(tmp_path: Path) -> None:
    assert load(str(write(tmp_path, VALID_TEXT))).name == "quickstart"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("", "the file is empty; expected a mapping of keys (name, region, ...)", id="empty"),
        pytest.param("\n\n", "the file is empty; expected a mapping of keys (name, region, ...)", id="blank-lines"),
        pytest.param(
            "# name: x\n",
            "the file is empty; expected a mapping of keys (name, region, ...)",
            id="only-comments",
        ),
        pytest.param(
            "- name: a\n- name: b\n",
            "the top level is a list; expected a mapping of keys (name, region, ...)",
            id="top-level-list",
        ),
        pytest.param(
            "name: x\n  region: [\n",
            "line 2, column 9: YAML syntax error: mapping values are not allowed here",
            id="syntax-bad-indent",
        ),
        pytest.param(
            "name: x\ncompute: [1, 2\n",
            "line 3, column 1: YAML syntax error: expected ',' or ']', but got '<stream end>'",
            id="syntax-unclosed-list",
        ),
        pytest.param(
            "name: a\nregion: us-east-1\nname: b\n",
            "line 3, column 1: YAML syntax error: duplicate key 'name' (first on line 1)",
            id="duplicate-top-level-key",
        ),
        pytest.param(
            "name: a\ncompute:\n  - name: gpu\n    count: 1\n    name: cpu\n",
            "line 5, column 5: YAML syntax error: duplicate key 'name' (first on line 3)",
            id="duplicate-nested-key",
        ),
    ],
)
def test_file_level_problem(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text)
    assert load_lines(path) == [f"{path}: {expected}"]


def test_top_level_scalar(tmp_path: Path) -> None:
    path = write(tmp_path, "just some text\n")
    [line] = load_lines(path)
    assert line.startswith(f"{path}: the top level is ")
    assert line.endswith("; expected a mapping of keys (name, region, ...)")


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nowhere.yaml"
    assert load_lines(path) == [f"{path}: file not found"]


def test_directory(tmp_path: Path) -> None:
    assert load_lines(tmp_path) == [f"{tmp_path}: is a directory, not a cluster file"]


def test_not_utf8(tmp_path: Path) -> None:
    path = write(tmp_path, b"\xff\xfename: x\n")
    [line] = load_lines(path)
    assert line.startswith(f"{path}: cannot read the file: ")


def test_syntax_error_names_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, VALID_TEXT + "storage:\n  lustre: {capacity_gib: 1200\n")
    [line] = load_lines(path)
    assert line.startswith(f"{path}: line 10, column 1: YAML syntax error: ")


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("? [a, b]\n: c\n", id="block-list-key"),
        pytest.param(VALID_TEXT + "tags: {[a]: b}\n", id="flow-list-key"),
        pytest.param(VALID_TEXT + "tags:\n  ? {a: b}\n  : c\n", id="mapping-key"),
    ],
)
def test_unhashable_key_is_a_problem_not_a_traceback(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    [line] = load_lines(path)
    assert line.startswith(f"{path}: line ")


def test_yaml_merge_keys_work(tmp_path: Path) -> None:
    """`<<: *anchor` is valid YAML that yaml.safe_load accepts; the duplicate-key check must keep it so."""
    path = write(
        tmp_path,
        """\
name: quickstart
region: us-east-1
availability_zone_id: use1-az6
compute:
  - &gpu
    name: gpu
    instance_type: p5.48xlarge
    count: 2
  - <<: *gpu
    name: gpu2
""",
    )
    config = load(path)
    assert [(g.name, g.instance_type, g.count) for g in config.compute] == [
        ("gpu", "p5.48xlarge", 2),
        ("gpu2", "p5.48xlarge", 2),
    ]


def test_utf8_bom_and_crlf_are_accepted(tmp_path: Path) -> None:
    path = write(tmp_path, b"\xef\xbb\xbf" + VALID_TEXT.replace("\n", "\r\n").encode())
    assert load(path).name == "quickstart"


def test_unquoted_account_number(tmp_path: Path) -> None:
    path = write(tmp_path, VALID_TEXT + "account: 123456789012\n")
    assert load_lines(path) == [
        f'{path}: account: must be a quoted string of 12 digits, e.g. "012345678901" '
        "(YAML drops leading zeros of numbers)"
    ]


def test_yaml_booleans_in_nccl_env(tmp_path: Path) -> None:
    path = write(tmp_path, VALID_TEXT + "nccl:\n  env:\n    NCCL_DEBUG: WARN\n    FI_EFA_FORK_SAFE: yes\n")
    assert load_lines(path) == [
        f"{path}: nccl.env.FI_EFA_FORK_SAFE: must be a string or a whole number; got True "
        "(quote it: YAML reads yes/no/true as booleans)"
    ]


def test_yaml_parameter_counts(tmp_path: Path) -> None:
    path = write(tmp_path, VALID_TEXT + "training:\n  model_parameters: 7e9\n  checkpoint_write_seconds: 60\n")
    config = load(path)
    assert config.training is not None
    assert config.training.model_parameters == 7e9


def test_every_problem_of_a_file_is_reported_in_one_run(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
name: Bad_Name
region: us-east-1
availability_zone_id: us-east-1a
network:
  vpc_cidr: 8.8.0.0/16
compute:
  - name: gpu
    instance_type: p5.48xlarg
    count: -1
    capcity: on-demand
orchestrator:
  type: slurm
storage:
  lustre:
    capacity_gib: 1000
    metadata_iops: 2000
    repositories:
      - path: datasets
training:
  model_parameters: lots
nccl:
  env:
    CUDA_HOME: /usr/local/cuda
observability:
  alarm_email: ops
tags:
  aws:team: ml
""",
    )
    assert load_lines(path) == [
        f"{path}: {line}"
        for line in [
            "name: must be 2-24 characters of lowercase letters, digits and '-', starting with a letter and "
            "ending "
            "with a letter or digit; got 'Bad_Name'",
            "availability_zone_id: 'us-east-1a' is an AZ name; give the AZ ID (like use1-az1): names map to "
            "different zones in each account, IDs do not (aws ec2 describe-availability-zones lists both)",
            "network.vpc_cidr: must be a private (RFC 1918) block in 10.0.0.0/8, 172.16.0.0/12 or "
            "192.168.0.0/16; "
            "got '8.8.0.0/16'",
            "orchestrator.type: must be 'hyperpod-slurm' or 'pcs'; got 'slurm'",
            "compute[0].instance_type: unknown instance type 'p5.48xlarg': EC2 offers no such type (botocore ec2 "
            "InstanceType); did you mean 'p5.48xlarge'?",
            "compute[0].count: must be at least 0; got -1",
            "compute[0].capcity: unknown key; did you mean 'capacity'?",
            "storage.lustre.capacity_gib: must be 1200, 2400 or a multiple of 2400 GiB; got 1000 (nearest: 1200)",
            "storage.lustre.metadata_iops: must be 1500, 3000, 6000, 12000 or a multiple of 12000 up to "
            "192000; "
            "got 2000",
            "storage.lustre.repositories[0].path: must be an absolute Lustre path like /datasets; got 'datasets'",
            "training.model_parameters: must be a parameter count like 7B, 70B, 1.5T or 7e9; got 'lots'",
            "nccl.env.CUDA_HOME: 'CUDA_HOME' is not an NCCL or libfabric variable; keys must match "
            "^(NCCL|FI|OFI_NCCL)_[A-Z0-9_]+$",
            "observability.alarm_email: must be an email address like ops@example.com; got 'ops'",
            "tags.aws:team: 'aws:team': tag keys starting with 'aws:' are reserved by AWS",
        ]
    ]


def test_key_problems_and_cross_section_problems_of_a_file_are_reported_together(tmp_path: Path) -> None:
    """The contract: all problems in the file are reported in one run, not only the first."""
    path = write(
        tmp_path,
        """\
name: quickstart
region: us-east-1
availability_zone_id: use1-az6
compute:
  - {name: gpu, instance_type: p5.48xlarge, count: 2}
  - {name: gpu, instance_type: p5.48xlarge, count: 2}
storage:
  lustre:
    capacity_gib: 1000
    repositories:
      - path: /data
      - path: /data/c4
observability:
  prometheus: none
""",
    )
    assert sorted(load_lines(path)) == sorted(
        f"{path}: {line}"
        for line in [
            "storage.lustre.capacity_gib: must be 1200, 2400 or a multiple of 2400 GiB; got 1000 (nearest: 1200)",
            "compute[1].name: 'gpu' is already the name of compute[0]; group names must be unique",
            "storage.lustre.repositories[1].path: '/data/c4' and repositories[0].path '/data' nest; "
            "one path may not lie inside another",
            "observability.grafana: 'self-hosted' needs prometheus: managed as its data source; "
            "set grafana: none or prometheus: managed",
        ]
    )
