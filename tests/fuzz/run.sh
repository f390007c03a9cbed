#!/usr/bin/env bash
# Runs each libFuzzer target of a fuzz build for a fixed time (make fuzz,
# make fuzz-ci). Usage: tests/fuzz/run.sh BUILD_DIR SECONDS WORK_DIR TARGET...
#
# Each target fuzz_<name> starts from its seed corpus in tests/fuzz/corpus/<name>
# (read only) and grows a corpus of its own in WORK_DIR/<target>/corpus,
# outside the sources, which later runs start from too. Running out of time
# is the normal end; a crash, a leak, an input slower than 10 s or over
# 2 GiB of memory, or a fuzzer that does not stop is a failure: the input is
# kept in WORK_DIR/<target>/artifacts and the command that reproduces it is
# printed. Every target runs even after a failure; the exit status is 1 if
# any failed.
set -uo pipefail

[ $# -ge 4 ] || { echo "usage: $0 BUILD_DIR SECONDS WORK_DIR TARGET..." >&2; exit 2; }
build=$1 seconds=$2 work=$3
shift 3
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dict=$root/tests/fuzz/s3.dict

# Readable stack traces need llvm-symbolizer (package llvm-14 on Debian 12).
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ]; then
  for s in /usr/lib/llvm-14/bin/llvm-symbolizer "$(command -v llvm-symbolizer 2>/dev/null)"; do
    if [ -n "$s" ] && [ -x "$s" ]; then export ASAN_SYMBOLIZER_PATH=$s; break; fi
  done
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

failed=()
for t in "$@"; do
  bin=$build/$t
  seeds=$root/tests/fuzz/corpus/${t#fuzz_}
  if [ ! -x "$bin" ]; then
    echo "fuzz: $t: $bin was not built" >&2
    failed+=("$t")
    continue
  fi
  mkdir -p "$work/$t/corpus" "$work/$t/artifacts"
  log=$work/$t/log
  touch "$work/$t/.started"
  start=$(date +%s)
  # libFuzzer stops itself after -max_total_time; the outer timeout only
  # catches a fuzzer that hangs outside an input (then it is a failure).
  timeout --signal=KILL $((seconds + 120)) "$bin" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -dict="$dict" -artifact_prefix="$work/$t/artifacts/" -print_final_stats=1 \
    "$work/$t/corpus" $( [ -d "$seeds" ] && echo "$seeds" ) >"$log" 2>&1
  rc=$?
  took=$(( $(date +%s) - start ))
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  if [ $rc -eq 0 ]; then
    echo "fuzz: $t: ok, ${runs:-?} inputs in ${took} s, corpus $(ls "$work/$t/corpus" | wc -l) files"
    continue
  fi
  failed+=("$t")
  echo "fuzz: $t: FAILED (exit $rc after ${took} s, ${runs:-?} inputs)"
  input=$(find "$work/$t/artifacts" -type f -newer "$work/$t/.started" 2>/dev/null | head -n 1)
  if [ -n "$input" ]; then
    echo "  input:      $input"
    echo "  reproduce:  $bin $input"
    echo "  or without libFuzzer, in any build: <build>/replay_$t $input"
    echo "  (add it to tests/fuzz/corpus/${t#fuzz_}/ once fixed, so every build replays it)"
  else
    [ $rc -eq 137 ] && echo "  the fuzzer did not stop within $((seconds + 120)) s and was killed"
  fi
  echo "  last lines of $log:"
  tail -n 40 "$log" | sed 's/^/    /'
done

if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz: ${#failed[@]} of $# targets failed: ${failed[*]}"
  exit 1
fi
echo "fuzz: all $# targets ran ${seconds} s each without a failure"
