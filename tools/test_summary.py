#!/usr/bin/env python3
"""Turns a `bazel test` log plus its test.xml files into one line per test case
and the closing `N passed, N failed, N skipped` line that CI reads.

A target that did not build or whose XML is missing counts as one failure, so
a broken build can never look green.
"""
import glob
import os
import re
import sys
import xml.etree.ElementTree as ET

STATUS_RE = re.compile(r"^(//\S+)\s+(?:\(cached\)\s+)?(PASSED|FAILED|TIMEOUT|FLAKY|NO STATUS|FAILED TO BUILD|SKIPPED)\b")


def cases_of(xml_path):
    """Yields (name, outcome) per test case; outcome is passed/failed/skipped."""
    root = ET.parse(xml_path).getroot()
    for case in root.iter("testcase"):
        name = "%s.%s" % (case.get("classname", ""), case.get("name", ""))
        if case.find("failure") is not None or case.find("error") is not None:
            yield name, "failed"
        elif case.find("skipped") is not None or case.get("result") == "skipped" or case.get("status") == "notrun":
            yield name, "skipped"
        else:
            yield name, "passed"


def main(log_path, testlogs):
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    seen = False
    for line in open(log_path, errors="replace"):
        m = STATUS_RE.match(line.strip())
        if not m:
            continue
        seen = True
        target, status = m.group(1), m.group(2)
        pkg, _, name = target[2:].partition(":")
        target_dir = os.path.join(testlogs, pkg, name)
        # A sharded target (shard_count) has one test.xml per shard.
        xml_paths = [os.path.join(target_dir, "test.xml")] + sorted(
            glob.glob(os.path.join(target_dir, "shard_*_of_*", "test.xml")))
        results = []
        if status in ("PASSED", "FAILED", "FLAKY", "TIMEOUT"):
            for xml_path in xml_paths:
                if not os.path.exists(xml_path):
                    continue
                try:
                    results += list(cases_of(xml_path))
                except ET.ParseError:
                    pass
        if status in ("FAILED", "TIMEOUT", "NO STATUS", "FAILED TO BUILD") and not any(
                r == "failed" for _, r in results):
            results.append(("(target %s)" % status.lower(), "failed"))
        if not results:
            results = [("(whole target)", "passed" if status in ("PASSED", "FLAKY") else "failed")]
        for case, outcome in results:
            counts[outcome] += 1
            print("%-7s %s %s" % (outcome.upper(), target, case))
    if not seen:
        print("FAILED  (no test results: the build failed before any test ran)")
        counts["failed"] += 1
    print("%d passed, %d failed, %d skipped" % (counts["passed"], counts["failed"], counts["skipped"]))
    return 0 if counts["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
