"""Cluster-default topology spread (``SCHEDULER_CONFIG``, Karpenter main #3205): parsing, the selector
kube-scheduler's ``DefaultSelector`` deduces, and the defaulting of pods in conversion."""

from __future__ import annotations

import pytest

from nodewright.errors import NodewrightValidationError
from nodewright.kube import resources as r
from nodewright.kube.memory import InMemoryCluster
from nodewright.selectors import LabelSelector
from nodewright.settings import load_settings
from nodewright.state.cluster import sync_models
from nodewright.state.defaultspread import (
    SYSTEM_DEFAULT_CONSTRAINTS,
    SchedulerConfig,
    SpreadSelectors,
    default_spread,
    parse_scheduler_config,
)
from nodewright.state.models import models_for

ZONE_DNS = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}
LIST = SchedulerConfig((ZONE_DNS,))


def _err(text: str) -> str:
    with pytest.raises(NodewrightValidationError) as info:
        parse_scheduler_config(text)
    return str(info.value)


# --- parsing ------------------------------------------------------------------------------------


def test_empty_means_no_defaults() -> None:
    assert parse_scheduler_config("") is None
    assert parse_scheduler_config("  \n") is None
    assert parse_scheduler_config("{}") == SchedulerConfig()
    assert SchedulerConfig().constraints == ()


def test_list_yaml_and_json() -> None:
    yaml_text = """
podTopologySpread:
  defaultConstraints:
    - maxSkew: 1
      topologyKey: topology.kubernetes.io/zone
      whenUnsatisfiable: DoNotSchedule
    - {maxSkew: 3, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, minDomains: 2}
"""
    cfg = parse_scheduler_config(yaml_text)
    assert cfg is not None and cfg.defaulting_type == "List"
    assert [c["maxSkew"] for c in cfg.constraints] == [1, 3]
    assert cfg.constraints[1]["minDomains"] == 2
    json_text = '{"podTopologySpread":{"defaultingType":"List","defaultConstraints":[' \
                '{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"DoNotSchedule"}]}}'
    assert parse_scheduler_config(json_text) == LIST


def test_system_is_kube_schedulers_builtin_set() -> None:
    cfg = parse_scheduler_config("podTopologySpread: {defaultingType: System}")
    assert cfg is not None and cfg.constraints == SYSTEM_DEFAULT_CONSTRAINTS
    assert [(c["topologyKey"], c["maxSkew"], c["whenUnsatisfiable"]) for c in cfg.constraints] == [
        ("kubernetes.io/hostname", 3, "ScheduleAnyway"), ("topology.kubernetes.io/zone", 5, "ScheduleAnyway")]


@pytest.mark.parametrize(("text", "message"), [
    ("podTopologySpread: {", "SCHEDULER_CONFIG: not valid YAML or JSON at line 2, column 1: did not find expected "
                             "node content"),  # libyaml's words (api.manifests.SAFE_LOADER)
    ("- a", "SCHEDULER_CONFIG: expected a mapping with podTopologySpread, got list"),
    ("nodeResourcesFit: {}", "SCHEDULER_CONFIG nodeResourcesFit: unknown field; expected one of podTopologySpread"),
    ("podTopologySpread: {defaultConstraint: []}", "SCHEDULER_CONFIG podTopologySpread.defaultConstraint: unknown "
                                                   "field; expected one of defaultConstraints, defaultingType"),
    ("podTopologySpread: {defaultingType: Cluster}",
     "SCHEDULER_CONFIG podTopologySpread.defaultingType: 'Cluster' is not List or System"),
    ("podTopologySpread: {defaultingType: System, defaultConstraints: [{maxSkew: 1, topologyKey: z, "
     "whenUnsatisfiable: DoNotSchedule}]}",
     "SCHEDULER_CONFIG podTopologySpread.defaultConstraints: must be empty when defaultingType is System "
     "(kube-scheduler's rule)"),
    ("podTopologySpread: {defaultConstraints: [{maxSkew: 0, topologyKey: z, whenUnsatisfiable: DoNotSchedule}]}",
     "SCHEDULER_CONFIG podTopologySpread.defaultConstraints[0].maxSkew: must be an integer >= 1, got 0"),
    ("podTopologySpread: {defaultConstraints: [{maxSkew: 1, whenUnsatisfiable: DoNotSchedule}]}",
     "SCHEDULER_CONFIG podTopologySpread.defaultConstraints[0].topologyKey: required field is missing"),
    ("podTopologySpread: {defaultConstraints: [{maxSkew: 1, topologyKey: 'a b', whenUnsatisfiable: DoNotSchedule}]}",
     "SCHEDULER_CONFIG podTopologySpread.defaultConstraints[0].topologyKey: 'a b' is not a valid label name"),
    ("podTopologySpread: {defaultConstraints: [{maxSkew: 1, topologyKey: z}]}",
     "SCHEDULER_CONFIG podTopologySpread.defaultConstraints[0].whenUnsatisfiable: required: DoNotSchedule or "
     "ScheduleAnyway"),
    ("podTopologySpread: {defaultConstraints: [{maxSkew: 1, topologyKey: z, whenUnsatisfiable: DoNotSchedule, "
     "labelSelector: {matchLabels: {a: b}}}]}",
     "SCHEDULER_CONFIG podTopologySpread.defaultConstraints[0].labelSelector: must not be set: the selector is "
     "deduced for each pod"),
    ("podTopologySpread: {defaultConstraints: [{maxSkew: 1, topologyKey: z, whenUnsatisfiable: DoNotSchedule, "
     "matchLabelKeys: [a]}]}",
     "SCHEDULER_CONFIG podTopologySpread.defaultConstraints[0].matchLabelKeys: must not be set: it has no effect "
     "on default constraints"),
    ("podTopologySpread: {defaultConstraints: [{maxSkew: 1, topologyKey: z, whenUnsatisfiable: DoNotSchedule}, "
     "{maxSkew: 2, topologyKey: z, whenUnsatisfiable: DoNotSchedule}]}",
     "SCHEDULER_CONFIG podTopologySpread.defaultConstraints[1]: duplicates defaultConstraints[0] (z, DoNotSchedule)"),
    ("podTopologySpread: {defaultConstraints: [{maxSkew: 1, topologyKey: z, whenUnsatisfiable: DoNotSchedule, "
     "skew: 1}]}", "SCHEDULER_CONFIG podTopologySpread.defaultConstraints[0].skew: unknown field; expected one of "
                   "labelSelector, matchLabelKeys, maxSkew, minDomains, nodeAffinityPolicy, nodeTaintsPolicy, "
                   "topologyKey, whenUnsatisfiable"),
])
def test_bad_input_is_one_line(text: str, message: str) -> None:
    assert _err(text) == message


def test_settings_env_and_flag() -> None:
    base = {"CLUSTER_NAME": "c", "AWS_REGION": "us-east-1"}
    assert load_settings(base).scheduler_config is None
    env = load_settings({**base, "SCHEDULER_CONFIG": "podTopologySpread: {defaultingType: System}"})
    assert env.scheduler_config is not None and env.scheduler_config.defaulting_type == "System"
    flag = load_settings({**base, "SCHEDULER_CONFIG": "podTopologySpread: {defaultingType: System}"},
                         {"scheduler_config": '{"podTopologySpread":{"defaultConstraints":[{"maxSkew":1,'
                                              '"topologyKey":"topology.kubernetes.io/zone",'
                                              '"whenUnsatisfiable":"DoNotSchedule"}]}}'})
    assert flag.scheduler_config == LIST  # the flag wins over the variable
    with pytest.raises(NodewrightValidationError, match="^SCHEDULER_CONFIG podTopologySpread.defaultingType"):
        load_settings({**base, "SCHEDULER_CONFIG": "podTopologySpread: {defaultingType: none}"})


# --- selector deduction (kube-scheduler helper.DefaultSelector) ---------------------------------


def _pod(labels: dict[str, str], owner: tuple[str, str, str] | None = None, *, namespace: str = "default",
         controller: bool = True, spreads: list | None = None) -> dict:
    meta: dict = {"name": "p", "namespace": namespace, "labels": labels}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": owner[0], "kind": owner[1], "name": owner[2], "uid": "u",
                                    "controller": controller}]
    spec: dict = {"containers": [{"name": "c"}]}
    if spreads is not None:
        spec["topologySpreadConstraints"] = spreads
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _service(selector: dict | None, name: str = "svc", namespace: str = "default") -> dict:
    spec = {} if selector is None else {"selector": selector}
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def _controller(kind: str, name: str, selector: dict, api: str = "apps/v1") -> dict:
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": selector}}


APP = {"app": "web", "pod-template-hash": "abc"}


def test_replicaset_selector_becomes_requirements() -> None:
    rs = _controller("ReplicaSet", "web-abc", {"matchLabels": APP,
                                               "matchExpressions": [{"key": "tier", "operator": "NotIn",
                                                                     "values": ["db"]}]})
    sel = SpreadSelectors.build([], [rs]).selector(_pod(APP, ("apps/v1", "ReplicaSet", "web-abc")))
    assert sel == {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]},
                                        {"key": "pod-template-hash", "operator": "In", "values": ["abc"]},
                                        {"key": "tier", "operator": "NotIn", "values": ["db"]}]}


def test_services_merge_and_statefulset_adds() -> None:
    services = [_service({"app": "web"}), _service({"app": "web", "ver": "1"}, "svc2"),
                _service({"app": "other"}, "svc3"), _service({"app": "web"}, "elsewhere", "prod"),
                _service(None, "headless"), _service({}, "everything")]
    ss = _controller("StatefulSet", "db", {"matchLabels": {"app": "web"}})
    labels = {"app": "web", "ver": "1", "statefulset.kubernetes.io/pod-name": "db-0"}
    sel = SpreadSelectors.build(services, [ss]).selector(_pod(labels, ("apps/v1", "StatefulSet", "db")))
    # Only this namespace's matching Services; the per-pod name label is not part of the selector.
    assert sel == {"matchLabels": {"app": "web", "ver": "1"},
                   "matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}


def test_replication_controller_overwrites_service_labels() -> None:
    rc = _controller("ReplicationController", "old", {"app": "web", "track": "stable"}, api="v1")
    pod = _pod({"app": "web", "track": "stable"}, ("v1", "ReplicationController", "old"))
    sel = SpreadSelectors.build([_service({"app": "web"})], [rc]).selector(pod)
    assert sel == {"matchLabels": {"app": "web", "track": "stable"}}


def test_no_selector_without_matching_service_or_supported_owner() -> None:
    rs = _controller("ReplicaSet", "web", {"matchLabels": APP})
    index = SpreadSelectors.build([_service(None), _service({})], [rs])
    assert index.selector(_pod(APP)) is None  # no owner; nil and empty Services contribute nothing
    assert index.selector(_pod(APP, ("batch/v1", "Job", "j"))) is None  # unsupported owner
    assert index.selector(_pod(APP, ("apps/v1", "ReplicaSet", "gone"))) is None  # deleted owner
    assert index.selector(_pod(APP, ("apps/v1", "ReplicaSet", "web"), controller=False)) is None  # not controller


# --- defaulting ---------------------------------------------------------------------------------


def test_pod_with_own_constraints_untouched() -> None:
    own = [{"maxSkew": 2, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": APP}}]
    pod = _pod(APP, ("apps/v1", "ReplicaSet", "web"), spreads=own)
    index = SpreadSelectors.build([], [_controller("ReplicaSet", "web", {"matchLabels": APP})])
    assert default_spread(pod, pod["spec"], LIST, index) is pod["spec"]
    assert default_spread(pod, {}, None, index) == {}


def test_list_and_system_defaults_stamp_the_selector() -> None:
    pod = _pod({"app": "web"})
    index = SpreadSelectors.build([_service({"app": "web"})], [])
    listed = default_spread(pod, pod["spec"], LIST, index)
    assert listed["topologySpreadConstraints"] == [{**ZONE_DNS, "labelSelector": {"matchLabels": {"app": "web"}}}]
    system = default_spread(pod, pod["spec"], SchedulerConfig(defaulting_type="System"), index)
    assert [(c["topologyKey"], c["maxSkew"], c["whenUnsatisfiable"], c["labelSelector"])
            for c in system["topologySpreadConstraints"]] == [
        ("kubernetes.io/hostname", 3, "ScheduleAnyway", {"matchLabels": {"app": "web"}}),
        ("topology.kubernetes.io/zone", 5, "ScheduleAnyway", {"matchLabels": {"app": "web"}})]
    assert "topologySpreadConstraints" not in pod["spec"]  # the object is not changed


def test_cluster_models_default_pods_and_follow_selector_changes() -> None:
    cluster = InMemoryCluster(lambda: 0.0, seed=0)
    cluster.create(r.REPLICASETS, _controller("ReplicaSet", "web", {"matchLabels": {"app": "web"}}))
    obj = cluster.create(r.PODS, _pod({"app": "web"}, ("apps/v1", "ReplicaSet", "web")))
    models = models_for(cluster)
    assert sync_models(cluster).pod(obj).topology_spread == ()  # no SCHEDULER_CONFIG: as before
    models.use_scheduler_config(LIST)
    (tsc,) = sync_models(cluster).pod(obj).topology_spread
    assert (tsc.topology_key, tsc.max_skew, tsc.when_unsatisfiable) == ("topology.kubernetes.io/zone", 1,
                                                                         "DoNotSchedule")
    assert tsc.label_selector == LabelSelector(match_expressions=(("app", "In", ("web",)),))
    cluster.delete(r.REPLICASETS, "web", "default")  # the owner goes: no selector, no defaults
    assert sync_models(cluster).pod(obj).topology_spread == ()


def test_only_a_selector_change_drops_the_conversions() -> None:
    cluster = InMemoryCluster(lambda: 0.0, seed=0)
    cluster.create(r.REPLICASETS, _controller("ReplicaSet", "web", {"matchLabels": {"app": "web"}}))
    models = models_for(cluster)
    models.use_scheduler_config(LIST)
    sync_models(cluster)
    epoch = models.epoch
    cluster.patch_status(r.REPLICASETS, "web", {"replicas": 3}, "default")  # a status write: same selector
    sync_models(cluster)
    assert models.epoch == epoch
    cluster.create(r.SERVICES, _service({"app": "web"}))
    sync_models(cluster)
    assert models.epoch == epoch + 1  # views caching converted pods (incremental_view) rebuild
