"""nodewright: a Karpenter-compatible node autoscaler for Amazon EKS."""

__version__ = "0.1.0"
#: The Karpenter release nodewright targets (its v1 API: NodePool, NodeClaim, EC2NodeClass; settings, gates and
#: metrics). `nodewright --version` prints it and snapshots record it. Behaviour whose v1.15.1 source was not
#: available follows Karpenter main of 2026-08-20 (docs/karpenter-compatibility.md says where).
KARPENTER_VERSION = "v1.15.1"
