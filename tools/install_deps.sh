#!/bin/sh
# Install the Debian packages tgraph needs, only those that are missing.
#   tools/install_deps.sh build   compiler, meson, OpenBLAS, Check, MPI
#   tools/install_deps.sh run     build + data packages (CMUdict) + gnuplot + PyTorch (peer)
#   tools/install_deps.sh fuzz    build + clang with libFuzzer and its sanitizer runtimes (./test.sh --fuzz)
#   tools/install_deps.sh cross-aarch64
#                                 build + the aarch64 cross compiler, qemu-user, and OpenBLAS and
#                                 Check of Debian's arm64 architecture (added with dpkg, multiarch)
#                                 for ./test.sh --cross aarch64
#   tools/install_deps.sh emulate  build + qemu-user (./test.sh --emulate haswell)
# Without root, it names what is missing and returns 1 (the caller decides what to do).
set -eu
what=${1:-build}
pkgs="gcc meson ninja-build pkg-config libopenblas-dev check python3 libopenmpi-dev openmpi-bin doxygen"
if [ "$what" = run ]; then
    pkgs="$pkgs pocketsphinx-en-us gnuplot-nox python3-torch"
fi
if [ "$what" = fuzz ]; then
    pkgs="$pkgs clang libclang-rt-14-dev libomp-14-dev"
fi
if [ "$what" = emulate ]; then
    pkgs="$pkgs qemu-user"
fi
if [ "$what" = cross-aarch64 ]; then
    # libc6-dev-arm64-cross is only a recommendation of the compiler (not installed without it);
    # libc6:arm64 (pulled in by the :arm64 libraries) puts the aarch64 loader at
    # /lib/ld-linux-aarch64.so.1, where qemu-aarch64 finds it without QEMU_LD_PREFIX
    pkgs="$pkgs gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user libopenblas-dev:arm64 check:arm64"
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
        if [ "$(id -u)" != 0 ]; then
            echo "install_deps: the arm64 architecture is not enabled (as root: dpkg --add-architecture arm64)" >&2
            exit 1
        fi
        dpkg --add-architecture arm64
    fi
fi
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
    echo "install_deps: missing Debian packages:$missing (run as root, or: apt-get install$missing)" >&2
    exit 1
fi
echo "install_deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing
