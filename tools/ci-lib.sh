# Helpers shared by the CI job scripts (tools/ci-sanitizers, tools/ci-fuzz,
# .ci/run). Source it from the repository root; it defines functions only.
#
# A job reports one line "<job> <passed> <failed> <seconds>" to the file
# named by $KVS_CI_RESULTS when .ci/run sets it, and always prints it.
# A job whose ctest run had failures also appends a digest of them (each
# failed test's name and the first lines of its failure) to the file named by
# $KVS_CI_FAILURES, which .ci/run prints again after its summary: the end of
# a long log then names what failed.

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

# ci_ctest_failures JOB LOG: appends to $KVS_CI_FAILURES (when set), for each
# test LOG shows as failed ("***Failed", "***Timeout", "***Exception", "Not
# Run"; LOG from ctest --output-on-failure), the status line and at most 24
# lines of its output, from the first line that names a failure (gtest's
# "Failure", a sanitizer's "ERROR:", "error:", "Check failed") or else its last
# 24 lines.
ci_ctest_failures() {
  [ -n "${KVS_CI_FAILURES:-}" ] || return 0
  awk -v job="$1" '
    function flush(   i, from, to) {
      if (status == "") return
      from = 0
      for (i = 1; i <= n; i++)
        if (lines[i] ~ /Failure|ERROR:|error:|Check failed|terminate called/) { from = i; break }
      if (from == 0) from = (n > 24 ? n - 23 : 1)
      to = from + 23; if (to > n) to = n
      print "-- " job ": " status
      for (i = from; i <= to; i++) print "   " substr(lines[i], 1, 300)
      status = ""; n = 0
    }
    /^ *[0-9]+\/[0-9]+ Test +#[0-9]+: / {
      flush()
      if ($0 ~ /\*\*\*(Failed|Timeout|Exception)|Not Run/) { status = $0; sub(/^ +/, "", status) }
      next
    }
    /^ +Start +[0-9]+: / || /^[0-9]+% tests passed/ { flush(); next }
    status != "" { lines[++n] = $0 }
    END { flush() }
  ' "$2" >>"$KVS_CI_FAILURES"
}

# ci_build_failure JOB LOG: appends to $KVS_CI_FAILURES (when set) that
# JOB stopped before its tests (setup, configure or build failed), with at
# most 24 lines of LOG from the first that names an error (a compiler's
# "error:", the assembler's "Error:", ninja's "FAILED:", "CMake Error", apt's
# "E: ") or else LOG's last 24 lines: a broken build is named at the end.
ci_build_failure() {
  [ -n "${KVS_CI_FAILURES:-}" ] || return 0
  local from
  from=$(grep -n -m1 -E 'error:|Error:|^FAILED:|CMake Error|^E: ' "$2" | cut -d: -f1)
  {
    echo "-- $1: stopped before its tests ran"
    if [ -n "$from" ]; then
      tail -n +"$from" "$2" | head -n 24 | cut -c1-300 | sed 's/^/   /'
    else
      tail -n 24 "$2" | cut -c1-300 | sed 's/^/   /'
    fi
  } >>"$KVS_CI_FAILURES"
}

# ci_job_failures JOB LOG: what failed in LOG, a job's whole log: its
# tests' failures (ci_ctest_failures) when ctest ran, else that the job
# stopped before its tests (ci_build_failure).
ci_job_failures() {
  if grep -qE '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$2"; then
    ci_ctest_failures "$1" "$2"
  else
    ci_build_failure "$1" "$2"
  fi
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
