#!/usr/bin/env python
"""The policy gate: checkov on everything nodewright ships, with nodewright's own checks.

``make policy`` runs ``python scripts/policy_gate.py``, which

1. synthesizes the stacks (``python main.py`` -> ``cdktf.out/stacks/*/cdk.tf.json``) and renders the chart
   with its default and example values (``scripts/render_chart.py`` -> ``out/chart/*.yaml``), in parallel;
2. runs checkov (``.venv-checkov/bin/checkov``, its own virtualenv, ``BC_SKIP_MAPPING=TRUE``) with
   ``--external-checks-dir policies`` on the stacks (``terraform_json``), the manifests (``kubernetes``) and
   the ``Dockerfile`` (``dockerfile``), in one checkov process (``--parallel``: two, side by side);
3. moves failures listed in ``policies/skips.toml`` (each with its reason) to "skipped";
4. checks coverage: every ``CKV_NW_*`` check must have evaluated at least one object of a framework that
   was scanned (a check that saw nothing - e.g. no controller role found - proves nothing);
5. prints one table (framework, passed, failed, skipped) and each failure as check id, resource, file and
   the fix; writes the same as JSON to ``out/policy/report.json`` (a CI artefact).

Exit status: 0 all passed; 1 any failure (a check, a parsing error, a coverage gap); 2 the gate could not
run (checkov or an input missing, synthesis or rendering failed, invalid skips file).

Usage: ``python scripts/policy_gate.py [--no-build] [--stacks-dir DIR ...] [--manifests-dir DIR ...]
[--dockerfile FILE ...] [--report FILE] [--parallel]``.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
POLICIES = ROOT / "policies"
SKIPS = POLICIES / "skips.toml"
CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"
sys.path.insert(0, str(POLICIES))

import nw_catalog  # noqa: E402
import nw_k8s_rules  # noqa: E402
import nw_stack_rules  # noqa: E402
import nw_tfdoc  # noqa: E402

FRAMEWORKS = ("terraform_json", "kubernetes", "dockerfile")
CHECKOV_TIMEOUT_S = 300


class GateError(RuntimeError):
    """The gate could not run (exit 2); the message says what to do."""


@dataclass
class Result:
    """One checkov result: ``outcome`` is "passed", "failed" or "skipped"; ``resource`` an address."""

    framework: str
    check_id: str
    check_name: str
    outcome: str
    resource: str
    file: str
    lines: list[int]
    messages: list[str] = field(default_factory=list)
    fix: str = ""
    skip_reason: str = ""


@dataclass(frozen=True)
class Skip:
    """An accepted failure: ``check`` id, ``resource`` and optional ``file`` glob patterns, ``reason``."""

    check: str
    resource: str
    reason: str
    file: str = "*"

    def matches(self, result: Result) -> bool:
        """True when this skip covers ``result``."""
        return (result.check_id == self.check and fnmatch.fnmatchcase(result.resource, self.resource)
                and fnmatch.fnmatchcase(result.file, self.file))


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------


def load_skips(path: Path) -> list[Skip]:
    """Read the skips file. Raises GateError on a malformed entry, a missing reason, or a skip of a
    ``CKV_NW_*`` check (those encode what must never ship and cannot be skipped)."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise GateError(f"{path}: cannot read skips: {err}") from None
    skips = []
    for i, entry in enumerate(raw.get("skip") or []):
        where = f"{path.name}: skip[{i}]"
        if not isinstance(entry, dict) or not entry.get("check") or not entry.get("resource"):
            raise GateError(f"{where}: needs 'check' and 'resource'")
        if len(str(entry.get("reason") or "").strip()) < 20:
            raise GateError(f"{where} ({entry['check']}): needs a 'reason' (a sentence saying why)")
        if str(entry["check"]).startswith("CKV_NW_"):
            raise GateError(f"{where}: {entry['check']} is a nodewright check and cannot be skipped; fix the cause")
        skips.append(Skip(str(entry["check"]), str(entry["resource"]), " ".join(str(entry["reason"]).split()),
                          str(entry.get("file") or "*")))
    return skips


def build(synth: bool, render: bool) -> dict[str, float]:
    """Synthesize and render side by side; return the seconds each took. Raises GateError on failure."""
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    jobs = {}
    if synth:
        jobs["synth"] = [sys.executable, str(ROOT / "main.py")]
    if render:
        jobs["chart"] = [sys.executable, str(ROOT / "scripts" / "render_chart.py")]

    def run(name: str) -> tuple[str, float, subprocess.CompletedProcess[str]]:
        started = time.perf_counter()
        proc = subprocess.run(jobs[name], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        return name, time.perf_counter() - started, proc

    timings = {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        for name, seconds, proc in pool.map(run, list(jobs)):
            if proc.returncode != 0:
                tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
                raise GateError(f"{name} failed (exit {proc.returncode}): {' '.join(jobs[name])}\n{tail}")
            timings[name] = seconds
    return timings


def collect(stacks_dirs: list[Path], manifests_dirs: list[Path], dockerfiles: list[Path]) -> dict[str, list[Path]]:
    """The files to scan per framework. Raises GateError when a framework has nothing to scan."""
    files = {
        "terraform_json": sorted(p for d in stacks_dirs for p in d.glob("*/cdk.tf.json")),
        "kubernetes": sorted(p for d in manifests_dirs for p in d.rglob("*.y*ml")),
        "dockerfile": [p for p in dockerfiles if p.is_file()],
    }
    hints = {"terraform_json": "run `make synth` (python main.py)", "kubernetes": "run `make chart`",
             "dockerfile": "the repository's Dockerfile is missing"}
    for framework, found in files.items():
        if not found:
            raise GateError(f"nothing to scan for {framework}: {hints[framework]}")
    return files


# --------------------------------------------------------------------------------------------
# checkov
# --------------------------------------------------------------------------------------------


def checkov_command(files: dict[str, list[Path]], frameworks: list[str], out_dir: Path) -> list[str]:
    """The checkov command line for ``frameworks`` over their files, JSON into ``out_dir``."""
    cmd = [str(CHECKOV), "--framework", *frameworks, "--external-checks-dir", str(POLICIES),
           "-o", "json", "--output-file-path", str(out_dir), "--compact", "--skip-download"]
    for framework in frameworks:
        for path in files[framework]:
            cmd += ["-f", str(path)]
    return cmd


def run_checkov(files: dict[str, list[Path]], groups: list[list[str]]) -> list[dict[str, Any]]:
    """Run one checkov per framework group (side by side when several); return checkov's JSON reports.

    Raises GateError when checkov is missing, crashes (exit > 1) or writes no report.
    """
    if not CHECKOV.is_file():
        raise GateError(f"checkov not found at {CHECKOV}: run `make setup`")
    env = {**os.environ, "BC_SKIP_MAPPING": "TRUE", "PYTHONDONTWRITEBYTECODE": "1"}

    def run(group: list[str]) -> list[dict[str, Any]]:
        with tempfile.TemporaryDirectory(prefix="nw-checkov-") as tmp:
            proc = subprocess.run(checkov_command(files, group, Path(tmp)), cwd=ROOT, env=env,
                                  capture_output=True, text=True, timeout=CHECKOV_TIMEOUT_S)
            report = Path(tmp) / "results_json.json"
            if proc.returncode > 1 or not report.is_file():
                tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
                raise GateError(f"checkov ({', '.join(group)}) exited {proc.returncode} without a report:\n{tail}")
            data = json.loads(report.read_text())
        return data if isinstance(data, list) else [data]

    with ThreadPoolExecutor(max_workers=len(groups)) as pool:
        return [r for reports in pool.map(run, groups) for r in reports]


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


_KEY_LINE = re.compile(r'^(\s*)"([^"]+)"\s*:\s*\{')


def tf_address(path: Path, start_line: int, resource: str) -> str:
    """``aws_iam_role.node`` for checkov's ``resource.node`` (its Python checks drop the type): the
    type is the enclosing JSON key of the block starting at ``start_line``."""
    kind, _, name = resource.partition(".")
    if kind not in ("resource", "data"):
        return resource
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return resource
    match = _KEY_LINE.match(lines[start_line - 1]) if 0 < start_line <= len(lines) else None
    indent = len(match.group(1)) if match else 0
    for line in reversed(lines[: max(start_line - 1, 0)]):
        outer = _KEY_LINE.match(line)
        if outer and len(outer.group(1)) < indent:
            prefix = "data." if kind == "data" else ""
            return f"{prefix}{outer.group(2)}.{name}"
    return resource


def relative(path: str) -> str:
    """``path`` relative to the repository when inside it."""
    p = Path(path).resolve()
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)


def to_results(reports: list[dict[str, Any]]) -> tuple[list[Result], dict[str, int]]:
    """Flatten checkov reports into ``Result``s; also return parsing errors per framework."""
    results: list[Result] = []
    parsing: dict[str, int] = {}
    for report in reports:
        framework = report.get("check_type", "?")
        parsing[framework] = parsing.get(framework, 0) + int(report.get("summary", {}).get("parsing_errors", 0))
        for outcome in ("passed", "failed", "skipped"):
            for rec in report.get("results", {}).get(f"{outcome}_checks", []):
                abs_path = Path(rec.get("file_abs_path") or rec["file_path"])
                lines = list(rec.get("file_line_range") or [0, 0])
                resource = rec.get("resource", "")
                if framework == "terraform_json":
                    resource = tf_address(abs_path if abs_path.is_absolute() else ROOT / abs_path, lines[0], resource)
                elif framework == "dockerfile":  # checkov prefixes the instruction with the file path
                    resource = resource.rsplit("/", 1)[-1]
                info = nw_catalog.CHECKS.get(rec["check_id"])
                results.append(Result(framework, rec["check_id"], rec.get("check_name", ""), outcome, resource,
                                      relative(str(abs_path if abs_path.is_absolute() else ROOT / abs_path)),
                                      lines, list(rec.get("details") or []),
                                      info.fix if info else (rec.get("guideline") or "")))
    return results, parsing


def explain(results: list[Result], trusts: dict[str, list[str]] | None = None) -> None:
    """Fill in the messages of failed CKV_NW_* results by re-running the same rules (checkov's
    kubernetes runner drops check details); ``trusts`` are the scanned stacks' IRSA trusts (CKV_NW_12)."""
    analyses: dict[str, nw_catalog.RuleReport] = {}
    for r in results:
        if r.outcome != "failed" or not r.check_id.startswith("CKV_NW_") or r.messages:
            continue
        path = ROOT / r.file
        if r.framework == "terraform_json":
            key = str(path.parent.parent)
            if key not in analyses:
                analyses[key] = nw_stack_rules.analyze(nw_tfdoc.project_of(path))
            r.messages = analyses[key].messages(r.check_id, str(path.resolve()), r.resource)
        elif r.framework == "kubernetes":
            r.messages = _k8s_messages(path, r, trusts or {})


def _k8s_messages(path: Path, r: Result, trusts: dict[str, list[str]]) -> list[str]:
    kind, _, rest = r.resource.partition(".")
    namespace, _, name = rest.partition(".")
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if isinstance(d, dict)]
    except (OSError, yaml.YAMLError):
        return []
    rule = nw_k8s_rules.RULES.get(r.check_id)
    for doc in docs:
        meta = doc.get("metadata") or {}
        if doc.get("kind") == kind and meta.get("name") == name and meta.get("namespace", "default") == namespace:
            if r.check_id == "CKV_NW_12":
                return nw_k8s_rules.service_account_problems(doc, trusts) or []
            return (rule(doc) or []) if rule else []
    return []


def apply_skips(results: list[Result], skips: list[Skip]) -> list[Skip]:
    """Turn failures covered by a skip into skipped results (with the reason); return unused skips."""
    used = set()
    for r in results:
        if r.outcome != "failed":
            continue
        for skip in skips:
            if skip.matches(r):
                r.outcome, r.skip_reason = "skipped", skip.reason
                used.add(skip)
                break
    return [s for s in skips if s not in used]


def coverage_gaps(results: list[Result], scanned: list[str]) -> list[str]:
    """``CKV_NW_*`` checks that evaluated nothing in any scanned framework they apply to."""
    seen = {r.check_id for r in results}
    gaps = []
    for info in nw_catalog.CHECKS.values():
        if info.id not in seen and any(f in scanned for f in info.frameworks):
            gaps.append(f"{info.id} evaluated no object ({info.name}): the thing it guards is missing from "
                        f"what was scanned, or the check failed to load")
    return gaps


# --------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------


def table(results: list[Result], frameworks: list[str]) -> str:
    """The summary table: one row per framework and a total."""
    rows: list[tuple[str, ...]] = [("framework", "passed", "failed", "skipped")]
    totals = [0, 0, 0]
    for framework in frameworks:
        counts = [sum(1 for r in results if r.framework == framework and r.outcome == o)
                  for o in ("passed", "failed", "skipped")]
        totals = [a + b for a, b in zip(totals, counts, strict=True)]
        rows.append((framework, *map(str, counts)))
    rows.append(("total", *map(str, totals)))
    return "\n".join(f"{r[0]:<16}{r[1]:>8}{r[2]:>8}{r[3]:>9}" for r in rows)


def _order(r: Result) -> tuple[int, str, int, str, str]:
    """Failures in framework order, then ours first by number (CKV_NW_1 before CKV_NW_10), then built-ins."""
    prefix, _, number = r.check_id.rpartition("_")
    rank = FRAMEWORKS.index(r.framework) if r.framework in FRAMEWORKS else len(FRAMEWORKS)
    return (rank, "" if prefix == "CKV_NW" else prefix, int(number) if number.isdigit() else 0, r.file, r.resource)


def failure_text(r: Result) -> str:
    """One failure: id, resource, file:lines, what is wrong, and the fix."""
    lines = f":{r.lines[0]}-{r.lines[1]}" if r.lines and r.lines[0] else ""
    out = [f"FAILED {r.check_id}  {r.resource}  {r.file}{lines}", f"    {r.check_name}"]
    out += [f"    - {m}" for m in r.messages]
    if r.fix:
        out.append(f"    fix: {r.fix}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-build", action="store_true", help="scan existing outputs: no synth, no render")
    parser.add_argument("--stacks-dir", type=Path, action="append", help="default: cdktf.out/stacks")
    parser.add_argument("--manifests-dir", type=Path, action="append", help="default: out/chart")
    parser.add_argument("--dockerfile", type=Path, action="append", help="default: Dockerfile")
    parser.add_argument("--skips", type=Path, default=SKIPS)
    parser.add_argument("--report", type=Path, default=ROOT / "out" / "policy" / "report.json")
    parser.add_argument("--parallel", action="store_true",
                        help="one checkov process per framework group, side by side (faster on an idle "
                             "machine; one process costs less CPU on a busy one, hence the default)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    timings: dict[str, float] = {}
    try:
        skips = load_skips(args.skips)
        if not args.no_build:
            timings.update(build(synth=not args.stacks_dir, render=not args.manifests_dir))
        files = collect(args.stacks_dir or [ROOT / "cdktf.out" / "stacks"],
                        args.manifests_dir or [ROOT / "out" / "chart"],
                        args.dockerfile or [ROOT / "Dockerfile"])
        scanned = [f for f in FRAMEWORKS if files[f]]
        groups = [["terraform_json"], [f for f in scanned if f != "terraform_json"]] if args.parallel else [scanned]
        checkov_started = time.perf_counter()
        reports = run_checkov(files, [g for g in groups if g])
        timings["checkov"] = time.perf_counter() - checkov_started
    except GateError as err:
        print(f"policy gate: error: {err}", file=sys.stderr)
        return 2

    results, parsing = to_results(reports)
    explain(results, nw_stack_rules.irsa_trusts_of_files([str(f) for f in files["terraform_json"]]))
    unused = apply_skips(results, skips)
    problems = [f"{n} file(s) could not be parsed by checkov's {fw} framework" for fw, n in parsing.items() if n]
    problems += coverage_gaps(results, scanned)
    failures = sorted((r for r in results if r.outcome == "failed"), key=_order)
    timings["total"] = time.perf_counter() - started

    print(f"policy gate: {len(files['terraform_json'])} stack(s), {len(files['kubernetes'])} manifest file(s), "
          f"{len(files['dockerfile'])} Dockerfile(s); skips from {relative(str(args.skips))}")
    print(table(results, scanned))
    for r in failures:
        print(failure_text(r))
    for p in problems:
        print(f"FAILED gate: {p}")
    for s in unused:
        print(f"note: skip of {s.check} on {s.resource} matched nothing; remove it from {args.skips.name}")
    verdict = "FAILED" if failures or problems else "passed"
    spent = ", ".join(f"{k} {v:.1f} s" for k, v in timings.items() if k != "total")
    print(f"policy gate {verdict}: {len(failures)} failed check(s), {len(problems)} gate problem(s) "
          f"in {timings['total']:.1f} s ({spent})")
    write_report(args.report, results, problems, unused, timings, verdict)
    return 1 if failures or problems else 0


def write_report(path: Path, results: list[Result], problems: list[str], unused: list[Skip],
                 timings: dict[str, float], verdict: str) -> None:
    """The JSON report (CI artefact): verdict, counts, failures, skipped results with reasons."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {
        "verdict": verdict,
        "timings_s": {k: round(v, 2) for k, v in timings.items()},
        "counts": {o: sum(1 for r in results if r.outcome == o) for o in ("passed", "failed", "skipped")},
        "nodewright_checks": {
            cid: {o: sum(1 for r in results if r.check_id == cid and r.outcome == o) for o in ("passed", "failed")}
            for cid in nw_catalog.CHECKS
        },
        "failures": [asdict(r) for r in results if r.outcome == "failed"],
        "gate_problems": problems,
        "skipped": [asdict(r) for r in results if r.outcome == "skipped"],
        "unused_skips": [asdict(s) for s in unused],
    }
    path.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
