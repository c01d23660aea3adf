"""nodewright.kube."""
