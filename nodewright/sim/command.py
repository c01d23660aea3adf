"""``nodewright simulate --scenario FILE``: replay a scenario and print / plot the result.

The ``simulate`` subcommand (``nodewright/cli.py``) hands over here when ``--scenario`` is given.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections import Counter
from pathlib import Path

import click

from nodewright.admission import apply_limit_ranges
from nodewright.api.annotations import document_annotation_problems
from nodewright.api.manifests import parse_documents
from nodewright.errors import NodewrightValidationError
from nodewright.pricing import PricingPolicy
from nodewright.review import SETTING_KINDS, review_documents, skipped_kinds_line
from nodewright.settings import scheduler_config
from nodewright.sim.compare import (
    NOMINATION_OPTION,
    OPTION,
    PRICING_OPTION,
    compare_nomination,
    compare_pricing,
    compare_target_utilization,
    parse_targets,
    render_comparison,
    render_nomination_comparison,
    render_pricing_comparison,
)
from nodewright.sim.progress import progress_for_terminal
from nodewright.sim.render import render_table
from nodewright.sim.runner import run_scenario
from nodewright.sim.scenario import Scenario, load_scenario
from nodewright.sim.world import APPLIED_KINDS


def check_plot_path(plot: str) -> Path:
    """The ``--plot`` target, checked before a long run: a ``.png`` file in a directory that already exists
    (nodewright never creates directories), and not a directory itself.

    Raises:
        NodewrightValidationError: path ``--plot``.
    """
    path = Path(plot)
    if path.suffix.lower() != ".png":
        raise NodewrightValidationError("--plot", f"must name a .png file, got {plot!r}")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise NodewrightValidationError("--plot", f"directory {str(parent)!r} does not exist (nodewright does not create it)")
    if path.is_dir():
        raise NodewrightValidationError("--plot", f"{plot!r} is a directory")
    return path


def _only_simulated_kinds(scenario: Scenario) -> Scenario:
    """``scenario`` with LimitRange defaults applied (:mod:`nodewright.admission`) and the kinds the simulated
    world does not play left out, each named once in one summary line on stderr
    (:func:`nodewright.review.skipped_kinds_line`): Ingress, Role, ..., the kinds the world accepts and ignores
    (ServiceAccount, ConfigMap, Secret, PriorityClass: :data:`nodewright.sim.world.IGNORED_KINDS`) and Services
    unless ``SCHEDULER_CONFIG`` gives default topology spread constraints (their selectors deduce its selector)."""
    manifests = apply_limit_ranges(scenario.manifests)
    played = APPLIED_KINDS if scheduler_config(os.environ) is not None else APPLIED_KINDS - SETTING_KINDS.keys()
    skipped = Counter(str(d.get("kind")) for d in manifests if d.get("kind") not in played | {"LimitRange"})
    line = skipped_kinds_line(skipped, "the simulation does not play")
    if line:
        click.echo(line, err=True)
    kept = [d for d in manifests if d.get("kind") in played]
    return dataclasses.replace(scenario, manifests=kept)


def simulate_scenario(path: str, *, output: str = "table", baseline: str | None = None, plot: str | None = None,
                      seed: int | None = None, compare_targets: str | None = None,
                      pricing: PricingPolicy | None = None, pricing_name: str = "",
                      compare_pricing_runs: bool = False, compare_nomination_runs: bool = False) -> dict[str, object]:
    """Run the scenario at ``path`` and print its result; returns the result document.

    Args:
        path: scenario file (YAML).
        output: ``table`` (the side-by-side summary) or ``json`` (timeline, summary, baseline).
        baseline: ``"cluster-autoscaler"`` to run the baseline as well.
        plot: PNG path to write (nodes by pool, pending pods, $/h).
        seed: overrides the scenario's seed.
        compare_targets: ``"1.0,0.75"``: run once per target utilization instead (:mod:`nodewright.sim.compare`).
        pricing: a PricingPolicy: each summary adds ``effective_cost_usd`` beside the list-price ``cost_usd``.
        pricing_name: how reports name it (:func:`nodewright.pricing.report.policy_label`).
        compare_pricing_runs: with ``pricing``, run nodewright twice, deciding on list then on effective prices,
            side by side (:func:`nodewright.sim.compare.compare_pricing`).
        compare_nomination_runs: run nodewright with and without nomination, side by side
            (:func:`nodewright.sim.compare.compare_nomination`).

    Raises:
        NodewrightValidationError: an invalid scenario file.
    """
    if plot:
        check_plot_path(plot)
    scenario = _only_simulated_kinds(load_scenario(path))
    for finding in scenario.findings:  # unknown fields (nodewright.review.unknown_field_findings)
        click.echo(finding.line(), err=True)
    # NodePools the replay can launch nothing from (a nodeClassRef naming an EC2NodeClass the scenario lacks), as
    # simulate -f finds them: the run's pending pods would otherwise be its only sign.
    not_ready = review_documents(scenario.manifests, parse_documents(scenario.manifests), for_simulate=False, default_class=False).not_ready
    for name, why in sorted(not_ready.items()):
        click.echo(f"warning: {path}: NodePool {name!r} cannot launch: {why}", err=True)
    for problem in document_annotation_problems(scenario.manifests):
        click.echo(f"warning: {path}: spec.manifests {problem}", err=True)
    started = time.perf_counter()
    if compare_targets is not None:
        if baseline or plot or pricing:
            raise NodewrightValidationError(OPTION, "cannot be combined with --baseline, --plot or --pricing")
        doc = compare_target_utilization(scenario, parse_targets(compare_targets), seed, progress_for_terminal())
        click.echo(json.dumps(doc, indent=2) if output == "json" else render_comparison(doc))
        click.echo(f"simulated {len(doc['runs'])} x {scenario.duration / 60:g} min in "
                   f"{time.perf_counter() - started:.1f} s", err=True)
        return doc
    if compare_nomination_runs:
        if baseline or plot or compare_pricing_runs:
            raise NodewrightValidationError(NOMINATION_OPTION, "cannot be combined with --baseline, --plot or "
                                                               "--compare-pricing")
        doc = compare_nomination(scenario, seed, progress_for_terminal(), pricing)
        click.echo(json.dumps(doc, indent=2) if output == "json" else render_nomination_comparison(doc))
        click.echo(f"simulated {len(doc['runs'])} x {scenario.duration / 60:g} min in "
                   f"{time.perf_counter() - started:.1f} s", err=True)
        return doc
    if compare_pricing_runs:
        if pricing is None or baseline or plot:
            raise NodewrightValidationError(PRICING_OPTION, "needs --pricing FILE and cannot be combined with "
                                                            "--baseline or --plot")
        doc = compare_pricing(scenario, pricing, pricing_name, seed, progress_for_terminal())
        click.echo(json.dumps(doc, indent=2) if output == "json" else render_pricing_comparison(doc))
        click.echo(f"simulated {len(doc['runs'])} x {scenario.duration / 60:g} min in "
                   f"{time.perf_counter() - started:.1f} s", err=True)
        return doc
    try:
        result = run_scenario(scenario, baseline=baseline, seed=seed, progress=progress_for_terminal(),
                              pricing=pricing)
    except NodewrightValidationError as err:  # manifests are applied as the run starts: name the file
        raise err.rewrite(lambda where, reason: (f"{path}#{where}" if where else path, reason)) from None
    if output == "json":
        click.echo(json.dumps(result, indent=2))
    else:
        click.echo(render_table(result))
    click.echo(f"simulated {scenario.duration / 60:g} min in {time.perf_counter() - started:.1f} s", err=True)
    if plot:
        from nodewright.sim.plot import write_plot

        click.echo(f"wrote {write_plot(result, plot)}", err=True)
    return result
