"""``nodewright simulate`` / ``convert`` on the input a new user actually writes: every problem named (file,
document, object, field, reason), one warning line per silent case, exit codes 2 / 3, no traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner, Result

from nodewright.cli import KARPENTER_VERSION, cli

CLASS = """apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  role: KarpenterNodeRole-demo
"""


def pool(name: str = "default", node_class: str = "default", requirements: str = "[]", extra: str = "",
         group: str = "karpenter.k8s.aws", kind: str = "EC2NodeClass") -> str:
    return f"""---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: {name}}}
spec:{extra}
  template:
    spec:
      requirements: {requirements}
      nodeClassRef: {{group: {group}, kind: {kind}, name: {node_class}}}
"""


def deployment(name: str = "web", replicas: int = 2, cpu: str = "500m", memory: str = "1Gi", extra: str = "") -> str:
    return f"""---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: {replicas}
  template:
    spec:{extra}
      containers: [{{name: c, image: x, resources: {{requests: {{cpu: "{cpu}", memory: "{memory}"}}}}}}]
"""


def run(tmp_path: Path, text: str, *args: str, name: str = "in.yaml") -> tuple[Result, Path]:
    path = tmp_path / name
    path.write_text(text)
    return CliRunner().invoke(cli, ["simulate", "-f", str(path), *args]), path


def test_version_names_the_karpenter_release() -> None:
    out = CliRunner().invoke(cli, ["--version"])
    assert out.exit_code == 0
    assert f"(Karpenter {KARPENTER_VERSION} API" in out.output and KARPENTER_VERSION == "v1.15.1"


def test_helm_template_output_is_simulated_with_one_skip_line(tmp_path: Path) -> None:
    extras = "".join(f"---\napiVersion: v1\nkind: {kind}\nmetadata: {{name: x{i}}}\n"
                     for i, kind in enumerate(["ServiceAccount", "ServiceAccount", "Service", "ConfigMap"]))
    extras += "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: web}\n"
    extras += "---\napiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: web}\nspec: {}\n"
    text = "# Source: chart/templates/all.yaml\n---\n" + CLASS + pool() + extras + deployment()
    out, path = run(tmp_path, text, "-o", "json")
    assert out.exit_code == 0, out.stderr
    lines = out.stderr.splitlines()
    # Services only matter to SCHEDULER_CONFIG's default topology spread (unset here): named, with why.
    assert lines[0] == ("skipped 5 objects simulate does not need: ServiceAccount x2, ConfigMap x1, Ingress x1, "
                        "Service x1 (read only for SCHEDULER_CONFIG's default topology spread)")
    # The leading comment block is not a document: the ScaledObject is document 7, counting from 0. Pod autoscalers
    # are read to size their targets (issue #26 item 5); this one names none, so the replicas are used as given.
    assert lines[1] == (f"warning: {path}#documents[7].spec.scaleTargetRef.name: required field is missing: cannot "
                        "size its target, whose replicas are used as given (in ScaledObject 'web')")
    decision = json.loads(out.stdout)
    assert [(n["instance_type"], len(n["pods"])) for n in decision["nodeclaims"]] == [("t4g.medium", 2)]


def test_silent_cases_each_get_one_warning_and_strict_fails(tmp_path: Path) -> None:
    text = (CLASS + pool("default") + pool("default")
            + pool("gpu", node_class="missing")
            + pool("other", group="example.com", kind="FooNodeClass")
            + pool("typo", requirements='[{key: node.kubernetes.io/instance-type, operator: In, values: [m5.larg]},'
                                        ' {key: karpenter.sh/capacity-type, operator: In, values: [spto]}]')
            + deployment())
    out, path = run(tmp_path, text)
    assert out.exit_code == 0, out.stderr
    warnings = [line for line in out.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: {path}#documents[2].metadata.name: NodePool 'default' is defined again (first at "
        f"{path}#documents[1]): "
        "the later one replaces the earlier, as kubectl apply would",
        f"warning: {path}#documents[3].spec.template.spec.nodeClassRef: EC2NodeClass 'missing' is not in the input "
        "(classes: default): Karpenter would keep this NodePool not Ready, so it launches nothing (in NodePool 'gpu')",
        f"warning: {path}#documents[4].spec.template.spec.nodeClassRef: example.com/FooNodeClass is not a node class "
        "nodewright can launch (only karpenter.k8s.aws/EC2NodeClass): this NodePool launches nothing "
        "(in NodePool 'other')",
        f"warning: {path}#documents[5].spec.template.spec.requirements[0].values: 'm5.larg' is not a "
        "node.kubernetes.io/instance-type value anywhere in the bundled catalog, so no node can match it; "
        "did you mean 'm5.large'? (in NodePool 'typo')",
        f"warning: {path}#documents[5].spec.template.spec.requirements[1].values: 'spto' is not a "
        "karpenter.sh/capacity-type value anywhere in the bundled catalog, so no node can match it; "
        "did you mean 'spot'? (in NodePool 'typo')",
    ]
    assert "NODEPOOL" in out.stdout and "gpu " not in out.stdout and "other " not in out.stdout
    strict, _ = run(tmp_path, text, "--strict")
    assert strict.exit_code == 2
    assert [line.split(":", 1)[0] for line in strict.stderr.splitlines()] == ["error"] * 5
    assert strict.stdout == ""


def test_pod_selectors_with_values_that_exist_nowhere(tmp_path: Path) -> None:
    text = CLASS + pool() + deployment(extra="\n      nodeSelector: {kubernetes.io/arch: amd46}")
    out, path = run(tmp_path, text)
    assert (f"warning: {path}#documents[2].spec.template.spec.nodeSelector[kubernetes.io/arch]: 'amd46' is not a "
            "kubernetes.io/arch value anywhere in the bundled catalog, so no node can match it; did you mean "
            "'amd64'? (in Deployment 'web')") in out.stderr.splitlines()


def test_v114_fields_that_are_honoured_are_not_warned(tmp_path: Path) -> None:
    """Static NodePools, Balanced and capacity reservations are honoured (controllers/static.py,
    disruption/balanced.py, cloud/reservations.py): none of them is warned any more."""
    cls = CLASS + "  capacityReservationSelectorTerms: [{id: cr-0123456789abcdef0}]\n"
    static = pool("static", extra="\n  replicas: 3\n  limits: {nodes: '5'}")
    balanced = pool("balanced", extra="\n  disruption: {consolidationPolicy: Balanced}")
    out, path = run(tmp_path, cls + static + balanced + deployment())
    assert out.exit_code == 0, out.stderr
    assert [line for line in out.stderr.splitlines() if line.startswith("warning")] == []


def test_exbibytes_never_crash(tmp_path: Path) -> None:
    out, _ = run(tmp_path, CLASS + pool(extra="\n  limits: {memory: 1Ei}") + deployment(memory="1Ei"), "-o", "json")
    assert out.exit_code == 0, out.stderr
    unschedulable = json.loads(out.stdout)["unschedulable"]
    assert len(unschedulable) == 2 and "memory: 1Ei" in unschedulable[0]["reason"]


def test_binary_stdin_is_one_error_line() -> None:
    out = CliRunner().invoke(cli, ["simulate", "-f", "-"], input=b"\x00\xff\xfe binary \x80")
    assert out.exit_code == 2
    assert out.stderr == "error: <stdin>: not UTF-8 text (byte 0xff at offset 1)\n"


def test_every_invalid_field_of_every_file_at_once(tmp_path: Path) -> None:
    bad = pool(extra="\n  weight: 0\n  limits: {cpu: lots}")
    out, path = run(tmp_path, CLASS + bad + deployment(replicas=-1))
    assert out.exit_code == 2
    assert out.stderr.splitlines() == [
        f"error: {path}#documents[1].spec.limits.cpu: 'lots' is not a quantity: expected a number with an optional "
        "suffix like m, Gi, G (in NodePool 'default')",
        f"error: {path}#documents[1].spec.weight: Input should be greater than or equal to 1, got 0 "
        "(in NodePool 'default')",
        # The Deployment's problem in the same run (issue #26 item 6: every kind at once).
        f"error: {path}#documents[2].spec.replicas: must be a non-negative integer, got -1 (in Deployment 'web')",
    ]


def test_fail_on_unschedulable_exits_3(tmp_path: Path) -> None:
    text = CLASS + pool() + deployment(cpu="1000")  # no type has 1,000 vCPUs
    ok, _ = run(tmp_path, text)
    assert ok.exit_code == 0
    out, _ = run(tmp_path, text, "--fail-on-unschedulable")
    assert out.exit_code == 3
    assert out.stderr.splitlines()[-1] == "error: 2 pod(s) unschedulable (--fail-on-unschedulable)"


def test_misspelt_v1alpha5_field_is_named(tmp_path: Path) -> None:
    prov = tmp_path / "prov.yaml"
    prov.write_text("apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: default}\n"
                    "spec:\n  providerRef: {name: default}\n  ttlSecondsAfterEmty: 30\n")
    out = CliRunner().invoke(cli, ["convert", "-f", str(prov), "--node-role", "r"])
    assert out.exit_code == 0
    assert out.stderr == (f"warning: {prov}#documents[0].spec.ttlSecondsAfterEmty: unknown karpenter.sh/v1alpha5 "
                          "Provisioner field: conversion drops it; did you mean 'ttlSecondsAfterEmpty'? "
                          "(in Provisioner 'default')\n")
    assert CliRunner().invoke(cli, ["convert", "--strict", "-f", str(prov)]).exit_code == 2


def test_role_warning_only_for_classes_that_named_no_role(tmp_path: Path) -> None:
    """Karpenter's getting-started EC2NodeClass sets ``role: KarpenterNodeRole-${CLUSTER_NAME}`` itself."""
    cls = tmp_path / "cls.yaml"
    cls.write_text("apiVersion: karpenter.k8s.aws/v1beta1\nkind: EC2NodeClass\nmetadata: {name: default}\n"
                   "spec:\n  amiFamily: AL2023\n  role: KarpenterNodeRole-${CLUSTER_NAME}\n"
                   "  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]\n"
                   "  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]\n")
    out = CliRunner().invoke(cli, ["convert", "-f", str(cls)])
    assert out.exit_code == 0 and out.stderr == ""
    assert yaml.safe_load(out.stdout)["spec"]["role"] == "KarpenterNodeRole-${CLUSTER_NAME}"


def test_scenario_limits_and_plot_directory(tmp_path: Path) -> None:
    scenario = tmp_path / "long.yaml"
    scenario.write_text("apiVersion: nodewright.io/v1alpha1\nkind: Scenario\nmetadata: {name: long}\n"
                        "spec: {duration: 100000h, region: us-east-1, manifests: []}\n")
    out = CliRunner().invoke(cli, ["simulate", "--scenario", str(scenario)])
    assert out.exit_code == 2
    assert out.stderr == (f"error: {scenario}#spec.duration: at most 168h (7 days) of simulated time, "
                          "got '100000h'\n")
    missing_dir = tmp_path / "no" / "such" / "plot.png"
    out = CliRunner().invoke(cli, ["simulate", "--scenario", str(scenario), "--plot", str(missing_dir)])
    assert out.exit_code == 2
    assert out.stderr == f"error: --plot: directory {str(missing_dir.parent)!r} does not exist (nodewright does not create it)\n"
    assert not (tmp_path / "no").exists()


def test_limit_range_defaults_are_applied_like_the_api_server(tmp_path: Path) -> None:
    """A namespace LimitRange (default 1 CPU / 2Gi limit, defaultRequest 500m CPU) fills containers' unset
    requests; an explicit limit still wins over defaultRequest (pod defaulting runs first)."""
    limit_range = ("---\napiVersion: v1\nkind: LimitRange\nmetadata: {name: defaults, namespace: shop}\nspec:\n"
                   "  limits:\n  - type: Container\n    default: {cpu: '1', memory: 2Gi}\n"
                   "    defaultRequest: {cpu: 500m}\n")
    bare = ("---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: bare, namespace: shop}\nspec:\n"
            "  replicas: 2\n  template:\n    spec:\n      containers: [{name: c, image: x}]\n")
    limited = ("---\napiVersion: v1\nkind: Pod\nmetadata: {name: limited, namespace: shop}\nspec:\n"
               "  containers: [{name: c, image: x, resources: {limits: {cpu: '2'}}}]\n")
    elsewhere = ("---\napiVersion: v1\nkind: Pod\nmetadata: {name: other, namespace: default}\nspec:\n"
                 "  containers: [{name: c, image: x}]\n")
    out, _ = run(tmp_path, CLASS + pool() + limit_range + bare + limited + elsewhere, "-o", "json")
    assert out.exit_code == 0, out.stderr
    assert out.stderr == ""  # the LimitRange is used, not skipped
    claims = json.loads(out.stdout)["nodeclaims"]
    assert len(claims) == 1 and len(claims[0]["pods"]) == 4
    # 2 x (500m, 2Gi) + (2, 2Gi: its own limit, not defaultRequest) + the pod in another namespace (nothing):
    # millicores and bytes.
    assert (claims[0]["requests"]["cpu"], claims[0]["requests"]["memory"]) == (3000, 6 * 2**30)


def test_convert_reports_conversion_and_validation_problems_together(tmp_path: Path) -> None:
    path = tmp_path / "mixed.yaml"
    path.write_text("apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: a}\nspec: {}\n"
                    + pool("b", extra="\n  weight: 0"))
    out = CliRunner().invoke(cli, ["convert", "-f", str(path)])
    assert out.exit_code == 2
    assert out.stderr.splitlines() == [
        f"error: {path}#documents[0].spec.providerRef: a Provisioner needs providerRef (or an inline provider) to "
        "convert",
        f"error: {path}#documents[1].spec.weight: Input should be greater than or equal to 1, got 0 (in NodePool 'b')",
    ]


def test_scenarios_skip_kinds_they_do_not_play_and_name_the_file(tmp_path: Path) -> None:
    docs = [yaml.safe_load(CLASS), yaml.safe_load(pool()), yaml.safe_load(deployment()),
            {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "web"}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r"}}]
    scenario = {"apiVersion": "nodewright.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "s"},
                "spec": {"duration": "2m", "region": "us-east-1", "manifests": docs}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    out = CliRunner().invoke(cli, ["simulate", "--scenario", str(path), "-o", "json"])
    assert out.exit_code == 0, out.stderr
    assert out.stderr.splitlines()[0] == "skipped 2 objects the simulation does not play: Ingress x1, Role x1"
    assert json.loads(out.stdout)["summary"]["pods_scheduled"] == 2
    docs[2]["spec"]["replicas"] = -1
    scenario["spec"]["manifests"] = docs[:3]
    path.write_text(yaml.safe_dump(scenario))
    out = CliRunner().invoke(cli, ["simulate", "--scenario", str(path)])
    assert out.exit_code == 2
    assert out.stderr == f"error: {path}#spec.manifests: Deployment web: web.spec.replicas: expected a count, got -1\n"
    docs[1]["spec"]["limits"] = {"cpu": "-3"}
    path.write_text(yaml.safe_dump(scenario))
    out = CliRunner().invoke(cli, ["simulate", "--scenario", str(path)])
    assert out.stderr == f"error: {path}#spec.manifests[1].spec.limits.cpu: '-3' is negative (in NodePool 'default')\n"


def test_misspelt_workload_fields_are_named_with_the_closest_field(tmp_path: Path) -> None:
    """``replica``, ``nodeSelecter``, ``resources.request``: each ignored by the decision (3 replicas of 0 CPU on
    any arch), so each is one warning naming file, object and field path; --strict makes them errors."""
    text = CLASS + pool() + """---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replica: 3
  template:
    spec:
      nodeSelecter: {kubernetes.io/arch: arm64}
      containers: [{name: c, image: x, resources: {request: {cpu: "2"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: 100m}}}]
  initContainers: [{name: i, image: x, resourcs: {}}]
"""
    out, path = run(tmp_path, text)
    assert out.exit_code == 0, out.stderr
    why = "unknown field: simulate ignores it (kubectl apply would refuse it: strict field validation)"
    assert [line for line in out.stderr.splitlines() if line.startswith("warning:")] == [
        f"warning: {path}#documents[2].spec.replica: {why}; did you mean 'replicas'? (in Deployment 'web')",
        f"warning: {path}#documents[2].spec.template.spec.nodeSelecter: {why}; did you mean 'nodeSelector'? "
        "(in Deployment 'web')",
        f"warning: {path}#documents[2].spec.template.spec.containers[0].resources.request: {why}; did you mean "
        "'requests'? (in Deployment 'web')",
        f"warning: {path}#documents[3].spec.initContainers[0].resourcs: {why}; did you mean 'resources'? "
        "(in Pod 'p')",
    ]
    strict, _ = run(tmp_path, text, "--strict")
    assert strict.exit_code == 2 and strict.stdout == ""
    assert [line.split(":", 1)[0] for line in strict.stderr.splitlines()] == ["error"] * 4


def test_well_formed_workloads_of_every_kind_get_no_field_warning(tmp_path: Path) -> None:
    template = ("template:\n    metadata: {labels: {app: x}}\n    spec:\n      restartPolicy: OnFailure\n"
                "      containers: [{name: c, image: x, resources: {requests: {cpu: 100m}, limits: {cpu: 200m}}}]\n")
    text = CLASS + pool() + "".join(
        f"---\napiVersion: {api}\nkind: {kind}\nmetadata: {{name: w{i}, namespace: ns}}\nspec:\n  {extra}"
        f"  selector: {{matchLabels: {{app: x}}}}\n  {template}"
        for i, (api, kind, extra) in enumerate([
            ("apps/v1", "Deployment", "replicas: 1\n  strategy: {type: Recreate}\n"),
            ("apps/v1", "StatefulSet", "serviceName: s\n  podManagementPolicy: Parallel\n"),
            ("apps/v1", "ReplicaSet", "minReadySeconds: 5\n"),
            ("apps/v1", "DaemonSet", "updateStrategy: {type: OnDelete}\n"),
            ("batch/v1", "Job", "completions: 2\n  parallelism: 2\n  backoffLimit: 1\n"),
        ]))
    out, _ = run(tmp_path, text)
    assert out.exit_code == 0, out.stderr
    assert "warning" not in out.stderr


def test_misspelt_v1_nodepool_field_is_an_error_with_the_closest_field(tmp_path: Path) -> None:
    out, path = run(tmp_path, CLASS + pool(extra="\n  disruption: {consolidateAftr: 1m}") + deployment())
    assert out.exit_code == 2
    assert out.stderr.splitlines() == [f"error: {path}#documents[1].spec.disruption.consolidateAftr: unknown "
                                       "field; did you mean 'consolidateAfter'? (in NodePool 'default')"]


def test_nodepool_limit_keys_that_cap_nothing_are_warned(tmp_path: Path) -> None:
    limits = "\n  limits: {cpu: '100', memry: 100Gi, nvidia.com/gpus: '4', example.com/fpga: '2', hugepages-2Mi: 1Gi}"
    out, path = run(tmp_path, CLASS + pool(extra=limits) + deployment())
    assert out.exit_code == 0, out.stderr
    assert [line for line in out.stderr.splitlines() if line.startswith("warning:")] == [
        f"warning: {path}#documents[1].spec.limits.memry: 'memry' is not a resource name (names without a domain "
        "are Kubernetes' own: cpu, memory, pods, ephemeral-storage, hugepages-<size>; and Karpenter's nodes), so "
        "this limit caps nothing; did you mean 'memory'? (in NodePool 'default')",
        f"warning: {path}#documents[1].spec.limits[nvidia.com/gpus]: 'nvidia.com/gpus' is no resource an EC2 "
        "instance type has, so this limit caps nothing; did you mean 'nvidia.com/gpu'? (in NodePool 'default')",
    ]
    assert run(tmp_path, CLASS + pool(extra=limits) + deployment(), "--strict")[0].exit_code == 2


def test_autoscaler_bounds_the_api_server_refuses_are_errors(tmp_path: Path) -> None:
    hpa = ("---\napiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: web}\nspec:\n"
           "  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n  minReplicas: 5\n  maxReplicas: 2\n")
    keda = ("---\napiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: web}\nspec:\n"
            "  scaleTargetRef: {name: web}\n  minReplicaCount: 3\n  maxReplicaCount: 1\n"
            "  triggers: [{type: cpu, metadata: {value: '60'}}]\n")
    out, path = run(tmp_path, CLASS + pool() + deployment() + hpa + keda)
    assert out.exit_code == 2 and out.stdout == ""
    assert out.stderr.splitlines() == [
        f"error: {path}#documents[3].spec.maxReplicas: must be greater than or equal to minReplicas (5), got 2: the "
        "API server refuses this HorizontalPodAutoscaler (in HorizontalPodAutoscaler 'web')",
        f"error: {path}#documents[4].spec.minReplicaCount: must not exceed maxReplicaCount (1), got 3: KEDA refuses "
        "this ScaledObject (in ScaledObject 'web')",
    ]
    scenario = {"apiVersion": "nodewright.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "s"},
                "spec": {"duration": "2m", "region": "us-east-1",
                         "manifests": [yaml.safe_load(d) for d in (CLASS, pool(), deployment(), hpa)]}}
    replay = tmp_path / "s.yaml"
    replay.write_text(yaml.safe_dump(scenario))
    out = CliRunner().invoke(cli, ["simulate", "--scenario", str(replay)])
    assert out.exit_code == 2 and "minReplicas (5), got 2" in out.stderr and len(out.stderr.splitlines()) == 1


def test_pricing_help_says_the_plan_changes() -> None:
    out = CliRunner().invoke(cli, ["simulate", "--help"], terminal_width=200)
    text = " ".join(out.output.split())
    assert "--pricing FILE A PricingPolicy (Savings Plans, RIs, discounts): decide on effective marginal prices, " \
           "as run --pricing-policy does (the plan can change), and show effective $/h beside list $/h" in text


def test_every_kind_simulate_leaves_out_is_named_once(tmp_path: Path, monkeypatch: Any) -> None:
    """``simulate -f`` and ``--scenario``: a Service (read only for SCHEDULER_CONFIG's default spread), ConfigMap,
    Secret, ServiceAccount, PriorityClass are each named once in the skipped-kinds line (a scenario accepted the last
    four silently); a ResourceQuota only in its own warning (it was in both); a CapacityBuffer and its PodTemplate
    are read, their virtual pods join the batch (they were skipped, though docs/capacity-buffers.md reads them)."""
    extras = [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}}},
              {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}},
              {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}},
              {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "a"}},
              {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 10}]
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"}, "spec": {"hard": {"cpu": "9"}}}
    buffer = [{"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer", "metadata": {"name": "room"},
               "spec": {"podTemplateRef": {"name": "t"}, "replicas": 1}},
              {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}, "template": {"spec": {
                  "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}}]
    text = CLASS + pool() + deployment() + "".join("---\n" + json.dumps(d) + "\n" for d in [*extras, quota, *buffer])
    monkeypatch.delenv("SCHEDULER_CONFIG", raising=False)
    out, path = run(tmp_path, text, "-o", "json")
    assert out.exit_code == 0, out.stderr
    assert out.stderr.splitlines() == [
        "skipped 5 objects simulate does not need: ConfigMap x1, PriorityClass x1, Secret x1, Service x1 (read only "
        "for SCHEDULER_CONFIG's default topology spread), ServiceAccount x1",
        f"warning: {path}#documents[8]: ResourceQuota 'q' is not modelled by simulate: quotas are not enforced"]
    placed = [p for n in json.loads(out.stdout)["nodeclaims"] for p in n["pods"]]
    assert "default/capacity-buffer-room-1" in placed
    monkeypatch.setenv("SCHEDULER_CONFIG", "podTopologySpread: {defaultingType: System}")
    out, _ = run(tmp_path, text, "-o", "json")
    assert out.stderr.splitlines()[0] == ("skipped 4 objects simulate does not need: ConfigMap x1, PriorityClass x1, "
                                          "Secret x1, ServiceAccount x1")
    monkeypatch.delenv("SCHEDULER_CONFIG")
    docs = [yaml.safe_load(CLASS), yaml.safe_load(pool()), yaml.safe_load(deployment()), *extras]
    scenario = {"apiVersion": "nodewright.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "s"},
                "spec": {"duration": "2m", "region": "us-east-1", "manifests": docs}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(scenario))
    out = CliRunner().invoke(cli, ["simulate", "--scenario", str(tmp_path / "s.yaml"), "-o", "json"])
    assert out.exit_code == 0, out.stderr
    assert out.stderr.splitlines()[0] == (
        "skipped 5 objects the simulation does not play: ConfigMap x1, PriorityClass x1, Secret x1, Service x1 (read "
        "only for SCHEDULER_CONFIG's default topology spread), ServiceAccount x1")
    assert json.loads(out.stdout)["summary"]["pods_scheduled"] == 2


def test_scenario_manifests_get_the_unknown_field_warnings_of_simulate_f(tmp_path: Path) -> None:
    """``replica`` and ``resources.request`` in a scenario's inline Deployment, ``ttlSecondsAfterEmty`` in a
    Provisioner of a manifest file it names: each was ignored silently by the replay (the Deployment ran its 2
    replicas of 0 CPU). Now one warning each, naming the scenario file, ``spec.manifests[i]`` and the field."""
    web = yaml.safe_load(deployment(replicas=2))
    web["spec"]["replica"] = 5
    web["spec"]["template"]["spec"]["containers"][0]["resources"]["request"] = {"cpu": "1"}
    provisioner = {"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "metadata": {"name": "old"},
                   "spec": {"providerRef": {"name": "default"}, "ttlSecondsAfterEmty": 30}}
    (tmp_path / "old.yaml").write_text(yaml.safe_dump(provisioner))
    scenario = {"apiVersion": "nodewright.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "s"},
                "spec": {"duration": "2m", "region": "us-east-1",
                         "manifests": [yaml.safe_load(CLASS), yaml.safe_load(pool()), web, "old.yaml"]}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    out = CliRunner().invoke(cli, ["simulate", "--scenario", str(path), "-o", "json"])
    assert out.exit_code == 0, out.stderr
    why = "unknown field: simulate ignores it (kubectl apply would refuse it: strict field validation)"
    assert out.stderr.splitlines()[:3] == [
        f"warning: {path}#spec.manifests[2].spec.replica: {why}; did you mean 'replicas'? (in Deployment 'web')",
        f"warning: {path}#spec.manifests[2].spec.template.spec.containers[0].resources.request: {why}; did you mean "
        "'requests'? (in Deployment 'web')",
        f"warning: {path}#spec.manifests[3] (old.yaml)#documents[0].spec.ttlSecondsAfterEmty: unknown "
        "karpenter.sh/v1alpha5 Provisioner field: conversion drops it; did you mean 'ttlSecondsAfterEmpty'? (in "
        "Provisioner 'old')"]


def test_scenario_nodepool_without_its_ec2nodeclass_is_one_warning(tmp_path: Path) -> None:
    """A scenario NodePool naming an EC2NodeClass the scenario lacks launches nothing: the replay ended with its
    pods unscheduled and no word why. One warning line names it, as ``simulate -f`` does."""
    scenario = {"apiVersion": "nodewright.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "s"},
                "spec": {"duration": "2m", "region": "us-east-1",
                         "manifests": [yaml.safe_load(CLASS), yaml.safe_load(pool(node_class="gone")),
                                       yaml.safe_load(deployment())]}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    out = CliRunner().invoke(cli, ["simulate", "--scenario", str(path), "-o", "json"])
    assert out.exit_code == 0, out.stderr
    assert out.stderr.splitlines()[0] == (f"warning: {path}: NodePool 'default' cannot launch: its EC2NodeClass "
                                          "'gone' is not in the input (classes: default)")
    assert json.loads(out.stdout)["summary"]["unscheduled_pods_at_end"] == 2
