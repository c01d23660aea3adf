"""CustomResourceDefinitions generated from the API models (one source of truth).

Each CRD's OpenAPI v3 schema comes from the pydantic model's JSON schema, rewritten into a
Kubernetes *structural* schema: references inlined, ``Optional`` unions flattened, titles and
``additionalProperties: false`` dropped, quantities as ``x-kubernetes-int-or-string``, map-key
enums turned into CEL rules, and the models' CEL rules (``x-kubernetes-validations``) kept.
Printer columns follow Karpenter's (``kubectl get nodepools`` shows NODECLASS, NODES, READY,
AGE; ``kubectl get nodeclaims`` TYPE, CAPACITY, ZONE, NODE, READY, AGE).

The generated files live in ``helm/nodewright/crds/`` (``make crds`` rewrites them); a unit test
fails when they drift from the models.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from nodewright.api.capacitybuffer import GROUP as CB_GROUP
from nodewright.api.capacitybuffer import VERSION as CB_VERSION
from nodewright.api.capacitybuffer import CapacityBufferSpec, CapacityBufferStatus
from nodewright.api.ec2nodeclass import EC2NodeClassSpec, EC2NodeClassStatus
from nodewright.api.nodeclaim import NodeClaimSpec, NodeClaimStatus
from nodewright.api.nodeoverlay import NodeOverlaySpec, NodeOverlayStatus
from nodewright.api.nodepool import NodePoolSpec, NodePoolStatus

_READY = '.status.conditions[?(@.type=="Ready")].status'
_AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


@dataclass(frozen=True)
class CRDSpec:
    """What a CRD is made of: names, the spec/status models, and printer columns."""

    group: str
    kind: str
    plural: str
    spec_model: type[BaseModel]
    status_model: type[BaseModel]
    printer_columns: tuple[dict[str, Any], ...]
    short_names: tuple[str, ...] = ()
    description: str = ""
    #: Served/stored version, ``scope`` and ``categories`` (Karpenter's kinds: v1, Cluster, karpenter).
    version: str = "v1"
    scope: str = "Cluster"
    categories: tuple[str, ...] = ("karpenter",)

    @property
    def name(self) -> str:
        """``<plural>.<group>``, the CRD's object name."""
        return f"{self.plural}.{self.group}"

    @property
    def filename(self) -> str:
        """File name in Karpenter's convention, ``<group>_<plural>.yaml``."""
        return f"{self.group}_{self.plural}.yaml"


CRD_SPECS: tuple[CRDSpec, ...] = (
    CRDSpec(
        group="karpenter.sh",
        kind="NodePool",
        plural="nodepools",
        spec_model=NodePoolSpec,
        status_model=NodePoolStatus,
        description="NodePool is the Schema for the NodePools API",
        printer_columns=(
            {"name": "NodeClass", "type": "string", "jsonPath": ".spec.template.spec.nodeClassRef.name"},
            {"name": "Nodes", "type": "string", "jsonPath": ".status.resources.nodes"},
            {"name": "Ready", "type": "string", "jsonPath": _READY},
            _AGE,
            {"name": "Weight", "type": "integer", "jsonPath": ".spec.weight", "priority": 1},
            {"name": "CPU", "type": "string", "jsonPath": ".status.resources.cpu", "priority": 1},
            {"name": "Memory", "type": "string", "jsonPath": ".status.resources.memory", "priority": 1},
            # nodewright: the packing target in effect (nodewright.io/target-utilization; "1" = pack fully).
            {"name": "Target", "type": "string", "jsonPath": ".status.targetUtilization", "priority": 1},
        ),
    ),
    CRDSpec(
        group="karpenter.sh",
        kind="NodeClaim",
        plural="nodeclaims",
        spec_model=NodeClaimSpec,
        status_model=NodeClaimStatus,
        description="NodeClaim is the Schema for the NodeClaims API",
        printer_columns=(
            {"name": "Type", "type": "string", "jsonPath": ".metadata.labels.node\\.kubernetes\\.io/instance-type"},
            {"name": "Capacity", "type": "string", "jsonPath": ".metadata.labels.karpenter\\.sh/capacity-type"},
            {"name": "Zone", "type": "string", "jsonPath": ".metadata.labels.topology\\.kubernetes\\.io/zone"},
            {"name": "Node", "type": "string", "jsonPath": ".status.nodeName"},
            {"name": "Ready", "type": "string", "jsonPath": _READY},
            _AGE,
            {"name": "ImageID", "type": "string", "jsonPath": ".status.imageID", "priority": 1},
            {"name": "ID", "type": "string", "jsonPath": ".status.providerID", "priority": 1},
            {"name": "NodePool", "type": "string", "jsonPath": ".metadata.labels.karpenter\\.sh/nodepool", "priority": 1},
            {"name": "NodeClass", "type": "string", "jsonPath": ".spec.nodeClassRef.name", "priority": 1},
            {"name": "Drifted", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Drifted")].status',
             "priority": 1},
        ),
    ),
    CRDSpec(
        group="karpenter.k8s.aws",
        kind="EC2NodeClass",
        plural="ec2nodeclasses",
        spec_model=EC2NodeClassSpec,
        status_model=EC2NodeClassStatus,
        short_names=("ec2nc", "ec2ncs"),
        description="EC2NodeClass is the Schema for the EC2NodeClass API",
        printer_columns=(
            {"name": "Ready", "type": "string", "jsonPath": _READY},
            _AGE,
            {"name": "Role", "type": "string", "jsonPath": ".spec.role", "priority": 1},
        ),
    ),
    # SIG Autoscaling's CapacityBuffer, which Karpenter's chart ships (charts/karpenter/crds) for its
    # CapacityBuffer gate (nodewright/controllers/buffer.py).
    CRDSpec(
        group=CB_GROUP,
        kind="CapacityBuffer",
        plural="capacitybuffers",
        spec_model=CapacityBufferSpec,
        status_model=CapacityBufferStatus,
        short_names=("cb",),
        description="CapacityBuffer is the configuration that an autoscaler can use to provision buffer capacity "
                    "within a cluster.",
        version=CB_VERSION,
        scope="Namespaced",
        categories=("autoscaling",),
        printer_columns=(
            {"name": "Strategy", "type": "string", "jsonPath": ".spec.provisioningStrategy"},
            {"name": "PodTemplate", "type": "string", "jsonPath": ".status.podTemplateRef.name"},
            {"name": "Replicas", "type": "integer", "jsonPath": ".status.replicas"},
            {"name": "ConditionsType", "type": "string", "jsonPath": ".status.conditions[*].type"},
            {"name": "ConditionsStatus", "type": "string", "jsonPath": ".status.conditions[*].status"},
            {"name": "ConditionsReason", "type": "string", "jsonPath": ".status.conditions[*].reason"},
            _AGE,
        ),
    ),
    CRDSpec(
        group="karpenter.sh",
        kind="NodeOverlay",
        plural="nodeoverlays",
        version="v1alpha1",
        spec_model=NodeOverlaySpec,
        status_model=NodeOverlayStatus,
        short_names=("overlays",),
        description="NodeOverlay is the Schema for the NodeOverlays API (price and extended-resource overrides "
                    "of the instance types its requirements select; feature gate NodeOverlay)",
        printer_columns=(
            {"name": "Ready", "type": "string", "jsonPath": _READY},
            _AGE,
            {"name": "Weight", "type": "integer", "jsonPath": ".spec.weight", "priority": 1},
        ),
    ),
)

# JSON-schema keywords a structural schema cannot carry (or that only add noise).
_DROP = frozenset({"title", "$defs", "discriminator"})


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_inline(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = copy.deepcopy(defs[node["$ref"].rsplit("/", 1)[-1]])
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _inline(merged, defs)
    return {key: _inline(value, defs) for key, value in node.items() if key not in _DROP}


def _structural(node: Any) -> Any:
    """Rewrite an inlined JSON schema node into a Kubernetes structural schema node."""
    if isinstance(node, list):
        return [_structural(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = dict(node)
    options = node.get("anyOf")
    if options and not node.get("x-kubernetes-int-or-string"):
        kept = [o for o in options if o.get("type") != "null"]
        if len(kept) == 1:
            node.pop("anyOf")
            # Outer keywords (description, default, extras) win over the inner ones.
            node = {**kept[0], **node}
    if node.get("default", 0) is None:
        node.pop("default")
    if node.get("additionalProperties") is False:
        node.pop("additionalProperties")
    if node.get("additionalProperties") is True:
        node.pop("additionalProperties")
        node["x-kubernetes-preserve-unknown-fields"] = True
    if node.get("type") == "object" and "properties" not in node and "additionalProperties" not in node:
        node["x-kubernetes-preserve-unknown-fields"] = True
    names = node.pop("propertyNames", None)
    if names and "enum" in names:
        allowed = ", ".join(f"'{v}'" for v in names["enum"])
        node.setdefault("x-kubernetes-validations", []).append(
            {"message": f"keys must be one of [{allowed}]", "rule": f"self.all(x, x in [{allowed}])"}
        )
    if "const" in node:
        node["enum"] = [node.pop("const")]
    if "description" in node:
        node["description"] = " ".join(str(node["description"]).replace("``", "").split())
    return {key: _structural(value) for key, value in node.items()}


def model_schema(model: type[BaseModel]) -> dict[str, Any]:
    """Structural OpenAPI v3 schema of ``model`` (camelCase property names)."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    schema: dict[str, Any] = _structural(_inline(raw, raw.get("$defs", {})))
    return schema


def generate_crd(spec: CRDSpec) -> dict[str, Any]:
    """The CustomResourceDefinition (``apiextensions.k8s.io/v1``) for one kind."""
    status = model_schema(spec.status_model)
    status["x-kubernetes-preserve-unknown-fields"] = True
    schema = {
        "description": spec.description,
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": model_schema(spec.spec_model),
            "status": status,
        },
        "required": ["spec"],
    }
    names: dict[str, Any] = {
        "categories": list(spec.categories),
        "kind": spec.kind,
        "listKind": f"{spec.kind}List",
        "plural": spec.plural,
    }
    if spec.short_names:
        names["shortNames"] = list(spec.short_names)
    names["singular"] = spec.kind.lower()
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": spec.name, "labels": {"app.kubernetes.io/part-of": "nodewright"}},
        "spec": {
            "group": spec.group,
            "names": names,
            "scope": spec.scope,
            "versions": [
                {
                    "name": spec.version,
                    "served": True,
                    "storage": True,
                    "additionalPrinterColumns": [dict(c) for c in spec.printer_columns],
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {"status": {}},
                }
            ],
        },
    }


def generate_crds() -> list[dict[str, Any]]:
    """Every CRD: NodePool, NodeClaim, EC2NodeClass, NodeOverlay and CapacityBuffer."""
    return [generate_crd(spec) for spec in CRD_SPECS]


_HEADER = "# Generated by `nodewright crds` from nodewright/api (do not edit; run `make crds`).\n"


def render_crd(crd: dict[str, Any]) -> str:
    """YAML text of one CRD, stable across runs (fixed key order, no line wrapping)."""
    return _HEADER + yaml.safe_dump(crd, sort_keys=False, width=10_000, allow_unicode=True)


def render_crds() -> str:
    """All CRDs as one multi-document YAML stream (what ``nodewright crds`` prints)."""
    return "---\n".join(render_crd(crd) for crd in generate_crds())


def write_crds(output_dir: str | Path) -> list[Path]:
    """Write one file per CRD into ``output_dir`` (created if missing); return the paths."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for spec, crd in zip(CRD_SPECS, generate_crds(), strict=True):
        path = out / spec.filename
        path.write_text(render_crd(crd), encoding="utf-8")
        paths.append(path)
    return paths
