"""Long calls release the GIL: other Python threads run while tomors
computes, and two reconstructions in two threads overlap in time.

Both checks are about ordering, not speed: with the GIL held through a
native call no other Python code could run inside that call's time window,
so a single Python-level event inside it proves the GIL was released."""

import threading
import time

import numpy as np

import tomors


def _workload(rows: int):
    theta = tomors.angles(256)
    sino = tomors.shepp_logan_projections(theta, 256)
    proj = np.ascontiguousarray(np.repeat(sino[:, None, :], rows, axis=1))
    return proj, theta


def _timed_call(proj, theta, **kw):
    """Runs recon in a thread; returns (thread, record) with start/end times."""
    record = {}

    def work():
        record["start"] = time.perf_counter()
        tomors.recon(proj, theta, backend="cpu", **kw)
        record["end"] = time.perf_counter()

    return threading.Thread(target=work), record


def test_other_threads_run_during_a_call():
    proj, theta = _workload(16)
    # Make the call long enough (≥ 0.2 s) whatever the machine's speed.
    while True:
        t0 = time.perf_counter()
        tomors.recon(proj, theta, backend="cpu")
        if time.perf_counter() - t0 >= 0.2:
            break
        proj = np.ascontiguousarray(np.concatenate([proj, proj], axis=1))
    worker, record = _timed_call(proj, theta)
    ticks = []
    worker.start()
    while worker.is_alive():
        ticks.append(time.perf_counter())
        time.sleep(0.001)
    worker.join()
    start, end = record["start"], record["end"]
    quarter = (end - start) / 4
    inside = [t for t in ticks if start + quarter < t < end - quarter]
    # The main thread wakes every ~1 ms; with the GIL held none of its ticks
    # could fall inside the call's middle half.
    assert len(inside) >= 5, f"{len(inside)} main-thread ticks inside a {end - start:.2f} s call"


def test_two_reconstructions_overlap():
    proj, theta = _workload(24)
    events = {0: [], 1: []}

    def runner(k):
        tomors.recon(proj, theta, backend="cpu", slab=1,
                     progress=lambda done, total: events[k].append(time.perf_counter()))

    threads = [threading.Thread(target=runner, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(events[0]) == len(events[1]) == 24
    # Slab-by-slab progress of the two calls interleaves: each call reports
    # progress while the other one is between its first and last report.
    a0, a1 = events[0][0], events[0][-1]
    b0, b1 = events[1][0], events[1][-1]
    assert any(b0 < t < b1 for t in events[0]) and any(a0 < t < a1 for t in events[1]), (
        "the two calls ran one after the other"
    )
