"""The artifact list, the node helper's pins rendered from it, and the mirror job run for real against a local HTTP
server (good digest, bad digest, a re-run that changes nothing). The S3 side of the job (the aws CLI) is not run here:
nothing calls AWS in tests; the directory destination exercises the same download-verify-publish path."""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from fmcluster import mirror

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
"""An internet host in a URL; the instance metadata service (IMDS, link-local) is no internet host."""
AWS_PLACEHOLDERS = ("https://aps-workspaces.REGION.amazonaws.com", "https://aps-workspaces.$REGION.amazonaws.com",
                    "https://[A-Za-z0-9.-]+")  # fmt: skip
"""observability.sh's usage text and check of the Prometheus remote-write endpoint: an AWS endpoint in the region,
reached through the VPC's interface endpoint, which the node is given, not a download."""


def internet_hosts(text: str) -> list[str]:
    for placeholder in AWS_PLACEHOLDERS:
        text = text.replace(placeholder, "")
    return HOSTS.findall(text) + re.findall(r"\b(?:github\.com|nvcr\.io|dl\.grafana\.com|fsx-lustre-client-repo)", text)


NOT_YET_ON_THE_MIRROR = {"fmcluster/node/mount-lustre.sh"}
"""Node files that still name an internet host: mount-lustre.sh installs a missing Lustre client on Ubuntu/RHEL from
AWS's FSx client repository (kernel-specific packages, not on the mirror). Remaining work of issue 22 item 2; the test
fails when the set is wrong either way, so it shrinks as files move to mirror_get."""


def test_no_node_file_names_an_internet_host():
    offenders = {
        str(path.relative_to(ROOT))
        for path in sorted(NODE.rglob("*"))
        if path.is_file() and internet_hosts(path.read_text(encoding="utf-8", errors="replace"))
    }
    assert offenders == NOT_YET_ON_THE_MIRROR


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
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def run_job(tmp_path, entries, dest):
    listing = tmp_path / "artifacts.json"
    listing.write_text(json.dumps({"artifacts": entries}))
    return subprocess.run([sys.executable, str(JOB), str(listing), str(dest)], capture_output=True, text=True,
                          check=False)  # fmt: skip


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


def test_the_mirrors_readme_lists_every_artifact_with_its_digests_source():
    readme = (ROOT / "fmcluster" / "mirror" / "README.md").read_text(encoding="utf-8")
    assert readme.endswith(mirror.readme_table()), "the table of fmcluster/mirror/README.md is mirror.readme_table()"
