#!/usr/bin/env bash
# Mutation testing of the test suite, from a clean clone in one command (a developer's tool,
# not part of make test): installs what the tests need, prepares the data they read, then runs
# scripts/mutate.py, which plants each of its one-line bugs in a scratch copy of the tree and
# runs the tests that claim to catch it. Arguments go to mutate.py (--check, --list, --only ID,...).
# The last full run's result is in docs/testing.md; this run's in build/mutate/results.json.
set -euo pipefail
cd "$(dirname "$0")/.."
case " $* " in
    *" --check "*|*" --list "*) ;;
    *) bash scripts/setup.sh
       make -s prepare_data
       bash scripts/prepare_data.sh > /dev/null ;;
esac
exec /usr/bin/python3 scripts/mutate.py "$@"
