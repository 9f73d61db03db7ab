"""Prints one lane's counts from the suite's vitest JSON report and fails (exit 1) on a
failed test that known-failures.txt does not list.

usage: counts.py REPORT KNOWN

known-failures.txt: one failure per line, `<file>: <test title>  # <reason>`; a listed
failure that passes is reported, so the list only shrinks.
"""
import json
import sys

report, known_path = sys.argv[1], sys.argv[2]
known = {}
for line in open(known_path):
    line = line.strip()
    if not line or line.startswith("#"):
        continue
    key, _, reason = line.partition("  # ")
    known[key.strip()] = reason.strip()

r = json.load(open(report))
files = tests = passed = failed = skipped = 0
unexpected, expected, fixed = [], [], []
for f in r.get("testResults", []):
    files += 1
    name = f["name"].split("/")[-1]
    for a in f.get("assertionResults", []):
        tests += 1
        key = f"{name}: {a.get('title', '')}"
        if a["status"] == "passed":
            passed += 1
            if key in known:
                fixed.append(key)
        elif a["status"] == "failed":
            failed += 1
            (expected if key in known else unexpected).append(key)
        else:
            skipped += 1
print(f"  files {files}, tests {tests}: pass {passed}, fail {failed} ({len(expected)} known), skip {skipped}")
for k in expected:
    print(f"  known failure: {k} ({known[k]})")
for k in fixed:
    print(f"  listed as a known failure but passed (remove it from the list): {k}")
for k in unexpected:
    print(f"  FAILED: {k}")
sys.exit(1 if unexpected or tests == 0 else 0)
