#!/usr/bin/env python3
"""Refresh nodewright's bundled EC2 instance-type catalog (``nodewright/data/catalog/``).

Calls the EC2 API exactly as the live controller does:

* ``DescribeInstanceTypes`` (paginated) for the specs of every instance type, stored once for all regions in
  ``instance-types.json.gz`` (a list of ``InstanceTypeInfo`` records, AWS field names, sorted by name);
* ``DescribeAvailabilityZones`` and ``DescribeInstanceTypeOfferings`` with ``LocationType=availability-zone``
  (paginated) per region, stored as ``offerings/<region>.json.gz``:
  ``{"region", "source", "zones": [{"name", "id"}], "offerings": {"<type>": ["<zone>", ...]}}``.

Two modes:

* ``--moto`` (offline, the default when no AWS credentials are found): runs the same calls against moto's
  in-process mock (``mock_aws``), which serves real EC2 specs for ~1,400 types and per-AZ offerings for its
  regions as captured by the moto project.
* real AWS (``--aws``): needs credentials with ``ec2:DescribeInstanceTypes``,
  ``ec2:DescribeInstanceTypeOfferings`` and ``ec2:DescribeAvailabilityZones``.

Files are written deterministically (sorted keys, gzip mtime 0) so a refresh without changes leaves git clean.

Regions: every commercial region moto has offerings for (30: all of ``aws`` partition's but ap-east-2,
ap-southeast-6, ap-southeast-7 and mx-central-1, which moto 5.2.5 does not know). ``scripts/catalog_supplement.json``
adds types the source lacks (moto has no AMD GPU g4ad): its records join the specs and its ``offerings``
(family -> regions) add every size of the family to every zone of those regions, only where the source has no
record / offering of its own.

Usage::

    .venv/bin/python scripts/refresh_catalog.py --moto
    .venv/bin/python scripts/refresh_catalog.py --aws --regions us-east-1 ap-northeast-2
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gzip
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3

DATA_DIR = Path(__file__).resolve().parent.parent / "nodewright" / "data" / "catalog"
DEFAULT_REGIONS = (
    "af-south-1", "ap-east-1", "ap-northeast-1", "ap-northeast-2", "ap-northeast-3", "ap-south-1", "ap-south-2",
    "ap-southeast-1", "ap-southeast-2", "ap-southeast-3", "ap-southeast-4", "ap-southeast-5", "ca-central-1",
    "ca-west-1", "eu-central-1", "eu-central-2", "eu-north-1", "eu-south-1", "eu-south-2", "eu-west-1", "eu-west-2",
    "eu-west-3", "il-central-1", "me-central-1", "me-south-1", "sa-east-1", "us-east-1", "us-east-2", "us-west-1",
    "us-west-2",
)
SUPPLEMENT = Path(__file__).resolve().parent / "catalog_supplement.json"
# Parts of an InstanceTypeInfo record nodewright never reads: dropped to keep the bundle small.
_DROPPED_KEYS = ("PlacementGroupInfo", "SupportedBootModes", "NitroTpmInfo", "MediaAcceleratorInfo")
_DROPPED_NETWORK_KEYS = ("ConnectionTrackingConfiguration",)


def _paginate(client: Any, operation: str, result_key: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
    for page in client.get_paginator(operation).paginate(**kwargs):
        yield from page[result_key]


def _trim(record: dict[str, Any]) -> dict[str, Any]:
    """Drop fields nodewright never reads (placement groups, boot modes, TPM, conntrack timeouts)."""
    out = {k: v for k, v in record.items() if k not in _DROPPED_KEYS}
    network = out.get("NetworkInfo")
    if isinstance(network, dict):
        out["NetworkInfo"] = {k: v for k, v in network.items() if k not in _DROPPED_NETWORK_KEYS}
    return out


def fetch_instance_types(session: Any, region: str) -> list[dict[str, Any]]:
    """Every ``InstanceTypeInfo`` record ``DescribeInstanceTypes`` returns in ``region``, trimmed, by name."""
    ec2 = session.client("ec2", region_name=region)
    records = [_trim(r) for r in _paginate(ec2, "describe_instance_types", "InstanceTypes")]
    return sorted(records, key=lambda r: r["InstanceType"])


def fetch_offerings(session: Any, region: str) -> tuple[list[dict[str, str]], dict[str, list[str]]]:
    """``(zones, offerings)`` of ``region``: zones as ``{"name", "id"}``; type -> sorted zone names."""
    ec2 = session.client("ec2", region_name=region)
    zones = [
        {"name": z["ZoneName"], "id": z.get("ZoneId", "")}
        for z in ec2.describe_availability_zones()["AvailabilityZones"]
        if z.get("ZoneType", "availability-zone") == "availability-zone"
    ]
    by_type: dict[str, set[str]] = {}
    for offering in _paginate(
        ec2,
        "describe_instance_type_offerings",
        "InstanceTypeOfferings",
        LocationType="availability-zone",
    ):
        by_type.setdefault(offering["InstanceType"], set()).add(offering["Location"])
    zones.sort(key=lambda z: z["name"])
    return zones, {name: sorted(locs) for name, locs in sorted(by_type.items())}


def _write_json_gz(path: Path, payload: Any) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    with path.open("wb") as fh, gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0) as gz:
        gz.write(raw)
    return path.stat().st_size


def _supplement() -> dict[str, Any]:
    return dict(json.loads(SUPPLEMENT.read_text())) if SUPPLEMENT.is_file() else {"instance_types": [], "offerings": {}}


def supplement_offerings(region: str, zones: list[dict[str, str]], offerings: dict[str, list[str]],
                         supplement: dict[str, Any]) -> dict[str, list[str]]:
    """``offerings`` plus the supplement's types of each family listed for ``region``, in every zone; the source's
    own offerings of a type win."""
    out = dict(offerings)
    for family, regions in supplement.get("offerings", {}).items():
        if region not in regions:
            continue
        for record in supplement["instance_types"]:
            name = record["InstanceType"]
            if name.split(".")[0] == family and name not in out:
                out[name] = sorted(z["name"] for z in zones)
    return dict(sorted(out.items()))


def refresh(session: Any, regions: list[str], source: str, out_dir: Path) -> None:
    """Fetch specs (once, from the first region, merged with the others) and per-region offerings, add the
    supplement; write files."""
    specs: dict[str, dict[str, Any]] = {}
    supplement = _supplement()
    for region in regions:
        zones, offerings = fetch_offerings(session, region)
        offerings = supplement_offerings(region, zones, offerings, supplement)
        size = _write_json_gz(
            out_dir / "offerings" / f"{region}.json.gz",
            {"region": region, "source": source, "zones": zones, "offerings": offerings},
        )
        print(f"{region:16s} {len(zones):2d} zones {len(offerings):5d} types offered  {size:8d} bytes")
        for record in fetch_instance_types(session, region):
            specs.setdefault(record["InstanceType"], record)
    for record in supplement["instance_types"]:
        specs.setdefault(record["InstanceType"], record)
    if supplement["instance_types"]:
        source += f"; plus {SUPPLEMENT.name}: {supplement['source']}"
    size = _write_json_gz(
        out_dir / "instance-types.json.gz",
        {"source": source, "instance_types": [specs[name] for name in sorted(specs)]},
    )
    print(f"{'specs':16s} {len(specs):5d} instance types           {size:8d} bytes")


def _has_credentials() -> bool:
    return boto3.session.Session().get_credentials() is not None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--moto", action="store_true", help="run against moto's in-process mock (offline)")
    mode.add_argument("--aws", action="store_true", help="run against real AWS (needs credentials)")
    parser.add_argument("--regions", nargs="+", default=list(DEFAULT_REGIONS))
    parser.add_argument("--out", type=Path, default=DATA_DIR)
    args = parser.parse_args(argv)

    today = dt.date.today().isoformat()
    use_moto = args.moto or (not args.aws and not _has_credentials())
    if use_moto:
        import moto
        from moto import mock_aws

        source = f"moto {moto.__version__} EC2 data (DescribeInstanceTypes, DescribeInstanceTypeOfferings)"
        # Fake credentials so botocore signs requests; mock_aws intercepts them in-process.
        ctx: contextlib.AbstractContextManager[Any] = mock_aws()
        with ctx:
            session = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing")
            refresh(session, args.regions, source, args.out)
    else:
        if not _has_credentials():
            print("error: --aws needs AWS credentials (none found)", file=sys.stderr)
            return 2
        source = f"AWS EC2 API (DescribeInstanceTypes, DescribeInstanceTypeOfferings), {today}"
        refresh(boto3.session.Session(), args.regions, source, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
