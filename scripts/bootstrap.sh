#!/usr/bin/env bash
# Prepare a virtual environment in .venv with what vmafxd needs.
#
#   scripts/bootstrap.sh [core|test]
#
# core: the package itself (numpy, msgpack, trio, PyAV) -- enough to score on the CPU lane,
#       from y4m, raw .yuv or any video file FFmpeg reads.
# test: also pytest/pytest-trio, hypothesis (the reliability fuzzer), matplotlib (plot), systemd-python, PyOpenGL, hip-python, the
#       NVIDIA compiler bindings, ray and pyarrow (vmafxctl batch), plus the Debian packages the tests use
#       (systemd tools, Mesa EGL, the ROCm 5.2 HIP runtime for compiling kernels).
# Works on a fresh Debian 12 with only python3 and apt; re-running is cheap.
set -euo pipefail
profile="${1:-core}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${VMAFX_VENV:-$root/.venv}"
py="${PYTHON:-python3}"

sudo_cmd=()
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo_cmd=(sudo); fi
fi

apt_install() {
    # Install the Debian packages among "$@" that are missing.
    local missing=()
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "bootstrap: apt-get not found; please install: ${missing[*]}" >&2
        return 1
    fi
    echo "bootstrap: apt-get install ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    "${sudo_cmd[@]}" apt-get update -qq || true
    "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# The venv module is a separate Debian package; pyenv/other Pythons carry it.
if ! "$py" -c "import ensurepip, venv" >/dev/null 2>&1; then
    ver="$("$py" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
    apt_install "python${ver}-venv" || apt_install python3-venv
fi

if [ "$profile" = test ]; then
    # systemd-python builds against libsystemd; the tests use systemd-socket-activate
    # and systemd-analyze; Mesa gives a surfaceless EGL/GL context for the GL tests;
    # Debian's ROCm 5.2 runtime lets HIPRTC compile kernels for AMD GPUs without one.
    apt_install gcc pkg-config libsystemd-dev python3-dev systemd \
        libegl1 libgl1 libegl-mesa0 libgl1-mesa-dri libgles2 \
        libamdhip64-5 libhiprtc-builtins5 || \
        echo "bootstrap: some Debian packages could not be installed; the tests that need them will skip and say why" >&2
fi

if [ ! -x "$venv/bin/python" ]; then
    "$py" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
pip_quiet() {  # pip's build chatter only when it fails
    local log
    log="$(mktemp)"
    if "$venv/bin/python" -m pip install -q "$@" > "$log" 2>&1; then rm -f "$log"; return 0; fi
    cat "$log" >&2
    rm -f "$log"
    return 1
}
case "$profile" in
    core) pip_quiet -e "$root" ;;
    test) pip_quiet -e "$root[test,gl,cuda,hip,plot,ray,parquet]"
          pip_quiet -e "$root[systemd]" || \
              echo "bootstrap: systemd-python did not build; the sd_notify tests will skip and say why" >&2 ;;
    *) echo "usage: $0 [core|test]" >&2; exit 2 ;;
esac
# the CPU lane's native C++ kernels, built once into the kernel cache (with g++; without one the
# CPU lane runs its numpy twins): the first score loads them instead of compiling for ~15 s
"$venv/bin/python" -m vmafxd.lanes.native > /dev/null 2>&1 || true
echo "$venv"
