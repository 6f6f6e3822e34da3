"""The alarms as a part of `nettel serve`: built from the settings, saved at stop, restored."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from service.alarms.service import AlarmService
from service.alarms.store import BOOK_NAME, ENGINE_NAME
from service.config import Settings
from tests.alarms.mesh import START, Mesh


class Analysis:
    """The part of a cycle's analysis the alarms read."""

    def __init__(self, congestion_probability: np.ndarray) -> None:
        self.congestion_probability = congestion_probability


def test_the_state_saved_at_stop_is_what_the_next_start_restores(tmp_path: Path) -> None:
    settings = Settings(state_dir=tmp_path, alarm_open_minutes=1, model="none")
    service = AlarmService.build(settings)
    assert service is not None
    mesh = Mesh()
    loss = np.zeros(len(mesh))
    loss[2] = 1.0
    mesh.feed(START, loss=loss)
    view = mesh.view(START)
    service.start()
    service.after_cycle(view, Analysis(np.full(len(view), np.nan)), None)  # type: ignore[arg-type]
    service.stop()
    assert (tmp_path / BOOK_NAME).exists() and (tmp_path / ENGINE_NAME).exists()
    again = AlarmService.build(settings)
    assert again is not None
    assert again.book.open_alarms() == service.book.open_alarms() != []
    assert again.engine.last_minute == START


def test_a_failed_evaluation_is_logged_and_the_cycle_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    service = AlarmService.build(Settings(model="none"))
    assert service is not None

    mesh = Mesh()
    mesh.feed(START)
    view = mesh.view(START)
    wrong = Analysis(np.full(len(view) + 1, np.nan))  # not the view's links
    with caplog.at_level(logging.ERROR, "nettel.alarms"):
        service.after_cycle(view, wrong, None)  # type: ignore[arg-type]
    assert "alarm evaluation failed" in caplog.text
