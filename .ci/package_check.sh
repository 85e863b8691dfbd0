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
ls "$work"/dist/*.whl >/dev/null
tar -tzf "$sdist" >"$work/sdist.txt"
for f in LICENSE CHANGELOG.md scrapy_recrawl/change/_walk.pyx scrapy_recrawl/change/_hashes.pyx \
         scrapy_recrawl/change/_hashes.pxd scrapy_recrawl/change/_diff.pyx \
         scrapy_recrawl/scoring/_em.pyx scrapy_recrawl/py.typed; do
  grep -q "/$f\$" "$work/sdist.txt" || { echo "package-check: $f missing from the sdist"; exit 1; }
done

"${PYTHON:-python3}" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet "$sdist" 2>&1 | grep -v "^WARNING: Location" || true
"$work/venv/bin/python" -c "import scrapy_recrawl" # installed, or pip failed above
cd "$work"  # not the repository: the installed package must be the one imported
"$work/venv/bin/python" "$OLDPWD/.ci/package_smoke.py" "$work/project"
