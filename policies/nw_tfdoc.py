"""A read-only model of synthesized CDK Terrain stacks (``cdktf.out/stacks/<stack>/cdk.tf.json``).

Pure Python (standard library only): imported by the checkov wrappers (``nw_checkov_terraform``) and,
without checkov, by the tests and the gate.

What it understands, because that is what cdktn writes (Terraform JSON syntax,
https://developer.hashicorp.com/terraform/language/syntax/json):

- blocks ``resource.<type>.<name>``, ``data.<type>.<name>``, ``output.<name>``;
- references written as a whole string ``"${aws_iam_role.node.arn}"`` or ``"${data.<type>.<name>.<attr>}"``;
- cross-stack references: cdktn turns a value used in another stack into an ``output`` of the producing
  stack and ``${data.terraform_remote_state.cross-stack-reference-input-<stack>.outputs.<output>}`` in
  the consumer; ``Project.resolve`` follows them to the producing resource;
- the same values "list-wrapped" the way checkov's HCL-style parser hands them to checks
  (``{"name": ["x"]}``): every accessor unwraps single-element lists.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# "${<type>.<name>.<attr>}" or "${data.<type>.<name>.<attr...>}", nothing else in the string.
_REF = re.compile(r"^\$\{(?:(data)\.)?([A-Za-z0-9_]+)\.([A-Za-z0-9_\-]+)\.([A-Za-z0-9_\-.]+)\}$")
_REMOTE_STATE_PREFIX = "cross-stack-reference-input-"
_META_KEYS = {"//", "__startline__", "__endline__", "__address__"}


# --------------------------------------------------------------------------------------------
# Unwrapping list-wrapped values (checkov hands resource attributes over as one-element lists)
# --------------------------------------------------------------------------------------------


def scalar(value: Any) -> Any:
    """``value`` without any one-element list wrappers: ``[["x"]] -> "x"``, ``[] -> None``."""
    while isinstance(value, list) and len(value) <= 1:
        value = value[0] if value else None
    return value


def str_list(value: Any) -> list[str]:
    """A flat list of the strings in ``value`` (a string, a list, or nested lists of them).

    Non-strings (numbers, booleans) are turned into strings; ``None`` gives ``[]``.
    """
    if value is None:
        return []
    if isinstance(value, list):
        out: list[str] = []
        for item in value:
            out.extend(str_list(item))
        return out
    if isinstance(value, bool):
        return ["true" if value else "false"]
    return [str(value)]


def dict_list(value: Any) -> list[dict[str, Any]]:
    """The dicts in ``value``: one dict, a list of dicts, or nested lists of them (blocks)."""
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list):
        out: list[dict[str, Any]] = []
        for item in value:
            out.extend(dict_list(item))
        return out
    return []


def clean(conf: Any) -> Any:
    """``conf`` without cdktn metadata (``//``) and checkov line markers, recursively."""
    if isinstance(conf, dict):
        return {k: clean(v) for k, v in conf.items() if k not in _META_KEYS}
    if isinstance(conf, list):
        return [clean(v) for v in conf]
    return conf


# --------------------------------------------------------------------------------------------
# References
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ref:
    """A resolved reference: ``stack`` holds block ``kind`` ("resource"/"data") ``type.name``."""

    stack: str
    kind: str
    type: str
    name: str
    attr: str

    @property
    def address(self) -> str:
        """Terraform address: ``aws_iam_role.node`` or ``data.aws_iam_policy_document.trust``."""
        base = f"{self.type}.{self.name}"
        return base if self.kind == "resource" else f"data.{base}"


def parse_ref(stack: str, value: Any) -> Ref | None:
    """The reference a value is, if it is a whole-string ``${...}`` reference; else ``None``."""
    text = scalar(value)
    if not isinstance(text, str):
        return None
    match = _REF.match(text.strip())
    if not match:
        return None
    is_data, type_, name, attr = match.groups()
    return Ref(stack, "data" if is_data else "resource", type_, name, attr)


# --------------------------------------------------------------------------------------------
# Stacks and the project
# --------------------------------------------------------------------------------------------


@dataclass
class Stack:
    """One synthesized stack: ``name`` (directory name), ``path`` of its cdk.tf.json, its JSON."""

    name: str
    path: str
    doc: dict[str, Any]

    def blocks(self, kind: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """``(type, name, conf)`` of every ``resource`` or ``data`` block, in file order."""
        for type_, named in (self.doc.get(kind) or {}).items():
            if type_ in _META_KEYS or not isinstance(named, dict):
                continue
            for name, conf in named.items():
                if name in _META_KEYS:
                    continue
                for one in dict_list(conf):
                    yield type_, name, one

    def resources(self, type_: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """``(name, conf)`` of the resources of one type."""
        for t, name, conf in self.blocks("resource"):
            if t == type_:
                yield name, conf

    def block(self, kind: str, type_: str, name: str) -> dict[str, Any] | None:
        """One block's configuration, or ``None``."""
        conf = ((self.doc.get(kind) or {}).get(type_) or {}).get(name)
        found = dict_list(conf)
        return found[0] if found else None

    def output_value(self, name: str) -> Any:
        """The ``value`` of ``output.<name>``, or ``None``."""
        out = (self.doc.get("output") or {}).get(name)
        return scalar(out.get("value")) if isinstance(out, dict) else None


@dataclass(frozen=True)
class Address:
    """Where a finding is reported: the stack file and the Terraform address inside it."""

    path: str
    address: str


@dataclass
class Project:
    """All stacks of one synthesis (the sibling directories of ``cdktf.out/stacks``)."""

    stacks: dict[str, Stack] = field(default_factory=dict)

    def resolve(self, stack: str, value: Any, depth: int = 0) -> Ref | None:
        """The block a value refers to, following cross-stack outputs; ``None`` for literals.

        A reference into a stack that is not loaded resolves to the remote-state data block itself.
        """
        ref = parse_ref(stack, value)
        if ref is None or depth > 8:
            return ref
        if ref.kind == "data" and ref.type == "terraform_remote_state" and ref.name.startswith(_REMOTE_STATE_PREFIX):
            producer = self.stacks.get(ref.name[len(_REMOTE_STATE_PREFIX):])
            output = ref.attr.split(".", 1)[1] if ref.attr.startswith("outputs.") else ""
            if producer is not None and output:
                produced = producer.output_value(output)
                inner = self.resolve(producer.name, produced, depth + 1)
                return inner if inner is not None else ref
        return ref

    def conf(self, ref: Ref) -> dict[str, Any] | None:
        """The configuration of the block ``ref`` names, or ``None``."""
        stack = self.stacks.get(ref.stack)
        return stack.block(ref.kind, ref.type, ref.name) if stack else None

    def where(self, stack: str, address: str) -> Address:
        """The report location of ``address`` in ``stack``."""
        return Address(self.stacks[stack].path, address)

    def all_resources(self, type_: str) -> Iterator[tuple[Stack, str, dict[str, Any]]]:
        """``(stack, name, conf)`` of every resource of one type in every stack."""
        for stack in self.stacks.values():
            for name, conf in stack.resources(type_):
                yield stack, name, conf


def load_stack(path: str | os.PathLike[str]) -> Stack:
    """Read one ``cdk.tf.json``; the stack name is its directory's name.

    Raises ``OSError`` when unreadable and ``ValueError`` when not a JSON object.
    """
    p = Path(path)
    doc = json.loads(p.read_text(encoding="utf-8"))
    if not isinstance(doc, dict):
        raise ValueError(f"{p}: not a Terraform JSON object")
    return Stack(name=p.parent.name, path=str(p.resolve()), doc=doc)


def load_project(stacks_dir: str | os.PathLike[str]) -> Project:
    """Every ``<stacks_dir>/*/cdk.tf.json`` as one project (unreadable files raise, see load_stack)."""
    project = Project()
    for path in sorted(Path(stacks_dir).glob("*/cdk.tf.json")):
        stack = load_stack(path)
        project.stacks[stack.name] = stack
    return project


def project_of(stack_file: str | os.PathLike[str]) -> Project:
    """The project a stack file belongs to: itself and its sibling stacks (``../*/cdk.tf.json``)."""
    path = Path(stack_file).resolve()
    project = load_project(path.parent.parent)
    if path.parent.name not in project.stacks:  # not laid out as stacks/<name>/cdk.tf.json
        stack = load_stack(path)
        project.stacks[stack.name] = stack
    return project
