"""`nettel simulate --family C --decisions`: closed-loop runs forked from one warm-up, resumable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("ns3", reason="ns-3 is not installed: pip install 'nettel[ns3]'")

from service.cli import main  # noqa: E402
from simulation.decision_world import draw_scenario  # noqa: E402

pytestmark = pytest.mark.slow
#: Scenario 0 of seed 2998: two candidates, 27 requests, one path idle and one with light cross
#: traffic (its ns-3 minutes simulate ~5x faster than a busy scenario's, e.g. seed 7's).
SEED = 2998


def test_every_policy_runs_the_same_requests_and_a_rerun_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "decisions"
    args = ["simulate", "--family", "C", "--decisions", str(out), "--seed", str(SEED),
            "--scenarios", "1", "--herding-scenarios", "0", "--policies", "random,served",
            "--no-oracle", "--processes", "1"]  # fmt: skip
    assert main(args) == 0
    lines = [json.loads(x) for x in (out / "runs.jsonl").read_text().splitlines()]
    assert [line["policy"] for line in lines] == ["random", "served"]
    scenario = draw_scenario(SEED, 0)
    for line in lines:
        assert [o["request"] for o in line["outcomes"]] == list(range(len(scenario.requests)))
        served = [o["view"]["cost"] for o in line["outcomes"]]
        assert all(len(costs) == 2 and None not in costs for costs in served)
        # after the 32-minute warm-up every path has the model's estimate
        assert all(None not in o["view"]["utilisation"] for o in line["outcomes"])
        finished = [o for o in line["outcomes"] if o["duration_s"] is not None]
        assert len(finished) >= len(scenario.requests) - 2
        assert all(o["duration_s"] > 0 for o in finished)
    served_line = lines[1]
    assert all(
        o["path"] == min(range(2), key=lambda i: o["view"]["cost"][i])
        or o["view"]["cost"][0] == o["view"]["cost"][1]
        for o in served_line["outcomes"]
    )
    capsys.readouterr()
    assert main(args) == 0
    assert "0 runs added" in capsys.readouterr().out
    assert main(["evaluate", "--decisions", str(out)]) == 0
    assert f"| served | {len(scenario.requests)}" in capsys.readouterr().out
