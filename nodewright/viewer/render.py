"""A :class:`~nodewright.viewer.view.ClusterView` as ``rich`` renderables: a summary line, the pending pods, then one
table of NodePool rows (bold, with totals and limits) each followed by its nodes' rows.

On a terminal the bars are Unicode blocks in colour; as plain text (``--once``, a pipe) they are ASCII
(``[####------]``) and nothing but text is written. :func:`render_lines` returns the rows of one screen page so
1,000 nodes stay readable: the summary and pool totals are always there, the node rows page.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from nodewright.quantities import CPU, MEMORY, format_quantity
from nodewright.viewer.view import UNMANAGED, ClusterView, NodeRow, PoolRow

#: Pending pods listed before "... N more".
PENDING_SHOWN = 8
BAR_WIDTH = 10


@dataclass(frozen=True)
class Style:
    """How bars and colours are drawn: ``plain`` -> ASCII, no styles."""

    plain: bool = False

    def bar(self, used: int, total: int) -> Text:
        """``used`` of ``total`` as a bar of :data:`BAR_WIDTH` cells and a percentage."""
        frac = used / total if total > 0 else 0.0
        cells = min(BAR_WIDTH, int(frac * BAR_WIDTH + 0.5))  # half up, not to even
        percent = f"{frac * 100:4.0f}%" if total > 0 else "   -"
        if self.plain:
            return Text(f"[{'#' * cells}{'-' * (BAR_WIDTH - cells)}] {percent}")
        colour = "green" if frac < 0.7 else "yellow" if frac < 0.9 else "red"
        text = Text()
        text.append("█" * cells, style=colour)
        text.append("░" * (BAR_WIDTH - cells), style="grey50")
        text.append(f" {percent}")
        return text

    def style(self, name: str) -> str:
        return "" if self.plain else name


def age(created: float | None, now: float) -> str:
    """kubectl's short age: ``45s``, ``12m``, ``5h``, ``3d`` (``-`` when unknown)."""
    if created is None:
        return "-"
    seconds = max(0, int(now - created))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def cores(millicores: int) -> str:
    """``1500`` -> ``1.5`` (cores, at most 2 decimals)."""
    return f"{millicores / 1000:.2f}".rstrip("0").rstrip(".")


def memory(value: int) -> str:
    """Bytes as a Kubernetes quantity (:func:`nodewright.quantities.format_quantity`): ``7.5Gi``-like."""
    if value >= 1024 ** 3:
        return f"{value / 1024 ** 3:.1f}".removesuffix(".0") + "Gi"
    return format_quantity(MEMORY, value)


def price(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _counted(count: int, noun: str) -> str:
    """``"1 node"``, ``"2 nodes"`` (the singular for one, as the pool titles' ``(1 node)``)."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def summary(view: ClusterView, style: Style) -> Text:
    """The first line: counts, $/h totals and what the view shows."""
    nodes = view.nodes
    text = Text("nodewright nodes", style=style.style("bold"))
    pools = sum(1 for p in view.pools if p.name != UNMANAGED)
    text.append(f"  {_counted(len(nodes), 'node')}  {_counted(pools, 'NodePool')}  "
                f"{_counted(len(view.pending), 'pending pod')}  ${view.list_price:.4f}/h list")
    if view.effective_price is not None and any(p.effective_price is not None for p in view.pools):
        text.append(f"  ${view.effective_price:.4f}/h effective")
    extras = [f"sort {view.sort}"]
    if view.selector:
        extras.append(f"selector {view.selector} ({_counted(view.hidden_nodes, 'node')} hidden)")
    text.append("  (" + ", ".join(extras) + ")", style=style.style("grey50"))
    return text


def pending_table(view: ClusterView, style: Style) -> RenderableType:
    """Pending pods, oldest first, with their one-line reason (at most :data:`PENDING_SHOWN`)."""
    table = Table(box=None, show_edge=False, pad_edge=False, title_justify="left", expand=False,
                  title=Text(f"Pending pods ({len(view.pending)})", style=style.style("bold red")))
    for column in ("POD", "AGE", "CPU", "MEMORY", "REASON"):
        wide = column == "REASON" and not style.plain  # plain text keeps the whole reason
        table.add_column(column, no_wrap=True, overflow="ellipsis", max_width=100 if wide else None)
    for row in view.pending[:PENDING_SHOWN]:
        table.add_row(row.key, age(row.created, view.now), cores(row.cpu), memory(row.memory), row.reason)
    if len(view.pending) > PENDING_SHOWN:
        table.add_row(f"... {len(view.pending) - PENDING_SHOWN} more", "", "", "", "")
    return table


def _limits(pool: PoolRow) -> str:
    if not pool.limits:
        return "" if pool.name == UNMANAGED else "no limits"
    parts = []
    for resource, limit in sorted(pool.limits.items()):
        used = pool.usage.get(resource, 0)
        if resource == CPU:
            parts.append(f"cpu {cores(used)}/{cores(limit)}")
        elif resource == MEMORY:
            parts.append(f"memory {memory(used)}/{memory(limit)}")
        else:
            parts.append(f"{resource} {used}/{limit}")
    return "limits " + ", ".join(parts)


def _columns(view: ClusterView) -> list[str]:
    columns = ["NODE", "TYPE", "CAPACITY", "ZONE", "AGE", "CPU", "MEMORY", "PODS", "LIST $/h"]
    if any(p.effective_price is not None for p in view.pools):
        columns.append("EFF $/h")
    return [*columns, "STATUS"]


def _node_cells(node: NodeRow, view: ClusterView, style: Style, effective: bool) -> list[RenderableType]:
    cells: list[RenderableType] = [
        f"  {node.name}", node.instance_type or "-", node.capacity_type or "-", node.zone or "-",
        age(node.created, view.now), style.bar(node.cpu_requested, node.cpu_allocatable),
        style.bar(node.memory_requested, node.memory_allocatable), f"{node.pods}/{node.pods_allocatable}",
        price(node.list_price)]
    if effective:
        cells.append(price(node.effective_price))
    cells.append(Text(node.status, style=style.style("green" if node.status == "Ready" else "red")))
    return cells


def _pool_cells(pool: PoolRow, style: Style, effective: bool) -> list[RenderableType]:
    count = len(pool.nodes)
    title = Text(f"{pool.name} ({_counted(count, 'node')})", style=style.style("bold cyan"))
    cells: list[RenderableType] = [
        title, "", "", "", "", style.bar(pool.cpu_requested, pool.cpu_allocatable),
        style.bar(pool.memory_requested, pool.memory_allocatable), str(pool.pods), f"{pool.list_price:.4f}"]
    if effective:
        cells.append(price(pool.effective_price))
    cells.append(_limits(pool))
    return cells


def body_rows(view: ClusterView) -> list[tuple[PoolRow, NodeRow | None]]:
    """Every table row in order: each pool's totals ``(pool, None)``, then its nodes ``(pool, node)``."""
    rows: list[tuple[PoolRow, NodeRow | None]] = []
    for pool in view.pools:
        rows.append((pool, None))
        rows.extend((pool, node) for node in pool.nodes)
    return rows


def render(view: ClusterView, style: Style, height: int | None = None, page: int = 0) -> tuple[RenderableType, int]:
    """The screen: summary, pending pods, the table. With ``height`` (terminal lines), only one page of node rows
    fits; pool rows are always kept. Returns the renderable and the number of pages."""
    parts: list[RenderableType] = [summary(view, style)]
    if view.pending:
        parts.append(pending_table(view, style))
    rows = body_rows(view)
    pages, shown = 1, rows
    if height is not None:
        used = 3 + (min(len(view.pending), PENDING_SHOWN) + 2 + (len(view.pending) > PENDING_SHOWN)
                    if view.pending else 0)
        room = max(1, height - used - len(view.pools) - 1)
        nodes = [i for i, (_, node) in enumerate(rows) if node is not None]
        pages = max(1, -(-len(nodes) // room))
        page = min(max(page, 0), pages - 1)
        keep = set(nodes[page * room:(page + 1) * room])
        shown = [row for i, row in enumerate(rows) if row[1] is None or i in keep]  # cells only for these
    table = Table(box=None, show_edge=False, pad_edge=False, expand=False, header_style=style.style("bold"))
    for column in _columns(view):
        table.add_column(column, no_wrap=True, overflow="ellipsis",
                         justify="right" if column in ("PODS", "LIST $/h", "EFF $/h") else "left")
    effective = "EFF $/h" in _columns(view)
    for pool, node in shown:
        if node is None:
            table.add_row(*_pool_cells(pool, style, effective), style=style.style("on grey11"))
        else:
            table.add_row(*_node_cells(node, view, style, effective))
    parts.append(table)
    if pages > 1:
        parts.append(Text(f"page {page + 1}/{pages}  (n/p or arrows: page, q: quit)", style=style.style("grey50")))
    return Group(*parts), pages
