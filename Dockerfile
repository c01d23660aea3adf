# syntax=docker/dockerfile:1
# nodewright controller image.
#   docker build -t nodewright:dev .
#   docker run --rm nodewright:dev --help      (arguments go to `nodewright run`)
# Stage 1 builds a virtualenv with the package and its runtime dependencies only (no dev/infra
# extras); stage 2 copies that virtualenv onto a clean slim base: no compiler, no pip, no sources.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/nodewright
# Dependencies first, so editing the code does not invalidate this layer.
COPY pyproject.toml README.md ./
RUN mkdir -p nodewright && touch nodewright/__init__.py \
    && /opt/nodewright/bin/pip install --upgrade pip setuptools wheel \
    && /opt/nodewright/bin/pip install . \
    && /opt/nodewright/bin/pip uninstall -y nodewright
COPY nodewright ./nodewright
RUN /opt/nodewright/bin/pip install --no-deps . \
    # The final image runs, it does not install: drop the installers from the virtualenv.
    && /opt/nodewright/bin/pip uninstall -y pip setuptools wheel \
    && find /opt/nodewright -name '__pycache__' -prune -exec rm -rf {} + \
    && /opt/nodewright/bin/python -m compileall -q /opt/nodewright/lib

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="nodewright" \
      org.opencontainers.image.description="Karpenter-compatible node autoscaler for Amazon EKS, in Python" \
      org.opencontainers.image.licenses="Apache-2.0"
# The base image's pip is not needed at run time; remove it so the image holds no installer.
RUN python -m pip uninstall -y pip setuptools wheel 2>/dev/null || true \
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
