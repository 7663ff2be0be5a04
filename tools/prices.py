"""Refresh fmcluster/prices.yaml from the AWS Price List API (pricing GetProducts; needs AWS credentials).

    python tools/prices.py                          # every key of every region already in the table
    python tools/prices.py --region us-west-2 --key ec2:p5en.48xlarge --key sagemaker:ml.p5.48xlarge

A figure the API answers with exactly one price is written with `confirmed: true` and the API as its source; a key
it cannot answer keeps the table's figure and mark (`fmcluster.live.prices` says which queries are unconfirmed).
The table's date becomes today's when at least one figure was read. Tests: tests/live/test_prices.py (Stubber).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

import yaml

from fmcluster.cost import PriceTable
from fmcluster.live.aws import Aws
from fmcluster.live.prices import PriceList

TABLE = Path(__file__).resolve().parents[1] / "fmcluster" / "prices.yaml"
HEADER = """\
# The price table `fmcluster plan` estimates a cluster's cost from (fmcluster/cost.py). USD, list prices, Linux, shared
# tenancy, before taxes, credits, Savings Plans and discounts. Every figure is an estimate. Written by
# tools/prices.py from the AWS Price List API where `confirmed: true`; other figures are hand-written seeds from
# secondary sources, shown by `plan` as "(unconfirmed)".
"""


def refreshed(table: PriceTable, prices: PriceList, wanted: dict[str, set[str]]) -> tuple[PriceTable, int]:
    """`table` with every key of `wanted` (region -> keys) that the Price List API answers replaced, and how many."""
    regions = {region: dict(entries) for region, entries in table.prices.items()}
    read = 0
    for region, keys in sorted(wanted.items()):
        for key in sorted(keys):
            price = prices.price_of(region, key)
            if price is not None:
                regions.setdefault(region, {})[key] = price
                read += 1
    date = f"{datetime.now(UTC):%Y-%m-%d}" if read else table.date
    source = "AWS Price List API and hand-written seeds (see each entry)" if read else table.source
    return PriceTable(date=date, source=source, prices=regions), read


def dumped(table: PriceTable) -> str:
    data = {
        "date": table.date,
        "source": table.source,
        "prices": {
            region: {key: asdict(price) for key, price in entries.items()} for region, entries in table.prices.items()
        },
    }
    return HEADER + yaml.safe_dump(data, sort_keys=False, width=200)


def main(argv: Sequence[str] | None = None, aws: Aws | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--region", action="append", default=[], help="a region to price (default: the table's)")
    parser.add_argument("--key", action="append", default=[], help="a key to add, e.g. ec2:p5en.48xlarge")
    parser.add_argument("--table", type=Path, default=TABLE)
    args = parser.parse_args(argv)
    table = PriceTable.load(args.table.read_text())
    regions = args.region or sorted(table.prices)
    wanted = {region: set(table.prices.get(region, {})) | set(args.key) for region in regions}
    updated, read = refreshed(table, PriceList(aws or Aws(PriceList.REGION)), wanted)
    args.table.write_text(dumped(updated))
    asked = sum(len(keys) for keys in wanted.values())
    print(f"{args.table}: {read} of {asked} price(s) read from the AWS Price List API; the rest kept as they were")
    return 0


if __name__ == "__main__":
    sys.exit(main())
