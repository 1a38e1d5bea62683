# Helpers shared by the CI job scripts (tools/ci-sanitizers, tools/ci-fuzz,
# .ci/run). Source it from the repository root; it defines functions only.
#
# A job reports one line "<job> <passed> <failed> <seconds>" to the file
# named by $KVS_CI_RESULTS when .ci/run sets it, and always prints it.

# ci_packages PKG...: installs the Debian packages that are missing
# (apt-get update first), as root or through sudo.
ci_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  local sudo=""
  [ "$(id -u)" != 0 ] && sudo="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get update
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${missing[@]}"
}

# ci_configure DIR CMAKE_ARGS...: configures DIR with Ninja and the shared
# data directory ($KVS_SHARED_DIR, else ../shared); ccache when installed.
ci_configure() {
  local dir=$1; shift
  local launcher=()
  if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  fi
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DKVS_SHARED_DIR="${KVS_SHARED_DIR:-$PWD/../shared}" "${launcher[@]}" "$@"
}

# ci_ctest_counts LOG: "<passed> <failed>" from ctest's closing summary in
# LOG ("N% tests passed, F tests failed out of T"); "0 1" when there is none.
ci_ctest_counts() {
  local line total failed
  line=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$1" | tail -1)
  if [ -z "$line" ]; then echo "0 1"; return; fi
  failed=$(sed -E 's/.* ([0-9]+) tests? failed out of.*/\1/' <<<"$line")
  total=$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$line")
  echo "$((total - failed)) $failed"
}

# ci_report JOB PASSED FAILED SECONDS
ci_report() {
  echo "job $1: $2 passed, $3 failed, $4 s wall"
  if [ -n "${KVS_CI_RESULTS:-}" ]; then echo "$1 $2 $3 $4" >>"$KVS_CI_RESULTS"; fi
}

# ci_sanitizer_logs DIR: prints every sanitizer report file in DIR (a
# bounded excerpt each) and returns non-zero if there is any.
ci_sanitizer_logs() {
  local files=("$1"/*)
  [ -e "${files[0]}" ] || return 0
  echo "== ${#files[@]} sanitizer report file(s) in $1:"
  local f
  for f in "${files[@]}"; do
    echo "---- $f"
    head -n 80 "$f"
  done
  return 1
}
