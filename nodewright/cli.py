"""The ``nodewright`` command line: ``run``, ``simulate``, ``convert``, ``crds``, ``nodes``.

Each subcommand is a thin wrapper over the module that owns the behaviour; invalid user input
(:class:`nodewright.errors.NodewrightValidationError`) is printed on one line and exits 2.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import click

from nodewright import KARPENTER_VERSION  # the Karpenter release whose v1 API nodewright targets
from nodewright.errors import NodewrightValidationError


def exit_on_invalid_input(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn a :class:`NodewrightValidationError` into one ``error:`` line per problem on stderr and exit code 2.

    Any other exception escaping a command over user input is a bug; it is still reported on one line (with
    exit 2) rather than as a traceback, so a CI log shows what was wrong with the input's handling.
    """

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except NodewrightValidationError as err:
            for problem in err.problems:
                click.echo(f"error: {problem}", err=True)
            sys.exit(2)
        except RecursionError:
            click.echo("error: input nested too deeply", err=True)
            sys.exit(2)

    wrapper.__name__ = func.__name__
    wrapper.__doc__ = func.__doc__
    return wrapper


def annotation_findings(loaded: Any) -> list[Any]:
    """One :class:`nodewright.review.Finding` per malformed ``nodewright.io/*`` NodePool annotation in ``loaded``
    (:class:`nodewright.api.manifests.ManifestFiles`); the command goes on, as the controller would (``--strict``:
    exit 2)."""
    from nodewright.api.annotations import document_annotation_problems
    from nodewright.review import Finding

    return [Finding(problem.path, problem.reason) for problem in document_annotation_problems(loaded.docs)]


def _version_message() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        ours = version("nodewright")
    except PackageNotFoundError:  # running from a source tree without an installed distribution
        ours = "unknown"
    return f"nodewright {ours} (Karpenter {KARPENTER_VERSION} API: karpenter.sh/v1, karpenter.k8s.aws/v1)"


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 120})
@click.version_option(message=_version_message(), package_name="nodewright")
def cli() -> None:
    """nodewright: a Karpenter-compatible node autoscaler for Amazon EKS (Karpenter v1.15.1 API)."""


def report_findings(findings: list[Any], locate: Callable[[str], str], strict: bool) -> None:
    """Print each finding (:class:`nodewright.review.Finding`) as one line on stderr; with ``strict``, as
    ``error:`` lines and exit 2."""
    for finding in findings:
        located = type(finding)(locate(finding.path), finding.reason)
        click.echo(located.line("error" if strict else "warning"), err=True)
    if strict and findings:
        sys.exit(2)


# Subcommands are added below, one per owning module (see docs/architecture.md).


@cli.command("simulate", short_help="What would these manifests launch, at what $/h? Or replay a --scenario.")
@click.option("-f", "--filename", "filenames", multiple=True, type=click.Path(dir_okay=False),
              help="Multi-document YAML manifests (repeatable; '-' is stdin, e.g. helm template ... | simulate -f -).")
@click.option("--region", default=None, help="AWS region; inferred from zone requirements when omitted.")
@click.option("--output", "-o", "output", type=click.Choice(["json", "table"]), default="table", show_default=True)
@click.option("--scenario", default=None, type=click.Path(dir_okay=False),
              help="Replay a Scenario file on a simulated clock (instead of one decision for -f files).")
@click.option("--baseline", default=None, type=click.Choice(["cluster-autoscaler"]),
              help="With --scenario: also run the Cluster Autoscaler baseline, side by side.")
@click.option("--plot", default=None, type=click.Path(dir_okay=False),
              help="With --scenario: write a PNG of nodes by pool, pending pods and $/h (its directory must exist).")
@click.option("--seed", default=None, type=int, help="With --scenario: random seed (default: the scenario's).")
@click.option("--compare-target-utilization", "compare_targets", default=None, metavar="1.0,0.75",
              help="With --scenario: run once per nodewright.io/target-utilization (set on every NodePool), side by side.")
@click.option("--pricing", "pricing_file", default=None, type=click.Path(dir_okay=False),
              help="A PricingPolicy (Savings Plans, RIs, discounts): decide on effective marginal prices, as run "
                   "--pricing-policy does (the plan can change), and show effective $/h beside list $/h "
                   "(docs/pricing.md).")
@click.option("--compare-pricing", "compare_pricing_runs", is_flag=True,
              help="With --scenario and --pricing: decide on list prices, then on effective prices; dollars side by side.")
@click.option("--compare-nomination", "compare_nomination_runs", is_flag=True,
              help="With --scenario: run with and without pod nomination (NOMINATE_PODS); plan kept side by side.")
@click.option("--strict", is_flag=True, help="Treat warnings about the input as errors (exit 2).")
@click.option("--fail-on-unschedulable", is_flag=True,
              help="Exit 3 when any pod stays unschedulable (for CI).")
@click.option("--snapshot", "snapshot_file", default=None, type=click.Path(dir_okay=False),
              help="A `nodewright snapshot` file: pending pods' provisioning and a disruption dry run (docs/whatif.md).")
@click.option("--replicas", "replicas_mode", type=click.Choice(["min", "max"]), default="min", show_default=True,
              help="Targets of HorizontalPodAutoscalers and KEDA ScaledObjects: min = max(replicas, minReplicas); "
                   "max = maxReplicas (the peak, within the NodePools' limits or not).")
@exit_on_invalid_input
def simulate_command(filenames: tuple[str, ...], region: str | None, output: str, scenario: str | None = None,
                     baseline: str | None = None, plot: str | None = None, seed: int | None = None,
                     compare_targets: str | None = None, pricing_file: str | None = None,
                     compare_pricing_runs: bool = False, strict: bool = False,
                     fail_on_unschedulable: bool = False, snapshot_file: str | None = None,
                     replicas_mode: str = "min", compare_nomination_runs: bool = False) -> None:
    """Print the provisioning decision for FILEs: new nodes, their types, pods and $/hour.
    With --scenario, replay a scenario over time (nodes, pending pods, cost) instead.

    Kinds a decision does not need (ServiceAccount, Ingress, Role, ...) are skipped with one summary line;
    input that is valid but probably wrong gets one warning line each (--strict: exit 2). Every problem of every
    document is reported in one run. Exit codes: 0 done, 2 invalid input, 3 unschedulable pods with
    --fail-on-unschedulable."""
    import json

    if snapshot_file is not None:  # docs/whatif.md
        if filenames or scenario or baseline or plot or compare_targets or compare_pricing_runs:
            raise NodewrightValidationError("--snapshot", "give --snapshot alone (with --region, --output, --pricing, "
                                                          "--fail-on-unschedulable)")
        from nodewright.whatif.command import simulate_snapshot

        unschedulable = simulate_snapshot(snapshot_file, region, output, pricing_file)["provisioning"]["unschedulable"]
        if fail_on_unschedulable and unschedulable:
            click.echo(f"error: {len(unschedulable)} pod(s) unschedulable (--fail-on-unschedulable)", err=True)
            sys.exit(3)
        return

    from nodewright.admission import apply_limit_ranges
    from nodewright.api.manifests import ManifestFiles, load_manifest_files
    from nodewright.sim.decision import decide, render_table

    pricing = None
    if pricing_file is not None:
        from nodewright.pricing import load_pricing_policy
        from nodewright.pricing.report import policy_label

        policy = load_pricing_policy(pricing_file)
        pricing = (policy, policy_label(policy, pricing_file))
    if scenario is not None:
        if filenames or region:
            raise NodewrightValidationError("--scenario", "give either --scenario or -f/--region, not both "
                                                          "(a scenario names its region in spec.region)")
        if replicas_mode != "min":
            raise NodewrightValidationError("--replicas", "applies to -f decisions; a scenario's autoscalers follow "
                                                          "its load events")
        from nodewright.sim.command import check_plot_path, simulate_scenario

        if plot:
            check_plot_path(plot)
        result = simulate_scenario(scenario, output=output, baseline=baseline, plot=plot, seed=seed,
                                   compare_targets=compare_targets, pricing=pricing[0] if pricing else None,
                                   pricing_name=pricing[1] if pricing else "",
                                   compare_pricing_runs=compare_pricing_runs,
                                   compare_nomination_runs=compare_nomination_runs)
        summary = result.get("summary") if isinstance(result, dict) else None
        if fail_on_unschedulable and isinstance(summary, dict) and summary.get("unscheduled_pods_at_end"):
            click.echo(f"error: {summary['unscheduled_pods_at_end']} pod(s) unscheduled at the end "
                       "(--fail-on-unschedulable)", err=True)
            sys.exit(3)
        return
    if baseline or plot or seed is not None or compare_targets is not None or compare_pricing_runs:
        raise NodewrightValidationError("--baseline/--plot/--seed/--compare-target-utilization/--compare-pricing",
                                        "only apply to --scenario runs")
    if not filenames:
        raise NodewrightValidationError("--filename", "give at least one manifest file with -f")
    unreadable: list[NodewrightValidationError] = []  # reported with every other problem, in one run
    loaded = load_manifest_files(list(filenames), unreadable)
    docs, review, sizings = _read_simulate_input(loaded, strict, peak=replicas_mode == "max", unreadable=unreadable)
    # LimitRange defaults, as the API server's admission would apply them, before any pod is read.
    used = ManifestFiles(apply_limit_ranges(docs), loaded.sources).subset(review.keep)
    # The decision runs the provisioner, which logs its sentences once (the events of the decision): with the
    # table they are shown on stderr as plain lines; the JSON carries them in "events" (stderr then shows only
    # warnings and errors, Python's default).
    with _log_to_stderr(logging.INFO if output == "table" else logging.WARNING):
        try:
            decision = decide(used.docs, region, pricing)
        except NodewrightValidationError as err:
            raise used.locate(err) from None
    from nodewright.cloud.catalog import price_is_fallback

    if price_is_fallback(decision["region"]):
        click.echo(f"warning: nodewright bundles on-demand prices for us-east-1 only: its prices stand in for "
                   f"{decision['region']}, so the $/h shown are estimates", err=True)
    if output == "json":
        click.echo(json.dumps(decision, indent=2))
    else:
        click.echo(render_table(decision))
    if replicas_mode == "max" and any(s.replicas is not None for s in sizings):
        from nodewright.sim.decision import peak_line

        click.echo(peak_line(decision, sizings), err=True)
    if fail_on_unschedulable and decision["unschedulable"]:
        click.echo(f"error: {len(decision['unschedulable'])} pod(s) unschedulable (--fail-on-unschedulable)", err=True)
        sys.exit(3)


def _read_simulate_input(loaded: Any, strict: bool, peak: bool, unreadable: list[NodewrightValidationError] | None = None
                         ) -> tuple[list[dict[str, Any]], Any, list[Any]]:
    """Parse and review ``loaded`` (:class:`~nodewright.api.manifests.ManifestFiles`) for ``simulate -f``: the
    documents to decide on (autoscaled workloads sized, :func:`nodewright.sim.autoscaling.size_autoscaled_workloads`)
    the :class:`~nodewright.review.Review` (which of them a decision uses) and the
    :class:`~nodewright.sim.autoscaling.Sizing` of each pod autoscaler. Prints the skipped-kinds line, one line per warning and one line per
    sizing on stderr.

    Raises:
        NodewrightValidationError: every problem of every document at once (``unreadable``: the files and YAML
            documents :func:`~nodewright.api.manifests.load_manifest_files` could not read; Karpenter kinds,
            workloads, volumes, ...), each naming its file and document; or, when every NodePool is not ready,
            one line saying which and why.
        SystemExit: 2 with ``strict`` and warnings.
    """
    from nodewright.api.manifests import parse_documents
    from nodewright.errors import combine
    from nodewright.review import Finding, review_documents
    from nodewright.settings import scheduler_config
    from nodewright.sim.autoscaling import size_autoscaled_workloads
    from nodewright.sim.decision import document_problems

    problems: list[NodewrightValidationError] = []
    objects = parse_documents(loaded.docs, problems)
    docs, sizings, unread, refused = size_autoscaled_workloads(loaded.docs, peak=peak)
    problems.extend(refused)  # bounds the API server (or KEDA) refuses: errors, like a field of a Karpenter kind
    review = review_documents(loaded.docs, objects, default_spread=scheduler_config(os.environ) is not None)
    skipped = review.skipped_line()
    if skipped:
        click.echo(skipped, err=True)
    findings = annotation_findings(loaded) + review.findings + [Finding(p.path, p.reason) for p in unread]
    findings = [type(f)(f.path, loaded.locate_text(f.reason)) for f in findings]
    if problems or unreadable:
        report_findings(findings, loaded.locate_path, False)
        everything = problems + document_problems(objects)
        located = loaded.locate(combine(everything)).problems if everything else []
        raise combine([*(unreadable or []), *located])
    report_findings(findings, loaded.locate_path, strict)
    for sizing in sizings:
        click.echo(sizing.line(peak), err=True)
    pools = {pool.name for pool in objects.nodepools}
    no_pool = review.no_pool_reason() if pools and pools <= set(review.not_ready) else None
    if no_pool is not None:
        raise NodewrightValidationError("", no_pool)
    return docs, review, sizings


@contextlib.contextmanager
def _log_to_stderr(level: int) -> Iterator[None]:
    """Print nodewright's log records of ``level`` and higher (INFO with the table, WARNING with JSON, whose
    ``events`` carry the rest) to stderr as bare messages while the block runs, less the per-pod "Could not
    schedule pod" errors: the output has those once (the table grouped by reason, the JSON in ``unschedulable``)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.addFilter(lambda record: not (record.levelno >= logging.ERROR and getattr(record, "pod", None)))
    logger = logging.getLogger("nodewright")
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)


@cli.command("run", short_help="Run the controller: watch pending pods, launch and remove nodes.")
@click.option("--cluster-name", default=None, help="EKS cluster name [env CLUSTER_NAME] (required).")
@click.option("--cluster-endpoint", default=None, help="API server URL for node bootstrap [env CLUSTER_ENDPOINT].")
@click.option("--cluster-ca-bundle", default=None, help="Base64 cluster CA for node bootstrap [env CLUSTER_CA_BUNDLE]; default eks:DescribeCluster.")
@click.option("--cluster-cidr", default=None, help="Service CIDR for node bootstrap [env CLUSTER_CIDR]; default eks:DescribeCluster.")
@click.option("--aws-region", default=None, help="AWS region [env AWS_REGION] (required).")
@click.option("--interruption-queue", default=None, help="SQS queue of EC2 interruption events [env INTERRUPTION_QUEUE].")
@click.option("--batch-idle-duration", default=None, help="Close a batch after this long without new pods [env BATCH_IDLE_DURATION, 1s].")
@click.option("--batch-max-duration", default=None, help="Longest a batch stays open [env BATCH_MAX_DURATION, 10s].")
@click.option("--log-level", default=None, help="debug|info|warn|error [env LOG_LEVEL].")
@click.option("--log-format", default=None, help="auto|json|text [env NODEWRIGHT_LOG_FORMAT].")
@click.option("--metrics-port", default=None, type=int, help="Prometheus port [env METRICS_PORT, 8080].")
@click.option("--health-probe-port", default=None, type=int, help="Health probe port [env HEALTH_PROBE_PORT, 8081].")
@click.option("--metrics-bind-address", default=None, help="IP the metrics endpoint listens on [env METRICS_BIND_ADDRESS, 0.0.0.0].")
@click.option("--health-probe-bind-address", default=None, help="IP the health endpoint listens on [env HEALTH_PROBE_BIND_ADDRESS, 0.0.0.0].")
@click.option("--leader-election/--disable-leader-election", default=None, help="Elect a leader on a Lease [on].")
@click.option("--bind-pods/--no-bind-pods", default=None, help="Bind planned pods to new nodes on registration [env BIND_PODS, off].")
@click.option("--kubeconfig", default=None, help="Kubeconfig path [env KUBECONFIG]; default in-cluster.")
@click.option("--pricing-policy", default=None, help="PricingPolicy file (Savings Plans, RIs, discounts) [env NODEWRIGHT_PRICING_POLICY].")
@click.option("--aws-endpoint-url", default=None, help="Override the AWS endpoint (testing against a local EC2 emulator).")
@click.option("--feature-gates", default=None, help="Gate=bool,... [env FEATURE_GATES]: SpotToSpotConsolidation, ReservedCapacity, ...")
@click.option("--aws-feature-gates", default=None, help="Gate=bool,... [env AWS_FEATURE_GATES]: NodeClassCEL (kubelet expressions).")
@click.option("--scheduler-config", default=None, help="YAML/JSON: podTopologySpread.defaultConstraints for pods without their own [env SCHEDULER_CONFIG].")
@click.option("--leader-election-name", default=None, help="Lease name [env LEADER_ELECTION_NAME, nodewright-leader-election].")
@click.option("--leader-election-namespace", default=None, help="Lease namespace [env LEADER_ELECTION_NAMESPACE, else the pod's].")
@click.version_option(package_name="nodewright", message="nodewright %(version)s")
def run_command(aws_endpoint_url: str | None, **flags: Any) -> None:
    """Run the controller: watch the cluster, provision and terminate nodes (until SIGTERM).

    A startup failure is one structured log line (what to fix) and a distinct exit code per class: 2 settings,
    3 kubeconfig, 4 API server, 5 AWS credentials, 6 AWS region, 7 EKS cluster discovery, 1 anything else."""
    from nodewright.logging import setup_logging
    from nodewright.runtime import build_and_run
    from nodewright.settings import load_settings
    from nodewright.startup import StartupError, classify, from_validation, report

    try:
        settings = load_settings(os.environ, flags)
        setup_logging(settings.log_level, settings.log_format, output_paths=settings.log_output_paths)
    except NodewrightValidationError as err:
        setup_logging("info", "auto", output_paths=("stdout",))
        sys.exit(report(from_validation(err)))
    try:
        build_and_run(settings, aws_endpoint_url)
    except StartupError as err:
        sys.exit(report(err, err.__cause__))
    except NodewrightValidationError as err:
        sys.exit(report(classify(err)))


@cli.command("convert", short_help="Convert v1alpha5/v1beta1 Karpenter manifests to v1 YAML.")
@click.option("-f", "--filename", "files", multiple=True, required=True, help="Manifest file (YAML, multi-doc); '-' is stdin.")
@click.option("--node-role", default=None, help="IAM role for converted node templates that name none.")
@click.option("--instance-profile", default=None, help="Instance profile for converted node templates that name none.")
@click.option("--strict", is_flag=True, help="Treat warnings about the input as errors (exit 2).")
@exit_on_invalid_input
def convert_command(files: tuple[str, ...], node_role: str | None, instance_profile: str | None,
                    strict: bool = False) -> None:
    """Convert Provisioner/AWSNodeTemplate (v1alpha5) and v1beta1 NodePool/EC2NodeClass manifests
    to Karpenter v1 and print them as multi-document YAML (other documents pass through)."""
    import yaml

    from nodewright.api import convert_documents
    from nodewright.api.conversion import PLACEHOLDER_NODE_ROLE
    from nodewright.api.manifests import load_manifest_files
    from nodewright.review import Finding, object_name, review_documents

    loaded = load_manifest_files(list(files))
    try:
        docs = convert_documents(loaded.docs, node_role=node_role, instance_profile=instance_profile)
    except NodewrightValidationError as err:
        raise loaded.locate(err) from None
    findings = annotation_findings(loaded) + review_documents(loaded.docs, for_simulate=False).findings
    # A class whose input named a role (even the placeholder itself, as Karpenter's getting-started guide does)
    # got no placeholder from us.
    named_role = {
        object_name(d) for d in loaded.docs
        if d.get("kind") in ("EC2NodeClass", "AWSNodeTemplate") and isinstance(d.get("spec"), dict)
        and (d["spec"].get("role") or d["spec"].get("instanceProfile"))
    }
    for doc in docs:
        name = object_name(doc)
        if (doc.get("kind") == "EC2NodeClass" and (doc.get("spec") or {}).get("role") == PLACEHOLDER_NODE_ROLE
                and name not in named_role):
            findings.append(Finding(
                "", f"EC2NodeClass {name!r} named no node role; wrote the placeholder {PLACEHOLDER_NODE_ROLE!r}: "
                    "substitute it, or convert again with --node-role or --instance-profile",
            ))
    report_findings(findings, loaded.locate_path, strict)
    click.echo(yaml.safe_dump_all(docs, sort_keys=False, width=10_000, explicit_start=True), nl=False)


@cli.command("crds", short_help="Print or write the NodePool, NodeClaim and EC2NodeClass CRDs.")
@click.option("--output-dir", default=None, type=click.Path(file_okay=False), help="Write one file per CRD here instead of printing.")
def crds_command(output_dir: str | None) -> None:
    """Print (or write) the NodePool, NodeClaim and EC2NodeClass CRDs generated from the models."""
    from nodewright.api import crds

    if output_dir is None:
        click.echo(crds.render_crds(), nl=False)
        return
    for path in crds.write_crds(output_dir):
        click.echo(f"wrote {path}")


@cli.command("nodes", short_help="Watch nodes: requests vs allocatable, pods, $/h, by NodePool (eks-node-viewer).")
@click.option("--kubeconfig", default=None, help="Kubeconfig path [env KUBECONFIG, else ~/.kube/config].")
@click.option("--context", default=None, help="Kubeconfig context (default: the current one).")
@click.option("--snapshot", default=None, type=click.Path(dir_okay=False),
              help="Read a snapshot file (a kind: List of the cluster's objects) instead of a cluster.")
@click.option("-l", "--node-selector", "selector", default="", metavar="SELECTOR",
              help="Show only nodes matching this label selector (a=b,c in (x,y),!d).")
@click.option("--sort", "sort", default="creation", show_default=True, metavar="KEY[=asc|desc]",
              help="Order nodes in a NodePool by name, creation, cpu, memory, pods, price or any label key.")
@click.option("--pricing", "pricing_file", default=None, type=click.Path(dir_okay=False),
              help="A PricingPolicy: add each node's effective $/h beside its list $/h (docs/pricing.md).")
@click.option("--region", default=None, help="Region for prices of nodes without region or zone labels [us-east-1].")
@click.option("--once", is_flag=True, help="Print one plain-text view and exit (the default when not on a terminal).")
@exit_on_invalid_input
def nodes_command(kubeconfig: str | None, context: str | None, snapshot: str | None, selector: str, sort: str,
                  pricing_file: str | None, region: str | None, once: bool) -> None:
    """A live view of the cluster's nodes grouped by NodePool: CPU and memory requests against allocatable,
    pods, instance type, capacity type, zone, age, list (and with --pricing effective) $/h, pool totals and
    limits, and pending pods with the reason they wait. Refreshes from watches; docs/viewer.md."""
    from nodewright.viewer.app import Options, run

    policy, source = None, ""
    if pricing_file:
        from nodewright.pricing.policy import load_pricing_policy
        from nodewright.pricing.report import policy_label

        policy = load_pricing_policy(pricing_file)
        source = policy_label(policy, pricing_file)
    sys.exit(run(Options(kubeconfig=kubeconfig, context=context, snapshot=snapshot, selector=selector, sort=sort,
                         policy=policy, policy_source=source, region=region, once=once)))


# --- what-if (nodewright/whatif/, docs/whatif.md) ----------------------------------------------------------------


@cli.command("snapshot", short_help="Write every object a decision reads (read-only) to one file.")
@click.option("-o", "--output", default=None, type=click.Path(dir_okay=False),
              help="Snapshot file to write (JSON when it ends in .json, else YAML); written whole or not at all.")
@click.option("--kubeconfig", default=None, help="Kubeconfig path [env KUBECONFIG]; default in-cluster, then ~/.kube/config.")
@click.option("--context", default=None, help="Kubeconfig context (default: the current one).")
@click.option("--redact", is_flag=True, help="Replace names and labels with stable hashes (to share in a bug report).")
@click.option("--from-file", "from_files", multiple=True, type=click.Path(dir_okay=False),
              help="Build the snapshot from `kubectl get ... -o yaml` output instead of a cluster (repeatable).")
@click.option("--timeout", default=30.0, show_default=True, type=float, help="Seconds per LIST request.")
@click.option("--print-clusterrole", is_flag=True, help="Print the read-only ClusterRole a snapshot needs, and exit.")
@exit_on_invalid_input
def snapshot_cmd(output: str | None, kubeconfig: str | None, context: str | None, redact: bool,
                 from_files: tuple[str, ...], timeout: float, print_clusterrole: bool = False) -> None:
    """Read Nodes, NodeClaims, NodePools, EC2NodeClasses, pods, DaemonSets, PDBs, volumes, CSINodes, LimitRanges,
    Namespaces, RuntimeClasses (and NodeOverlays) with list verbs only and write them to one file. Never reads
    Secrets or ConfigMaps. Exit 2 (nothing written) on an unreachable cluster or refused LIST."""
    from nodewright.whatif.command import snapshot_command

    snapshot_command(output, kubeconfig, context, redact, from_files, timeout, print_clusterrole)


@cli.command("explain", short_help="Why a pod is pending, why a node is (not) disrupted, what a NodePool costs.")
@click.argument("what", type=click.Choice(["pod", "node", "nodepool"]))
@click.argument("name")
@click.option("--snapshot", default=None, type=click.Path(dir_okay=False), help="A `nodewright snapshot` file.")
@click.option("--kubeconfig", default=None, help="Read the live cluster instead (read-only).")
@click.option("--region", default=None, help="AWS region; default from the nodes' zones.")
@click.option("--pricing", "pricing_file", default=None, type=click.Path(dir_okay=False),
              help="A PricingPolicy: decide on effective marginal prices (the plan can change); effective $/h "
                   "beside list $/h.")
@exit_on_invalid_input
def explain_cmd(what: str, name: str, snapshot: str | None, kubeconfig: str | None, region: str | None,
                pricing_file: str | None) -> None:
    """Explain one object (pod: namespace/name or name in default) in Karpenter's words, on one screen."""
    from nodewright.whatif.command import explain_command

    explain_command(what, name, snapshot, kubeconfig, region, pricing_file)


@cli.command("diff", short_help="What two revisions of NodePools/EC2NodeClasses change: $/h, nodes, drift.")
@click.option("--base", required=True, type=click.Path(file_okay=False, exists=True), help="Manifests before.")
@click.option("--head", required=True, type=click.Path(file_okay=False, exists=True), help="Manifests after.")
@click.option("--snapshot", default=None, type=click.Path(dir_okay=False), help="Evaluate on this snapshot.")
@click.option("--scenario", default=None, type=click.Path(dir_okay=False), help="Evaluate by replaying this Scenario.")
@click.option("--region", default=None, help="AWS region; default from the nodes' zones.")
@click.option("--output", "-o", type=click.Choice(["table", "markdown", "json"]), default="table", show_default=True)
@click.option("--pricing", "pricing_file", default=None, type=click.Path(dir_okay=False),
              help="A PricingPolicy: decide on effective marginal prices (the plan can change); effective $/h "
                   "beside list $/h.")
@click.option("--max-cost-increase", default=None, metavar="5%", help="Exit 1 when $/h grows by more than this.")
@click.option("--max-evictions", default=None, type=int, help="Exit 1 when the change evicts more pods than this.")
@exit_on_invalid_input
def diff_cmd(base: str, head: str, snapshot: str | None, scenario: str | None, region: str | None, output: str,
             pricing_file: str | None, max_cost_increase: str | None, max_evictions: int | None) -> None:
    """Evaluate the NodePools/EC2NodeClasses of --base and of --head on a snapshot (or a scenario) and print what
    changes: $/h (list, effective), nodes, instance types, pending pods, drift (nodes replaced, pods evicted, pace
    under the budgets). Exit 1 when a --max-* gate is exceeded, 2 on invalid input."""
    from nodewright.whatif.command import diff_command

    diff_command(base, head, snapshot, scenario, region, output, pricing_file, max_cost_increase, max_evictions)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point (``argv``: arguments without the program name; default ``sys.argv[1:]``)."""
    cli.main(args=argv, prog_name="nodewright")


if __name__ == "__main__":
    main()
