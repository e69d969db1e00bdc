#!/usr/bin/env bash
# Fails if clang-format (Google base, 100 columns; .clang-format) would change any C++ file.
set -euo pipefail
cd "$(dirname "$0")/.."
files=$(git ls-files '*.h' '*.cc' 2>/dev/null || find . -name '*.h' -o -name '*.cc' | grep -v '^./build')
[ -z "$files" ] && exit 0
if ! clang-format --dry-run -Werror $files; then
  echo "clang-format: run 'clang-format -i' on the files above" >&2
  exit 1
fi
