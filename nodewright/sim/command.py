"""``nodewright simulate --scenario FILE``: replay a scenario and print / plot the result.

The ``simulate`` subcommand (``nodewright/cli.py``) hands over here when ``--scenario`` is given.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from nodewright.api.annotations import document_annotation_problems
from nodewright.errors import NodewrightValidationError
from nodewright.pricing import PricingPolicy
from nodewright.sim.compare import OPTION, compare_target_utilization, parse_targets, render_comparison
from nodewright.sim.progress import progress_for_terminal
from nodewright.sim.render import render_table
from nodewright.sim.runner import run_scenario
from nodewright.sim.scenario import load_scenario


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


def simulate_scenario(path: str, *, output: str = "table", baseline: str | None = None, plot: str | None = None,
                      seed: int | None = None, compare_targets: str | None = None,
                      pricing: PricingPolicy | None = None) -> dict[str, object]:
    """Run the scenario at ``path`` and print its result; returns the result document.

    Args:
        path: scenario file (YAML).
        output: ``table`` (the side-by-side summary) or ``json`` (timeline, summary, baseline).
        baseline: ``"cluster-autoscaler"`` to run the baseline as well.
        plot: PNG path to write (nodes by pool, pending pods, $/h).
        seed: overrides the scenario's seed.
        compare_targets: ``"1.0,0.75"``: run once per target utilization instead (:mod:`nodewright.sim.compare`).
        pricing: a PricingPolicy: each summary adds ``effective_cost_usd`` beside the list-price ``cost_usd``.

    Raises:
        NodewrightValidationError: an invalid scenario file.
    """
    if plot:
        check_plot_path(plot)
    scenario = load_scenario(path)
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
    result = run_scenario(scenario, baseline=baseline, seed=seed, progress=progress_for_terminal(), pricing=pricing)
    if output == "json":
        click.echo(json.dumps(result, indent=2))
    else:
        click.echo(render_table(result))
    click.echo(f"simulated {scenario.duration / 60:g} min in {time.perf_counter() - started:.1f} s", err=True)
    if plot:
        from nodewright.sim.plot import write_plot

        click.echo(f"wrote {write_plot(result, plot)}", err=True)
    return result
