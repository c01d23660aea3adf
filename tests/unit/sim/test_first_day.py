"""``nodewright simulate -f`` as a first-day user meets it (issue #26 items 5-9), through the CLI.

Fixtures in ``tests/fixtures/firstday/``: ``pools.yaml`` (NodePool ``default``, on-demand ``m`` types, ``limits.cpu:
64``, and its EC2NodeClass), ``app.yaml`` (Deployment ``web`` of 1 vCPU / 1Gi without ``replicas`` and an HPA
3..10 on it; Deployment ``worker`` of 2 vCPU / 2Gi, ``replicas: 1``, and a KEDA ScaledObject 2..20).
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from nodewright.cli import cli

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "firstday"


def _simulate(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["simulate", *args], input=stdin)


def _f(*names: str) -> list[str]:
    return [arg for name in names for arg in ("-f", str(FIX / name))]


# --- item 5: HPA and ScaledObject in the README's CI recipe ------------------------------------------------


def test_the_readme_ci_recipe_passes_with_an_hpa_and_a_scaledobject() -> None:
    # helm template ... | nodewright simulate -f nodepools.yaml -f - --strict --fail-on-unschedulable
    done = _simulate(*_f("pools.yaml"), "-f", "-", "--strict", "--fail-on-unschedulable",
                     stdin=(FIX / "app.yaml").read_text())
    assert done.exit_code == 0, done.output
    assert done.stderr.splitlines()[:2] == [
        "HorizontalPodAutoscaler 'web' sizes Deployment 'web' at 3 replicas (max(replicas 1, minReplicas 3))",
        "ScaledObject 'worker' sizes Deployment 'worker' at 2 replicas (max(replicas 1, minReplicaCount 2))",
    ]
    assert "skipped" not in done.stderr and "warning" not in done.stderr
    assert done.stdout.splitlines()[2] == ("node 1 (m6g.2xlarge): default/worker-0, default/worker-1, default/web-0, "
                                           "default/web-1, default/web-2")


def test_replicas_max_simulates_the_peak_within_the_limits() -> None:
    done = _simulate(*_f("pools.yaml", "app.yaml"), "--replicas", "max", "-o", "json")
    assert done.exit_code == 0, done.output
    assert "HorizontalPodAutoscaler 'web' sizes Deployment 'web' at 10 replicas (maxReplicas 10, --replicas max)" in \
        done.stderr.splitlines()
    assert done.stderr.splitlines()[-1].startswith(
        "peak (--replicas max): 2 autoscaled workload(s), 30 pod(s), fit within the NodePools' limits at $")


def test_replicas_max_says_when_the_limits_do_not_allow_the_peak(tmp_path: Path) -> None:
    pools = tmp_path / "pools.yaml"
    pools.write_text((FIX / "pools.yaml").read_text().replace('limits: {cpu: "64"}', 'limits: {cpu: "1"}'))
    done = _simulate("-f", str(pools), *_f("app.yaml"), "--replicas", "max", "--fail-on-unschedulable")
    assert done.exit_code == 3
    assert ("warning: peak (--replicas max): 30 of the autoscaled workloads' 30 pod(s) are unschedulable "
            "(NodePool limits: default cpu=1): raise spec.limits or lower maxReplicas, or see the unschedulable "
            "lines for other reasons") in done.stderr.splitlines()


def test_replicas_max_is_refused_for_a_scenario() -> None:
    done = _simulate("--scenario", str(Path(__file__).resolve().parents[3] / "examples" / "scenarios" /
                                       "team-spread.yaml"), "--replicas", "max")
    assert done.exit_code == 2
    assert done.stderr == ("error: --replicas: applies to -f decisions; a scenario's autoscalers follow its load "
                           "events\n")


def test_an_autoscaler_count_that_is_not_an_integer_is_one_line_naming_its_field(tmp_path: Path) -> None:
    # An HPA's minReplicas "three": simulate -f warns on the field (it used to print Python's "invalid literal for
    # int()" on ".spec"); the target keeps the replicas it was given.
    app = tmp_path / "app.yaml"
    app.write_text((FIX / "app.yaml").read_text().replace("minReplicas: 3", "minReplicas: three"))
    done = _simulate(*_f("pools.yaml"), "-f", str(app))
    assert done.exit_code == 0, done.output
    assert done.stderr.splitlines()[0] == (
        f"warning: {app}#documents[1].spec.minReplicas: must be a non-negative integer, got 'three': cannot size "
        "its target, whose replicas are used as given (in HorizontalPodAutoscaler 'web')")


def test_a_scenario_scaledobject_count_that_is_not_an_integer_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    scenarios = Path(__file__).resolve().parents[3] / "examples" / "scenarios"
    (tmp_path / "manifests").symlink_to(scenarios / "manifests")
    path = tmp_path / "s.yaml"
    path.write_text((scenarios / "load-test.yaml").read_text().replace("minReplicaCount: 2", "minReplicaCount: two"))
    done = _simulate("--scenario", str(path))
    assert done.exit_code == 2
    assert done.stderr == (f"error: {path}#spec.manifests: ScaledObject qna-api: qna-api.spec.minReplicaCount: must "
                           "be a non-negative integer, got 'two'\n")


# --- item 6: every problem of every document, in one run ---------------------------------------------------


def test_problems_of_a_nodepool_a_deployment_and_a_pod_are_reported_together() -> None:
    done = _simulate(*_f("pools.yaml", "bad.yaml"))
    bad = FIX / "bad.yaml"
    assert done.exit_code == 2
    assert done.stderr.splitlines() == [
        f"error: {bad}#documents[0].spec.template.spec.requirements[0].values: Gt needs one integer, got 'lots' "
        "(in NodePool 'broken')",
        f"error: {bad}#documents[1].spec.template.spec.containers[0].resources.requests.cpu: 'two' is not a "
        "quantity like '500m', '2' or '4Gi' (in Deployment 'api')",
        f"error: {bad}#documents[2].spec.containers[0].resources.requests.memory: '1Zi' is not a quantity like "
        "'500m', '2' or '4Gi' (in Pod 'lone')",
    ]


def test_unreadable_files_and_bad_yaml_are_reported_with_the_other_problems(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    done = _simulate(*_f("pools.yaml", "broken.yaml", "bad.yaml"), "-f", str(missing))
    assert done.exit_code == 2
    lines = done.stderr.splitlines()
    assert lines[:2] == [
        f"error: {FIX / 'broken.yaml'}#documents[0]: invalid YAML at line 3 of the document: did not find expected "
        "',' or '}'",
        f"error: {missing}: cannot read file: No such file or directory",
    ]
    assert len(lines) == 5 and all(line.startswith(f"error: {FIX / 'bad.yaml'}#documents[") for line in lines[2:])


# --- item 7: duplicate NodePools, a missing EC2NodeClass ---------------------------------------------------


def test_a_duplicate_nodepool_blames_the_right_documents_and_the_winner_launches() -> None:
    # dup2.yaml's NodePool 'default' (class 'nope', missing) is replaced by pools.yaml's, which launches.
    done = _simulate(*_f("dup2.yaml", "pools.yaml", "pod.yaml"))
    assert done.exit_code == 0, done.output
    assert done.stderr.splitlines()[0] == (
        f"warning: {FIX / 'pools.yaml'}#documents[0].metadata.name: NodePool 'default' is defined again (first at "
        f"{FIX / 'dup2.yaml'}#documents[0]): the later one replaces the earlier, as kubectl apply would")
    assert "nope" not in done.stderr
    assert done.stdout.splitlines()[2] == "node 1 (m6g.large): default/p"


def test_a_pool_whose_ec2nodeclass_is_missing_is_not_ready_and_says_why() -> None:
    done = _simulate(*_f("missing.yaml", "pod.yaml"))
    assert done.exit_code == 2
    assert done.stderr.splitlines()[-1] == ("error: no NodePool can launch nodes: NodePool 'gpu' is not ready: its "
                                            "EC2NodeClass 'gpu' is not in the input (classes: other)")
    assert "no NodePool or Provisioner in the input" not in done.output


# --- item 8: a statically bound PV/PVC pair --------------------------------------------------------------


def test_a_statically_bound_claim_counts_as_bound() -> None:
    # PV data-pv (zone us-east-1c, claimRef default/data) and PVC data (volumeName data-pv), no bind-completed.
    done = _simulate(*_f("pools.yaml", "pv.yaml"), "-o", "json")
    assert done.exit_code == 0, done.output
    import json

    decision = json.loads(done.stdout)
    assert decision["unschedulable"] == []
    assert [(nc["instance_type"], nc["zone"], nc["pods"]) for nc in decision["nodeclaims"]] == [
        ("m6g.large", "us-east-1c", ["default/db"])]


# --- item 9: the output --------------------------------------------------------------------------------


def test_unschedulable_pods_print_once_grouped_by_reason_in_karpenters_words() -> None:
    done = _simulate(*_f("pools.yaml", "big.yaml", "huge.yaml"))
    assert done.exit_code == 0, done.output
    assert "Could not schedule" not in done.stderr  # the table says it once
    assert "Requirements(" not in done.output
    assert done.stdout.splitlines()[:2] == [  # no NODEPOOL header: nothing launches
        "unschedulable (10 pods: default/huge-0, default/huge-1, default/huge-2, default/huge-3, default/huge-4 and 5 "
        'more): incompatible with nodepool "default", key karpenter.k8s.aws/instance-category, '
        "karpenter.k8s.aws/instance-category In [c] not in karpenter.k8s.aws/instance-category In [m]",
        'unschedulable (2 pods: default/huger-0, default/huger-1): incompatible with nodepool "default", daemonset '
        "overhead={}, no instance type satisfied resources {cpu: 500, memory: 1Gi, pods: 1} and requirements "
        "karpenter.k8s.aws/instance-category In [m], karpenter.sh/capacity-type In [on-demand], "
        "karpenter.sh/nodepool In [default]",
    ]


def test_json_output_carries_the_unschedulable_pods_and_stderr_does_not_repeat_them() -> None:
    import json

    done = _simulate(*_f("pools.yaml", "big.yaml"), "-o", "json")
    assert done.exit_code == 0, done.output
    assert done.stderr == ""
    assert sorted(u["pod"] for u in json.loads(done.stdout)["unschedulable"]) == sorted(
        f"default/huge-{i}" for i in range(10))


def test_stdin_is_named_stdin() -> None:
    done = _simulate("-f", "-", stdin=(FIX / "bad.yaml").read_text())
    assert done.exit_code == 2
    assert done.stderr.splitlines()[0].startswith("error: <stdin>#documents[0].spec.template.spec.requirements[0]")


def test_prices_outside_the_bundled_region_get_a_warning_line() -> None:
    done = _simulate(*_f("pools.yaml", "pod.yaml"), "--region", "eu-west-1")
    assert done.exit_code == 0, done.output
    assert ("warning: nodewright bundles on-demand prices for us-east-1 only: its prices stand in for eu-west-1, "
            "so the $/h shown are estimates") in done.stderr.splitlines()
    summary = [line for line in done.stdout.splitlines() if line.startswith("1 new node(s)")]
    assert summary == ["1 new node(s) for 1 pod(s), 0 pod(s) on existing nodes, 0 unschedulable; total "
                       "$0.0770/h (eu-west-1)"]


# --- item 10: a scenario's output shows each pool's target ---------------------------------------------------

SCENARIOS = Path(__file__).resolve().parents[3] / "examples" / "scenarios"


def test_scenario_output_shows_each_pools_target_utilization() -> None:
    # load-test's pool 'service' is annotated 0.8: why its plain replay differs from the "1.0" comparison column.
    done = _simulate("--scenario", str(SCENARIOS / "load-test.yaml"))
    assert done.exit_code == 0, done.output
    assert "target utilization per NodePool: low-spot 100%, platform 100%, service 80%" in done.stdout.splitlines()


def test_comparison_names_the_scenarios_own_targets() -> None:
    done = _simulate("--scenario", str(SCENARIOS / "team-spread.yaml"), "--compare-target-utilization", "1.0,0.75")
    assert done.exit_code == 0, done.output
    assert done.stdout.splitlines()[-1] == ("every NodePool set to each column's target; the scenario's own (a plain "
                                            "replay): team1 100%")


# --- items 2 and 4 in simulate -f: two budgets over the same pods; do-not-evict ---------------------------------


def test_simulate_warns_of_pods_two_budgets_select_and_of_do_not_evict() -> None:
    # pdbs.yaml: Deployment 'web' (labels app=web, team=shop; karpenter.sh/do-not-evict) and PDBs 'web'
    # (app=web) and 'shop' (team=shop).
    done = _simulate(*_f("pools.yaml", "pdbs.yaml"))
    where = f"{FIX / 'pdbs.yaml'}#documents[0].spec.template.metadata"
    assert done.exit_code == 0, done.output
    assert [line for line in done.stderr.splitlines() if line.startswith("warning:")] == [
        f"warning: {where}.annotations[karpenter.sh/do-not-evict]: the v1alpha5 annotation: Karpenter v1 ignores it; "
        "nodewright honours it as karpenter.sh/do-not-disrupt (its node is not disrupted voluntarily); annotate "
        'karpenter.sh/do-not-disrupt: "true" instead (in Deployment \'web\')',
        f"warning: {where}.labels: its pods are selected by more than one PodDisruptionBudget (shop, web): the "
        "Eviction API refuses to evict such pods, so their nodes are never disrupted voluntarily (consolidation, "
        "drift) (in Deployment 'web')",
    ]
    assert _simulate(*_f("pools.yaml", "pdbs.yaml"), "--strict").exit_code == 2
