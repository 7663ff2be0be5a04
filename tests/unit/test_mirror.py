"""The artifact list, the node helper's pins rendered from it, and the mirror job run for real against a local HTTP
server (good digest, bad digest, a re-run that changes nothing). The S3 side of the job (the aws CLI) is not run here:
nothing calls AWS in tests; the directory destination exercises the same download-verify-publish path."""

from __future__ import annotations

import functools
import hashlib
import http.server
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import threading
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fmcluster import mirror, names
from tests.conftest import EXAMPLES

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / "fmcluster" / "node"
JOB = ROOT / "fmcluster" / "mirror" / "job.py"


def test_the_shipped_node_helper_carries_the_lists_pins():
    text = (NODE / mirror.NODE_HELPER).read_text(encoding="ascii")
    assert text == mirror.rendered_node_helper(text), "run: python -m fmcluster.mirror"


def test_every_unpinned_artifact_says_why_and_every_pin_names_its_source():
    for artifact in mirror.artifacts():
        if artifact.sha256 is None:
            assert "(unconfirmed)" in artifact.sha256_source
        else:
            assert "pin" in artifact.sha256_source or "sums" in artifact.sha256_source


def test_a_malformed_entry_is_refused(tmp_path, monkeypatch):
    entry = {"name": "x", "version": "1.0", "arch": "amd64", "url": "https://example.com/x", "key": "x/1.0/x",
             "sha256": None, "sha256_source": "no idea", "required_by": "nothing"}  # fmt: skip
    (tmp_path / "artifacts.json").write_text(json.dumps({"artifacts": [entry]}))
    monkeypatch.setattr(mirror, "list_path", lambda: tmp_path / "artifacts.json")
    mirror.artifacts.cache_clear()
    try:
        with pytest.raises(ValueError, match=r"^fmcluster/mirror/artifacts.json: x/1.0/x: an artifact without a digest "
                           r"must say \(unconfirmed\) in sha256_source$"):  # fmt: skip
            mirror.artifacts()
    finally:
        mirror.artifacts.cache_clear()


HOSTS = re.compile(r"(?:https?|ftp)://(?!169\.254\.169\.254|127\.0\.0\.1|localhost)[^\s\"'/]+")
"""An internet host in a URL; the instance metadata service (IMDS, link-local) is no internet host. S3 is reached as
s3://<bucket variable>/..., which this does not match."""
HOST_NAMES = re.compile(
    r"\b(?:github\.com|[\w.-]*githubusercontent\.com|nvidia\.github\.io|nvcr\.io|docker\.io|ghcr\.io|quay\.io"
    r"|pypi\.org|files\.pythonhosted\.org|dl\.grafana\.com|grafana\.com|download\.schedmd\.com"
    r"|fsx-lustre-client-repo[\w.-]*|developer\.download\.nvidia\.com|archive\.ubuntu\.com)"
)
"""Hosts a node script might download from, named without a scheme (a `curl` argument built from parts, a registry
image name, a repository line): the release and package sites of everything nodes install."""
AWS_PLACEHOLDERS = ("https://aps-workspaces.REGION.amazonaws.com", "https://aps-workspaces.$REGION.amazonaws.com",
                    "https://[A-Za-z0-9.-]+")  # fmt: skip
"""observability.sh's usage text and check of the Prometheus remote-write endpoint: an AWS endpoint in the region,
reached through the VPC's interface endpoint, which the node is given, not a download."""


def internet_hosts(text: str) -> list[str]:
    for placeholder in AWS_PLACEHOLDERS:
        text = text.replace(placeholder, "")
    return HOSTS.findall(text) + HOST_NAMES.findall(text)


def test_the_host_check_finds_what_it_is_for():
    """The check itself, on lines that would come back if a download from the internet did (each a real former line of
    fmcluster/node or a pattern of the brief)."""
    for line in (
        "retry curl -fsSL -o x https://github.com/NVIDIA/enroot/releases/download/v4.1.2/enroot_4.1.2-1_amd64.deb",
        "deb [signed-by=/usr/share/keyrings/fsx.gpg] https://fsx-lustre-client-repo.s3.amazonaws.com/ubuntu noble main",
        'DCGM_EXPORTER_IMAGE="nvcr.io/nvidia/k8s/dcgm-exporter:$TAG"',
        "curl -s -L https://nvidia.github.io/libnvidia-container/gpgkey",
        "url=raw.githubusercontent.com/org/repo/main/install.sh",
        "pip install --index-url https://pypi.org/simple torch",
        "docker pull docker.io/library/ubuntu:24.04",
        "wget http://example.com/x.tar.gz",
    ):
        assert internet_hosts(line), line
    for line in ("aws s3 cp s3://$BUCKET/fmcluster-mirror/x /tmp/x", "curl http://169.254.169.254/latest/api/token",
                 'check "https://aps-workspaces.$REGION.amazonaws.com/workspaces/ws-1/"'):  # fmt: skip
        assert not internet_hosts(line), line


def test_no_node_file_names_an_internet_host():
    """Every file under fmcluster/node: nodes install from the image and the project's mirror only."""
    offenders = {
        str(path.relative_to(ROOT)): internet_hosts(path.read_text(encoding="utf-8", errors="replace"))
        for path in sorted(NODE.rglob("*"))
        if path.is_file()
    }
    assert {path: hosts for path, hosts in offenders.items() if hosts} == {}


def node_archives(outdir: Path) -> dict[str, str]:
    """The text of every file of the synthesized node archives in cdk.out: the PCS node bundle and HyperPod's lifecycle
    archive (a zip or directory asset holding run-step.sh) and the PCS lifecycle actions' runner (a .sh asset)."""
    texts: dict[str, str] = {}
    for asset in sorted(outdir.glob("asset.*")):
        if asset.suffix == ".zip":
            with zipfile.ZipFile(asset) as archive:
                files = {name: archive.read(name) for name in archive.namelist() if not name.endswith("/")}
        elif asset.is_dir():
            files = {p.relative_to(asset).as_posix(): p.read_bytes() for p in asset.rglob("*") if p.is_file()}
        elif asset.suffix == ".sh":
            files = {asset.name: asset.read_bytes()}
        else:
            continue
        if asset.suffix == ".sh" or any(name.endswith("run-step.sh") for name in files):
            texts |= {f"{asset.name}/{name}": data.decode("utf-8", "replace") for name, data in files.items()}
    return texts


def node_settings(templates: dict[str, dict]) -> dict[str, str]:
    """What each template gives its nodes: PCS node groups' lifecycle actions, HyperPod instance groups' lifecycle
    configuration, launch templates' user data (as JSON text, tokens and all)."""
    found: dict[str, str] = {}
    for stack, template in templates.items():
        for logical_id, resource in template.get("Resources", {}).items():
            props = resource.get("Properties", {})
            values = {
                "AWS::PCS::ComputeNodeGroup": [props.get("NodeLifecycleActions")],
                "AWS::SageMaker::Cluster": [group.get("LifeCycleConfig") for group in props.get("InstanceGroups", [])],
                "AWS::EC2::LaunchTemplate": [props.get("LaunchTemplateData", {}).get("UserData")],
            }.get(resource["Type"], [])
            for n, value in enumerate(v for v in values if v is not None):
                found[f"{stack}/{logical_id}/{n}"] = json.dumps(value)
    return found


@pytest.mark.parametrize("example", [path.stem for path in EXAMPLES])
def test_no_synthesized_lifecycle_action_or_archive_names_an_internet_host(synthesized, example):
    result = synthesized[example]
    archives, settings = node_archives(result.outdir), node_settings(result.templates)
    assert any(name.endswith("run-step.sh") for name in archives), "no node archive found in cdk.out"
    assert settings, "no lifecycle action or lifecycle configuration found"
    offenders = {name: internet_hosts(text) for name, text in (archives | settings).items()}
    assert {name: hosts for name, hosts in offenders.items() if hosts} == {}


def test_every_key_a_node_script_installs_is_in_the_list():
    """Every `mirror_get` of a node script names a listed key (with its variables as the script sets them)."""
    keys = {a.key for a in mirror.artifacts()}
    used: set[str] = set()
    for path in sorted(NODE.rglob("*.sh")):
        used.update(re.findall(r"mirror_get\s+\"?([\w${}.+-]+/[^\s\"]+)", path.read_text(encoding="ascii")))
    assert used, "no node script installs from the mirror"

    def pattern(used_key: str) -> re.Pattern[str]:
        parts = re.split(r"\$\{?[A-Za-z_]+\}?", used_key)  # a shell variable matches one path component's text
        return re.compile("^" + "[^/]+".join(re.escape(part) for part in parts) + "$")

    patterns = [pattern(u) for u in used]
    for pattern, raw in zip(patterns, used, strict=True):
        assert any(pattern.match(key) for key in keys), f"{raw} is installed by a node script but not in the list"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # the test's output stays readable
        pass


@pytest.fixture
def upstream(tmp_path):
    """A local HTTP server standing in for the upstream release hosts."""
    root = tmp_path / "upstream"
    root.mkdir()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def run_job(tmp_path, entries, dest):
    """The job as CodeBuild runs it, except that it does not pause between its download attempts (they still happen:
    CodeBuild's pauses are 5 s and 10 s, `test_the_job_pauses_5_then_10_seconds_between_attempts`)."""
    listing = tmp_path / "artifacts.json"
    listing.write_text(json.dumps({"artifacts": entries}))
    return subprocess.run([sys.executable, str(JOB), str(listing), str(dest)], capture_output=True, text=True,
                          check=False, env={**os.environ, "MIRROR_RETRY_PAUSE": "0"})  # fmt: skip


def entry(name, url, sha256):
    return {"name": name, "version": "1.0", "arch": "amd64", "url": url, "key": f"{name}/1.0/{name}.tar.gz",
            "sha256": sha256, "sha256_source": "pinned in the test" if sha256 else "(unconfirmed) test",
            "required_by": "test"}  # fmt: skip


def test_the_job_publishes_a_matching_download_refuses_a_wrong_one_and_skips_an_unpinned_one(tmp_path, upstream):
    root, base = upstream
    (root / "good.tar.gz").write_bytes(b"good archive")
    (root / "bad.tar.gz").write_bytes(b"tampered archive")
    good = hashlib.sha256(b"good archive").hexdigest()
    entries = [
        entry("good", f"{base}/good.tar.gz", good),
        entry("bad", f"{base}/bad.tar.gz", hashlib.sha256(b"the real archive").hexdigest()),
        entry("unpinned", f"{base}/good.tar.gz", None),
    ]
    dest = tmp_path / "mirror"
    result = run_job(tmp_path, entries, dest)
    assert result.returncode == 1
    assert (dest / "good/1.0/good.tar.gz").read_bytes() == b"good archive"
    assert not (dest / "bad").exists()
    assert not (dest / "unpinned").exists()
    assert f"mirrored good/1.0/good.tar.gz (12 bytes, sha256 {good})" in result.stdout
    assert "FAILED bad/1.0/bad.tar.gz: " in result.stdout and "not the pinned" in result.stdout
    assert "NOT MIRRORED unpinned/1.0/unpinned.tar.gz: (unconfirmed) test" in result.stdout
    assert result.stderr.strip() == "mirror job FAILED for 1 artifact(s): bad/1.0/bad.tar.gz"

    (root / "good.tar.gz").unlink()  # a re-run with the same list downloads nothing
    again = run_job(tmp_path, entries[:1], dest)
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.splitlines() == [
        "present good/1.0/good.tar.gz",
        "mirror job finished: every pinned artifact is in the mirror",
    ]


def test_the_job_fails_on_an_unreachable_upstream(tmp_path, upstream):
    _, base = upstream
    result = run_job(tmp_path, [entry("gone", f"{base}/missing.tar.gz", "0" * 64)], tmp_path / "mirror")
    assert result.returncode == 1
    assert "FAILED gone/1.0/gone.tar.gz: " in result.stdout
    assert "could not be downloaded (HTTP Error 404" in result.stdout
    assert [line.split(" (")[0] for line in result.stdout.splitlines() if "attempt" in line] == [
        "  attempt 1 of 3 failed",
        "  attempt 2 of 3 failed",
    ]


def test_the_job_pauses_5_then_10_seconds_between_attempts(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("mirror_job", JOB)
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)
    monkeypatch.delenv("MIRROR_RETRY_PAUSE", raising=False)
    pauses: list[float] = []
    monkeypatch.setattr(job.time, "sleep", pauses.append)
    with pytest.raises(OSError):
        job.download("http://127.0.0.1:9/unreachable", tmp_path / "download")  # the discard port: refused
    assert pauses == [5.0, 10.0]


def test_the_mirrors_readme_lists_every_artifact_with_its_digests_source():
    readme = (ROOT / "fmcluster" / "mirror" / "README.md").read_text(encoding="utf-8")
    assert readme.endswith(mirror.readme_table()), "the table of fmcluster/mirror/README.md is mirror.readme_table()"


PIN = ROOT / "tools" / "pin_artifacts.py"
TODAY = datetime.now(UTC).date().isoformat()
GOOD = b"good archive"
GOOD_SHA = hashlib.sha256(GOOD).hexdigest()


def release(root, body=GOOD, checksums=None):
    """An upstream release under the local server: https://example.org/rel/v1/good.tar.gz (+ its sha256sums.txt)."""
    folder = root / "example.org" / "rel" / "v1"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "good.tar.gz").write_bytes(body)
    if checksums is not None:
        (folder / "sha256sums.txt").write_text(checksums)


def pin_entry(name, sha256, checksums=False, url="https://example.org/rel/v1/good.tar.gz"):
    found = entry(name, url, sha256)
    if checksums:
        found["checksums_url"] = "https://example.org/rel/v1/sha256sums.txt"
    return found


def run_pin(tmp_path, entries, *arguments, base="http://127.0.0.1:9"):
    listing = tmp_path / "artifacts.json"
    if entries is not None:
        listing.write_text(json.dumps({"artifacts": entries}, indent=1) + "\n")
    result = subprocess.run([sys.executable, str(PIN), *arguments, "--list", str(listing), "--base-url", base,
                             "--attempts", "1"], capture_output=True, text=True, check=False)  # fmt: skip
    return result, json.loads(listing.read_text())["artifacts"]


def test_pin_artifacts_write_pins_the_unpinned_cross_checked_and_leaves_a_matching_pin_alone(tmp_path, upstream):
    root, base = upstream
    release(root, checksums=f"{'1' * 64}  other.tar.gz\n{GOOD_SHA}  good.tar.gz\n")
    entries = [pin_entry("new", None, checksums=True), pin_entry("kept", GOOD_SHA), entry("image", None, None)]
    result, written = run_pin(tmp_path, entries, "--write", base=base)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines() == [
        f"pinned new/1.0/new.tar.gz: {GOOD_SHA}",
        f"ok kept/1.0/kept.tar.gz: {GOOD_SHA}",
        "skipped image/1.0/image.tar.gz: no upstream file (url is null): (unconfirmed) test",
    ]
    assert written[0]["sha256"] == GOOD_SHA
    assert written[0]["sha256_source"] == (
        f"computed by tools/pin_artifacts.py from {base}/example.org/rel/v1/good.tar.gz on {TODAY}; "
        f"matches {base}/example.org/rel/v1/sha256sums.txt"
    )
    assert written[1:] == entries[1:], "a matching pin and an entry without a URL are not rewritten"
    assert mirror.Artifact(**written[0]).pinned, "the written entry passes the list's own checks"


def test_pin_artifacts_check_lists_the_unpinned_and_the_mismatching_and_changes_nothing(tmp_path, upstream):
    root, base = upstream
    release(root)
    entries = [
        pin_entry("new", None),
        pin_entry("wrong", "0" * 64),
        pin_entry("kept", GOOD_SHA),
        entry("i", None, None),
    ]
    result, written = run_pin(tmp_path, entries, "--check", base=base)
    assert result.returncode == 1
    url = f"{base}/example.org/rel/v1/good.tar.gz"
    assert result.stdout.splitlines() == [
        f"UNPINNED new/1.0/new.tar.gz: {url} has SHA-256 {GOOD_SHA}",
        f"MISMATCH wrong/1.0/wrong.tar.gz: {url} has SHA-256 {GOOD_SHA}, the list pins {'0' * 64}",
        f"ok kept/1.0/kept.tar.gz: {GOOD_SHA}",
        "UNPINNED i/1.0/i.tar.gz: no upstream file (url is null): (unconfirmed) test",
    ]
    assert result.stderr == "pin_artifacts: 3 artifact(s) unpinned or not matching; nothing written\n"
    assert written == entries


def test_pin_artifacts_never_changes_a_pinned_digest_without_force(tmp_path, upstream):
    root, base = upstream
    release(root)
    entries = [pin_entry("new", None), pin_entry("wrong", "0" * 64)]
    result, written = run_pin(tmp_path, entries, "--write", base=base)
    assert result.returncode == 1
    assert f"MISMATCH wrong/1.0/wrong.tar.gz: {base}/example.org/rel/v1/good.tar.gz has SHA-256 {GOOD_SHA}, " \
           f"the list pins {'0' * 64}" in result.stdout.splitlines()  # fmt: skip
    assert written == entries, "an error writes nothing, not even the unpinned entry"
    result, written = run_pin(tmp_path, entries, "--write", "--force", "--only", "wrong", base=base)
    assert result.returncode == 0
    assert result.stdout == f"REPLACED wrong/1.0/wrong.tar.gz: pinned {'0' * 64}, now {GOOD_SHA}\n"
    assert [e["sha256"] for e in written] == [None, GOOD_SHA]


def test_pin_artifacts_refuses_a_download_the_upstream_checksum_file_disagrees_with(tmp_path, upstream):
    root, base = upstream
    release(root, checksums=f"{'2' * 64} *good.tar.gz\n")
    result, written = run_pin(tmp_path, [pin_entry("new", None, checksums=True)], "--write", base=base)
    assert result.returncode == 1
    assert result.stdout == (f"MISMATCH new/1.0/new.tar.gz: {base}/example.org/rel/v1/good.tar.gz has SHA-256 "
                             f"{GOOD_SHA}, {base}/example.org/rel/v1/sha256sums.txt lists {'2' * 64}\n")  # fmt: skip
    assert written[0]["sha256"] is None
    (root / "example.org" / "rel" / "v1" / "sha256sums.txt").write_text(f"{GOOD_SHA}  another.tar.gz\n")
    result, _ = run_pin(tmp_path, None, "--check", base=base)
    assert result.stdout == f"MISMATCH new/1.0/new.tar.gz: {base}/example.org/rel/v1/sha256sums.txt lists no SHA-256 " \
                            "for good.tar.gz\n"  # fmt: skip


def test_pin_artifacts_says_in_one_line_which_download_failed(tmp_path, upstream):
    root, base = upstream
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    result, _ = run_pin(tmp_path, [pin_entry("new", None)], "--check", base=f"http://127.0.0.1:{port}")
    assert (result.returncode, result.stdout) == (2, "")
    refused = "<urlopen error [Errno 111] Connection refused>"
    assert result.stderr == (f"pin_artifacts: http://127.0.0.1:{port}/example.org/rel/v1/good.tar.gz: could not be "
                             f"downloaded ({refused}); nothing written\n")  # fmt: skip
    release(root)
    result, written = run_pin(tmp_path, [pin_entry("new", None, checksums=True)], "--write", base=base)
    assert result.returncode == 2
    assert result.stderr == (f"pin_artifacts: {base}/example.org/rel/v1/sha256sums.txt: could not be downloaded "
                             "(HTTP Error 404: File not found); nothing written\n")  # fmt: skip
    assert written[0]["sha256"] is None
    result, _ = run_pin(tmp_path, None, "--check", "--only", "nothing", base=base)
    assert (result.returncode, result.stderr) == (2, "pin_artifacts: --only nothing: no artifact has this name\n")


def test_the_mirrors_readme_is_rendered_from_the_list():
    readme = (ROOT / "fmcluster" / "mirror" / "README.md").read_text(encoding="utf-8")
    assert mirror.rendered_readme(readme + "| stale | row |\n") == readme, "python -m fmcluster.mirror renders it"


def test_with_a_baked_node_image_the_mirror_stack_depends_on_nothing_and_keeps_its_bucket_and_key(synthesized):
    """With `orchestrator.node_image: baked` (examples/pcs-own-vpc.yaml) the mirror has a stack of its own that waits
    for no stack (so the node-image build and the nodes wait for the mirror job only, not for FSx: DESIGN.md, Flow),
    and keeps its key and buckets with `storage.retain_on_delete` (true by default). Nodes and builds read it
    through `read_policy`, which grants only the mirror's prefix."""
    result = synthesized["pcs-own-vpc"]
    assert result.config.orchestrator.node_image == "baked" and result.config.storage.retain_on_delete
    stacks = result.built  # fmcluster.stacks.ClusterStacks
    assert stacks.mirror.dependencies == []
    assert stacks.mirror in stacks.cluster.dependencies and stacks.mirror in stacks.node_image.dependencies
    assert stacks.storage.mirror is None
    template = result.templates[stacks.mirror.stack_name]
    stateful = [r for r in template["Resources"].values() if r["Type"] in ("AWS::S3::Bucket", "AWS::KMS::Key")]
    assert sorted(resource["Type"] for resource in stateful) == ["AWS::KMS::Key"] + ["AWS::S3::Bucket"] * 2
    assert {resource.get("DeletionPolicy") for resource in stateful} == {"Retain"}
    assert [r for r in template["Resources"].values() if r["Type"] == "Custom::S3AutoDeleteObjects"] == []
    (read,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::IAM::ManagedPolicy"]
    (objects, decrypt) = read["Properties"]["PolicyDocument"]["Statement"]
    assert (
        objects["Action"] == "s3:GetObject" and objects["Resource"]["Fn::Join"][1][-1] == f"/{mirror.MIRROR_PREFIX}/*"
    )
    assert decrypt["Action"] == "kms:Decrypt" and "kms:ViaService" in decrypt["Condition"]["StringEquals"]


def test_a_baked_mirror_stack_deletes_its_key_and_buckets_without_retain_on_delete():
    """examples/p6-b300-isolated.yaml (retain_on_delete: false) made baked: the mirror stack's key and buckets are
    deleted with it, the buckets emptied first. Read from the constructs, without synthesizing the app."""
    import aws_cdk as cdk
    import yaml

    from fmcluster.config import parse
    from fmcluster.stacks import build

    raw = yaml.safe_load((ROOT / "examples" / "p6-b300-isolated.yaml").read_text())
    raw["orchestrator"]["node_image"] = "baked"
    stacks = build(cdk.App(), parse(raw, source="baked.yaml"))
    assert stacks.mirror is not None
    stateful = [
        stacks.mirror.key,
        stacks.mirror.bucket,
        *[b for b in stacks.mirror.node.children if b.node.id == "LogsBucket"],
    ]
    assert len(stateful) == 3
    for construct in stateful:
        assert construct.node.default_child.cfn_options.deletion_policy == cdk.CfnDeletionPolicy.DELETE
    emptied = [
        c for c in stacks.mirror.node.find_all() if isinstance(c, cdk.CustomResource) and "AutoDelete" in c.node.id
    ]
    assert len(emptied) == 2


@pytest.mark.parametrize("example", ["quickstart", "p6-b300-isolated"])
def test_with_boot_the_storage_stack_holds_the_mirror_as_before(synthesized, example):
    """With `orchestrator.node_image: boot` (the default, and every cluster deployed before the mirror stack existed)
    the mirror stays where it was: the storage stack's construct Mirror under the data bucket, the same logical ids,
    no mirror stack and no read policy of its own (the nodes read it through the storage stack's NodeDataAccess),
    so an fmcluster upgrade changes no node group's lifecycle arguments and replaces no node for it."""
    result = synthesized[example]
    assert result.config.orchestrator.node_image == "boot"
    stacks = result.built
    assert stacks.mirror is None
    assert not [name for name in result.templates if name.endswith(f"-{names.MIRROR_STACK}")]
    storage = result.templates[stacks.storage.stack_name]["Resources"]
    assert storage["Mirror224E8F46"]["Type"] == "Custom::ArtifactMirror"
    assert [name for name in storage if name.startswith("MirrorReadPolicy")] == []
    uri = storage["Mirror224E8F46"]["Properties"]["MirrorUri"]
    assert uri["Fn::Join"][1][0] == "s3://" and uri["Fn::Join"][1][1] == {"Ref": "BucketsDataBucket44451DC7"}
