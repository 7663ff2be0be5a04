"""The in-account artifact mirror: one list of every file a node installs, with the SHA-256 kept in the package.

`artifacts.json` (beside this module) lists each artifact once: name, version, CPU architecture, upstream URL, the
S3 key it lands under in the mirror (`<name>/<version>/<file>`, so a new version is a new key and an old one is never
overwritten), its SHA-256 and where that digest comes from. The mirror job (`job.py`, run by CodeBuild outside the
VPC: `fmcluster.constructs.mirror.ArtifactMirror`) downloads each pinned artifact, verifies the digest and copies it
into the project's data bucket under `MIRROR_PREFIX` (the mirror stack's bucket with a baked node image); nodes
download only from there (through the VPC's S3 gateway endpoint) and verify the same digest again, which travels with
the node scripts: `fmcluster/node/mirror.sh` carries a block rendered from this list (`rendered_node_helper`), so
nothing a node trusts is read from the mirror itself.

An artifact whose digest no source confirms has `"sha256": null` and says "(unconfirmed)" in `sha256_source`. It is
not mirrored (the job lists it as NOT MIRRORED) and a node refuses to install it, naming it: fail safe. How to pin one
(from the upstream checksum file, or a public source that pins the same file): `README.md` beside this module, whose
table of every artifact and its digest's source is `readme_table()` (a test keeps the two equal).

Example::

    from fmcluster import mirror
    [a.key for a in mirror.artifacts() if a.name == "node_exporter"]
    # ['node_exporter/1.10.2/node_exporter-1.10.2.linux-amd64.tar.gz', ...]
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

MIRROR_PREFIX = "fmcluster-mirror"
"""Key prefix of the mirror in its bucket (the data bucket, or the mirror stack's: `fmcluster.stacks.mirror`)."""
NODE_HELPER = "mirror.sh"
"""The node-side helper under fmcluster/node/ that carries the pinned digests (`rendered_node_helper`)."""
PINS_BEGIN = (
    "# --- pinned digests rendered from fmcluster/mirror/artifacts.json (fmcluster.mirror); do not edit here ---"
)
PINS_END = "# --- end of pinned digests ---"
README_TABLE_HEAD = "| artifact | version | arch | SHA-256 | digest source |"
SHA256 = re.compile(r"^[0-9a-f]{64}$")
KEY = re.compile(r"^[a-z][a-z0-9_-]*/[0-9][A-Za-z0-9.-]*/[A-Za-z0-9][A-Za-z0-9._+-]*$")


@dataclass(frozen=True)
class Artifact:
    """One file a node installs from the mirror."""

    name: str
    version: str
    arch: str
    """amd64, arm64 (dpkg's names) or "source"."""
    url: str | None
    """Where the mirror job downloads it; None: there is no upstream file (never mirrored)."""
    key: str
    """Its key under the mirror prefix: <name>/<version>/<file>."""
    sha256: str | None
    """The pinned digest; None: unconfirmed (never mirrored, never installed)."""
    sha256_source: str
    required_by: str
    checksums_url: str | None = None
    """The checksum file upstream publishes beside it, if any (tools/pin_artifacts.py cross-checks against it)."""

    @property
    def pinned(self) -> bool:
        return self.sha256 is not None and self.url is not None


def list_path() -> Path:
    return Path(str(resources.files("fmcluster").joinpath("mirror", "artifacts.json")))


@functools.cache
def artifacts() -> tuple[Artifact, ...]:
    """Every artifact of `artifacts.json`, checked (a malformed entry raises ValueError naming it)."""
    entries = json.loads(list_path().read_text(encoding="utf-8"))["artifacts"]
    found = tuple(Artifact(**entry) for entry in entries)
    keys: set[str] = set()
    for artifact in found:
        problem = _problem(artifact)
        if artifact.key in keys:
            problem = "is listed twice"
        if problem:
            raise ValueError(f"fmcluster/mirror/artifacts.json: {artifact.key}: {problem}")
        keys.add(artifact.key)
    return found


def _problem(artifact: Artifact) -> str | None:
    if not KEY.match(artifact.key) or artifact.key.split("/")[1] != artifact.version:
        return "key must be <component>/<version>/<file>"
    if artifact.sha256 is not None and not SHA256.match(artifact.sha256):
        return f"sha256 must be 64 lowercase hex digits or null; got {artifact.sha256!r}"
    if artifact.sha256 is None and "(unconfirmed)" not in artifact.sha256_source:
        return "an artifact without a digest must say (unconfirmed) in sha256_source"
    if artifact.url is not None and not artifact.url.startswith("https://"):
        return f"url must be https://; got {artifact.url!r}"
    if artifact.checksums_url is not None and not artifact.checksums_url.startswith("https://"):
        return f"checksums_url must be https://; got {artifact.checksums_url!r}"
    if artifact.arch not in ("amd64", "arm64", "source"):
        return f"arch must be amd64, arm64 or source; got {artifact.arch!r}"
    return None


def readme_table() -> str:
    """The Markdown table of README.md: every artifact with its version, architecture, whether it is pinned and where
    its digest comes from."""
    rows = [README_TABLE_HEAD, "|---|---|---|---|---|"]
    for a in artifacts():
        digest = f"`{a.sha256[:12]}...`" if a.pinned and a.sha256 else "none: refused by nodes"
        rows.append(f"| {a.key.rsplit('/', 1)[1]} | {a.version} | {a.arch} | {digest} | {a.sha256_source} |")
    return "\n".join(rows) + "\n"


def list_hash() -> str:
    """The hash of the list: a property of the mirror's custom resource, so a changed list runs the job again."""
    return hashlib.sha256(list_path().read_bytes()).hexdigest()[:16]


def pins_block() -> str:
    """The bash lines of mirror.sh's pinned-digest block: MIRROR_SHA256[<key>]=<sha256> for every pinned artifact."""
    lines = [f"MIRROR_SHA256['{a.key}']={a.sha256}\n" for a in artifacts() if a.pinned]
    return "".join(lines)


def rendered_node_helper(text: str) -> str:
    """mirror.sh's `text` with its pinned-digest block rewritten from the list (a test keeps the shipped file equal
    to it; `python -m fmcluster.mirror` rewrites it after the list changed)."""
    head, rest = text.split(PINS_BEGIN + "\n", 1)
    _, tail = rest.split(PINS_END + "\n", 1)
    return f"{head}{PINS_BEGIN}\n{pins_block()}{PINS_END}\n{tail}"


def rendered_readme(text: str) -> str:
    """README.md's `text` with its closing table rewritten from the list (`readme_table`)."""
    return text[: text.index(README_TABLE_HEAD)] + readme_table()


def write_rendered_files() -> None:
    """Rewrite what is rendered from the list: mirror.sh's pinned digests and README.md's table."""
    helper = Path(__file__).parent.parent / "node" / NODE_HELPER
    helper.write_text(rendered_node_helper(helper.read_text(encoding="ascii")), encoding="ascii")
    readme = Path(__file__).parent / "README.md"
    readme.write_text(rendered_readme(readme.read_text(encoding="utf-8")), encoding="utf-8")
