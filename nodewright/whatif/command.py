"""The what-if subcommands' bodies (``cli.py`` only declares their options): ``snapshot``, ``simulate --snapshot``,
``explain`` and ``diff``. Invalid input raises :class:`~nodewright.errors.NodewrightValidationError` (the CLI prints
one line per problem, exit 2)."""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from collections.abc import Iterator
from typing import Any

import click

from nodewright.errors import NodewrightValidationError


@contextlib.contextmanager
def _warnings_only() -> Iterator[None]:
    """nodewright's warnings on stderr, without the provisioner's per-pod "Could not schedule pod" errors: the
    dry run reports those pods once (provisioning's unschedulable list, ``explain pod``, the diff's pending pods),
    and a scenario or a large snapshot would otherwise repeat hundreds of them (the ``simulate -f`` handler).
    The what-if's own warnings are given once (``explain`` and ``diff`` restore the snapshot more than once)."""
    from nodewright.cli import _log_to_stderr

    seen: set[str] = set()

    def once(record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message in seen:
            return False
        seen.add(message)
        return True

    whatif = logging.getLogger("nodewright.whatif")
    whatif.addFilter(once)
    try:
        with _log_to_stderr(logging.WARNING):
            yield
    finally:
        whatif.removeFilter(once)


def report_findings(snap: Any) -> None:
    """One ``warning:`` line per finding of the snapshot (:attr:`nodewright.whatif.snapshot.Snapshot.findings`:
    fields the simulation ignores), through the what-if's logger (shown once by :func:`_warnings_only`)."""
    for finding in snap.findings:
        logging.getLogger("nodewright.whatif").warning("%s", finding.line())


def load_pricing(path: str | None) -> tuple[Any, str] | None:
    """(PricingPolicy, label) of ``--pricing``, or None."""
    if path is None:
        return None
    from nodewright.pricing import load_pricing_policy
    from nodewright.pricing.report import policy_label

    policy = load_pricing_policy(path)
    return policy, policy_label(policy, path)


def snapshot_command(output: str | None, kubeconfig: str | None, context: str | None, redact: bool,
                     from_files: tuple[str, ...], timeout: float, print_clusterrole: bool = False) -> None:
    """``nodewright snapshot``: read the cluster (or ``--from-file`` kubectl output) and write ``output``; or print
    the ClusterRole it needs."""
    from nodewright.whatif.snapshot import (
        cluster_role,
        identity,
        now_utc,
        read_snapshot,
        summary_line,
        take_snapshot,
        write_snapshot,
    )

    if print_clusterrole:
        import yaml

        click.echo(yaml.safe_dump(cluster_role(), sort_keys=False), nl=False)
        return
    if output is None:
        raise NodewrightValidationError("--output", "required: the snapshot file to write")

    if from_files:
        if kubeconfig or context:
            raise NodewrightValidationError("--from-file", "give either --from-file or --kubeconfig/--context")
        merged: dict[Any, Any] = {}
        times = []
        for path in from_files:  # a later file's copy of an object wins
            snap = read_snapshot(path)
            merged.update((identity(o), o) for o in snap.objects)
            if snap.time is not None:
                times.append(snap.time)
        objects: list[Any] = list(merged.values())
        taken = min(times) if times else now_utc()
    else:
        objects, taken = take_snapshot(kubeconfig, context, timeout)
    count = write_snapshot(output, objects, time=taken, redact_names=redact)
    click.echo(f"wrote {output}: {count} object{'' if count == 1 else 's'} ({summary_line(objects) or 'none'})"
               + ("; names and labels redacted" if redact else ""), err=True)


def simulate_snapshot(path: str, region: str | None, output: str, pricing_file: str | None) -> dict[str, Any]:
    """``nodewright simulate --snapshot FILE``: print the dry run (table or JSON); returns it."""
    from nodewright.whatif.dryrun import dry_run
    from nodewright.whatif.render import render_dry_run
    from nodewright.whatif.snapshot import read_snapshot

    snap = read_snapshot(path)
    with _warnings_only():
        report_findings(snap)
        result = dry_run(snap, region, load_pricing(pricing_file))
    click.echo(json.dumps(result, indent=2) if output == "json" else render_dry_run(result))
    return result


def explain_command(what: str, name: str, snapshot: str | None, kubeconfig: str | None, region: str | None,
                    pricing_file: str | None) -> None:
    """``nodewright explain pod|node|nodepool NAME``: one screen (see :mod:`nodewright.whatif.explain`)."""
    from nodewright.whatif.explain import explain
    from nodewright.whatif.snapshot import Snapshot, read_snapshot, take_snapshot

    if (snapshot is None) == (kubeconfig is None):
        raise NodewrightValidationError("--snapshot", "give exactly one of --snapshot FILE or --kubeconfig PATH")
    if snapshot is not None:
        snap = read_snapshot(snapshot)
    else:
        objects, taken = take_snapshot(kubeconfig)
        snap = Snapshot(objects, taken, source=f"live cluster ({kubeconfig})")
    with _warnings_only():
        report_findings(snap)
        text = explain(snap, what, name, region, load_pricing(pricing_file))
    click.echo(text)


def diff_command(base: str, head: str, snapshot: str | None, scenario: str | None, region: str | None,
                 output: str, pricing_file: str | None, max_cost_increase: str | None,
                 max_evictions: int | None) -> None:
    """``nodewright diff``: print the comparison; exit 1 when a ``--max-*`` gate is exceeded."""
    from nodewright.whatif.diff import check_gates, diff, parse_percent, render_diff

    limit = parse_percent(max_cost_increase) if max_cost_increase is not None else None
    with _warnings_only():
        result = diff(base, head, snapshot=snapshot, scenario=scenario, region=region,
                      pricing=load_pricing(pricing_file))
    click.echo(render_diff(result, output))
    failures = check_gates(result, limit, max_evictions)
    for line in failures:
        click.echo(f"gate: {line}", err=True)
    if failures:
        sys.exit(1)
