"""Loaded at start-up by a process that has ``bench/gc_probe`` on its ``PYTHONPATH``
(``harness.gateway(..., gc_probe=True)``): logs every garbage collection that takes 10 ms or
more to stderr, with its generation and the objects it looked at, so that a latency spike in
a load benchmark can be matched with a collector pause. The app itself is unchanged."""

import gc
import sys
import time

_started: list[float] = []


def _probe(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        _started.append(time.perf_counter())
        return
    if not _started:
        return
    took = (time.perf_counter() - _started.pop()) * 1000
    if took >= 10:
        counts = gc.get_count()
        sys.stderr.write(
            f"gc-probe: generation {info.get('generation')} took {took:.1f} ms at "
            f"{time.monotonic():.3f} (collected {info.get('collected')}, "
            f"objects tracked {len(gc.get_objects(info.get('generation', 2)))}, counts {counts})\n"
        )
        sys.stderr.flush()


gc.callbacks.append(_probe)

# An experiment, not a setting of the app: GC_PROBE_FREEZE_AFTER=N moves every object alive N
# seconds after start (imports, the embedder, the app) to the permanent generation, as a
# ``gc.freeze()`` at the end of the app's start-up would.
_freeze_after = float(__import__("os").environ.get("GC_PROBE_FREEZE_AFTER", "0") or 0)
if _freeze_after > 0:
    import threading

    threading.Timer(_freeze_after, gc.freeze).start()
