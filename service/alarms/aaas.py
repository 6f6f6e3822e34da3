"""`--alarm-profile aaas`: OSG Alarms and Alerts' own windows, so operators can compare.

AAAS runs batch jobs over the last 24 hours. Here each UTC day is judged once, when its last
minute has settled, over that day's minutes (every minute accumulated as it settles, so the
day needs no more memory than a few numbers per link and host):

- loss: each link's mean loss over the day; 2 % <= mean < 100 % is high, 100 % complete. A host
  whose high-loss links reach at least 5 other sites gives one "high packet loss on multiple
  links" alarm (its links give no alarm of their own); a destination host with complete loss
  from more than 10 source hosts gives one "firewall issue" alarm for its site; the other links
  one alarm each.
- delay: the p95 of the day's minute medians (at least 10 of them) above max(1.5 x p95,
  mean + 2 x IQR) of the baseline of the days before (the day itself enters the baseline after
  it is judged, all its minutes at one weight).
- clock: each host's (mean delay of its links out - mean delay of its links in) / 2 over the
  day, beyond 100 ms either way.

An alarm of a day opens when the day is judged (started at the day's start) and closes when a
later day is judged without it. "link silent" and "sustained congestion" are nettel's own kinds
and are not raised in this profile. No group hysteresis either: AAAS judges every day afresh.
Nor are the throughput and traceroute alarms (bandwidth, path changed, destination cannot be
reached): this profile compares the delay and loss alarms with AAAS's.
"""

from __future__ import annotations

import numpy as np

from service.alarms import conditions as rules
from service.alarms.baseline import (
    ANCHOR_BIN,
    BINS,
    EMPTY,
    FLOOR_MS,
    binned_quantile,
    cumulative_bins,
    global_bin,
)
from service.alarms.book import AlarmBook
from service.alarms.engine import AlarmEngine, AlarmRules
from service.alarms.grouping import (
    FIREWALL_SOURCES,
    GROUP_SITES,
    AlarmSpec,
    Grouping,
    LatchedHosts,
    LatchedLinks,
)
from service.alarms.records import Alarm, AlarmKind
from service.state.link_state import LinkResults, StateView

DAY_MINUTES = 1440
_ROWS = {
    "day/loss_sum": np.float64,
    "day/loss_count": np.int32,
    "day/delay_count": np.int32,
    "day/delay_sum": np.float64,
    "day/log_jitter_sum": np.float64,
    "day/offset": np.int16,
}
_HOSTS = ("day/out_sum", "day/out_count", "day/in_sum", "day/in_count")


class AaasEngine(AlarmEngine):
    """Accumulates each UTC day's minutes and judges the day once it has settled."""

    def __init__(self, book: AlarmBook, rules_: AlarmRules | None = None) -> None:
        super().__init__(book, rules_)
        self.row_arrays = {name: np.zeros(0, dtype) for name, dtype in _ROWS.items()}
        self.row_arrays["day/delay_bins"] = np.zeros((0, BINS), np.float32)
        self.row_fill = {"day/offset": EMPTY}
        self.host_arrays = {name: np.zeros(0, np.float64) for name in _HOSTS}
        self._day_specs: dict[tuple[AlarmKind, str], AlarmSpec] | None = None

    def _evaluate_minute(self, view: StateView, minute: int, probability: np.ndarray) -> None:
        values = rules.minute_values(view, minute)
        self._accumulate(values)
        if (minute + 1) % DAY_MINUTES == 0:
            day_start = minute + 1 - DAY_MINUTES
            self._day_specs = self._judge(view, day_start)
            self._fold_day(minute)
            self._clear_day()

    def _fold(self, view: StateView, minute: int) -> None:
        """Nothing per minute: a day enters the baseline once judged."""

    def _evaluate_results(self, view: StateView, results: LinkResults | None, minute: int) -> None:
        """Nothing: the throughput and path alarms are the short profile's."""

    def _refresh_limits(self, minute: int) -> None:
        """Nothing per minute: a day's thresholds are read when it is judged."""

    def _specs(
        self, view: StateView, open_alarms: dict[tuple[AlarmKind, str], Alarm]
    ) -> dict[tuple[AlarmKind, str], AlarmSpec] | None:
        specs, self._day_specs = self._day_specs, None
        return specs

    # -- the day so far ------------------------------------------------------------------------

    def _accumulate(self, values: rules.MinuteValues) -> None:
        day = self.row_arrays
        measured = ~np.isnan(values.loss)
        day["day/loss_sum"][measured] += values.loss[measured]
        day["day/loss_count"][measured] += 1
        rows = np.flatnonzero(~np.isnan(values.delay_median))
        medians = values.delay_median[rows]
        new = day["day/offset"][rows] == EMPTY
        if new.any():
            base = self.baseline.offset[rows[new]]
            own = global_bin(medians[new]) - ANCHOR_BIN
            day["day/offset"][rows[new]] = np.where(base == EMPTY, own, base)
        local = global_bin(medians) - day["day/offset"][rows].astype(np.int64)
        day["day/delay_bins"][rows, np.clip(local, 0, BINS - 1)] += 1
        day["day/delay_count"][rows] += 1
        day["day/delay_sum"][rows] += medians
        stds = np.maximum(values.delay_std[rows], FLOOR_MS)
        day["day/log_jitter_sum"][rows] += np.log(np.where(np.isnan(stds), 1.0, stds))
        hosts = self.host_arrays
        delay = ~np.isnan(values.delay_mean)
        mean = np.where(delay, values.delay_mean, 0.0)
        count = len(hosts["day/out_sum"])
        for side, codes in (("out", self.ends.source_host), ("in", self.ends.destination_host)):
            hosts[f"day/{side}_sum"] += np.bincount(codes, mean, count)
            hosts[f"day/{side}_count"] += np.bincount(codes, delay, count)

    def _clear_day(self) -> None:
        for name, array in self.row_arrays.items():
            array[...] = EMPTY if name == "day/offset" else 0
        for array in self.host_arrays.values():
            array[...] = 0

    # -- judging a day -------------------------------------------------------------------------

    def _judge(self, view: StateView, day_start: int) -> dict[tuple[AlarmKind, str], AlarmSpec]:
        day = self.row_arrays
        grouping = Grouping(view, self.ends)
        count = day["day/loss_count"]
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_loss = np.where(count > 0, day["day/loss_sum"] / count, np.nan)
            complete = mean_loss >= rules.COMPLETE_LOSS
            high = (mean_loss >= rules.HIGH_LOSS) & ~complete
        specs = self._loss_specs(grouping, high, complete, mean_loss, day_start)
        specs += self._delay_specs(grouping, day_start)
        specs += self._clock_specs(grouping, day_start)
        return {(spec.kind, spec.subject): spec for spec in specs}

    def _loss_specs(
        self,
        grouping: Grouping,
        high: np.ndarray,
        complete: np.ndarray,
        mean_loss: np.ndarray,
        day_start: int,
    ) -> list[AlarmSpec]:
        count = self.row_arrays["day/loss_count"]

        def latched(mask: np.ndarray, threshold: float) -> LatchedLinks:
            rows = np.flatnonzero(mask)
            evidence: list[dict[str, float | int | str]] = [
                {"loss": round(float(mean_loss[r]), 4), "threshold": threshold,
                 "measurements": int(count[r])}
                for r in rows.tolist()
            ]  # fmt: skip
            return LatchedLinks(rows, np.full(len(rows), day_start), evidence)

        specs: list[AlarmSpec] = []
        lossy = latched(high, rules.HIGH_LOSS)
        position = {row: at for at, row in enumerate(lossy.rows.tolist())}
        touching: dict[int, list[int]] = {}
        for row in position:
            for host in (int(self.ends.source_host[row]), int(self.ends.destination_host[row])):
                touching.setdefault(host, []).append(row)
        grouped = {
            host: rows
            for host, rows in touching.items()
            if len(grouping.other_sites(host, rows)) >= GROUP_SITES
        }
        for host, rows in sorted(grouped.items()):
            subject = self.ends.hosts[host]
            kind = AlarmKind.HIGH_PACKET_LOSS_MULTIPLE
            specs.append(grouping.group_spec(kind, subject, rows, lossy, position))
        claimed = {row for rows in grouped.values() for row in rows}
        for row in sorted(set(position) - claimed):
            specs.append(grouping.link_spec(AlarmKind.HIGH_PACKET_LOSS, row, lossy, position[row]))
        blocked = latched(complete, rules.COMPLETE_LOSS)
        position = {row: at for at, row in enumerate(blocked.rows.tolist())}
        senders: dict[int, set[int]] = {}
        for row in position:
            destination = int(self.ends.destination_host[row])
            senders.setdefault(destination, set()).add(int(self.ends.source_host[row]))
        firewalled = {host for host, sources in senders.items() if len(sources) > FIREWALL_SOURCES}
        by_site: dict[str, list[int]] = {}
        for row in position:
            host = int(self.ends.destination_host[row])
            if host in firewalled:
                site = self.ends.host_site[host] or self.ends.hosts[host]
                by_site.setdefault(site, []).append(row)
        for site, rows in sorted(by_site.items()):
            spec = grouping.group_spec(AlarmKind.FIREWALL_ISSUE, site, rows, blocked, position)
            specs.append(grouping.with_sources(spec))
        for row in sorted(position):
            if int(self.ends.destination_host[row]) not in firewalled:
                kind = AlarmKind.COMPLETE_PACKET_LOSS
                specs.append(grouping.link_spec(kind, row, blocked, position[row]))
        return specs

    def _delay_specs(self, grouping: Grouping, day_start: int) -> list[AlarmSpec]:
        day = self.row_arrays
        stats = self.baseline.stats(day_start)
        norms = rules.link_norms(
            stats.p25, stats.p75, stats.p95, stats.mean, stats.jitter, stats.minutes
        )
        counts = day["day/delay_bins"].T
        total = counts.sum(axis=0, dtype=np.float64)
        p95 = binned_quantile(cumulative_bins(counts), 0.95 * total, day["day/offset"])
        measured = day["day/delay_count"] >= rules.MIN_MEASUREMENTS
        with np.errstate(invalid="ignore"):
            high = measured & (p95 > norms.threshold)
        rows = np.flatnonzero(high)
        evidence: list[dict[str, float | int | str]] = []
        for row in rows.tolist():
            item: dict[str, float | int | str] = {
                "delay_p95_ms": round(float(p95[row]), 3),
                "threshold_ms": round(float(norms.threshold[row]), 3),
                "baseline_p95_ms": round(float(stats.p95[row]), 3),
                "baseline_mean_ms": round(float(stats.mean[row]), 3),
                "baseline_iqr_ms": round(float(stats.iqr[row]), 3),
                "measurements": int(day["day/delay_count"][row]),
            }
            evidence.append(item)
        latched = LatchedLinks(rows, np.full(len(rows), day_start), evidence)
        return [
            grouping.link_spec(AlarmKind.HIGH_DELAY, row, latched, at)
            for at, row in enumerate(rows.tolist())
        ]

    def _clock_specs(self, grouping: Grouping, day_start: int) -> list[AlarmSpec]:
        hosts = self.host_arrays
        out_count, in_count = hosts["day/out_count"], hosts["day/in_count"]
        both = (out_count > 0) & (in_count > 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            correction = np.where(
                both,
                (hosts["day/out_sum"] / out_count - hosts["day/in_sum"] / in_count) / 2,
                np.nan,
            )
            codes = np.flatnonzero(np.abs(correction) > rules.CLOCK_CORRECTION_MS)
        evidence: list[dict[str, float | int | str]] = [
            {"correction_ms": round(float(correction[c]), 3),
             "threshold_ms": rules.CLOCK_CORRECTION_MS}
            for c in codes.tolist()
        ]  # fmt: skip
        clocks = LatchedHosts(codes, np.full(len(codes), day_start), evidence)
        return [
            grouping.host_spec(self.ends.hosts[code], [code], [at], clocks)
            for at, code in enumerate(codes.tolist())
        ]

    # -- the baseline --------------------------------------------------------------------------

    def _fold_day(self, last_minute: int) -> None:
        """Add the day's minute medians to the baselines, all at the weight of its last minute."""
        day, baseline = self.row_arrays, self.baseline
        rows = np.flatnonzero(day["day/delay_count"] > 0)
        if not len(rows):
            return
        weight = np.float32(baseline.weight_of(last_minute))
        day_offset = day["day/offset"][rows].astype(np.int64)
        empty = baseline.offset[rows] == EMPTY
        baseline.offset[rows[empty]] = day_offset[empty]
        shift = day_offset - baseline.offset[rows].astype(np.int64)
        target = np.clip(np.arange(BINS)[None, :] + shift[:, None], 0, BINS - 1)
        np.add.at(baseline.weights, (target, rows[:, None]), weight * day["day/delay_bins"][rows])
        baseline.value_sum[rows] += weight * day["day/delay_sum"][rows].astype(np.float32)
        baseline.log_jitter_sum[rows] += weight * day["day/log_jitter_sum"][rows].astype(np.float32)
        counts = day["day/delay_count"][rows]
        baseline.follow(rows, day["day/delay_sum"][rows] / counts)
