#!/usr/bin/env python3
"""Issue #16's size limits, checked: no non-test source file over 600 lines, and no function over
60 lines (signature to closing brace) in consumers/, projections/ and src/cli/serve*.cc.

  scripts/check-sizes.py            # exit 1 and list what is over
  scripts/check-sizes.py --top 10   # the longest functions, for planning

The function finder is a brace matcher over the source with comments and literals removed: a
`{` whose head (the text since the previous `;`, `{` or `}`) has a parenthesis and is not inside
another function opens a function; namespace, class, struct, enum and initializer braces do not.
"""
import argparse
import pathlib
import re
import subprocess
import sys

MAX_FILE, MAX_FUNCTION = 600, 60
FUNCTION_SCOPES = ("consumers/", "projections/", "src/cli/serve")
CONTAINER = re.compile(r"^\s*(template\s*<.*>\s*)?(namespace|class|struct|enum|union|extern)\b")


def strip(text):
    """Comments and string/char literals blanked, newlines kept (line numbers stay right)."""
    pattern = re.compile(r'//[^\n]*|/\*.*?\*/|R"([^(]*)\(.*?\)\1"|"(\\.|[^"\\\n])*"|'
                         r"'(\\.|[^'\\\n])*'", re.S)
    return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def functions(path):
    """(name line, first line, last line) of each function defined in `path`."""
    text = strip(path.read_text())
    found, stack, head_start, head_line = [], [], 0, 1
    line = 1
    for i, ch in enumerate(text):
        if ch == "\n":
            line += 1
        elif ch in ";{}":
            if ch == "{":
                head = text[head_start:i]
                in_function = any(kind == "function" for kind, _, _ in stack)
                if in_function or CONTAINER.match(head) or "(" not in head or \
                        re.search(r"=\s*$", head) or re.match(r"\s*(return|if|for|while|"
                                                               r"switch|else|do)\b", head):
                    stack.append(("block", 0, ""))
                else:
                    first = head_line + head[:len(head) - len(head.lstrip())].count("\n")
                    name = re.sub(r"\s+", " ", head.strip())[:90]
                    stack.append(("function", first, name))
            elif ch == "}" and stack:
                kind, first, name = stack.pop()
                if kind == "function":
                    found.append((name, first, line))
            head_start, head_line = i + 1, line
    return found


def tracked_sources():
    out = subprocess.run(["git", "ls-files", "*.cc", "*.h"], capture_output=True, text=True,
                         check=True).stdout.split()
    return [pathlib.Path(p) for p in out if not p.startswith("tests/")]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--top", type=int, default=0)
    args = parser.parse_args()
    over, longest = [], []
    for path in tracked_sources():
        lines = path.read_text().count("\n")
        if lines > MAX_FILE:
            over.append(f"{path}: {lines} lines (limit {MAX_FILE})")
        if not str(path).startswith(FUNCTION_SCOPES):
            continue
        for name, first, last in functions(path):
            length = last - first + 1
            longest.append((length, f"{path}:{first}", name))
            if length > MAX_FUNCTION:
                over.append(f"{path}:{first}: {name} is {length} lines (limit {MAX_FUNCTION})")
    for length, where, name in sorted(longest, reverse=True)[:args.top]:
        print(f"{length:4d} {where} {name}")
    for line in over:
        print(line)
    if over:
        return 1
    print(f"sizes ok: no source over {MAX_FILE} lines, no function over {MAX_FUNCTION} lines in "
          f"{', '.join(FUNCTION_SCOPES)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
