#!/usr/bin/env bash
# The package a release would upload: build the sdist and the wheel, install the
# sdist into a fresh venv (pip compiles the Cython modules from the .pyx it carries),
# and crawl a local site twice with it, from a new Scrapy project.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

.venv/bin/python -m build --outdir "$work/dist" . >"$work/build.log" 2>&1 || {
  tail -40 "$work/build.log"; exit 1; }
sdist=$(ls "$work"/dist/*.tar.gz)
wheel=$(ls "$work"/dist/*.whl)
tar -tzf "$sdist" >"$work/sdist.txt"
# the shipped test kit and the Lua scripts are in the wheel a third party installs
"${PYTHON:-python3}" -m zipfile -l "$wheel" >"$work/wheel.txt"
for f in scrapy_recrawl/testing/store_contract.py scrapy_recrawl/testing/fixtures.py \
         scrapy_recrawl/api.py scrapy_recrawl/lua/history_record.lua \
         scrapy_recrawl/lua/frontier_fence.lua; do
  grep -q " *$f " "$work/wheel.txt" || { echo "package-check: $f missing from the wheel"; exit 1; }
done
for f in LICENSE CHANGELOG.md scrapy_recrawl/change/_walk.pyx scrapy_recrawl/change/_hashes.pyx \
         scrapy_recrawl/change/_hashes.pxd scrapy_recrawl/change/_diff.pyx \
         scrapy_recrawl/scoring/_em.pyx scrapy_recrawl/py.typed; do
  grep -q "/$f\$" "$work/sdist.txt" || { echo "package-check: $f missing from the sdist"; exit 1; }
done

"${PYTHON:-python3}" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet "$sdist" 2>&1 | grep -v "^WARNING: Location" || true
"$work/venv/bin/python" -c "import scrapy_recrawl" # installed, or pip failed above
cd "$work"  # not the repository: the installed package must be the one imported
# the example plug-in package passes the contract suite the installed package ships
"$work/venv/bin/python" -m pip install --quiet pytest "$OLDPWD/examples/plugin" 2>&1 \
  | grep -v "^WARNING: Location" || true
"$work/venv/bin/python" -m pytest -q -p no:cacheprovider --rootdir "$OLDPWD/examples/plugin" \
  "$OLDPWD/examples/plugin/tests" >"$work/example.log" 2>&1 || {
  tail -40 "$work/example.log"; echo "package-check: the example plug-in failed"; exit 1; }
"$work/venv/bin/python" "$OLDPWD/.ci/package_smoke.py" "$work/project"
