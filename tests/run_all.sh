#!/usr/bin/env bash
# `make test`: every test, unit and end-to-end, in three pytest sessions side by side.
#
#   tests/run_all.sh [PYTEST ARGS…]        # e.g. tests/run_all.sh -x
#
# Three sessions side by side keep both cores of a 2-core machine busy (a CI run sampled every 15 s: median 99%):
# a fourth would not shorten the run, less CPU would. Each session has its own
# cluster suffix and lock (tests/e2e/sim_steps.py), so their simulated nodes never meet; `hgxkit sim up` builds
# images one session at a time. Session A runs the serving-side e2e files listed below, session C the import,
# export, bundle, fault-matrix, fleet, suite-entry, server-kind, multi-node-group and split-over-hosts e2e files
# listed below; session B the unit tests (most in two workers), a sample of `make mutation`
# (tests/mutation/test_sample.py) and every other e2e file (a new e2e file lands there); the lists keep the three
# about as long. Session B streams to the terminal; sessions A's and C's output is in build/test-<a|c>.log,
# printed when all are done. Each pytest run writes build/test-<name>.xml (JUnit, times per test: a, b-unit,
# b-marked, b, c).
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
mkdir -p build

A_FILES=(tests/e2e/test_serving.py tests/e2e/test_router.py tests/e2e/test_serving_stack.py
         tests/e2e/test_bringup.py tests/e2e/test_sim_nodes.py tests/e2e/test_sim_mismatch.py
         tests/e2e/test_monitoring.py tests/e2e/test_hostile_node.py)
C_FILES=(tests/e2e/test_bundle.py tests/e2e/test_fault_matrix.py tests/e2e/test_fault_matrix_model.py
         tests/e2e/test_suite_entry.py tests/e2e/test_server_kinds.py tests/e2e/test_multinode_group.py
         tests/e2e/test_export_compose.py tests/e2e/test_vllm_multinode.py tests/e2e/test_image_cache.py
         tests/e2e/test_deploy_sweep.py tests/e2e/test_pd_split_over_hosts.py)
B_FILES=(tests/mutation/test_sample.py)
for file in tests/e2e/test_*.py; do
    [[ " ${A_FILES[*]} ${C_FILES[*]} " == *" $file "* ]] || B_FILES+=("$file")
done

session() {  # session NAME FILES…: one pytest session with its own suffix, cache and JUnit report
    local name=$1; shift
    local suffix=${HGXKIT_SIM_TEST_SUFFIX:+${HGXKIT_SIM_TEST_SUFFIX}$name}
    HGXKIT_SIM_TEST_SUFFIX=$suffix "$PYTHON" -m pytest -o cache_dir="build/.pytest-cache-$name" \
        --durations=25 --junitxml="build/test-$name.xml" "$@"
}

start=$(date +%s)
echo "tests: session A (${A_FILES[*]}) in the background, output in build/test-a.log"
session a "${A_FILES[@]}" "$@" >build/test-a.log 2>&1 &
a_pid=$!
echo "tests: session C (${C_FILES[*]}) in the background, output in build/test-c.log"
session c "${C_FILES[@]}" "$@" >build/test-c.log 2>&1 &
c_pid=$!
# Session B's unit tests first: those that wait on no cluster in two workers (as `make check` runs them), then
# the packaging, option-table and client-store tests in one (each of those starts processes of its own), then the
# sample and the end-to-end files.
session b-unit -n 2 -m "not install and not pins and not client" tests/unit "$@"
unit_rc=$?
session b-marked -m "install or pins or client" tests/unit "$@"
marked_rc=$?
session b "${B_FILES[@]}" "$@"
b_rc=$?
(( unit_rc == 0 && marked_rc == 0 )) || (( b_rc = b_rc ? b_rc : 1 ))
wait "$a_pid"
a_rc=$?
wait "$c_pid"
c_rc=$?
for name in a c; do
    echo
    echo "==================== session ${name^^} (build/test-$name.log) ===================="
    cat "build/test-$name.log"
done
echo "tests: session A exit $a_rc, session B exit $b_rc, session C exit $c_rc, $(( $(date +%s) - start )) s for all"
(( a_rc == 0 && b_rc == 0 && c_rc == 0 ))
