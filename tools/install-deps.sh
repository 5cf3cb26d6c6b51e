#!/usr/bin/env bash
# Installs the Debian packages tandem needs, or says the one apt-get line to run.
# usage: tools/install-deps.sh [extra-package ...]   (make test and make bench add python3-torch)
set -euo pipefail

packages=(
  g++ cmake make ninja-build pkg-config ccache  # ccache: rebuilds on the same machine reuse objects (CMakeLists.txt)
  clang  # compiles the -O0 code in two thirds of g++'s time (cmake/cold_compiler.cmake); g++ the -O3 code
  libluajit-5.1-dev liblpsolve55-dev libspdlog-dev libboost-test-dev
  libopenmpi-dev openmpi-bin libopenblas-dev nlohmann-json3-dev zlib1g-dev libreadline-dev libseccomp-dev
  python3 python3-matplotlib
  iproute2 slurm-wlm munge  # the tests across hosts (network namespaces) and under a one-machine Slurm
  tmux  # the console test that reads the screen (integration.console_tmux)
  dataset-fashion-mnist fortunes
  "$@"
)

# One dpkg-query for all of them: it runs before every `make`, and twenty took most
# of a second on a slow machine.
installed=" $({ dpkg-query -W -f='${Package}=${Status}\n' "${packages[@]}" 2>/dev/null || true; } |
  sed -n 's/=install ok installed$//p' | tr '\n' ' ') "
missing=()
for p in "${packages[@]}"; do
  [[ "$installed" == *" $p "* ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -eq 0 ]]; then
  echo "tandem: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "tandem: missing Debian packages. Run:" >&2
  echo "  sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
