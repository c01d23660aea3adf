"""nodewright.whatif: what would change on the cluster you already run.

- :mod:`~nodewright.whatif.snapshot` -- ``nodewright snapshot``: read a cluster (read-only LISTs through the kube
  adapter) into one ``kind: List`` file; :func:`~nodewright.whatif.snapshot.read_snapshot` reads it back (also
  ``kubectl get ... -o yaml`` output);
- :mod:`~nodewright.whatif.dryrun` -- ``nodewright simulate --snapshot``: the provisioner's decision for the pending
  pods and the disruption controller's methods, on an in-memory copy of the snapshot (the controllers' own code);
- :mod:`~nodewright.whatif.explain` -- ``nodewright explain pod|node|nodepool``;
- :mod:`~nodewright.whatif.diff` -- ``nodewright diff --base DIR --head DIR``: two revisions of NodePool /
  EC2NodeClass manifests evaluated on a snapshot, a cost and churn gate for pull requests.

Details: docs/whatif.md.
"""
