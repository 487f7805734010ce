#!/usr/bin/env python3
"""check_docs.py: keeps the project documenting itself.

Checks a source tree for:
  1. references to design notes that live outside the repository (the notes' file names, and
     paths into a sibling "shared" directory other than its tools/, which scripts may use);
  2. README.md longer than the front door's limit (250 lines);
  3. links in README.md and docs/*.md that do not resolve: a relative link must name an existing
     file, and a #fragment must name a heading of that file (GitHub's heading ids).

Links to the pages listed in PENDING may point at files that do not exist yet (other branches
add them); such links are reported as notes, not failures. Once a pending page exists, links to
it are checked like any other.

usage: check_docs.py --root SRC      check the tree at SRC (exit 1 on any finding)
       check_docs.py --self-test     run the checks on small generated trees (exit 1 on failure)
Standard library only.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

README_MAX_LINES = 250

# Pages a change may link to before they exist (none today: every linked page must exist).
PENDING = set()

# Written in two parts so that this file does not match its own patterns.
_NOTES = "|".join(
    [
        "cupti" + "-notes",
        "ARCHITECTURE" + r"\.md",
        r"(?<![\w-])formats" + r"\.md",
        r"(?<![\w-])style" + r"\.md",
        "shared/" + "(?:design|seeds)",
        r"\.\./" + "shared(?!/tools/)",
        "/work/" + "shared(?!/tools/)",
    ]
)
EXTERNAL_REFERENCE = re.compile(_NOTES)

SKIP_DIRS = {".git", "node_modules", "__pycache__"}
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _in_build_output(rel):
    top = rel.split("/", 1)[0]
    return top.startswith("build") or top == "dist" or top in SKIP_DIRS


def source_files(root):
    """Every tracked or untracked-but-not-ignored file; without git, a walk that skips builds."""
    try:
        out = subprocess.run(
            ["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            check=True,
            capture_output=True,
        ).stdout
        names = [n for n in out.decode("utf-8", "surrogateescape").split("\0") if n]
        names = [n for n in names if not _in_build_output(n)]
        if names:
            return sorted(n for n in names if os.path.isfile(os.path.join(root, n)))
    except (OSError, subprocess.CalledProcessError):
        pass
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        top_level = os.path.samefile(dirpath, root)
        dirnames[:] = [
            d for d in dirnames if d not in SKIP_DIRS and not (top_level and _in_build_output(d))
        ]
        for f in filenames:
            found.append(os.path.relpath(os.path.join(dirpath, f), root))
    return sorted(found)


def read_text(path):
    with open(path, "rb") as f:
        data = f.read()
    if b"\0" in data:
        return None  # binary
    return data.decode("utf-8", "replace")


def check_external_references(root, files):
    problems = []
    for rel in files:
        text = read_text(os.path.join(root, rel))
        if text is None:
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            m = EXTERNAL_REFERENCE.search(line)
            if m:
                problems.append(
                    "%s:%d: refers to '%s', which is not in this repository; cite the docs/ "
                    "page that holds the fact instead" % (rel, lineno, m.group(0))
                )
    return problems


def check_readme_length(root):
    path = os.path.join(root, "README.md")
    if not os.path.isfile(path):
        return ["README.md: missing"]
    n = len(read_text(path).splitlines())
    if n > README_MAX_LINES:
        return [
            "README.md: %d lines, more than %d; move the detail into docs/ and link it"
            % (n, README_MAX_LINES)
        ]
    return []


def heading_ids(text):
    """Heading ids as GitHub makes them: lower case, punctuation dropped, spaces to '-'."""
    ids = set()
    seen = {}
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if fenced or not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        ids.add(slug if count == 0 else "%s-%d" % (slug, count))
    return ids


def documents(root):
    docs = ["README.md"]
    docs_dir = os.path.join(root, "docs")
    if os.path.isdir(docs_dir):
        docs += sorted("docs/" + f for f in os.listdir(docs_dir) if f.endswith(".md"))
    return [d for d in docs if os.path.isfile(os.path.join(root, d))]


def check_links(root):
    problems, notes = [], []
    for doc in documents(root):
        text = read_text(os.path.join(root, doc))
        fenced = False
        for lineno, line in enumerate(text.splitlines(), 1):
            if line.lstrip().startswith("```"):
                fenced = not fenced
            if fenced or line.startswith("    "):
                continue  # code, not prose
            for target in LINK.findall(line):
                if re.match(r"[a-z][a-z0-9+.-]*:", target):
                    continue  # https:, mailto: ...
                path, _, fragment = target.partition("#")
                if path:
                    resolved = os.path.normpath(os.path.join(os.path.dirname(doc), path))
                else:
                    resolved = doc
                where = "%s:%d: link '%s'" % (doc, lineno, target)
                if resolved.startswith(".."):
                    problems.append("%s leaves the repository" % where)
                    continue
                full = os.path.join(root, resolved)
                if not os.path.exists(full):
                    if resolved in PENDING:
                        notes.append("%s: %s is not here yet (pending)" % (where, resolved))
                    else:
                        problems.append("%s: %s does not exist" % (where, resolved))
                    continue
                if fragment and os.path.isfile(full) and resolved.endswith(".md"):
                    if fragment not in heading_ids(read_text(full)):
                        problems.append("%s: %s has no heading '#%s'" % (where, resolved, fragment))
    return problems, notes


def check(root):
    files = source_files(root)
    problems = check_external_references(root, files)
    problems += check_readme_length(root)
    link_problems, notes = check_links(root)
    problems += link_problems
    for p in PENDING:
        if os.path.isfile(os.path.join(root, p)):
            notes.append("%s exists now: drop it from PENDING in %s" % (p, os.path.basename(__file__)))
    return problems, notes


def run(root):
    problems, notes = check(root)
    for n in notes:
        print("note: " + n)
    for p in problems:
        print("error: " + p)
    if problems:
        print("docs check: %d problem(s)" % len(problems))
        return 1
    print("docs check: ok (%d documents)" % len(documents(root)))
    return 0


def self_test():
    """Each rule must catch its defect in a small tree, and a clean tree must pass."""

    def tree(files):
        d = tempfile.mkdtemp(prefix="kp_docs_check_")
        for rel, text in files.items():
            path = os.path.join(d, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        return d

    clean = {
        "README.md": "# kp\n\nSee [the index](docs/README.md) and [setup](docs/a.md#set-up-kp).\n",
        "docs/README.md": "# Index\n\n[A](a.md), [web](https://x.org)\n",
        "docs/a.md": "# A page\n\n## Set up kp!\n\nBack to [top](#a-page); [code](../src/x.cc).\n"
        "\n    [not a link](nowhere.md)\n",
        "src/x.cc": "// Why: see docs/a.md and ../shared/tools/perfetto/trace_processor_shell.\n",
    }
    cases = [
        ("clean tree", {}, None),
        ("notes file named", {"src/y.cc": "// see cupti" + "-notes §3\n"}, "not in this repository"),
        ("design path", {"src/z.py": "# ../sha" + "red/design/x\n"}, "not in this repository"),
        ("upper-case notes", {"CMakeLists.txt": "# ARCHITECTURE" + ".md\n"}, "not in this repository"),
        ("long README", {"README.md": "line\n" * (README_MAX_LINES + 1)}, "more than"),
        ("missing page", {"docs/b.md": "# B\n\n[gone](missing.md)\n"}, "does not exist"),
        ("missing heading", {"docs/b.md": "# B\n\n[x](a.md#no-such)\n"}, "has no heading"),
        ("outside the repo", {"docs/b.md": "# B\n\n[x](../../etc/passwd)\n"}, "leaves the repository"),
    ]
    failures = 0
    for name, extra, expected in cases:
        files = dict(clean)
        files.update(extra)
        root = tree(files)
        try:
            problems, _ = check(root)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        if expected is None:
            ok = not problems
        else:
            ok = any(expected in p for p in problems)
        print("%s: %s%s" % ("PASS" if ok else "FAIL", name, "" if ok else " -> %s" % problems))
        failures += not ok
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if not a.root:
        ap.error("--root or --self-test")
    return run(os.path.abspath(a.root))


if __name__ == "__main__":
    sys.exit(main())
