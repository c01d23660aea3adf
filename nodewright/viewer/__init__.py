"""``nodewright nodes``: a terminal viewer of a cluster's nodes, in the spirit of eks-node-viewer.

* :mod:`nodewright.viewer.view`: the pure part, one :class:`~nodewright.state.cluster.ClusterState` -> a
  :class:`~nodewright.viewer.view.ClusterView` (pending pods, NodePools with totals and limits, one row per node
  with requests vs allocatable and list/effective $/h).
* :mod:`nodewright.viewer.render`: that view as a ``rich`` table (a terminal) or plain text (``--once``, a pipe).
* :mod:`nodewright.viewer.source`: where the objects come from: a snapshot file (a ``kind: List``) or a live
  cluster through the informers of :mod:`nodewright.kube.informer` (list once, then watch).
* :mod:`nodewright.viewer.app`: the command's loop (redraw on watch events, page with the keyboard).
"""
