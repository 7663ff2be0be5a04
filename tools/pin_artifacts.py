"""Pin the SHA-256 of fmcluster's mirror artifacts from their upstream files (run on a machine with internet).

    python tools/pin_artifacts.py --check                    # exit 1 listing every unpinned or mismatching artifact
    python tools/pin_artifacts.py --write --only enroot      # pin every `enroot` entry that has no digest yet
    python tools/pin_artifacts.py --write --only grafana --force   # replace a pinned digest (printed as REPLACED)

For each entry of fmcluster/mirror/artifacts.json (or each entry named NAME with `--only`) that has an upstream
file, the file is downloaded from the URL the mirror job downloads (`url`, with the job's own `download`, and hashed
with its `sha256_of`, so this tool and the job cannot disagree about what is fetched) and its SHA-256 computed while
streaming. Where the entry names the upstream checksum file (`checksums_url`: Prometheus' `sha256sums.txt`,
goreleaser's `<project>_<version>_checksums.txt`, Grafana's `<archive>.sha256`), that file is read too and must list
the same digest for the file's name.

`--check` changes nothing and exits 1 when an entry is unpinned or its pin differs from the download. `--write` pins
entries without a digest (`sha256_source`: "computed by tools/pin_artifacts.py from <url> on <date>", plus "; matches
<checksums_url>" when one was read). A pinned digest that differs from the download is an error naming both, and is
replaced only with `--force`. Any error writes nothing. After writing the package's own list, the node helper's pins
and the README's table are rendered again (`python -m fmcluster.mirror`).

`--base-url` fetches `<base-url>/<host>/<path>` instead of `https://<host>/<path>` (the tests' local HTTP server, or
an internal proxy of the release hosts); the URL recorded is the one actually downloaded.

Exit codes: 0 done, 1 mismatch or unpinned (--check) or a refused change, 2 bad usage or a download that failed
(one line each, no traceback).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from fmcluster import mirror
from fmcluster.mirror import job

PROG = "pin_artifacts"


class DownloadFailed(Exception):
    """A download that failed after the job's attempts; str() is the one-line message."""


def fetch_url(url: str, base_url: str | None) -> str:
    """The URL to download: `url` itself, or under `base_url` (`<base>/<host>/<path>`)."""
    if base_url is None:
        return url
    return f"{base_url.rstrip('/')}/{url.removeprefix('https://')}"


def fetch(url: str, target: Path, attempts: int) -> None:
    try:
        job.download(url, target, attempts=attempts)
    except OSError as error:
        raise DownloadFailed(f"{url}: could not be downloaded ({error})") from None


def listed_digest(checksums: str, file_name: str) -> str | None:
    """The digest a checksum file gives `file_name`: `<sha256>  <name>` lines (sha256sum, goreleaser; a `*` before the
    name is binary mode), or one lone digest (Grafana's `<archive>.sha256`)."""
    lines = [line.split() for line in checksums.splitlines() if line.strip()]
    if len(lines) == 1 and len(lines[0]) == 1:
        return lines[0][0].lower()
    for fields in lines:
        if len(fields) == 2 and fields[1].lstrip("*") == file_name:
            return fields[0].lower()
    return None


def pin(entry: dict, work: Path, args: argparse.Namespace, today: str) -> tuple[list[str], list[str]]:
    """Download one entry and compare; returns (problems, notes) and updates `entry` when --write may."""
    key, pinned = entry["key"], entry.get("sha256")
    if not entry.get("url"):
        line = f"{key}: no upstream file (url is null): {entry['sha256_source']}"
        return ([], [f"skipped {line}"]) if args.write else ([f"UNPINNED {line}"], [])
    url = fetch_url(entry["url"], args.base_url)
    target = work / "download"
    fetch(url, target, args.attempts)
    computed = job.sha256_of(target)
    target.unlink()
    source = f"computed by tools/pin_artifacts.py from {url} on {today}"
    if entry.get("checksums_url"):
        checksums_url = fetch_url(entry["checksums_url"], args.base_url)
        fetch(checksums_url, work / "checksums", args.attempts)
        file_name = entry["url"].rsplit("/", 1)[1]
        listed = listed_digest((work / "checksums").read_text(encoding="utf-8", errors="replace"), file_name)
        if listed is None:
            return [f"MISMATCH {key}: {checksums_url} lists no SHA-256 for {file_name}"], []
        if listed != computed:
            return [f"MISMATCH {key}: {url} has SHA-256 {computed}, {checksums_url} lists {listed}"], []
        source += f"; matches {checksums_url}"
    if pinned == computed:
        return [], [f"ok {key}: {computed}"]
    if pinned is not None and not (args.write and args.force):
        return [f"MISMATCH {key}: {url} has SHA-256 {computed}, the list pins {pinned}"], []
    if not args.write:
        return [f"UNPINNED {key}: {url} has SHA-256 {computed}"], []
    note = f"REPLACED {key}: pinned {pinned}, now {computed}" if pinned else f"pinned {key}: {computed}"
    entry["sha256"], entry["sha256_source"] = computed, source
    return [], [note]


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="change nothing; exit 1 on an unpinned or wrong digest")
    mode.add_argument("--write", action="store_true", help="pin the digest of every entry that has none")
    parser.add_argument("--only", metavar="NAME", help="only the entries with this name (every architecture)")
    parser.add_argument("--force", action="store_true", help="with --write: replace a pinned digest that differs")
    parser.add_argument(
        "--list", type=Path, default=mirror.list_path(), help="the artifact list (default: the package's)"
    )
    parser.add_argument("--base-url", help="download <base-url>/<host>/<path> instead of https://<host>/<path>")
    parser.add_argument("--attempts", type=int, default=job.ATTEMPTS, help="download attempts per file")
    args = parser.parse_args(argv)
    if args.force and not args.write:
        parser.error("--force needs --write")
    return args


def main(argv: Sequence[str]) -> int:
    args = parse(argv)
    try:
        listing = json.loads(args.list.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        print(f"{PROG}: {args.list}: cannot read the artifact list ({error})", file=sys.stderr)
        return 2
    entries = [e for e in listing["artifacts"] if args.only in (None, e["name"])]
    if not entries:
        print(f"{PROG}: --only {args.only}: no artifact has this name", file=sys.stderr)
        return 2
    today = datetime.now(UTC).date().isoformat()
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as work:
        for entry in entries:
            try:
                found, notes = pin(entry, Path(work), args, today)
            except DownloadFailed as failure:
                print(f"{PROG}: {failure}; nothing written", file=sys.stderr)
                return 2
            problems += found
            for line in found + notes:
                print(line, flush=True)
    if problems:
        print(f"{PROG}: {len(problems)} artifact(s) unpinned or not matching; nothing written", file=sys.stderr)
        return 1
    if args.write:
        args.list.write_text(json.dumps(listing, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        if args.list.resolve() == mirror.list_path().resolve():
            mirror.artifacts.cache_clear()
            mirror.write_rendered_files()
            print("rendered fmcluster/node/mirror.sh and fmcluster/mirror/README.md from the list", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
