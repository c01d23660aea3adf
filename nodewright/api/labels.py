"""Well-known Karpenter v1 labels, annotations, taints, finalizers, tags and condition types.

Every part of nodewright imports these names from here, so they are spelled exactly once and
exactly as Karpenter spells them (source: Karpenter v1 ``pkg/apis/v1`` labels/taints and the AWS
provider's ``pkg/apis/v1`` labels, read from the Karpenter documentation "Well-Known Labels" and
"Disruption" pages). Old v1alpha5/v1beta1 names are kept for conversion only.
"""

from __future__ import annotations

from typing import Final

# --- API groups and versions --------------------------------------------------------------------
GROUP: Final = "karpenter.sh"
AWS_GROUP: Final = "karpenter.k8s.aws"
API_VERSION: Final = "karpenter.sh/v1"
AWS_API_VERSION: Final = "karpenter.k8s.aws/v1"

# --- labels Karpenter sets on nodes and NodeClaims ----------------------------------------------
NODEPOOL: Final = "karpenter.sh/nodepool"
CAPACITY_TYPE: Final = "karpenter.sh/capacity-type"
INITIALIZED: Final = "karpenter.sh/initialized"
REGISTERED: Final = "karpenter.sh/registered"
EC2NODECLASS: Final = "karpenter.k8s.aws/ec2nodeclass"

CAPACITY_TYPE_SPOT: Final = "spot"
CAPACITY_TYPE_ON_DEMAND: Final = "on-demand"
CAPACITY_TYPE_RESERVED: Final = "reserved"

# Kubernetes well-known node labels.
HOSTNAME: Final = "kubernetes.io/hostname"
ARCH: Final = "kubernetes.io/arch"
OS: Final = "kubernetes.io/os"
INSTANCE_TYPE: Final = "node.kubernetes.io/instance-type"
ZONE: Final = "topology.kubernetes.io/zone"
REGION: Final = "topology.kubernetes.io/region"
WINDOWS_BUILD: Final = "node.kubernetes.io/windows-build"
ZONE_ID: Final = "topology.k8s.aws/zone-id"

# Deprecated beta spellings the kubelet still sets; Karpenter normalises them to the GA labels.
NORMALIZED_LABELS: Final[dict[str, str]] = {
    "beta.kubernetes.io/arch": ARCH,
    "beta.kubernetes.io/os": OS,
    "beta.kubernetes.io/instance-type": INSTANCE_TYPE,
    "failure-domain.beta.kubernetes.io/zone": ZONE,
    "failure-domain.beta.kubernetes.io/region": REGION,
}

# AWS provider instance labels (values are strings; numeric ones are integers as text:
# instance-cpu in vCPUs, instance-memory in MiB, bandwidths in Mbps, gpu-memory in MiB).
INSTANCE_HYPERVISOR: Final = "karpenter.k8s.aws/instance-hypervisor"
INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED: Final = "karpenter.k8s.aws/instance-encryption-in-transit-supported"
INSTANCE_CATEGORY: Final = "karpenter.k8s.aws/instance-category"
INSTANCE_FAMILY: Final = "karpenter.k8s.aws/instance-family"
INSTANCE_GENERATION: Final = "karpenter.k8s.aws/instance-generation"
INSTANCE_LOCAL_NVME: Final = "karpenter.k8s.aws/instance-local-nvme"
INSTANCE_SIZE: Final = "karpenter.k8s.aws/instance-size"
INSTANCE_CPU: Final = "karpenter.k8s.aws/instance-cpu"
INSTANCE_CPU_MANUFACTURER: Final = "karpenter.k8s.aws/instance-cpu-manufacturer"
INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ: Final = "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz"
INSTANCE_MEMORY: Final = "karpenter.k8s.aws/instance-memory"
INSTANCE_EBS_BANDWIDTH: Final = "karpenter.k8s.aws/instance-ebs-bandwidth"
INSTANCE_NETWORK_BANDWIDTH: Final = "karpenter.k8s.aws/instance-network-bandwidth"
INSTANCE_GPU_NAME: Final = "karpenter.k8s.aws/instance-gpu-name"
INSTANCE_GPU_MANUFACTURER: Final = "karpenter.k8s.aws/instance-gpu-manufacturer"
INSTANCE_GPU_COUNT: Final = "karpenter.k8s.aws/instance-gpu-count"
INSTANCE_GPU_MEMORY: Final = "karpenter.k8s.aws/instance-gpu-memory"
INSTANCE_ACCELERATOR_NAME: Final = "karpenter.k8s.aws/instance-accelerator-name"
INSTANCE_ACCELERATOR_MANUFACTURER: Final = "karpenter.k8s.aws/instance-accelerator-manufacturer"
INSTANCE_ACCELERATOR_COUNT: Final = "karpenter.k8s.aws/instance-accelerator-count"
CAPACITY_RESERVATION_ID: Final = "karpenter.k8s.aws/capacity-reservation-id"
CAPACITY_RESERVATION_TYPE: Final = "karpenter.k8s.aws/capacity-reservation-type"

# Labels a NodePool's requirements may use (scheduling treats every other key as a custom label).
WELL_KNOWN_LABELS: Final[frozenset[str]] = frozenset(
    {
        NODEPOOL,
        CAPACITY_TYPE,
        ARCH,
        OS,
        INSTANCE_TYPE,
        ZONE,
        REGION,
        WINDOWS_BUILD,
        ZONE_ID,
        EC2NODECLASS,
        INSTANCE_HYPERVISOR,
        INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED,
        INSTANCE_CATEGORY,
        INSTANCE_FAMILY,
        INSTANCE_GENERATION,
        INSTANCE_LOCAL_NVME,
        INSTANCE_SIZE,
        INSTANCE_CPU,
        INSTANCE_CPU_MANUFACTURER,
        INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
        INSTANCE_MEMORY,
        INSTANCE_EBS_BANDWIDTH,
        INSTANCE_NETWORK_BANDWIDTH,
        INSTANCE_GPU_NAME,
        INSTANCE_GPU_MANUFACTURER,
        INSTANCE_GPU_COUNT,
        INSTANCE_GPU_MEMORY,
        INSTANCE_ACCELERATOR_NAME,
        INSTANCE_ACCELERATOR_MANUFACTURER,
        INSTANCE_ACCELERATOR_COUNT,
        CAPACITY_RESERVATION_ID,
    }
    | set(NORMALIZED_LABELS)
)

# Keys no NodePool may put in its requirements or template labels (Karpenter sets them itself).
RESTRICTED_LABELS: Final[frozenset[str]] = frozenset({HOSTNAME, NODEPOOL, EC2NODECLASS})
# Label domains reserved for Karpenter: a custom label under them (or a subdomain) is rejected unless it is well
# known. Karpenter v1.14 restricts karpenter.sh (``pkg/apis/v1/labels.go`` RestrictedLabelDomains) and the AWS
# provider adds karpenter.k8s.aws; kubernetes.io and k8s.io keys are allowed since Karpenter v1.9.
RESTRICTED_LABEL_DOMAINS: Final[frozenset[str]] = frozenset({"karpenter.sh", "karpenter.k8s.aws"})

# --- annotations --------------------------------------------------------------------------------
DO_NOT_DISRUPT: Final = "karpenter.sh/do-not-disrupt"
NODEPOOL_HASH: Final = "karpenter.sh/nodepool-hash"
NODEPOOL_HASH_VERSION: Final = "karpenter.sh/nodepool-hash-version"
EC2NODECLASS_HASH: Final = "karpenter.k8s.aws/ec2nodeclass-hash"
EC2NODECLASS_HASH_VERSION: Final = "karpenter.k8s.aws/ec2nodeclass-hash-version"
NODECLAIM_TERMINATION_TIMESTAMP: Final = "karpenter.sh/nodeclaim-termination-timestamp"
# RFC 3339 time node repair rebooted the NodeClaim's instance (AWS gate RebootForRepair; nodewright's own: no such
# annotation in the Karpenter source available); removed once the Node is healthy again.
NODECLAIM_REPAIR_REBOOTED: Final = "nodewright.io/repair-rebooted-at"
# "true" on a NodeClaim whose minValues MinValuesPolicy=BestEffort relaxed, else "false" (Karpenter v1.14).
NODECLAIM_MIN_VALUES_RELAXED: Final = "karpenter.sh/nodeclaim-min-values-relaxed"
# Karpenter's conversion webhook parks a v1beta1 NodePool's kubelet block here (JSON) when it
# cannot move it onto the EC2NodeClass itself.
V1BETA1_KUBELET_CONVERSION: Final = "compatibility.karpenter.sh/v1beta1-kubelet-conversion"

# --- taints -------------------------------------------------------------------------------------
DISRUPTED_TAINT_KEY: Final = "karpenter.sh/disrupted"
DISRUPTED_TAINT_EFFECT: Final = "NoSchedule"
UNREGISTERED_TAINT_KEY: Final = "karpenter.sh/unregistered"
UNREGISTERED_TAINT_EFFECT: Final = "NoExecute"
NOT_READY_TAINT_KEY: Final = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT_KEY: Final = "node.kubernetes.io/unreachable"
UNINITIALIZED_TAINT_KEY: Final = "node.cloudprovider.kubernetes.io/uninitialized"
# nodewright's readiness hold (NOMINATION_HOLD; controllers/nomination.py): a planned Node registers with it (valued
# with its NodeClaim's name; the pods planned for it tolerate that value alone) and keeps it once its boot taints
# are gone until the pods of its provisioning batch are placed. nodewright's own: no Karpenter key.
NOMINATING_TAINT_KEY: Final = "nodewright.io/nominating"
NOMINATING_TAINT_EFFECT: Final = "NoSchedule"

# --- finalizers ---------------------------------------------------------------------------------
TERMINATION_FINALIZER: Final = "karpenter.sh/termination"
AWS_TERMINATION_FINALIZER: Final = "karpenter.k8s.aws/termination"

# --- EC2 tags Karpenter puts on instances, volumes and launch templates -------------------------
TAG_NODEPOOL: Final = NODEPOOL
TAG_NODECLAIM: Final = "karpenter.sh/nodeclaim"
TAG_EC2NODECLASS: Final = EC2NODECLASS
TAG_CLUSTER_NAME: Final = "eks:eks-cluster-name"
TAG_CLUSTER_PREFIX: Final = "kubernetes.io/cluster/"  # + cluster name, value "owned"
TAG_NAME: Final = "Name"
# Tag keys a user may not set in EC2NodeClass.spec.tags (Karpenter owns them).
RESTRICTED_TAG_KEYS: Final[frozenset[str]] = frozenset(
    {TAG_NODEPOOL, TAG_NODECLAIM, TAG_EC2NODECLASS, TAG_CLUSTER_NAME}
)

# --- status condition types ---------------------------------------------------------------------
CONDITION_READY: Final = "Ready"
CONDITION_LAUNCHED: Final = "Launched"
CONDITION_REGISTERED: Final = "Registered"
CONDITION_INITIALIZED: Final = "Initialized"
CONDITION_DRIFTED: Final = "Drifted"
CONDITION_CONSOLIDATABLE: Final = "Consolidatable"
CONDITION_DISRUPTION_REASON: Final = "DisruptionReason"
CONDITION_INSTANCE_TERMINATING: Final = "InstanceTerminating"
CONDITION_CONSISTENT_STATE_FOUND: Final = "ConsistentStateFound"
CONDITION_NODECLASS_READY: Final = "NodeClassReady"
CONDITION_VALIDATION_SUCCEEDED: Final = "ValidationSucceeded"

# --- disruption reasons (budgets) ---------------------------------------------------------------
REASON_UNDERUTILIZED: Final = "Underutilized"
REASON_EMPTY: Final = "Empty"
REASON_DRIFTED: Final = "Drifted"
DISRUPTION_REASONS: Final = (REASON_UNDERUTILIZED, REASON_EMPTY, REASON_DRIFTED)

# --- old names, accepted on input and mapped by conversion --------------------------------------
V1ALPHA5_PROVISIONER_NAME: Final = "karpenter.sh/provisioner-name"
V1ALPHA5_DO_NOT_EVICT: Final = "karpenter.sh/do-not-evict"
V1ALPHA5_DO_NOT_CONSOLIDATE: Final = "karpenter.sh/do-not-consolidate"
V1BETA1_DISRUPTION_TAINT_KEY: Final = "karpenter.sh/disruption"


def is_restricted_label(key: str) -> str | None:
    """Say why ``key`` may not be set by a NodePool (requirements or template labels).

    Returns a reason sentence, or ``None`` when the key is allowed. Follows Karpenter v1.14 (its
    ``IsRestrictedLabel`` and the NodePool CRD's CEL rules): the hostname, nodepool and ec2nodeclass
    labels are always restricted; other keys under ``karpenter.sh`` or ``karpenter.k8s.aws`` (or a
    subdomain) are allowed only when well known. Keys under ``kubernetes.io`` and ``k8s.io`` (and
    their subdomains) are allowed, as in Karpenter v1.9 and later.
    """
    if key in RESTRICTED_LABELS:
        return f"label {key!r} is restricted: Karpenter sets it itself"
    if key in WELL_KNOWN_LABELS or "/" not in key:
        return None
    domain = key.split("/", 1)[0]
    for restricted in RESTRICTED_LABEL_DOMAINS:
        if domain == restricted or domain.endswith("." + restricted):
            return f"label domain {restricted!r} is restricted (key {key!r} is not a well-known label)"
    return None
