"""Garbage-collector pacing of the service's processes."""

from __future__ import annotations

import gc

from service.memory import GC_THRESHOLD, relax_garbage_collection


def test_relaxed_collection_freezes_start_up_objects_and_still_collects_cycles() -> None:
    before = gc.get_threshold()
    try:
        relax_garbage_collection()
        assert gc.get_threshold()[0] == GC_THRESHOLD
        assert gc.get_freeze_count() > 0  # modules and everything alive now

        cycle: list = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1  # a cycle made later is still found
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
