"""Seeded generator of provisioning cases for the real-scheduler agreement suite (issue 25).

``generate(count, seed)`` returns ``count`` :class:`Case` objects, each one provisioning decision's input: the
NodePools and EC2NodeClass, bare Pods (so no ReplicaSet controller is needed), DaemonSets, and zonal
PersistentVolumes with their bound claims. Every case draws 2-4 workload groups of mixed sizes; each group
draws features from :data:`FEATURES`:

- ``zone-spread``: ``topologySpreadConstraints`` on the zone, maxSkew 1, DoNotSchedule;
- ``host-spread``: on the hostname, maxSkew 1, ScheduleAnyway;
- ``anti-affinity``: required pod anti-affinity on the hostname (one replica per node);
- ``affinity``: required pod affinity to the group's own pods in one zone;
- ``or-terms``: two ORed required ``nodeSelectorTerms`` (zone us-east-1a, or instance family m5);
- ``tainted-pool``: a toleration and node selector for the second NodePool (``dedicated=batch:NoSchedule``);
- ``preferred``: preferred node affinity for a zone, weight 1-100;
- ``host-port``: a container ``hostPort`` (one replica per node);
- ``zonal-pv``: each replica mounts its own PersistentVolume, pinned to a zone by its node affinity.

Cases alternate with and without a DaemonSet (100m / 128Mi per node). The draw is a pure function of the seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from nodewright.api import labels as L
from nodewright.cloud.instancetype import InstanceType
from nodewright.quantities import format_quantity

ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
SIZES = (("250m", "512Mi"), ("500m", "1Gi"), ("1", "2Gi"), ("1500m", "3Gi"), ("2", "4Gi"), ("3500m", "7Gi"),
         ("1", "6Gi"), ("6", "12Gi"))
FEATURES = ("zone-spread", "host-spread", "anti-affinity", "affinity", "or-terms", "tainted-pool", "preferred",
            "host-port", "zonal-pv")
TAINT = {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}


@dataclass
class Case:
    """One decision's input.

    Attributes:
        name: ``case-<index>``.
        seed: the draw's seed.
        features: the features drawn (for the report).
        karpenter: NodePools and the EC2NodeClass (for ``decide`` only).
        volumes: PersistentVolumes and PersistentVolumeClaims (both sides).
        daemonsets: DaemonSets (both sides).
        pods: bare Pods (both sides), namespace ``default`` (the suite renames it per run).
    """

    name: str
    seed: int
    features: list[str] = field(default_factory=list)
    karpenter: list[dict[str, Any]] = field(default_factory=list)
    volumes: list[dict[str, Any]] = field(default_factory=list)
    daemonsets: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)

    def documents(self) -> list[dict[str, Any]]:
        """Everything, for ``nodewright simulate -f`` / :func:`nodewright.sim.decision.decide`."""
        return [*self.karpenter, *self.volumes, *self.daemonsets, *self.pods]


def _nodepool(name: str, tainted: bool) -> dict[str, Any]:
    template: dict[str, Any] = {
        "requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["c5", "m5", "r5"]},
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": list(ZONES)},
        ],
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
    }
    labels = {"pool": name}
    if tainted:
        template["taints"] = [dict(TAINT)]
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"template": {"metadata": {"labels": labels}, "spec": template}}}


NODECLASS = {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
             "spec": {"role": "NodeRole", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                      "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "e2e"}}],
                      "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "e2e"}}]}}


def _pod(name: str, app: str, cpu: str, memory: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
            "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
                     "terminationGracePeriodSeconds": 0}}


def _apply_feature(feature: str, pod: dict[str, Any], app: str, index: int, rng: random.Random,
                   group_zone: str, case: Case) -> None:
    spec = pod["spec"]
    affinity = spec.setdefault("affinity", {})
    selector = {"matchLabels": {"app": app}}
    if feature == "zone-spread":
        spec.setdefault("topologySpreadConstraints", []).append(
            {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": selector})
    elif feature == "host-spread":
        spec.setdefault("topologySpreadConstraints", []).append(
            {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
             "labelSelector": selector})
    elif feature == "anti-affinity":
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname", "labelSelector": selector}]}
    elif feature == "affinity":
        affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "topology.kubernetes.io/zone", "labelSelector": selector}]}
    elif feature == "or-terms":
        affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]}]},
            {"matchExpressions": [{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5"]}]},
        ]}}
    elif feature == "tainted-pool":
        spec["tolerations"] = [{"key": TAINT["key"], "operator": "Equal", "value": TAINT["value"],
                                "effect": TAINT["effect"]}]
        spec["nodeSelector"] = {"pool": "batch"}
    elif feature == "preferred":
        affinity.setdefault("nodeAffinity", {})["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": rng.randint(1, 100), "preference": {"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [group_zone]}]}}]
    elif feature == "host-port":
        spec["containers"][0]["ports"] = [{"containerPort": 8080, "hostPort": 18080 + len(case.name) % 7}]
    elif feature == "zonal-pv":
        claim = f"{pod['metadata']['name']}-data"
        volume = f"{case.name}-{claim}"
        case.volumes.append({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume},
                             "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                                      "storageClassName": "", "persistentVolumeReclaimPolicy": "Retain",
                                      "claimRef": {"namespace": "default", "name": claim},
                                      "hostPath": {"path": f"/tmp/{volume}"},
                                      "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                                          {"key": "topology.kubernetes.io/zone", "operator": "In",
                                           "values": [ZONES[index % len(ZONES)]]}]}]}}}})
        case.volumes.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                             # Bound, as the provisioner finds it (the suite lets the PV controller bind it for real).
                             "metadata": {"name": claim, "namespace": "default",
                                          "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
                             "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": volume,
                                      "resources": {"requests": {"storage": "1Gi"}}}})
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    if not affinity:
        del spec["affinity"]


#: Features that cannot share a group (a pool's selector and another zone rule fight, etc.).
_EXCLUSIVE = ({"or-terms", "tainted-pool"}, {"affinity", "zone-spread"}, {"affinity", "zonal-pv"},
              {"or-terms", "zonal-pv"})


def generate(count: int = 48, seed: int = 25) -> list[Case]:
    """``count`` cases drawn from ``seed`` (see module docstring)."""
    cases = []
    for index in range(count):
        rng = random.Random(seed * 1000 + index)
        case = Case(name=f"case-{index:02d}", seed=seed * 1000 + index)
        # Each feature is forced once in turn, so every one of them appears in at least count/9 cases.
        forced = FEATURES[index % len(FEATURES)]
        tainted = forced == "tainted-pool" or rng.random() < 0.3
        case.karpenter = [_nodepool("general", False), NODECLASS]
        if tainted:
            case.karpenter.insert(1, _nodepool("batch", True))
        for group in range(rng.randint(2, 4)):
            app = f"g{group}"
            features = {forced} if group == 0 else set()
            while rng.random() < 0.45 and len(features) < 3:
                features.add(rng.choice(FEATURES))
            if "tainted-pool" in features and not tainted:
                features.discard("tainted-pool")
            if any(pair <= features for pair in _EXCLUSIVE):
                features = {forced} if group == 0 else set()
            replicas = rng.randint(1, 3) if {"zonal-pv", "anti-affinity", "host-port"} & features else rng.randint(1, 8)
            cpu, memory = rng.choice(SIZES)
            zone = rng.choice(ZONES)
            for i in range(replicas):
                pod = _pod(f"{app}-{i}", app, cpu, memory)
                for feature in sorted(features):
                    _apply_feature(feature, pod, app, i, rng, zone, case)
                case.pods.append(pod)
            case.features.extend(sorted(features))
        if index % 2 == 1:
            case.daemonsets.append({
                "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "default"},
                "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {
                    "metadata": {"labels": {"app": "agent"}},
                    "spec": {"tolerations": [{"operator": "Exists"}], "terminationGracePeriodSeconds": 0,
                             "containers": [{"name": "agent", "image": "registry.k8s.io/pause:3.10",
                                             "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}}}})
            case.features.append("daemonset")
        cases.append(case)
    return cases


def planned_node(name: str, claim: dict[str, Any], types: dict[str, InstanceType],
                 region: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Node a kubelet registers for a planned NodeClaim (one ``nodeclaims`` entry of a ``simulate -f``
    decision), and its status: the NodeClaim's labels over the instance type's, zone, capacity type, instance type,
    region and hostname; the NodePool's taints plus ``karpenter.sh/unregistered`` and ``node.kubernetes.io/not-ready``
    (a booting node's); capacity and allocatable from our catalog; ``Ready=False``."""
    itype = types[claim["instance_type"]]
    labels = {**{k: str(v) for k, v in itype.labels.items()}, **claim["labels"]}
    labels.update({L.HOSTNAME: name, L.ZONE: claim["zone"], L.CAPACITY_TYPE: claim["capacity_type"],
                   L.INSTANCE_TYPE: claim["instance_type"], "topology.kubernetes.io/region": region})
    taints = [*claim["taints"], {"key": L.UNREGISTERED_TAINT_KEY, "effect": L.UNREGISTERED_TAINT_EFFECT},
              {"key": L.NOT_READY_TAINT_KEY, "effect": "NoSchedule"}]
    allocatable = {k: format_quantity(k, v) for k, v in itype.allocatable().items()}
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "spec": {"providerID": f"aws:///{claim['zone']}/i-{name[-12:]}", "taints": taints}}
    status = {"capacity": allocatable, "allocatable": allocatable,
              "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]}
    return node, status
