"""RBAC replay: every Kubernetes API call the controller sends, judged against the chart's rendered RBAC rules."""
