"""The mirror job: copy every pinned artifact of artifacts.json into the mirror, verified. Python standard library only.

Usage: python3 job.py ARTIFACTS_JSON DEST
  DEST  s3://BUCKET/PREFIX (CodeBuild: the `aws` CLI copies, with the digest as object metadata `sha256`), or a
        local directory (the tests)

For each artifact with a URL and a pinned SHA-256: when DEST already holds its key with that digest (S3: the object's
`sha256` metadata; a directory: the file's own digest) nothing is done, so running the job again with the same list
is a no-op; otherwise it is downloaded over HTTPS (three attempts, pausing 5 s then 10 s between them; the
environment variable MIRROR_RETRY_PAUSE sets the first pause in seconds, the tests set 0), its SHA-256 computed and
compared with the pin, and only a match is uploaded. A mismatch or a failed download is an error: nothing is
published for that artifact, the others go on, and the job exits 1 at the end naming each failed artifact (the deploy
fails with the build's log). An artifact without a pin or without an upstream file is listed as NOT MIRRORED and is no
error (its entry says why; nodes refuse to install it). Prints one line per artifact.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ATTEMPTS = 3
PAUSE_SECONDS = 5.0
"""The pause after the first failed attempt; after attempt n it is n times this (MIRROR_RETRY_PAUSE overrides it)."""
CHUNK = 1 << 20


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while block := stream.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def retry_pause() -> float:
    """The first pause between attempts: MIRROR_RETRY_PAUSE's seconds when set, else PAUSE_SECONDS."""
    return float(os.environ.get("MIRROR_RETRY_PAUSE", PAUSE_SECONDS))


def download(url: str, target: Path, attempts: int = ATTEMPTS) -> None:
    """`url` into `target`, `attempts` attempts with a growing pause between them (`retry_pause`)."""
    pause = retry_pause()
    for attempt in range(1, attempts + 1):
        try:
            with urllib.request.urlopen(url, timeout=60) as response, target.open("wb") as out:
                shutil.copyfileobj(response, out, CHUNK)
            return
        except OSError as error:
            if attempt == attempts:
                raise
            print(f"  attempt {attempt} of {attempts} failed ({error}); retrying", flush=True)
            time.sleep(pause * attempt)


class S3:
    """The mirror in S3, through the aws CLI (CodeBuild's images carry it)."""

    def __init__(self, uri: str) -> None:
        self.bucket, _, self.prefix = uri.removeprefix("s3://").partition("/")
        self.prefix = self.prefix.strip("/")

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def holds(self, key: str, sha256: str) -> bool:
        result = subprocess.run(
            ["aws", "s3api", "head-object", "--bucket", self.bucket, "--key", self._key(key),
             "--query", "Metadata.sha256", "--output", "text"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        return result.returncode == 0 and result.stdout.strip() == sha256

    def put(self, key: str, path: Path, sha256: str) -> None:
        subprocess.run(
            ["aws", "s3", "cp", "--only-show-errors", "--metadata", f"sha256={sha256}", str(path),
             f"s3://{self.bucket}/{self._key(key)}"],
            check=True,
        )  # fmt: skip


class Directory:
    """The mirror as a local directory (tests)."""

    def __init__(self, root: str) -> None:
        self.root = Path(root)

    def holds(self, key: str, sha256: str) -> bool:
        path = self.root / key
        return path.is_file() and sha256_of(path) == sha256

    def put(self, key: str, path: Path, sha256: str) -> None:
        target = self.root / key
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)


def mirror(entries: list[dict], dest: S3 | Directory, work: Path) -> list[str]:
    """Copy every pinned entry into `dest`; returns the keys that failed (each reason printed)."""
    failed: list[str] = []
    for entry in entries:
        key, url, pinned = entry["key"], entry.get("url"), entry.get("sha256")
        if not url or not pinned:
            print(f"NOT MIRRORED {key}: {entry['sha256_source']}", flush=True)
            continue
        if dest.holds(key, pinned):
            print(f"present {key}", flush=True)
            continue
        target = work / "download"
        try:
            download(url, target)
        except OSError as error:
            print(f"FAILED {key}: {url} could not be downloaded ({error})", flush=True)
            failed.append(key)
            continue
        actual = sha256_of(target)
        if actual != pinned:
            print(f"FAILED {key}: {url} has SHA-256 {actual}, not the pinned {pinned}; not published", flush=True)
            failed.append(key)
            continue
        dest.put(key, target, pinned)
        print(f"mirrored {key} ({target.stat().st_size} bytes, sha256 {pinned})", flush=True)
        target.unlink()
    return failed


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: job.py ARTIFACTS_JSON DEST (s3://BUCKET/PREFIX or a directory)", file=sys.stderr)
        return 2
    entries = json.loads(Path(argv[0]).read_text(encoding="utf-8"))["artifacts"]
    dest = S3(argv[1]) if argv[1].startswith("s3://") else Directory(argv[1])
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as work:
        failed = mirror(entries, dest, Path(work))
    if failed:
        print(f"mirror job FAILED for {len(failed)} artifact(s): {', '.join(failed)}", file=sys.stderr)
        return 1
    print("mirror job finished: every pinned artifact is in the mirror", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
