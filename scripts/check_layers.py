#!/usr/bin/env python3
"""Checks common/'s layering: each folder common/<c>/ is the CMake target
oar_<c>, and its files may include only their own folder's headers and those
of the components its target links (target_link_libraries in
common/<c>/CMakeLists.txt, followed transitively); nothing in common/ may
include trainer/, pserver/, cli/, transpiler/ or examples/. And the
libraries (common/, trainer/, pserver/, transpiler/, examples/) define and
read no command-line flag: configuration enters through options structs
that cli/ fills (docs/architecture.md). Run by every build (the
check_layers target), so a wrong #include or a flag read below cli/ fails
the build, naming the file, the line and the rule.

    python3 scripts/check_layers.py [REPO_ROOT]
"""
import os
import re
import sys

UPPER = ("trainer/", "pserver/", "cli/", "transpiler/", "examples/")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
LIBRARIES = ("common", "trainer", "pserver", "transpiler", "examples")
# A gflags definition, declaration or read, in code (strings and comments
# removed first: messages may name a flag for the person who sets it).
FLAG_USE = re.compile(r"\b(?:DEFINE|DECLARE)_(?:bool|int32|int64|uint32|uint64|double|string|validator)\s*\(|"
                      r"\bFLAGS_[a-z]|gflags/gflags")
STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def source_lines(root, folder):
    """(path relative to root, line number, line) of every C++/CUDA source under folder."""
    for dirpath, _, names in os.walk(folder):
        for name in sorted(names):
            if not name.endswith((".h", ".cc", ".cu")):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            for no, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
                yield rel, no, line


def flag_uses(root):
    errors = []
    for top in LIBRARIES:
        for rel, no, line in source_lines(root, os.path.join(root, top)):
            code = line.split("//", 1)[0] if not line.lstrip().startswith("#") else line
            code = STRING.sub('""', code)
            if line.lstrip().startswith("#") and "gflags/gflags" in line:
                code = "gflags/gflags"
            if FLAG_USE.search(code):
                errors.append("%s:%d: a library defines or reads a command-line flag; take it in an "
                              "options struct that cli/ fills" % (rel, no))
    return errors


def component_deps(root):
    deps = {}
    common = os.path.join(root, "common")
    for c in sorted(os.listdir(common)):
        cmake = os.path.join(common, c, "CMakeLists.txt")
        if not os.path.isfile(cmake):
            continue
        text = open(cmake).read()
        own = set()
        for m in re.finditer(r"target_link_libraries\(\s*oar_%s\b([^)]*)\)" % re.escape(c), text):
            own.update(t[len("oar_"):] for t in m.group(1).split() if t.startswith("oar_"))
        deps[c] = own
    return deps


def closure(deps, c):
    seen, todo = set(), [c]
    while todo:
        for d in deps.get(todo.pop(), ()):
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    deps = component_deps(root)
    errors = []
    for c in sorted(deps):
        allowed = closure(deps, c) | {c}
        for rel, no, line in source_lines(root, os.path.join(root, "common", c)):
            m = INCLUDE.match(line)
            if not m:
                continue
            inc = m.group(1)
            if inc.startswith(UPPER):
                errors.append("%s:%d: includes %s: common/ names nothing of the layers above it" % (rel, no, inc))
            elif inc.startswith("common/") and inc != "common/config.h":
                other = inc.split("/")[1]
                if other not in allowed:
                    errors.append("%s:%d: includes %s, but oar_%s links only %s (common/%s/CMakeLists.txt)" %
                                  (rel, no, inc, c, ", ".join("oar_" + a for a in sorted(allowed)), c))
    errors.extend(flag_uses(root))
    for c in deps:  # a folder's target must not reach back up to itself
        if c in closure(deps, c):
            errors.append("common/%s/CMakeLists.txt: oar_%s depends on itself through its dependencies" % (c, c))
    if errors:
        print("\n".join(errors), file=sys.stderr)
        print("check_layers: %d line(s) break the layering (docs/architecture.md)" % len(errors),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
