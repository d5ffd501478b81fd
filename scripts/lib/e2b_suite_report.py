"""The report of scripts/test-e2b-suite.sh: passed / failed / skipped per directory of
each suite's JUnit XML, then each suite's share of passing tests among those that do not
need E2B's cloud, against its target. Exits 1 when a share is under its target.

    python3 scripts/lib/e2b_suite_report.py NOTES E2B_XML [INTERPRETER_XML]

NOTES holds one line per known test that does not pass here: `KIND<TAB>GLOB<TAB>WHY`,
GLOB matched (fnmatch) against `path/test_file.py::[Class::]test_name[params]`. Kinds
left out of the share: `cloud` (needs E2B's cloud: its hosts, its billing, its own
binaries), `offline` (needs what this machine cannot reach: the internet, a container
registry), `language` (the interpreter's tests of a language not installed). Kept in
(they count as not passing): `refused` (a feature sandboxd refuses by design),
`differs` (a difference chosen), `todo` (not served yet). A test that does not pass and
matches no line is listed as unexplained.
"""

import collections
import fnmatch
import sys
import xml.etree.ElementTree as ET

TARGETS = {"e2b": 0.95, "interpreter": 0.90}
LEFT_OUT = ("cloud", "offline", "language")
KINDS = LEFT_OUT + ("refused", "differs", "todo")


def notes(path):
    entries = []
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        if not line.strip() or line.startswith("#"):
            continue
        kind, glob, why = line.split("\t", 2)
        if kind not in KINDS:
            raise SystemExit(f"{path}: unknown kind {kind!r} in {line!r}")
        entries.append((kind, glob, why))
    return entries


def cases(path):
    """(test id, directory, outcome) of each test case."""
    for case in ET.parse(path).iter("testcase"):
        parts = case.get("classname", "").split(".")
        # A test in a class: the classname ends with the class's name.
        classes = []
        while len(parts) > 1 and parts[-1][:1].isupper():
            classes.insert(0, parts.pop())
        file = "/".join(parts) + ".py"
        directory = "/".join(p for p in parts[:-1] if p != "tests") or "."
        name = "::".join(classes + [case.get("name", "")])
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed"
            elif child.tag == "skipped" and outcome == "passed":
                outcome = "skipped"
        yield f"{file}::{name}", directory, outcome


def main():
    known = notes(sys.argv[1])
    status = 0
    for name, path in zip(("e2b", "interpreter"), sys.argv[2:]):
        try:
            results = list(cases(path))
        except (OSError, ET.ParseError) as error:
            print(f"{name}: no results ({error})")
            status = 1
            continue
        counts = collections.defaultdict(collections.Counter)
        counted = collections.Counter()
        unexplained = []
        for test_id, directory, outcome in results:
            note = next((n for n in known if fnmatch.fnmatchcase(test_id, n[1])), None)
            if note and note[0] in LEFT_OUT and outcome != "passed":
                counts[directory]["left out"] += 1
                continue
            counts[directory][outcome] += 1
            counted[outcome] += 1
            if outcome != "passed" and note is None:
                unexplained.append(f"{test_id} ({outcome})")
        print(f"\n{name}: {'directory':46} passed failed skipped left-out")
        total = collections.Counter()
        for directory in sorted(counts):
            c = counts[directory]
            total.update(c)
            print(f"{'':{len(name) + 2}}{directory:46} {c['passed']:6} {c['failed']:6} {c['skipped']:7} {c['left out']:8}")
        print(f"{'':{len(name) + 2}}{'total':46} {total['passed']:6} {total['failed']:6} {total['skipped']:7} {total['left out']:8}")
        considered = sum(counted.values())
        share = counted["passed"] / considered if considered else 0.0
        target = TARGETS[name]
        verdict = "meets" if share >= target else "UNDER"
        print(f"{name}: {counted['passed']} of {considered} tests that do not need E2B's cloud or what is out of reach pass "
              f"({share:.1%}; target {target:.0%}: {verdict})")
        for test in unexplained:
            print(f"  unexplained: {test}")
        if share < target:
            status = 1
    sys.exit(status)


if __name__ == "__main__":
    main()
