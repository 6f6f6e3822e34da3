# syntax=docker/dockerfile:1
#
# nettel images. Targets:
#   serve     (default) `nettel serve` / `nettel simulate`; numpy inference only, no TensorFlow.
#   training  the same plus the `training` extra (TensorFlow, Keras, scikit-learn, pandas).
#
#   docker build -t nettel .
#   docker build --target training -t nettel-training .
#
# Both install into the virtual environment /opt/nettel, built in a throw-away stage, so the
# final images carry neither the source tree nor build caches. The build tools are pinned
# exactly and the package is installed without build isolation, so the build uses only them.
# Checked by tests/deploy/test_dockerfile.py (hadolint when installed, plus structure).

ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

# ---- base: interpreter and environment shared by every stage ---------------------------------
FROM ${PYTHON_IMAGE} AS base
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PATH=/opt/nettel/bin:$PATH

# ---- build: the serving virtual environment --------------------------------------------------
FROM base AS build
# A C compiler for nettel's histogram scanner (service/parse/_histogram_scan.c); this stage only.
# The scanner is optional (without it histograms are parsed in Python, slower); images build it.
# Unpinned: Debian's security updates replace these versions within a release.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
RUN python -m venv /opt/nettel \
    && pip install --no-cache-dir pip==24.3.1 setuptools==75.6.0 wheel==0.45.1
WORKDIR /src
# README.md is optional (the package metadata reads it when present).
COPY pyproject.toml README.md* ./
COPY service/ service/
COPY models/ models/
COPY training/ training/
COPY simulation/ simulation/
# `.` is nettel's runtime dependencies only; TensorFlow lives in the `training` extra.
RUN pip install --no-cache-dir --no-build-isolation . \
    && ! pip show --quiet tensorflow tensorflow-cpu keras 2>/dev/null

# ---- build-training: the same environment plus the training extra ----------------------------
FROM build AS build-training
RUN pip install --no-cache-dir --no-build-isolation "/src[training]"

# ---- runtime: what both final images share ---------------------------------------------------
FROM base AS runtime
RUN useradd --system --uid 10001 --user-group --create-home --home-dir /home/nettel \
        --shell /usr/sbin/nologin nettel
WORKDIR /home/nettel

# ---- training (target) ----------------------------------------------------------------------
FROM runtime AS training
COPY --from=build-training /opt/nettel /opt/nettel
USER 10001:10001
ENTRYPOINT ["nettel"]
CMD ["--help"]

# ---- serve (default target, last so a plain `docker build` makes it) -------------------------
FROM runtime AS serve
COPY --from=build /opt/nettel /opt/nettel
USER 10001:10001
ENV NETTEL_LISTEN=0.0.0.0:8080
EXPOSE 8080
# Probes the port NETTEL_LISTEN names, on loopback; urlopen raises (exit 1) unless 2xx.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; port = os.environ.get('NETTEL_LISTEN', ':8080').rpartition(':')[2]; urllib.request.urlopen(f'http://127.0.0.1:{port}/healthz', timeout=4)"]
ENTRYPOINT ["nettel"]
CMD ["serve"]
