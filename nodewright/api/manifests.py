"""Reading manifests: multi-document YAML to dicts, and dicts to validated v1 models.

Every function raises :class:`nodewright.errors.NodewrightValidationError` on invalid input,
with a path that starts at the document (``spec.template...``) or, for YAML errors, names the
document index (``documents[2]``).
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
from nodewright.api.nodepool import NodePool
from nodewright.errors import NodewrightValidationError

# libyaml's loader when PyYAML was built with it (about 10x faster), else the pure-Python one.
_SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_KINDS: dict[str, tuple[str, type[NodePool] | type[NodeClaim] | type[EC2NodeClass]]] = {
    "NodePool": ("karpenter.sh/v1", NodePool),
    "NodeClaim": ("karpenter.sh/v1", NodeClaim),
    "EC2NodeClass": ("karpenter.k8s.aws/v1", EC2NodeClass),
}


def _split_documents(text: str) -> list[str]:
    # Split on document markers ourselves so a YAML error can name the document it is in.
    docs: list[list[str]] = [[]]
    for line in text.splitlines(keepends=True):
        if line.startswith("---") and (len(line) == 3 or line[3] in " \t\r\n"):
            docs.append([line[3:]] if line[3:].strip() else [])
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
            doc = yaml.load(chunk, Loader=_SAFE_LOADER)  # safe: SafeLoader or CSafeLoader
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


@dataclass
class KarpenterObjects:
    """Documents sorted by kind after conversion to v1: parsed Karpenter objects plus every
    other document (pods, Deployments, ...) as plain dicts, in input order."""

    nodepools: list[NodePool] = field(default_factory=list)
    ec2nodeclasses: list[EC2NodeClass] = field(default_factory=list)
    nodeclaims: list[NodeClaim] = field(default_factory=list)
    others: list[dict[str, Any]] = field(default_factory=list)


def parse_documents(docs: list[dict[str, Any]]) -> KarpenterObjects:
    """Convert ``docs`` to v1 (any supported version) and parse the Karpenter kinds.

    Raises:
        NodewrightValidationError: path prefixed with ``documents[i].`` (index in ``docs``).
    """
    from nodewright.api.conversion import convert_documents

    result = KarpenterObjects()
    for index, doc in enumerate(convert_documents(docs)):
        try:
            group = str(doc.get("apiVersion", "")).split("/")[0]
            kind = doc.get("kind")
            if group == "karpenter.sh" and kind == "NodePool":
                result.nodepools.append(parse_nodepool(doc))
            elif group == "karpenter.sh" and kind == "NodeClaim":
                result.nodeclaims.append(parse_nodeclaim(doc))
            elif group == "karpenter.k8s.aws" and kind == "EC2NodeClass":
                result.ec2nodeclasses.append(parse_ec2nodeclass(doc))
            else:
                result.others.append(doc)
        except NodewrightValidationError as err:
            raise _prefixed(err, f"documents[{index}]") from None
    return result


def _prefixed(err: NodewrightValidationError, prefix: str) -> NodewrightValidationError:
    return NodewrightValidationError(f"{prefix}.{err.path}" if err.path else prefix, err.reason)


@dataclass
class ManifestFiles:
    """Documents read from several files, with where each came from.

    ``sources[i]`` is ``"<file>#documents[j]"`` for ``docs[i]`` (``j`` counts every document of
    that file, empty ones included), so errors about ``documents[i]`` can name the file.
    """

    docs: list[dict[str, Any]]
    sources: list[str]

    def locate(self, err: NodewrightValidationError) -> NodewrightValidationError:
        """Rewrite an error whose path starts with ``documents[i]`` to name the file instead."""
        match = re.match(r"^documents\[(\d+)\]", err.path)
        if not match or int(match.group(1)) >= len(self.sources):
            return err
        return NodewrightValidationError(self.sources[int(match.group(1))] + err.path[match.end() :], err.reason)


def load_manifest_files(paths: list[str]) -> ManifestFiles:
    """Read and parse multi-document YAML files (``"-"`` is standard input), in order.

    Raises:
        NodewrightValidationError: path ``<file>`` when a file cannot be read, or
        ``<file>#documents[j]`` when a document is not valid YAML or not a mapping.
    """
    docs: list[dict[str, Any]] = []
    sources: list[str] = []
    for path in paths:
        try:
            text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise NodewrightValidationError(path, f"cannot read file: {getattr(err, 'strerror', None) or err}") from None
        for index, chunk in enumerate(_split_documents(text)):
            try:
                loaded = load_manifests(chunk)
            except NodewrightValidationError as err:
                raise NodewrightValidationError(f"{path}#documents[{index}]", err.reason) from None
            docs.extend(loaded)
            sources.extend(f"{path}#documents[{index}]" for _ in loaded)
    return ManifestFiles(docs, sources)
