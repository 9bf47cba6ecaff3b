# sloguard's container image: Debian 12's Python 3.11 and tini, sloguard in the virtualenv /opt/sloguard,
# user 65532, runs on a read-only root filesystem. There is no public image: build it and push it yourself.
#
#   scripts/build-image.sh                 no registry pull: a Debian base made by mmdebstrap, this file built on
#                                          it by buildah (offline wheels, SOURCE_DATE_EPOCH); CI builds and runs it
#   docker build -t registry.example.com/sloguard:0.1.0 .     the same steps on debian:bookworm-slim from a registry
#   ... --build-arg EXTRAS=canary          the -gpu variant: torch (CUDA wheels from PyPI, ~6 GiB) for the canary
#
# PID 1 is tini: it forwards SIGTERM to the daemon (which drains and exits 0 within 10 s) and reaps orphans; a
# Python process as PID 1 would ignore a SIGTERM that arrives before its handler is installed. docs/kubernetes.md.
ARG BASE=docker.io/library/debian:bookworm-slim

FROM ${BASE} AS base
# A base from scripts/build-image.sh has these (and no apt); debian:bookworm-slim gets them from Debian.
RUN if ! command -v python3 >/dev/null || ! command -v tini >/dev/null || ! python3 -c 'import ensurepip' 2>/dev/null; \
    then apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
         python3 python3-venv tini ca-certificates tzdata && rm -rf /var/lib/apt/lists/*; fi

FROM base AS build
ARG EXTRAS=""
ARG SOURCE_DATE_EPOCH
# The context is the repository filtered by .dockerignore: pyproject.toml, README.md, LICENSE, sloguard/ and,
# from scripts/build-image.sh, wheels/ (then nothing is fetched from an index).
COPY . /src
RUN python3 -m venv /opt/sloguard \
 && if [ -d /src/wheels ]; then set -- --no-index --find-links /src/wheels; fi \
 && /opt/sloguard/bin/pip install --no-cache-dir --disable-pip-version-check "$@" "/src${EXTRAS:+[$EXTRAS]}" \
 && /opt/sloguard/bin/pip uninstall -y -q pip setuptools \
 && /opt/sloguard/bin/sloguard --version

FROM base
ARG VERSION=0.1.0
COPY --from=build /opt/sloguard /opt/sloguard
RUN echo 'sloguard:x:65532:65532:sloguard:/var/lib/sloguard:/usr/sbin/nologin' >> /etc/passwd \
 && echo 'sloguard:x:65532:' >> /etc/group \
 && mkdir -p /etc/sloguard /var/lib/sloguard && chown 65532:65532 /var/lib/sloguard
# HOME and caches on /tmp: the only scratch space on a read-only root (the chart mounts an emptyDir there).
# TINI_SUBREAPER: with hostPID tini is not PID 1 and still reaps what the daemon's children leave behind.
ENV PATH=/opt/sloguard/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/tmp XDG_CACHE_HOME=/tmp/.cache PYTHONDONTWRITEBYTECODE=1 TINI_SUBREAPER=1
LABEL org.opencontainers.image.title="sloguard" \
      org.opencontainers.image.description="LLM inference latency SLO daemon and Prometheus exporter" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/sloguard/sloguard"
USER 65532:65532
WORKDIR /var/lib/sloguard
EXPOSE 9478
ENTRYPOINT ["/usr/bin/tini", "--", "/opt/sloguard/bin/sloguard"]
CMD ["run", "-c", "/etc/sloguard/sloguard.yaml"]
