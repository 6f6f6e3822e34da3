# Shared setup for scripts/run.sh and scripts/test.sh (sourced, not run): idempotent installs of
# Debian's activemq and gcc (and python3-venv, python3-dev when needed) and of nettel into .venv.
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

find_python() {
    local candidate
    for candidate in ${PYTHON:-} python3.11 python3; do
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

install_system_packages() {  # $@: Debian packages needed beyond activemq (e.g. chromium)
    local missing=() pkg
    # gcc (optional, but parsing is faster with it): builds nettel's C histogram scanner; without
    # a compiler the install skips it and delay histograms are parsed in Python.
    for pkg in activemq gcc "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
    done
    local py
    if ! py="$(find_python)"; then
        missing+=(python3 python3-venv)
    else
        "$py" -c 'import ensurepip' 2>/dev/null || missing+=(python3-venv)
        "$py" -c 'import os, sysconfig; os.stat(sysconfig.get_path("include") + "/Python.h")' \
            2>/dev/null || missing+=(python3-dev)  # headers to build the (optional) C scanner
    fi
    if [ "${#missing[@]}" -gt 0 ]; then
        echo "setup: installing ${missing[*]}"
        $SUDO apt-get update
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
    fi
}

install_venv() {  # $1: what to pip install, e.g. "." or ".[test]"
    [ -x .venv/bin/python ] || "$(find_python)" -m venv .venv
    local stamp want  # one stamp per target: skip pip while pyproject.toml and the C are unchanged
    stamp=".venv/.nettel-install-$(printf %s "$1" | tr -c '[:lower:]' '_')"
    want="$(cat pyproject.toml service/parse/*.c | sha256sum | cut -d' ' -f1)"  # C: rebuild
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        .venv/bin/python -m pip install --disable-pip-version-check -q -e "$1"
        echo "$want" >"$stamp"
    fi
}


install_promtool() {  # promtool only, from Debian's prometheus package, without starting a server
    [ -x .venv/bin/promtool ] && return 0
    local scratch
    scratch="$(mktemp -d)"
    if (cd "$scratch" && apt-get download prometheus >/dev/null 2>&1) ||
        { $SUDO apt-get update >/dev/null && (cd "$scratch" && apt-get download prometheus >/dev/null); }; then
        dpkg-deb -x "$scratch"/prometheus_*.deb "$scratch/root"
        cp "$scratch/root/usr/bin/promtool" .venv/bin/promtool
    else
        echo "setup: could not fetch promtool; its rule checks will be skipped" >&2
    fi
    rm -rf "$scratch"
}
