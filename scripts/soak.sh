#!/usr/bin/env bash
# make soak: every fault-injection harness with many more seeded scenarios
# than make test, on the in-process DynamoDB (internal/memdb) with a sample
# of each on moto so that memdb cannot drift, then the Kafka Streams and
# Flink CEP conformance. Each harness's output is kept in .build/soak/<harness>.log;
# at the end one line per harness gives its scenarios, mismatches and seed
# range, and each failing scenario's one-line command that runs it alone.
#
# Seed counts (override in the environment, e.g. SOAK_ES=100 make soak):
#   SOAK_AGGREGATE  per write path (per-batch, per-interval); every window kind in each
#   SOAK_WARMRACE   two warm handlers and the ticker racing on keyed states (sessions, sliding)
#   SOAK_JOIN       per join kind (inner, left, outer)
#   SOAK_CEP        CEP histories through every rule form
#   SOAK_BURSTS     CEP bursts cut three ways (about a second each: fewer)
#   SOAK_DEDUPE     dedupe ledger histories
#   SOAK_ES         event-store command histories
#   SOAK_MOTO       of each harness's scenarios, how many also run on moto
#   SOAK_CONFORMANCE  Kafka Streams histories per window kind, late policy and write path, and
#                     Flink CEP histories per rule form (0: none)
set -uo pipefail

GO=${GO:-go}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
LOGS=.build/soak
mkdir -p "$LOGS"

AGGREGATE=${SOAK_AGGREGATE:-1500}
WARMRACE=${SOAK_WARMRACE:-400}
JOIN=${SOAK_JOIN:-1000}
CEP=${SOAK_CEP:-2000}
BURSTS=${SOAK_BURSTS:-60}
DEDUPE=${SOAK_DEDUPE:-2000}
ES=${SOAK_ES:-2000}
MOTO=${SOAK_MOTO:-2}
CONFORMANCE=${SOAK_CONFORMANCE:-200}

summary=()
repros=()
failed=0

# harness NAME SEEDS PER PACKAGE TEST [FLAG...]: runs TEST of PACKAGE with
# SEEDS scenarios (PER: what they are counted per, or ""; FLAG: the test's
# own seed count, where it has one), and notes its line.
harness() {
	local name=$1 seeds=$2 per=$3 pkg=$4 test=$5 start end log rc pass fail
	shift 5
	log=$LOGS/$name.log
	start=$(date +%s)
	echo "== $name: $test in $pkg, seeds 1..$seeds${per:+ per $per} on memdb, the first $MOTO also on moto (log: $log)"
	$GO test -count=1 -v -timeout 60m -run "^$test\$" "$pkg" -args -fault.seeds="$seeds" -fault.moto="$MOTO" "$@" >"$log" 2>&1
	rc=$?
	end=$(date +%s)
	pass=$(grep -cE -- '--- PASS: .*/seed-[0-9]+ ' "$log")
	fail=$(grep -cE -- '--- FAIL: .*/seed-[0-9]+ ' "$log")
	summary+=("SOAK $name scenarios=$((pass + fail)) mismatches=$fail seeds=1..$seeds${per:+ per $per} (moto: the first $MOTO) $((end - start))s")
	while IFS= read -r line; do repros+=("$line"); done < <(grep -oE 'run this scenario alone: .*' "$log" | sed 's/^run this scenario alone: //')
	if [ "$rc" -ne 0 ] || [ "$fail" -ne 0 ]; then
		failed=1
		if [ "$fail" -eq 0 ]; then
			summary+=("SOAK $name FAILED outside a scenario (exit $rc): see $log")
			tail -n 20 "$log"
		fi
	fi
}

began=$(date +%s)
harness aggregate "$AGGREGATE" "write path" ./pkg/aggregate TestFaultInjectionViewsEqualReference
harness warm-race "$WARMRACE" "" ./pkg/aggregate TestWarmHandlersAndTheTickerPublishEachKeyedResultOnce -warmrace.seeds="$WARMRACE"
harness join "$JOIN" "join kind" ./pkg/join TestFaultInjectionOutputsEqualReference
harness cep "$CEP" "" ./pkg/cep TestFaultInjectionMatchesEqualReference
harness cep-bursts "$BURSTS" "" ./pkg/cep TestRandomBurstsNeverWedgeAKey
harness dedupe "$DEDUPE" "" ./pkg/dedupe TestFaultInjectionClaimsExactlyOnce
harness dedupe-ranges "$DEDUPE" "" ./pkg/dedupe TestFaultInjectionClaimsExactlyOnceByRange
harness es "$ES" "" ./pkg/es TestFaultInjectionCommandsExactlyOnce

if [ "$CONFORMANCE" -eq 0 ]; then
	:
else
echo "== conformance: $CONFORMANCE Kafka Streams histories per window kind, late policy and write path, the session ones again with every run held as its aggregate, and the per-interval ones again with a window state that overflows (log: $LOGS/conformance.log)"
start=$(date +%s)
if $GO test -count=1 -v -timeout 60m -run '^TestKafkaStreamsConformance(PerInterval|HeldRuns|Overflow)?$' ./conformance -args -conformance.seeds="$CONFORMANCE" >"$LOGS/conformance.log" 2>&1; then
	summary+=("SOAK conformance histories=$((CONFORMANCE * 28)) mismatches=0 seeds=1..$CONFORMANCE per window kind, late policy and write path, sessions again with held runs, per-interval again overflowing $(($(date +%s) - start))s")
else
	failed=1
	summary+=("SOAK conformance FAILED: see $LOGS/conformance.log (a mismatch prints the command that reruns its seed)")
	grep -E 'go test .*-run' "$LOGS/conformance.log" | head -n 20
fi
echo "== conformance: $CONFORMANCE Flink CEP histories per rule form (log: $LOGS/flinkcep.log)"
start=$(date +%s)
if $GO test -count=1 -v -timeout 30m -run '^TestFlinkCEPConformance$' ./conformance -args -conformance.seeds="$CONFORMANCE" >"$LOGS/flinkcep.log" 2>&1; then
	summary+=("SOAK flinkcep histories=$((CONFORMANCE * 8)) mismatches=0 seeds=1..$CONFORMANCE per rule form $(($(date +%s) - start))s")
else
	failed=1
	summary+=("SOAK flinkcep FAILED: see $LOGS/flinkcep.log (a mismatch prints the command that reruns its seed)")
	grep -E 'go test .*-run' "$LOGS/flinkcep.log" | head -n 20
fi
fi

total=0
for line in "${summary[@]}"; do
	n=$(sed -nE 's/^SOAK [a-z-]+ scenarios=([0-9]+) .*/\1/p' <<<"$line")
	total=$((total + ${n:-0}))
done
echo
printf '%s\n' "${summary[@]}"
echo "SOAK total fault scenarios=$total in $(($(date +%s) - began))s"
if [ "${#repros[@]}" -gt 0 ]; then
	echo "Each failing scenario alone:"
	printf '  %s\n' "${repros[@]}"
fi
exit "$failed"
