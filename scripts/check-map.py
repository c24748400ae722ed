#!/usr/bin/env python3
"""Holds CONTRIBUTING.md's map of the tree ("## Where things live") to the tree itself.

  scripts/check-map.py [ROOT]      (ROOT: the source tree; default: this script's ../)

The map is a nested Markdown bullet list, two spaces per level; each line names one file or
folder relative to the line above it at one level less, then says what it is:

  - `src/` the product
    - `core/` the rules, no I/O
      - `deadline_heap.{h,cc}` indexed min-heap of per-session deadlines

A name is a folder (`name/`), a file (`name`), brace alternatives (`stem.{h,cc}`: each must
exist) or `stem.*` (every file of the folder whose name starts with `stem.`; at least one).

The tree is `git ls-files` when ROOT is a git checkout (files deleted in the working tree left
out), else every file under ROOT but .git, build/, node_modules/ and __pycache__/ (Python
writes those when a test imports a bench module). It fails, one line per
problem, when:
  - a file of the tree is on no line (every file must be, but for the files under tests/, where
    each folder needs a line and files are optional, and under fuzz/corpus/ and docs/screenshots/,
    which their own lines cover whole);
  - a line names a path that does not exist (a stale line);
  - lines under one folder are not in tree order: byte order of their names, as `LC_ALL=C ls`
    lists them (folders among the files, by their names without the slash), a `stem.{h,cc}` or
    `stem.*` line sorting as `stem.`;
  - a line has no description;
  - a line is not a map line at all (no `name`, a bad indentation, a file holding lines), or
    names a file another line already names.
"""

import os
import re
import subprocess
import sys

MAP_FILE = "CONTRIBUTING.md"
HEADING = "## Where things live"
# Folders whose files need no line of their own: the folder's line covers them.
COVERED_WHOLE = ("fuzz/corpus", "docs/screenshots")
# Folders whose sub-folders need a line but whose files may be left out.
FILES_OPTIONAL = ("tests",)
WALK_SKIP = {".git", "build", "node_modules", "__pycache__"}

LINE_RE = re.compile(r"^(?P<indent> *)- `(?P<name>[^`]+)`(?P<rest>.*)$")
BRACE_RE = re.compile(r"^(?P<pre>[^{}*]*)\{(?P<alts>[^{}]+)\}(?P<post>[^{}*]*)$")


def under(path, folder):
    return path == folder or path.startswith(folder + "/")


def tree_files(root):
    """The tree's files, as paths relative to root with '/' separators."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True,
                             capture_output=True).stdout
        top = subprocess.run(["git", "-C", root, "rev-parse", "--show-toplevel"], check=True,
                             capture_output=True, text=True).stdout.strip()
        if os.path.realpath(top) == os.path.realpath(root):
            files = [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]
            return {p for p in files if os.path.lexists(os.path.join(root, p))}
    except (OSError, subprocess.CalledProcessError):
        pass
    files = set()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in WALK_SKIP]
        rel = os.path.relpath(dirpath, root)
        for f in filenames:
            files.add(f if rel == "." else f"{rel}/{f}".replace(os.sep, "/"))
    return files


def map_lines(text):
    """(line number, text) of the section's lines, or None when the heading is missing."""
    lines = text.split("\n")
    try:
        start = next(i for i, l in enumerate(lines) if l.rstrip() == HEADING)
    except StopIteration:
        return None
    out = []
    for i in range(start + 1, len(lines)):
        if lines[i].startswith("## ") or lines[i].startswith("# "):
            break
        out.append((i + 1, lines[i]))
    return out


def sort_key(name):
    """A line's place among its siblings: its name in bytes, `stem.{..}`/`stem.*` as `stem.`."""
    name = name.rstrip("/")
    for mark in ("{", "*"):
        if mark in name:
            name = name[:name.index(mark)]
    return name.encode("utf-8")


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    problems = []
    try:
        with open(os.path.join(root, MAP_FILE), encoding="utf-8") as f:
            section = map_lines(f.read())
    except OSError as e:
        print(f"{MAP_FILE}: cannot read: {e.strerror}")
        return 1
    if section is None:
        print(f"{MAP_FILE}: no \"{HEADING}\" heading")
        return 1

    files = tree_files(root)
    folders = {"/".join(p.split("/")[:k]) for p in files for k in range(1, p.count("/") + 1)}

    covered = {}       # file -> line number of the line naming it
    listed_dirs = set()
    stack = []         # (depth, folder path) of the open folder lines
    last_key = {}      # parent folder -> (sort key, name, line) of its last line so far
    seen_bullet = False

    def problem(n, msg):
        problems.append(f"{MAP_FILE}:{n}: {msg}")

    for n, line in section:
        if not line.strip():
            continue
        m = LINE_RE.match(line)
        if not m:
            if seen_bullet:
                problem(n, "not a map line (want: indentation, \"- `name` description\")")
            continue
        seen_bullet = True
        indent, name, rest = len(m["indent"]), m["name"], m["rest"]
        if indent % 2:
            problem(n, f"`{name}`: indented by {indent} spaces, not a multiple of 2")
            continue
        depth = indent // 2
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if depth > len(stack):
            problem(n, f"`{name}`: indented deeper than the folder line above it allows")
            continue
        parent = stack[-1][1] if stack else ""
        if parent is None:
            problem(n, f"`{name}`: indented under a file's line (only folders hold lines)")
            continue
        if not rest.strip():
            problem(n, f"`{name}`: no description")
        elif not rest.startswith(" "):
            problem(n, f"`{name}`: want a space between the name and the description")

        key = sort_key(name)
        prev = last_key.get(parent)
        if prev is not None and key <= prev[0]:
            where = f"{parent}/" if parent else "the top"
            problem(n, f"`{name}` comes after `{prev[1]}` (line {prev[2]}) in {where}: "
                       f"out of tree order (byte order of names)")
        last_key[parent] = (key, name, n)

        def full(p):
            return f"{parent}/{p}" if parent else p

        is_dir = name.endswith("/")
        bare = name.rstrip("/")
        if not bare or "/" in bare or bare in (".", ".."):
            problem(n, f"`{name}`: a name is one file or folder relative to its parent line")
            continue
        if is_dir:
            path = full(bare)
            stack.append((depth, path))
            listed_dirs.add(path)
            if not os.path.isdir(os.path.join(root, path)):
                problem(n, f"`{path}/` does not exist (stale line)")
            continue

        if "*" in bare:
            if not bare.endswith(".*") or "*" in bare[:-1] or "{" in bare:
                problem(n, f"`{name}`: the only wildcard form is `stem.*`")
                continue
            stem = bare[:-1]
            folder = os.path.join(root, parent)
            try:
                entries = sorted(e for e in os.listdir(folder) if e.startswith(stem)
                                 and os.path.isfile(os.path.join(folder, e)))
            except OSError:
                entries = []
            if not entries:
                problem(n, f"`{full(bare)}` matches no file (stale line)")
            names = [full(e) for e in entries]
        elif "{" in bare or "}" in bare:
            b = BRACE_RE.match(bare)
            if not b:
                problem(n, f"`{name}`: the only brace form is one group, like `stem.{{h,cc}}`")
                continue
            names = [full(b["pre"] + alt + b["post"]) for alt in b["alts"].split(",")]
        else:
            names = [full(bare)]
        for p in names:
            if not os.path.isfile(os.path.join(root, p)):
                problem(n, f"`{p}` does not exist (stale line)")
            elif p in covered:
                problem(n, f"`{p}` is already named on line {covered[p]}")
            else:
                covered[p] = n
        # A file line holds no lines: the next deeper line has no parent to join.
        stack.append((depth, None))

    if not seen_bullet:
        problems.append(f"{MAP_FILE}: no map under \"{HEADING}\"")
    # Files under a COVERED_WHOLE folder are the folder's line's: a missing one is reported
    # once, as its folder, below.
    for p in sorted(files):
        if p in covered or any(under(p, w) for w in COVERED_WHOLE + FILES_OPTIONAL):
            continue
        problems.append(f"{MAP_FILE}: `{p}` is on no line: add one (or a `stem.{{h,cc}}` "
                        f"line) to the map, in tree order")
    for d in sorted(folders):
        if d in listed_dirs or any(under(d, w) and d != w for w in COVERED_WHOLE):
            continue
        problems.append(f"{MAP_FILE}: folder `{d}/` is on no line: add one, in tree order")

    for p in problems:
        print(p)
    if problems:
        print(f"check-map: {len(problems)} problem(s); the map's rules are in "
              f"scripts/check-map.py's docstring")
        return 1
    print(f"check-map: {MAP_FILE}'s map covers the tree ({len(covered)} files named, "
          f"{len(listed_dirs)} folders)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
