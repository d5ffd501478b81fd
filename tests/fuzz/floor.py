"""Reads a schemathesis NDJSON report and prints, per operation, how many cases ran and
how many got a 2xx answer and a 5xx answer; fails when any operation's share of 2xx
answers is under the floor (a fuzz pass that never gets past validation proves little)
or when any answer was a 5xx.

    python3 tests/fuzz/floor.py EVENTS.ndjson FLOOR_PERCENT
"""

import collections
import json
import sys

path, floor = sys.argv[1], float(sys.argv[2])
counts = collections.defaultdict(lambda: collections.Counter())
for line in open(path):
    event = json.loads(line)
    body = event.get("ScenarioFinished")
    if not body:
        continue
    recorder = body.get("recorder", {})
    label = recorder.get("label", "?")
    for interaction in recorder.get("interactions", {}).values():
        response = interaction.get("response")
        status = response.get("status_code", 0) if response else 0
        counts[label]["cases"] += 1
        counts[label]["2xx"] += 200 <= status < 300
        counts[label]["5xx"] += status >= 500 or status == 0

failed = []
print(f"{'operation':<40} {'cases':>6} {'2xx':>6} {'share':>6} {'5xx':>4}")
for label in sorted(counts):
    c = counts[label]
    share = 100.0 * c["2xx"] / c["cases"] if c["cases"] else 0.0
    mark = ""
    if share < floor:
        failed.append(f"{label}: {share:.0f}% 2xx, under the floor of {floor:.0f}%")
        mark = "  < floor"
    if c["5xx"]:
        failed.append(f"{label}: {c['5xx']} server errors or no answer")
        mark += "  5xx!"
    print(f"{label:<40} {c['cases']:>6} {c['2xx']:>6} {share:>5.0f}% {c['5xx']:>4}{mark}")
total = sum(c["cases"] for c in counts.values())
ok = sum(c["2xx"] for c in counts.values())
print(f"{'all':<40} {total:>6} {ok:>6} {100.0 * ok / max(total, 1):>5.0f}%")
for failure in failed:
    print(f"fuzz floor: {failure}", file=sys.stderr)
sys.exit(1 if failed else 0)
