"""PASS/FAIL lines for the client checks in this folder; the exit code is the
number of failures (imported by the scripts beside it)."""

FAILURES = []


def check(name, ok, detail=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + str(detail)), flush=True)
    if not ok:
        FAILURES.append(name)


def summary():
    """Prints the count (and names) of failures; returns the exit code."""
    print("%d failure(s)%s" % (len(FAILURES), (": " + ", ".join(FAILURES)) if FAILURES else ""))
    return min(len(FAILURES), 100)
