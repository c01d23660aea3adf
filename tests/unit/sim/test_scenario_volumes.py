"""Scenario replay reads StorageClasses and claims: volume zones decide whether nodeWright can launch for a pod."""

from __future__ import annotations

import copy
from typing import Any

from nodewright.sim.runner import run
from nodewright.sim.scenario import parse_scenario

from .test_scenarios import NODECLASS, POOL, inflate


def _scenario(zone: str) -> dict[str, Any]:
    app = copy.deepcopy(inflate(2))
    spec = app["spec"]["template"]["spec"]
    del spec["topologySpreadConstraints"]
    spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    storage = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "gp3"},
               "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer",
               "allowedTopologies": [{"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": [zone]}]}]}
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "default"},
             "spec": {"storageClassName": "gp3", "accessModes": ["ReadWriteOnce"],
                      "resources": {"requests": {"storage": "10Gi"}}}}
    return {"apiVersion": "nodewright.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "volumes"},
            "spec": {"duration": "5m", "zones": ["us-east-1a", "us-east-1b"], "seed": 1,
                     "launchLatency": {"p50": "30s", "p90": "30s"}, "podStartDelay": "5s",
                     "manifests": [POOL, NODECLASS, storage, claim, app], "events": []}}


def test_storage_class_zone_in_the_scenario_schedules_the_pods() -> None:
    summary = run(parse_scenario(_scenario("us-east-1b"))).summary
    assert summary["pods_scheduled"] == 2 and summary["unscheduled_pods_at_end"] == 0


def test_storage_class_zone_outside_the_scenario_launches_nothing() -> None:
    summary = run(parse_scenario(_scenario("us-east-1c"))).summary
    assert summary["nodes_launched"] == 0 and summary["unscheduled_pods_at_end"] == 2


def test_a_statically_bound_pair_in_the_scenario_counts_as_bound() -> None:
    # Issue #26 item 8: claim 'data' names volume 'data-pv' (zone us-east-1b), whose claimRef names it back; no
    # pv.kubernetes.io/bind-completed, as users write them. The PersistentVolume controller would bind them.
    doc = _scenario("us-east-1b")
    manifests = doc["spec"]["manifests"]
    claim = next(m for m in manifests if m["kind"] == "PersistentVolumeClaim")
    claim["spec"] = {**claim["spec"], "storageClassName": "", "volumeName": "data-pv"}
    volume = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "data-pv"},
              "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                       "claimRef": {"namespace": "default", "name": "data"},
                       "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-0123"},
                       "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                           {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1b"]}]}]}}}}
    doc["spec"]["manifests"] = [m for m in manifests if m["kind"] != "StorageClass"] + [volume]
    summary = run(parse_scenario(doc)).summary
    assert summary["pods_scheduled"] == 2 and summary["unscheduled_pods_at_end"] == 0
