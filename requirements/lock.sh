#!/usr/bin/env bash
# `make lock`: renew the pins from the package index, each resolved in a fresh venv under build/lock.
#   requirements/test.txt        every package of `pip install -e '.[sim,test]'`: what `make venv` and .ci/run
#                                install (`-c requirements/test.txt`);
#   requirements/controller.txt  every package of a plain `pip install .`, a controller for real nodes, resolved
#                                inside the test pins so that a controller runs the versions the tests ran.
# The pins hold for the Python that resolved them (named in each file's header); PYTHON picks it.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
work=build/lock
rm -rf "$work"
mkdir -p "$work"

# pins VENV WHAT: a two-line header, then every package installed in VENV but hgxkit itself, as name==version.
pins() {
    local where
    where=$("$1/bin/python" -c 'import platform; print(f"Python {platform.python_version()} ({platform.machine()})")')
    printf '# %s, every package exactly pinned.\n' "$2"
    printf '# Resolved with %s by requirements/lock.sh; renew with: make lock\n' "$where"
    "$1/bin/pip" freeze --exclude-editable --disable-pip-version-check
}

"$python" -m venv "$work/test"
"$work/test/bin/pip" install --quiet --disable-pip-version-check -e '.[sim,test]'
pins "$work/test" "The test environment: pip install -e '.[sim,test]'" >"$work/test.txt"

"$python" -m venv "$work/controller"
"$work/controller/bin/pip" install --quiet --disable-pip-version-check -c "$work/test.txt" -e .
pins "$work/controller" "A controller: pip install ." >"$work/controller.txt"

mv "$work/test.txt" requirements/test.txt
mv "$work/controller.txt" requirements/controller.txt
rm -rf "$work"  # two venvs, over 1 GB: only the pins are wanted
for name in controller test; do
    echo "lock: requirements/$name.txt pins $(grep -cv '^#' "requirements/$name.txt") packages"
done
