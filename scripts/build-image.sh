#!/usr/bin/env bash
# Build sloguard's OCI image without a registry pull; print its reference as the last line of stdout.
#
#   scripts/build-image.sh [--gpu] [--tag REF]... [--save FILE.tar] [--rebuild]
#
#   --gpu         the -gpu variant: EXTRAS=canary, torch with its CUDA libraries from your package index
#   --tag REF     also tag it REF (e.g. registry.example.com/sloguard:0.1.0, then `podman push REF`)
#   --save FILE   also write it as an OCI archive (`skopeo copy oci-archive:FILE docker://...`, `ctr import`)
#   --rebuild     build the base and the image again even if an identical one is stored
#
# 1. Base: Debian 12 (bookworm, -updates, -security) made by mmdebstrap from a Debian mirror: the Essential
#    packages plus python3, python3-venv, libstdc++6 (numpy's C++), tini, ca-certificates and tzdata (no apt,
#    no docs, man pages or locales), committed by buildah as localhost/sloguard-base:bookworm-KEY.
# 2. Wheels: sloguard's dependencies for CPython 3.11 on manylinux x86_64, downloaded once into .cache/image/.
# 3. The repository's Dockerfile built on that base by `buildah bud --isolation chroot` (no daemon, no registry,
#    no index: the wheels are in the build context), tagged localhost/sloguard:VERSION[-gpu]-KEY and
#    localhost/sloguard:VERSION[-gpu]. KEY hashes every input, so a second run with the same inputs only prints.
#
# Reproducible: the same mirror state, wheels and sources give the same image ID. File and creation times are
# SOURCE_DATE_EPOCH: for the base the newest Date of the mirror's InRelease files, for the image the last commit
# that touched its inputs (or export SOURCE_DATE_EPOCH). A moving mirror gives newer packages later: pin it with
# a snapshot (SLOGUARD_IMAGE_MIRROR=http://snapshot.debian.org/archive/debian/20251130T000000Z and
# SLOGUARD_IMAGE_SECURITY_MIRROR=http://snapshot.debian.org/archive/debian-security/20251130T000000Z) and the
# wheels with PIP_CONSTRAINT=FILE. Needs root on Debian/Ubuntu; installs mmdebstrap, buildah and podman with apt.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
log() { printf '[build-image] %3ds %s\n' "$SECONDS" "$*" >&2; }
die() { log "error: $*"; exit 1; }

gpu=0 save="" rebuild=0 tags=()
while [ $# -gt 0 ]; do
  case "$1" in
    --gpu) gpu=1 ;;
    --tag) [ $# -ge 2 ] || die "--tag needs a reference"; tags+=("$2"); shift ;;
    --save) [ $# -ge 2 ] || die "--save needs a file"; save=$2; shift ;;
    --rebuild) rebuild=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
  shift
done
[ "$(id -u)" = 0 ] || die "needs root: mmdebstrap and buildah build a root filesystem"

need=()
for tool in mmdebstrap buildah podman curl eatmydata; do command -v "$tool" >/dev/null || need+=("$tool"); done
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
PY=python3
[ -x .venv/bin/python ] && PY=.venv/bin/python
CACHE=$ROOT/.cache/image
mkdir -p "$CACHE"
sha() { sha256sum | cut -c1-16; }

# 1. The Debian base, named after its recipe and the mirror state it was made from.
SUITE=bookworm
MIRROR=${SLOGUARD_IMAGE_MIRROR:-http://deb.debian.org/debian}
SECURITY=${SLOGUARD_IMAGE_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
PACKAGES=python3,python3-venv,libstdc++6,tini,ca-certificates,tzdata
SOURCES=("deb $MIRROR $SUITE main" "deb $MIRROR $SUITE-updates main" "deb $SECURITY $SUITE-security main")
# Essential + PACKAGES, merged /usr, no docs/man pages/locales; the runtime provides resolv.conf and hostname.
# eatmydata: dpkg without fsync while the tree is built (nothing of it is left in the tree).
MMDEBSTRAP_ARGS=(--variant=essential --include="$PACKAGES" --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
  --hook-dir=/usr/share/mmdebstrap/hooks/eatmydata
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*'
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias'
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright'
  --customize-hook='rm -f "$1/etc/resolv.conf" "$1/etc/hostname"')
release_date() {  # the Date of one suite's InRelease, in epoch seconds
  local date
  date=$(curl -fsS --max-time 60 "$1/dists/$2/InRelease" | sed -n 's/^Date: //p' | head -1) \
    || die "cannot read $1/dists/$2/InRelease"
  date -ud "$date" +%s
}
base_epoch=0 dates=""
for suite in "$MIRROR $SUITE" "$MIRROR $SUITE-updates" "$SECURITY $SUITE-security"; do
  # shellcheck disable=SC2086
  epoch=$(release_date $suite)
  dates="$dates $epoch"
  [ "$epoch" -gt "$base_epoch" ] && base_epoch=$epoch
done
base_key=$(printf '%s\n' "$(mmdebstrap --version)" "${MMDEBSTRAP_ARGS[@]}" "${SOURCES[@]}" "$dates" | sha)
BASE=localhost/sloguard-base:$SUITE-$base_key
if [ "$rebuild" = 1 ] || ! podman image exists "$BASE"; then
  log "building the base $BASE (mmdebstrap; mirror state $(date -ud "@$base_epoch" +%FT%TZ))"
  tar=$(mktemp --tmpdir="$CACHE" base.XXXXXX.tar)
  trap 'rm -f "$tar" "$tar.log"' EXIT
  SOURCE_DATE_EPOCH=$base_epoch mmdebstrap --quiet "${MMDEBSTRAP_ARGS[@]}" "$SUITE" "$tar" "${SOURCES[@]}" \
    >"$tar.log" 2>&1 || { tail -n 40 "$tar.log" >&2; die "mmdebstrap failed"; }
  ctr=$(buildah from --pull=never scratch)
  buildah add --quiet "$ctr" "$tar" / >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd /bin/sh \
    --label "org.opencontainers.image.description=Debian $SUITE: Essential, $PACKAGES (mmdebstrap)" "$ctr"
  buildah commit --quiet --timestamp "$base_epoch" --identity-label=false --rm "$ctr" "$BASE" >/dev/null
  rm -f "$tar" "$tar.log"
fi

# 2. Wheels for the image's Python (Debian 12: CPython 3.11, glibc 2.36), whatever Python runs this script.
extras="" suffix=""
[ "$gpu" = 1 ] && extras=canary suffix=-gpu
mapfile -t reqs < <("$PY" - "$extras" <<'EOF'
import sys, tomllib
meta = tomllib.load(open("pyproject.toml", "rb"))
extras = [e for e in sys.argv[1].split(",") if e]
print("\n".join([*meta["project"]["dependencies"], *meta["build-system"]["requires"],
                 *(r for e in extras for r in meta["project"]["optional-dependencies"][e])]))
EOF
)
platforms=()
for minor in $(seq 36 -1 5); do platforms+=(--platform "manylinux_2_${minor}_x86_64"); done
platforms+=(--platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64)
wheels_key=$(printf '%s\n' "${reqs[@]}" "${platforms[@]}" "$(cat "${PIP_CONSTRAINT:-/dev/null}")" \
  "${PIP_INDEX_URL:-}" "${PIP_EXTRA_INDEX_URL:-}" "${PIP_FIND_LINKS:-}" | sha)
WHEELS=$CACHE/wheels$suffix-$wheels_key
if [ ! -f "$WHEELS/.complete" ]; then
  log "downloading wheels into $WHEELS"
  rm -rf "$WHEELS" && mkdir -p "$WHEELS"
  "$PY" -m pip download -qq --disable-pip-version-check -d "$WHEELS" --only-binary=:all: --python-version 3.11 \
    --implementation cp --abi cp311 --abi abi3 --abi none "${platforms[@]}" "${reqs[@]}" >&2
  touch "$WHEELS/.complete"
fi

# 3. The build context (what .dockerignore lets through, plus wheels/), hashed into the image's tag.
VERSION=$("$PY" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
INPUTS=(sloguard pyproject.toml README.md LICENSE Dockerfile .dockerignore)
ctx=$(mktemp -d --tmpdir="$CACHE" context.XXXXXX)
trap 'rm -rf "$ctx" ${tar:+"$tar" "$tar.log"}' EXIT
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -z --cached --others --exclude-standard -- "${INPUTS[@]}" \
    | while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done | xargs -0 cp --parents -t "$ctx"
  sde=$(git log -1 --format=%ct -- "${INPUTS[@]}")
else
  cp -r "${INPUTS[@]}" "$ctx/" && find "$ctx" -name __pycache__ -prune -exec rm -rf {} +
  sde=$(find "${INPUTS[@]}" -type f -printf '%T@\n' | sort -n | tail -1 | cut -d. -f1)
fi
mkdir "$ctx/wheels" && cp -l "$WHEELS"/*.whl "$ctx/wheels/" 2>/dev/null || cp "$WHEELS"/*.whl "$ctx/wheels/"
sde=${SOURCE_DATE_EPOCH:-$(( sde > base_epoch ? sde : base_epoch ))}
base_id=$(podman image inspect --format '{{.Id}}' "$BASE")
key=$( { printf '%s\n' "$base_id" "$extras" "$sde" "$VERSION"; sha256sum "$ROOT/scripts/build-image.sh";
         (cd "$ctx" && find . -type f -print0 | sort -z | xargs -0 sha256sum); } | sha)
REF=localhost/sloguard:$VERSION$suffix-$key
if [ "$rebuild" = 1 ] || ! podman image exists "$REF"; then
  log "building $REF on $BASE (buildah, SOURCE_DATE_EPOCH=$sde)"
  buildah bud --quiet --isolation chroot --pull=never --timestamp "$sde" --identity-label=false \
    --build-arg BASE="$BASE" --build-arg EXTRAS="$extras" --build-arg SOURCE_DATE_EPOCH="$sde" \
    --build-arg VERSION="$VERSION" -f "$ctx/Dockerfile" -t "$REF" "$ctx" >&2
fi
podman tag "$REF" "localhost/sloguard:$VERSION$suffix" "${tags[@]}"
[ -z "$save" ] || podman save --quiet --format oci-archive -o "$save" "$REF"
log "$REF: $(podman image inspect --format '{{.Id}} {{.Size}}' "$REF" \
  | awk '{printf "id %.19s, %.0f MB uncompressed", $1, $2 / 1e6}')"
echo "$REF"
