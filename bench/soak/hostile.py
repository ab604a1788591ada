"""Hostile clients for `soak.py --hostile`, run beside the ordinary load.

Each kind of client misbehaves the way a careless or malicious one would and
records, per request, what the server answered, so the soak can check the
stream contract afterwards:

- huge ids: starts with 1 MB and 300-byte request ids (must be refused with
  INVALID_ARGUMENT in `message_error`, never run), next to a normal request;
- never reading: opens a stream, starts long generations and never reads a
  response for `hold_s` (the server must end it RESOURCE_EXHAUSTED, or at
  least keep it from hurting anyone), then cancels;
- abort storm: starts 16 requests, aborts them at once together with ids
  that were never started, then reuses the same ids right after their
  finished responses (must be accepted);
- duplicate ids: starts an id twice on one stream (the second must be an
  ALREADY_EXISTS `message_error`, not a second `finished`).

The Ledger counts, per (stream, request id, use), the responses with
`finished` set: every request the server accepted must get exactly one,
except on streams that a process kill or the client itself broke.
"""
import queue
import threading
import time

HUGE_ID = 1 << 20


class Ledger:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.violations = []

    def add(self, key, n=1):
        with self.lock:
            self.counts[key] = self.counts.get(key, 0) + n

    def violation(self, what):
        with self.lock:
            self.counts["violations"] = self.counts.get("violations", 0) + 1
            if len(self.violations) < 20:
                self.violations.append(what)

    def snapshot(self):
        with self.lock:
            return dict(self.counts), list(self.violations)


class Stream:
    """One Generate call fed from a queue; responses checked per request."""

    def __init__(self, stub, pb, ledger, timeout):
        self.pb = pb
        self.ledger = ledger
        self.outbox = queue.Queue()
        self.call = stub.Generate(self._requests(), timeout=timeout)
        self.finished = {}      # rid -> finished responses for its current use
        self.running = set()    # rids started and not yet finished
        self.message_errors = []

    def _requests(self):
        while True:
            item = self.outbox.get()
            if item is None:
                return
            yield item

    def start(self, rid, max_tokens=16, ignore_eos=True):
        pb = self.pb
        self.outbox.put(pb.GenerateRequest(start=pb.StartRequest(
            request_id=rid, text="Once upon a time",
            sampling=pb.SamplingParams(max_tokens=max_tokens, temperature=0.0,
                                       ignore_eos=ignore_eos))))

    def track(self, rid):
        self.running.add(rid)
        self.finished[rid] = 0

    def abort(self, rid):
        self.outbox.put(self.pb.GenerateRequest(abort=self.pb.AbortRequest(request_id=rid)))

    def close(self):
        self.outbox.put(None)

    def read_until(self, done):
        """Reads responses until done() or the call ends; False if it broke."""
        try:
            for resp in self.call:
                self.on_response(resp)
                if done():
                    return True
        except Exception as e:  # grpc.RpcError
            self.ledger.add("stream_broken_" + getattr(e, "code", lambda: None)().name)
            return False
        return True

    def on_response(self, resp):
        rid = resp.request_id
        if resp.HasField("message_error") and resp.message_error.code != 0:
            self.message_errors.append((rid, resp.message_error.code))
            if resp.finished:
                self.ledger.violation(f"message_error with finished for {rid[:40]!r}")
            return
        if not resp.finished:
            return
        if rid not in self.running:
            self.ledger.violation(f"finished for {rid[:40]!r}, which is not running")
            return
        self.finished[rid] += 1
        self.running.discard(rid)
        self.ledger.add("finished_" + ("error" if resp.status.code else "ok"))


def huge_id_client(stub, pb, deadline, ledger, timeout):
    while time.time() < deadline:
        s = Stream(stub, pb, ledger, timeout)
        s.start("x" * HUGE_ID)
        s.start("y" * 300)
        s.track("normal")
        s.start("normal")
        ok = s.read_until(lambda: not s.running and len(s.message_errors) >= 2)
        s.close()
        if not ok:
            continue
        codes = sorted(code for _, code in s.message_errors)
        if codes == [3, 3]:  # INVALID_ARGUMENT
            ledger.add("huge_id_refused", 2)
        else:
            ledger.violation(f"huge ids answered with message errors {codes}")


def never_reading_client(stub, pb, deadline, ledger, timeout, hold_s):
    while time.time() + hold_s < deadline:
        s = Stream(stub, pb, ledger, timeout)
        for i in range(4):
            s.start(f"slow-{i}", max_tokens=1500)
        t0 = time.time()
        while time.time() - t0 < hold_s and not s.call.done():
            time.sleep(0.5)
        if s.call.done():
            code = s.call.code().name
            ledger.add(f"never_reading_ended_{code}")
            # UNAVAILABLE: its frontend was killed under it.
            if code not in ("RESOURCE_EXHAUSTED", "UNAVAILABLE"):
                ledger.violation(f"never-reading client ended with {code}")
        else:
            ledger.add("never_reading_cancelled_by_client")
        s.call.cancel()
        s.close()


def abort_storm_client(stub, pb, deadline, ledger, timeout):
    round_no = 0
    while time.time() < deadline:
        round_no += 1
        s = Stream(stub, pb, ledger, timeout)
        ids = [f"storm-{i}" for i in range(16)]
        for use in range(2):  # the second use reuses every id at once
            for rid in ids:
                s.track(rid)
                s.start(rid, max_tokens=64)
            for rid in ids:
                s.abort(rid)
            for i in range(4):
                s.abort(f"never-started-{round_no}-{use}-{i}")
            before = len(s.message_errors)
            if not s.read_until(lambda: not s.running and len(s.message_errors) >= before + 4):
                break
            for rid in ids:
                if s.finished.get(rid) != 1:
                    ledger.violation(f"{rid} use {use}: {s.finished.get(rid)} finished responses")
            # An abort may land after its request finished (NOT_FOUND, fine);
            # a start of a finished id must never be ALREADY_EXISTS.
            reused = [c for r, c in s.message_errors if r.startswith("storm-") and c == 6]
            if reused:
                ledger.violation(f"ids refused on reuse after their finish: {reused[:3]}")
            ledger.add("storm_requests", len(ids))
        s.close()
        time.sleep(0.05)  # a storm every 50 ms, not a busy loop
        missing_not_found = [c for r, c in s.message_errors
                             if r.startswith("never-started") and c != 5]
        if missing_not_found:
            ledger.violation(f"aborts of unknown ids answered {missing_not_found[:3]}")


def duplicate_id_client(stub, pb, deadline, ledger, timeout):
    n = 0
    while time.time() < deadline:
        n += 1
        rid = f"dup-{threading.get_ident() % 100000}-{n}"  # unique per round
        s = Stream(stub, pb, ledger, timeout)
        s.track(rid)
        s.start(rid, max_tokens=4000)  # long: still running when the duplicate lands
        s.start(rid, max_tokens=16)
        if not s.read_until(lambda: s.message_errors or not s.running):
            continue
        if not s.message_errors:
            # The first ended before the duplicate arrived (e.g. refused under
            # overload): the second is then a request of its own.
            s.track(rid)
            s.abort(rid)
            s.read_until(lambda: not s.running)
            s.close()
            ledger.add("duplicate_rounds_skipped")
            continue
        s.abort(rid)
        ok = s.read_until(lambda: not s.running)
        s.close()
        if not ok:
            continue
        if s.finished[rid] != 1:
            ledger.violation(f"duplicate id: {s.finished[rid]} finished responses")
        if [c for _, c in s.message_errors] not in ([6], [6, 5]):  # ALREADY_EXISTS
            ledger.violation(f"duplicate start answered {s.message_errors}")
        ledger.add("duplicate_rounds")


def start_all(stub, pb, deadline, ledger, timeout, hold_s):
    """Starts one thread per hostile kind; returns them."""
    kinds = [
        (huge_id_client, (stub, pb, deadline, ledger, timeout)),
        (never_reading_client, (stub, pb, deadline, ledger, timeout, hold_s)),
        (never_reading_client, (stub, pb, deadline, ledger, timeout, hold_s)),
        (abort_storm_client, (stub, pb, deadline, ledger, timeout)),
        (duplicate_id_client, (stub, pb, deadline, ledger, timeout)),
    ]
    threads = [threading.Thread(target=f, args=a, daemon=True) for f, a in kinds]
    for t in threads:
        t.start()
    return threads
