# nodewright controller image.
#   docker build -t nodewright:dev .
#   docker run --rm nodewright:dev --help      (arguments go to `nodewright run`)
# Stage 1 builds a virtualenv with the package and its pinned runtime dependencies only (no dev/infra
# extras); stage 2 copies that virtualenv onto a clean slim base: no compiler, no pip, no sources.
# Reproducible: the base is pinned by digest and every Python package by version
# (requirements/*.txt, written by scripts/lock_requirements.py from the resolved virtualenv).
# Refresh the digest with `docker buildx imagetools inspect python:3.11-slim-bookworm`.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:a36c24f9cbdf4fd0f52d67f0823eeac19c2028c637cecc392d97f980d4fec56b

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_CONSTRAINT=/src/requirements/build.txt
WORKDIR /src
RUN python -m venv /opt/nodewright
# Dependencies first, from the lock file, so editing the code does not invalidate this layer.
COPY requirements ./requirements
RUN /opt/nodewright/bin/pip install --no-deps -r requirements/runtime.txt
COPY pyproject.toml README.md ./
COPY nodewright ./nodewright
# One install of the package, from a clean tree: a stale build/ directory would make setuptools package an
# old copy of the sources (it once shipped an empty nodewright/__init__.py).
RUN rm -rf build ./*.egg-info \
    && /opt/nodewright/bin/pip install --no-deps . \
    && /opt/nodewright/bin/python -c "import nodewright.cli, nodewright.runtime" \
    # The final image runs, it does not install: drop the installers from the virtualenv.
    && /opt/nodewright/bin/python -m pip uninstall -y pip setuptools wheel \
    && find /opt/nodewright -name '__pycache__' -prune -exec rm -rf {} + \
    && /opt/nodewright/bin/python -m compileall -q /opt/nodewright/lib

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="nodewright" \
      org.opencontainers.image.description="Karpenter-compatible node autoscaler for Amazon EKS, in Python" \
      org.opencontainers.image.licenses="Apache-2.0"
# The base image's installers are not needed at run time; remove them (and what only they use) so the image
# holds no pip, setuptools, wheel or packaging.
RUN python -m pip uninstall -y pip setuptools wheel packaging 2>/dev/null || true \
    && rm -rf /usr/local/lib/python3*/site-packages/pip* /usr/local/lib/python3*/site-packages/setuptools* \
              /usr/local/lib/python3*/site-packages/wheel* /usr/local/lib/python3*/site-packages/packaging* \
              /usr/local/bin/pip* \
    && groupadd --system --gid 65532 nonroot \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin nonroot
COPY --from=build /opt/nodewright /opt/nodewright
ENV PATH=/opt/nodewright/bin:${PATH} \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    NODEWRIGHT_LOG_FORMAT=json
USER 65532:65532
# 8080: Prometheus metrics; 8081: /healthz and /readyz (chart values controller.metricsPort/healthProbePort).
EXPOSE 8080 8081
# Kubernetes uses the chart's probes; this is for plain `docker run`.
HEALTHCHECK --interval=30s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8081/healthz', timeout=2)"]
ENTRYPOINT ["nodewright", "run"]
