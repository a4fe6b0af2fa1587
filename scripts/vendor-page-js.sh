#!/usr/bin/env bash
# Refresh the page's vendored JavaScript (turnstate/server/static/vendor/) from the npm
# registry: marked (markdown) and DOMPurify (HTML sanitizer), at the versions pinned here.
# Bump a version below, run this script, look at the diff, run the browser tests
# (tests/server/test_browser.py: markdown and the XSS payloads), commit.
set -euo pipefail
MARKED_VERSION=18.2.1
DOMPURIFY_VERSION=3.5.0

cd "$(dirname "$0")/.."
out=turnstate/server/static/vendor
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "marked@$MARKED_VERSION" "dompurify@$DOMPURIFY_VERSION" >/dev/null)
for name in "marked-$MARKED_VERSION" "dompurify-$DOMPURIFY_VERSION"; do
  mkdir -p "$work/$name" && tar xzf "$work/$name.tgz" -C "$work/$name"
done
mkdir -p "$out"
# The ES module builds, without their source-map comments (the maps are not vendored).
grep -v '^//# sourceMappingURL=' "$work/marked-$MARKED_VERSION/package/lib/marked.esm.js" \
  > "$out/marked.esm.js"
grep -v '^//# sourceMappingURL=' "$work/dompurify-$DOMPURIFY_VERSION/package/dist/purify.es.mjs" \
  > "$out/purify.es.js"
cp "$work/marked-$MARKED_VERSION/package/LICENSE" "$out/LICENSE.marked"
cp "$work/dompurify-$DOMPURIFY_VERSION/package/LICENSE" "$out/LICENSE.dompurify"  # Apache-2.0
cp "$work/dompurify-$DOMPURIFY_VERSION/package/LICENSE-MPL" "$out/LICENSE-MPL.dompurify"  # or MPL-2.0
{
  echo "# Vendored by scripts/vendor-page-js.sh from the npm registry; do not edit."
  echo "marked $MARKED_VERSION $(cd "$work" && sha256sum "marked-$MARKED_VERSION.tgz" | cut -d' ' -f1)"
  echo "dompurify $DOMPURIFY_VERSION $(cd "$work" && sha256sum "dompurify-$DOMPURIFY_VERSION.tgz" | cut -d' ' -f1)"
} > "$out/VERSIONS"
echo "vendored marked $MARKED_VERSION and DOMPurify $DOMPURIFY_VERSION into $out"
