#!/usr/bin/env bash
# Regenerate book/vendor/: the JavaScript the built book needs, so it works with no
# network (no CDN at build time or at reading time). Versions are pinned here; the
# result is committed, so `make book` never runs this. Needs `npm` and the npm registry.
#
#   mathjax                      3.2.2   Apache-2.0    math rendering (CHTML output)
#   requirejs                    2.3.8   MIT           AMD loader used by the widget manager
#   @jupyter-widgets/html-manager 1.0.15 BSD-3-Clause  renders saved ipywidgets state in HTML
#                                                     (1.0.x matches ipywidgets 8.1.x)
#   reveal.js                    4.0.2   MIT           slide decks of `make slides`
#                                                     (white theme, its Source Sans Pro fonts: OFL)
set -euo pipefail

MATHJAX_VERSION=3.2.2
REQUIREJS_VERSION=2.3.8
HTML_MANAGER_VERSION=1.0.15
REVEAL_VERSION=4.0.2

root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/book/vendor"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

command -v npm >/dev/null || { echo "vendor_assets: npm is needed (apt-get install npm)" >&2; exit 1; }

cd "$work"
npm pack --silent "mathjax@$MATHJAX_VERSION" "requirejs@$REQUIREJS_VERSION" \
    "@jupyter-widgets/html-manager@$HTML_MANAGER_VERSION" "reveal.js@$REVEAL_VERSION" >/dev/null
for pkg in mathjax requirejs html-manager reveal.js; do
    mkdir "$pkg"
    tar xzf ./*"$pkg"-*.tgz -C "$pkg" --strip-components=1
done

rm -rf "$dest/mathjax" "$dest/requirejs" "$dest/html-manager" "$dest/reveal.js"
mkdir -p "$dest/mathjax" "$dest/requirejs" "$dest/html-manager" "$dest/reveal.js"

# MathJax: the combined TeX+MathML -> CHTML component, the woff-v2 fonts it loads, the TeX
# extensions it autoloads (\boldsymbol, \cancel, ...) and the menu/accessibility pieces the
# context menu loads on demand. (sre/ speech maps are left out: speech is off by default.)
mj="$work/mathjax/es5"
cp "$mj/tex-mml-chtml.js" "$dest/mathjax/"
mkdir -p "$dest/mathjax/output/chtml/fonts" "$dest/mathjax/input/tex"
cp -r "$mj/output/chtml/fonts/woff-v2" "$dest/mathjax/output/chtml/fonts/"
cp -r "$mj/input/tex/extensions" "$dest/mathjax/input/tex/"
cp -r "$mj/a11y" "$mj/ui" "$dest/mathjax/"
cp "$work/mathjax/LICENSE" "$dest/mathjax/LICENSE"

# RequireJS: the single-file loader (licence header is inside the file).
cp "$work/requirejs/require.js" "$dest/requirejs/"

# html-manager: embed-amd.js bundles base, controls and output widgets; it loads the
# Font Awesome fonts for button icons from its own folder (woff2/woff/ttf suffice).
hm="$work/html-manager/dist"
cp "$hm/embed-amd.js" "$dest/html-manager/"
cp "$hm/embed.js.LICENSE.txt" "$dest/html-manager/THIRD_PARTY_LICENSES.txt"
cp "$hm"/*.woff2 "$hm"/*.woff "$hm"/*.ttf "$dest/html-manager/"
# drop the source-map comments: the .map files are not shipped
sed -i 's|^//# sourceMappingURL=.*$||' "$dest/html-manager/embed-amd.js"

# reveal.js: the UMD build, its stylesheet, the white theme and the woff files of the font
# that theme imports (browsers that read woff ignore the eot/ttf entries of its CSS).
rv="$work/reveal.js"
mkdir -p "$dest/reveal.js/theme/fonts/source-sans-pro"
cp "$rv/dist/reveal.js" "$rv/dist/reveal.css" "$rv/LICENSE" "$dest/reveal.js/"
cp "$rv/dist/theme/white.css" "$dest/reveal.js/theme/"
font="$rv/dist/theme/fonts/source-sans-pro"
cp "$font/source-sans-pro.css" "$font"/*.woff "$font/LICENSE" "$dest/reveal.js/theme/fonts/source-sans-pro/"
sed -i 's|^//# sourceMappingURL=.*$||' "$dest/reveal.js/reveal.js"

du -sh "$dest"/*
