#!/usr/bin/env bash
# Build llama.cpp's `llama-server` (CPU only) from the llama.cpp tree vendored in the llama-cpp-python sdist,
# for the real-engine e2e tests. Installs into .tools/llama-<version>/ (bin/llama-server + a vocab-only GGUF).
# Idempotent and cached: a complete install has .tools/llama-<version>/COMPLETE and is never rebuilt; a half-built
# tree lives in a separate .build directory and is moved into place only when finished, so it never looks complete.
# Usage: scripts/build-llama-server.sh   (prints the install directory on stdout)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}   # llama-cpp-python release whose vendored llama.cpp we build
DEST="$ROOT/.tools/llama-$VERSION"
JOBS=${LLAMA_BUILD_JOBS:-$(nproc)}

log() { printf '[llama-server] %s\n' "$*" >&2; }

if [ -f "$DEST/COMPLETE" ] && [ -x "$DEST/bin/llama-server" ]; then
  echo "$DEST"
  exit 0
fi
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v ninja >/dev/null || need+=(ninja-build)
command -v g++ >/dev/null || need+=(g++)
if [ ${#need[@]} -gt 0 ]; then
  log "installing Debian packages: ${need[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

mkdir -p "$ROOT/.tools"
# One builder at a time (several worktrees share .tools); the second waits, then finds it complete.
exec 9>"$ROOT/.tools/llama-$VERSION.lock"
flock 9
if [ -f "$DEST/COMPLETE" ] && [ -x "$DEST/bin/llama-server" ]; then
  echo "$DEST"
  exit 0
fi
# A machine-wide copy (outside the clone) lets a fresh clone on the same machine, e.g. CI's, skip the build.
CACHE="${SLOGUARD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sloguard}/llama-$VERSION"
if [ -f "$CACHE/COMPLETE" ] && [ -x "$CACHE/bin/llama-server" ]; then
  mkdir -p "$ROOT/.tools"
  rm -rf "$DEST.copy" && cp -a "$CACHE" "$DEST.copy" && rm -rf "$DEST" && mv "$DEST.copy" "$DEST"
  log "using the machine's cached build $CACHE"
  echo "$DEST"
  exit 0
fi


WORK="$ROOT/.tools/llama-$VERSION.build"
mkdir -p "$WORK"
sdist="$WORK/llama_cpp_python-$VERSION.tar.gz"
if [ ! -f "$sdist" ]; then
  log "downloading the llama-cpp-python $VERSION sdist (vendors llama.cpp)"
  PY=${PYTHON:-python3}
  [ -x "$ROOT/.venv/bin/python" ] && PY="$ROOT/.venv/bin/python"
  "$PY" -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$WORK/dl" 2>&1 \
    | grep -v "is ignored" >&2 || true
  mv "$WORK/dl/llama_cpp_python-$VERSION.tar.gz" "$sdist"
fi
src="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"
if [ ! -f "$src/CMakeLists.txt" ]; then
  log "unpacking"
  tar xzf "$sdist" -C "$WORK" "llama_cpp_python-$VERSION/vendor/llama.cpp"
fi

log "building llama-server with $JOBS jobs (CPU only; several minutes on 2 cores)"
start=$(date +%s)
cmake -S "$src" -B "$WORK/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DGGML_NATIVE=OFF -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_OPENMP=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON >"$WORK/cmake.log" 2>&1 \
  || { tail -30 "$WORK/cmake.log" >&2; exit 1; }
nice -n 5 cmake --build "$WORK/build" --target llama-server -j "$JOBS" >"$WORK/build.log" 2>&1 \
  || { tail -40 "$WORK/build.log" >&2; exit 1; }

stage="$WORK/stage"
rm -rf "$stage"
mkdir -p "$stage/bin" "$stage/models"
install -m 0755 "$(find "$WORK/build" -type f -name llama-server -perm -u+x | head -1)" "$stage/bin/llama-server"
cp "$src/models/ggml-vocab-llama-spm.gguf" "$stage/models/"
"$stage/bin/llama-server" --version >"$stage/VERSION" 2>&1 || true
echo "llama-cpp-python $VERSION, built $(date -u +%FT%TZ) in $(( $(date +%s) - start ))s" >"$stage/COMPLETE"
rm -rf "$DEST"
mv "$stage" "$DEST"
rm -rf "$WORK"
if mkdir -p "$(dirname "$CACHE")" 2>/dev/null; then
  rm -rf "$CACHE.copy" && cp -a "$DEST" "$CACHE.copy" && rm -rf "$CACHE" && mv "$CACHE.copy" "$CACHE" || true
fi
log "installed $DEST ($(cat "$DEST/COMPLETE"))"
echo "$DEST"
