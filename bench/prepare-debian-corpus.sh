#!/usr/bin/env bash
# Builds the large retrieval corpus (about 80,000 documents, ~85 MB) from Debian documentation packages:
#
#   bash bench/prepare-debian-corpus.sh            → bench/data/debian/{corpus,queries}.jsonl
#
# The packages are fetched with `apt-get download` and unpacked with `dpkg-deb -x` under
# bench/data/debian/packages/ rather than installed system-wide: nothing is configured or started
# (dict-gcide would otherwise pull in the dictd daemon), and it works the same as root or not.
# `apt-get update` runs first when we are root and the package lists lack a package.
# It also installs python3-sklearn (apt) for the benchmark's Python references when missing.
# Then bench/lib/corpus-debian.ts converts the HTML/text/dictionary files into a BEIR-like corpus.jsonl
# ({_id, title, text}) and samples 1,000 queries (fixed seed). Re-running skips what is already there;
# FORCE=1 rebuilds the corpus.
set -euo pipefail

cd "$(dirname "$0")/.."
out="bench/data/debian"
pkgdir="$out/packages"
debs="$out/debs"
mkdir -p "$pkgdir" "$debs"

# Preferred names first; if one is missing from this Debian release, `apt-cache search` finds the
# nearest alternative (e.g. linux-doc-6.12, python3.13-doc, postgresql-doc-17).
wanted=(linux-doc-6.1 python3.11-doc postgresql-doc-15 dict-gcide)
fallback_pattern=("^linux-doc-[0-9.]+$" "^python3\.[0-9]+-doc$" "^postgresql-doc-[0-9]+$" "^dict-gcide$")

# (No `| grep -q`: with pipefail, grep closing the pipe early makes the pipeline fail.)
have_candidate() {
  local policy
  policy=$(apt-cache policy "$1" 2>/dev/null || true)
  [[ "$policy" =~ Candidate:\ [^\(] ]]
}

if ! have_candidate "${wanted[0]}" && [ "$(id -u)" = 0 ]; then
  echo "apt-get update…"
  apt-get update -qq
fi

packages=()
for i in "${!wanted[@]}"; do
  name="${wanted[$i]}"
  if ! have_candidate "$name"; then
    alt=$(apt-cache search --names-only "${fallback_pattern[$i]}" | awk '{print $1}' | sort -V | tail -1 || true)
    if [ -z "$alt" ]; then
      echo "warning: no package like $name in the apt lists; skipping it" >&2
      continue
    fi
    echo "$name is not available; using $alt"
    name="$alt"
  fi
  packages+=("$name")
done
[ "${#packages[@]}" -gt 0 ] || { echo "no documentation package available (run apt-get update as root)" >&2; exit 1; }

for name in "${packages[@]}"; do
  if [ -e "$pkgdir/.$name.done" ]; then continue; fi
  echo "fetching $name…"
  (cd "$debs" && apt-get download -q "$name")
  deb=$(find "$debs" -maxdepth 1 -name "${name}_*.deb" | sort -V | tail -1)
  dpkg-deb -x "$deb" "$pkgdir"
  touch "$pkgdir/.$name.done"
done

# The Python references of bench/retrieval.ts (scikit-learn, numpy/scipy BM25) need Debian's packages.
if ! /usr/bin/python3 -c "import sklearn, scipy, numpy" 2>/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing python3-sklearn (references for bench/retrieval.ts)…"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-sklearn python3-scipy python3-numpy >/dev/null
  else
    echo "note: install python3-sklearn python3-scipy python3-numpy for the benchmark's Python references" >&2
  fi
fi

if [ -s "$out/corpus.jsonl" ] && [ -s "$out/queries.jsonl" ] && [ "${FORCE:-0}" != 1 ]; then
  echo "$out/corpus.jsonl exists (FORCE=1 rebuilds it)"
else
  node --import tsx bench/lib/corpus-debian.ts "$pkgdir" "$out"
fi
ls -l "$out"/*.jsonl
