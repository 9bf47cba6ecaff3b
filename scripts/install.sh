#!/usr/bin/env bash
# Install sloguard onto a systemd host: its own virtualenv (/opt/sloguard), the system user `sloguard`
# (sysusers.d), the hardened unit with a matching ExecStart, and a config skeleton that passes `sloguard check`.
#
#   sudo scripts/install.sh                      # build a wheel from this checkout and install it
#   sudo scripts/install.sh --wheel FILE.whl     # install a release wheel (dependencies from your index)
#   scripts/install.sh --destdir DIR ...         # stage into DIR (packaging, tests): no root, no systemctl
#   sudo scripts/install.sh --uninstall          # remove the venv, unit, link and user entry; KEEPS the config
#                                                # (/etc/sloguard) and the state (/var/lib/sloguard)
# Options: --prefix DIR (default /opt/sloguard), --canary (also install torch for the GPU canary).
# Needs Python >= 3.11 with the venv module (Debian/Ubuntu: apt install python3-venv).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
PREFIX=/opt/sloguard
DESTDIR=""
WHEEL=""
EXTRA=""
ACTION=do_install
UNIT=etc/systemd/system/sloguard.service
SYSUSERS=etc/sysusers.d/sloguard.conf
CONFIG=etc/sloguard/sloguard.yaml
LINK=usr/local/bin/sloguard

die() { printf 'install.sh: %s\n' "$*" >&2; exit 2; }
log() { printf '[install] %s\n' "$*" >&2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --wheel) WHEEL=${2:?--wheel needs a file}; shift 2 ;;
    --prefix) PREFIX=${2:?--prefix needs a directory}; shift 2 ;;
    --destdir) DESTDIR=${2:?--destdir needs a directory}; shift 2 ;;
    --canary) EXTRA="[canary]"; shift ;;
    --uninstall) ACTION=do_uninstall; shift ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
case "$PREFIX" in /*) ;; *) die "--prefix must be an absolute path, got $PREFIX" ;; esac
if [ -n "$DESTDIR" ]; then
  mkdir -p "$DESTDIR"
  DESTDIR=$(cd "$DESTDIR" && pwd)
elif [ "$(id -u)" != 0 ]; then
  die "installing onto this host needs root (sudo $0 ...), or stage it with --destdir DIR"
fi
VENV="$DESTDIR$PREFIX"
live() { [ -z "$DESTDIR" ]; }  # acting on the real host (systemctl, users) rather than a staging root

do_uninstall() {
  if live && command -v systemctl >/dev/null && systemctl list-unit-files sloguard.service >/dev/null 2>&1; then
    systemctl disable --now sloguard.service || true
  fi
  rm -rf "$VENV"
  rm -f "$DESTDIR/$UNIT" "$DESTDIR/$SYSUSERS"
  [ -L "$DESTDIR/$LINK" ] && rm -f "$DESTDIR/$LINK"
  if live && command -v systemctl >/dev/null; then systemctl daemon-reload || true; fi
  log "removed $PREFIX, the unit and the sysusers entry"
  log "kept: /etc/sloguard (config), /var/lib/sloguard (state: probe history, alert state, outbox) and the"
  log "  user 'sloguard'; delete them yourself if you want them gone (userdel sloguard)"
}

build_wheel() {
  local out=$1
  log "building a wheel from $ROOT"
  "$PY" -m pip wheel -q --no-deps --wheel-dir "$out" "$ROOT" >"$out/build.log" 2>&1 \
    || { cat "$out/build.log" >&2; die "building the wheel failed"; }
  WHEEL=$(ls "$out"/sloguard-*.whl)
}

# A venv made under DESTDIR names DESTDIR in its scripts; point them at the final prefix.
relocate() {
  [ -n "$DESTDIR" ] || return 0
  local f
  for f in "$VENV"/bin/*; do
    [ -f "$f" ] && [ ! -L "$f" ] || continue
    if head -c 2 "$f" | grep -q '#!' || grep -qF "$VENV" "$f"; then
      sed -i "s|$VENV|$PREFIX|g" "$f"
    fi
  done
  sed -i "s|$VENV|$PREFIX|g" "$VENV/pyvenv.cfg"
}

install_files() {
  # The unit from the repository, ExecStart pointed at this prefix's entry point.
  mkdir -p "$(dirname "$DESTDIR/$UNIT")"
  sed "s|^ExecStart=\S*sloguard |ExecStart=$PREFIX/bin/sloguard |" "$ROOT/systemd/sloguard.service" \
    > "$DESTDIR/$UNIT.tmp"
  grep -q "^ExecStart=$PREFIX/bin/sloguard run -c /$CONFIG\$" "$DESTDIR/$UNIT.tmp" || die "unit ExecStart not rewritten"
  chmod 0644 "$DESTDIR/$UNIT.tmp" && mv "$DESTDIR/$UNIT.tmp" "$DESTDIR/$UNIT"
  install -D -m 0644 /dev/stdin "$DESTDIR/$SYSUSERS" <<'EOF'
# sloguard's service user (scripts/install.sh); the unit runs as it. Home = the state directory.
u sloguard - "sloguard LLM inference SLO exporter" /var/lib/sloguard
EOF
  mkdir -p "$(dirname "$DESTDIR/$LINK")"
  ln -sfn "$PREFIX/bin/sloguard" "$DESTDIR/$LINK"
  if [ -e "$DESTDIR/$CONFIG" ]; then
    log "kept the existing /$CONFIG"
  else
    install -D -m 0644 "$ROOT/systemd/sloguard.yaml" "$DESTDIR/$CONFIG"
    log "wrote the config skeleton /$CONFIG: edit targets, probes and SLOs"
  fi
}

do_install() {
  "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || die "$PY is older than Python 3.11"
  "$PY" -c 'import ensurepip, venv' 2>/dev/null || die "$PY has no venv module: apt install python3-venv"
  TMP=$(mktemp -d)
  trap 'rm -rf "$TMP"' EXIT
  [ -n "$WHEEL" ] || build_wheel "$TMP"
  [ -f "$WHEEL" ] || die "no such wheel: $WHEEL"
  log "creating the virtualenv $PREFIX"
  mkdir -p "$(dirname "$VENV")"
  "$PY" -m venv --clear "$VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$(cd "$(dirname "$WHEEL")" && pwd)/$(basename "$WHEEL")$EXTRA" \
    >"$TMP/pip.log" 2>&1 || { cat "$TMP/pip.log" >&2; die "pip install failed (log above)"; }
  relocate
  install_files
  "$VENV/bin/python" -m sloguard check -c "$DESTDIR/$CONFIG" >/dev/null \
    || die "the config /$CONFIG does not pass sloguard check (see above)"
  if live; then
    if command -v systemd-sysusers >/dev/null; then
      systemd-sysusers "/$SYSUSERS"
    elif ! id sloguard >/dev/null 2>&1; then
      useradd --system --home-dir /var/lib/sloguard --no-create-home --shell /usr/sbin/nologin sloguard
    fi
    systemctl daemon-reload
    log "installed $("$PREFIX/bin/sloguard" version). Next:"
    log "  edit /$CONFIG, then: sloguard check -c /$CONFIG && systemctl enable --now sloguard"
  else
    log "staged into $DESTDIR (prefix $PREFIX)"
  fi
}

"$ACTION"
