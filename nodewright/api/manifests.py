"""Reading manifests: multi-document YAML to dicts, and dicts to validated v1 models.

Every function raises :class:`nodewright.errors.NodewrightValidationError` on invalid input,
with a path that starts at the document (``spec.template...``) or, for YAML errors, names the
document index (``documents[2]``). Documents are counted as YAML counts them: comments before the
first ``---`` do not make a document of their own. One error carries every problem found
(``err.problems``): each invalid field of a document, each invalid document of the input.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from nodewright.api.base import parse_model
from nodewright.api.ec2nodeclass import EC2NodeClass
from nodewright.api.nodeclaim import NodeClaim
from nodewright.api.nodeoverlay import NodeOverlay
from nodewright.api.nodepool import NodePool
from nodewright.errors import NodewrightValidationError, combine, prefixed

# libyaml's loader when PyYAML was built with it (about 10x faster), else the pure-Python one.
_BASE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _SafeLoader(_BASE_LOADER):  # type: ignore[misc,valid-type]
    """The safe loader that refuses a mapping with the same key twice, as kubectl does ("mapping key ... already
    defined"); YAML itself would keep the last one silently (two manifests pasted together without ``---``)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: the base constructor reports it
                continue
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"mapping key {key!r} already defined (the later value would silently win)", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]


#: The one YAML loader for what users write (manifests, PricingPolicy, SCHEDULER_CONFIG): safe, fast, no duplicates.
SAFE_LOADER: type[yaml.SafeLoader] = _SafeLoader

_KINDS: dict[str, tuple[str, type[NodePool] | type[NodeClaim] | type[EC2NodeClass] | type[NodeOverlay]]] = {
    "NodePool": ("karpenter.sh/v1", NodePool),
    "NodeOverlay": ("karpenter.sh/v1alpha1", NodeOverlay),
    "NodeClaim": ("karpenter.sh/v1", NodeClaim),
    "EC2NodeClass": ("karpenter.k8s.aws/v1", EC2NodeClass),
}


def _is_blank(lines: list[str]) -> bool:
    return all(not line.strip() or line.lstrip().startswith("#") for line in lines)


def _split_documents(text: str) -> list[str]:
    # Split on document markers ourselves so a YAML error can name the document it is in. Lines before the
    # first marker that are only comments (a license header, `# Source: chart/templates/x.yaml`) are not a
    # document: YAML (and kubectl) count `# c\n---\nkind: A` as one document.
    docs: list[list[str]] = [[]]
    marked = False
    for line in text.splitlines(keepends=True):
        if line.startswith("---") and (len(line) == 3 or line[3] in " \t\r\n"):
            if not marked and _is_blank(docs[0]):
                docs[0] = [line[3:]] if line[3:].strip() else []
            else:
                docs.append([line[3:]] if line[3:].strip() else [])
            marked = True
        elif line.rstrip() == "...":
            continue
        else:
            docs[-1].append(line)
    return ["".join(d) for d in docs]


def load_manifests(text: str) -> list[dict[str, Any]]:
    """Parse multi-document YAML into a list of mappings, skipping empty documents.

    Returns:
        One dict per non-empty document, in file order.

    Raises:
        NodewrightValidationError: path ``documents[i]`` (0-based index among all documents,
        empty ones included) when a document is not valid YAML or not a mapping.
    """
    out: list[dict[str, Any]] = []
    for index, chunk in enumerate(_split_documents(text)):
        try:
            doc = yaml.load(chunk, Loader=SAFE_LOADER)  # safe: SafeLoader or CSafeLoader
        except RecursionError:
            raise NodewrightValidationError(f"documents[{index}]", "invalid YAML: nested too deeply") from None
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f" at line {mark.line + 1} of the document" if mark is not None else ""
            problem = getattr(err, "problem", None) or str(err).splitlines()[0]
            raise NodewrightValidationError(f"documents[{index}]", f"invalid YAML{where}: {problem}") from None
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise NodewrightValidationError(
                f"documents[{index}]", f"expected a Kubernetes object (a mapping), got {type(doc).__name__}"
            )
        out.append(doc)
    return out


def _parse(doc: Any, kind: str) -> Any:
    api_version, model = _KINDS[kind]
    if not isinstance(doc, dict):
        raise NodewrightValidationError("", f"expected a {kind} mapping, got {type(doc).__name__}")
    if doc.get("kind") != kind:
        raise NodewrightValidationError("kind", f"expected {kind!r}, got {doc.get('kind')!r}")
    if doc.get("apiVersion") != api_version:
        hint = " (run 'nodewright convert' or use convert_documents first)" if doc.get("apiVersion") else ""
        raise NodewrightValidationError(
            "apiVersion", f"expected {api_version!r}, got {doc.get('apiVersion')!r}{hint}"
        )
    return parse_model(model, doc)


def parse_nodepool(doc: dict[str, Any]) -> NodePool:
    """Validate a ``karpenter.sh/v1`` NodePool manifest. Older versions must be converted first
    (:func:`nodewright.api.convert_documents`).

    Raises:
        NodewrightValidationError: first invalid field, e.g.
        ``spec.template.spec.requirements[2].values: Gt needs one integer, got 'abc'``.
    """
    result: NodePool = _parse(doc, "NodePool")
    return result


def parse_nodeclaim(doc: dict[str, Any]) -> NodeClaim:
    """Validate a ``karpenter.sh/v1`` NodeClaim manifest.

    Raises:
        NodewrightValidationError: first invalid field.
    """
    result: NodeClaim = _parse(doc, "NodeClaim")
    return result


def parse_ec2nodeclass(doc: dict[str, Any]) -> EC2NodeClass:
    """Validate a ``karpenter.k8s.aws/v1`` EC2NodeClass manifest.

    Raises:
        NodewrightValidationError: first invalid field.
    """
    result: EC2NodeClass = _parse(doc, "EC2NodeClass")
    return result


def parse_nodeoverlay(doc: dict[str, Any]) -> NodeOverlay:
    """Validate a ``karpenter.sh/v1alpha1`` NodeOverlay manifest (:mod:`nodewright.api.nodeoverlay`).

    Raises:
        NodewrightValidationError: every invalid field, e.g. ``spec.priceAdjustment: '10%' is not a price
        adjustment: ...``.
    """
    result: NodeOverlay = _parse(doc, "NodeOverlay")
    return result


@dataclass
class KarpenterObjects:
    """Documents sorted by kind after conversion to v1: parsed Karpenter objects plus every
    other document (pods, Deployments, ...) as plain dicts, in input order."""

    nodepools: list[NodePool] = field(default_factory=list)
    ec2nodeclasses: list[EC2NodeClass] = field(default_factory=list)
    nodeclaims: list[NodeClaim] = field(default_factory=list)
    nodeoverlays: list[NodeOverlay] = field(default_factory=list)
    others: list[dict[str, Any]] = field(default_factory=list)
    #: ``documents[i]`` index of each entry of ``others`` (for errors about them).
    other_indices: list[int] = field(default_factory=list)


def parse_documents(docs: list[dict[str, Any]],
                    errors: list[NodewrightValidationError] | None = None) -> KarpenterObjects:
    """Convert ``docs`` to v1 (any supported version) and parse the Karpenter kinds.

    With ``errors``, invalid documents are appended to it (and left out of the result) instead of raised, so a
    caller can report them with the problems of other kinds in one run.

    Raises:
        NodewrightValidationError: path prefixed with ``documents[i].`` (index in ``docs``); every invalid
        document is reported (``.problems``), not only the first.
    """
    from nodewright.api.conversion import convert_documents

    result = KarpenterObjects()
    collect = errors is not None
    errors = errors if errors is not None else []
    try:
        converted = convert_documents(docs)
    except NodewrightValidationError as err:
        if not collect:
            raise
        errors.append(err)
        # The other kinds are still read (and checked by the caller): Karpenter documents are left out.
        converted = [d if str(d.get("apiVersion", "")).split("/")[0] not in ("karpenter.sh", "karpenter.k8s.aws")
                     else {} for d in docs]
    for index, doc in enumerate(converted):
        if not doc:
            continue
        try:
            group = str(doc.get("apiVersion", "")).split("/")[0]
            kind = doc.get("kind")
            if group == "karpenter.sh" and kind == "NodePool":
                result.nodepools.append(parse_nodepool(doc))
            elif group == "karpenter.sh" and kind == "NodeClaim":
                result.nodeclaims.append(parse_nodeclaim(doc))
            elif group == "karpenter.sh" and kind == "NodeOverlay":
                result.nodeoverlays.append(parse_nodeoverlay(doc))
            elif group == "karpenter.k8s.aws" and kind == "EC2NodeClass":
                result.ec2nodeclasses.append(parse_ec2nodeclass(doc))
            else:
                result.others.append(doc)
                result.other_indices.append(index)
        except NodewrightValidationError as err:
            named = kind == "NodeOverlay" and isinstance(doc.get("metadata"), dict) and doc["metadata"].get("name")
            errors.append(prefixed(err, f"documents[{index}]", f" (in NodeOverlay {named!r})" if named else ""))
    if errors and not collect:
        raise combine(errors)
    return result


@dataclass
class ManifestFiles:
    """Documents read from several files, with where each came from.

    ``sources[i]`` is ``"<file>#documents[j]"`` for ``docs[i]`` (``j`` counts every document of
    that file, empty ones included), so errors about ``documents[i]`` can name the file.
    """

    docs: list[dict[str, Any]]
    sources: list[str]

    def locate(self, err: NodewrightValidationError) -> NodewrightValidationError:
        """Rewrite each problem whose path starts with ``documents[i]`` to name the file instead."""
        return err.rewrite(lambda path, reason: (self.locate_path(path), reason))

    def subset(self, indices: list[int]) -> ManifestFiles:
        """The documents at ``indices`` (in that order), still naming their files."""
        return ManifestFiles([self.docs[i] for i in indices], [self.sources[i] for i in indices])

    def locate_text(self, text: str) -> str:
        """Every ``documents[i]`` reference inside ``text`` (a reason naming another document) -> ``<file>#documents[j]``."""
        def located(match: re.Match[str]) -> str:
            index = int(match.group(1))
            return self.sources[index] if index < len(self.sources) else match.group(0)

        return re.sub(r"(?<![#\w])documents\[(\d+)\]", located, text)

    def locate_path(self, path: str) -> str:
        """``documents[i].spec.x`` -> ``<file>#documents[j].spec.x``; other paths unchanged."""
        match = re.match(r"^documents\[(\d+)\]", path)
        if not match or int(match.group(1)) >= len(self.sources):
            return path
        return self.sources[int(match.group(1))] + path[match.end() :]


def load_manifest_files(paths: list[str], errors: list[NodewrightValidationError] | None = None) -> ManifestFiles:
    """Read and parse multi-document YAML files (``"-"`` is standard input), in order.

    With ``errors``, unreadable files and invalid documents are appended to it (and left out) instead of raised,
    so a caller can report them with the other documents' problems in one run.

    Raises:
        NodewrightValidationError: path ``<file>`` when a file cannot be read, or
        ``<file>#documents[j]`` when a document is not valid YAML or not a mapping.
    """
    docs: list[dict[str, Any]] = []
    sources: list[str] = []
    collect = errors is not None
    errors = errors if errors is not None else []
    for path in paths:
        try:
            text = read_text(path)
        except NodewrightValidationError as err:
            if not collect:
                raise
            errors.append(err)
            continue
        for index, chunk in enumerate(_split_documents(text)):
            try:
                loaded = load_manifests(chunk)
            except NodewrightValidationError as err:
                errors.append(NodewrightValidationError(f"{'<stdin>' if path == '-' else path}#documents[{index}]",
                                                        err.reason))
                continue
            docs.extend(loaded)
            sources.extend(f"{'<stdin>' if path == '-' else path}#documents[{index}]" for _ in loaded)
    if errors and not collect:
        raise combine(errors)
    return ManifestFiles(docs, sources)


def read_text(path: str) -> str:
    """The UTF-8 text of file ``path`` (``"-"``: standard input, read as bytes and decoded strictly).

    Raises:
        NodewrightValidationError: path ``<file>`` when it cannot be read or is not UTF-8 text.
    """
    name = "<stdin>" if path == "-" else path
    try:
        if path == "-":
            stream = getattr(sys.stdin, "buffer", None)
            raw = stream.read() if stream is not None else sys.stdin.read().encode("utf-8", "surrogateescape")
        else:
            raw = Path(path).read_bytes()
    except OSError as err:
        raise NodewrightValidationError(name, f"cannot read file: {err.strerror or err}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise NodewrightValidationError(
            name, f"not UTF-8 text (byte 0x{raw[err.start]:02x} at offset {err.start})"
        ) from None
