"""The alarms as a part of `nettel serve`: the book, what raises its alarms each matrix cycle,
and, with --state-dir, their state saved every snapshot interval and at stop."""

from __future__ import annotations

import logging

from service.alarms.aaas import AaasEngine
from service.alarms.book import AlarmBook
from service.alarms.engine import AlarmEngine, AlarmRules
from service.alarms.store import AlarmStore
from service.analysis.link_analysis import LinkAnalysis
from service.config import Settings
from service.lifecycle import BackgroundLoop
from service.matrix.snapshot import CostMatrix
from service.state.link_state import LinkResults, StateView


class AlarmService:
    """Evaluates every cycle's view into the book; saves the alarm state periodically."""

    name = "alarms"

    def __init__(
        self,
        book: AlarmBook,
        engine: AlarmEngine,
        store: AlarmStore | None = None,
        save_interval: float = 60.0,
        log: logging.Logger | None = None,
    ) -> None:
        self.book = book
        self.engine = engine
        self.store = store
        self._log = log or logging.getLogger("nettel.alarms")
        self._loop = BackgroundLoop(self.name, self._save_quietly, save_interval, wait_first=True)

    @classmethod
    def build(cls, settings: Settings) -> AlarmService | None:
        """The alarms `settings` ask for, with the state saved in --state-dir restored (None
        with --alarms false)."""
        if not settings.alarms:
            return None
        book = AlarmBook()
        profile = AaasEngine if settings.alarm_profile == "aaas" else AlarmEngine
        engine = profile(book, alarm_rules(settings))
        store = AlarmStore(settings.state_dir) if settings.state_dir else None
        if store is not None:
            store.load(book, engine)
        return cls(book, engine, store, settings.snapshot_interval)

    def after_cycle(
        self,
        view: StateView,
        analysis: LinkAnalysis,
        matrix: CostMatrix,
        results: LinkResults | None = None,
    ) -> None:
        """A matrix cycle's analysis observer: evaluate (with the throughput and path
        `results` the cycle took with its view), then record (listeners hear here)."""
        try:
            events = self.engine.evaluate(view, analysis.congestion_probability, results)
        except Exception:  # the matrix is served already; the next cycle evaluates again
            self._log.exception("alarm evaluation failed")
            return
        self.book.record(events)

    def start(self) -> None:
        if self.store is not None:
            self._loop.start()

    def stop(self) -> None:
        """Stop saving periodically and save once more (the cycle has stopped by now)."""
        if self.store is not None:
            self._loop.stop(timeout=None)
            self._save_quietly()

    def save(self) -> None:
        if self.store is not None:
            self.store.save(self.book, self.engine)

    def _save_quietly(self) -> None:
        try:
            self.save()
        except OSError:
            self._log.exception("alarm state not saved; the next save tries again")


def alarm_rules(settings: Settings) -> AlarmRules:
    """The windows from the settings (the aaas profile reads only the settle time)."""
    return AlarmRules(
        open_minutes=settings.alarm_open_minutes,
        delay_open_minutes=settings.alarm_delay_open_minutes,
        close_minutes=settings.alarm_close_minutes,
        congestion_probability=settings.alarm_congestion_probability,
        congestion_minutes=settings.alarm_congestion_minutes,
        settle_seconds=settings.alarm_settle_seconds,
    )
