"""The operators' page in headless Chromium against a live service fed by the simulator, with
the shipped model (utilisation, its interval, the congestion probability) and crafted links that
are congested, clock-suspect (negative delays) and stale (nothing for 8 minutes).

The latest throughput test of a site pair (its tooltip) and of a host pair (the detail panel,
with AAAS's scores of its history), and the host pair's network path from its latest
traceroute: the simulator publishes both at perfSONAR's cadence.

Open network alarms: listed above the heatmap and their site pairs outlined, following
/alarms/stream as alarms open and close (a service in this process over the in-memory broker, the
alarms recorded in its book as the engine records them), and what the page says with --alarms
false.

Needs Debian's `chromium` (/usr/bin/chromium) and the `playwright` Python package (its own browser
download is not used). Saves a screenshot in the test's tmp dir and at out/e2e/web-view.png
(docs/images/web-view.png is a copy of one).
"""

from __future__ import annotations

import re
import shutil
import threading
import time
from pathlib import Path

import httpx
import pytest
import yaml

from devtools.metrics_reader import sample_value, samples_named
from devtools.stomp_client import StompClient
from devtools.waiting import wait_for
from simulation.demo_feed import run_demo_feed
from simulation.simulator import build_mesh
from tests.deploy.site_mesh import mesh_messages
from tests.deploy.site_mesh import write_topology as write_mesh_topology
from tests.integration.wire import current_minute_ts, get_json
from tests.publish.alarm_data import FIREWALL, HIGH_LOSS, OPENED, closed, opened
from tests.publish.support import detach_alarm_engine
from tests.publish.wire_data import DELAY, LOSS, delay_body, loss_body

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOT = Path(__file__).resolve().parents[2] / "out" / "e2e" / "web-view.png"
SITES, SEED = 8, 3
#: A plain (non-durable) subscription, so no backlog from other tests' services reaches ours.
SERVE_ARGS = ("--interval", "1", "--subscription", "plain", "--client-id", "nettel-e2e-web")
CONGESTED_FILL = "#8e0152"
#: Extra hosts for a crafted congested link, used only if the simulated window has none.
CRAFTED = [("SITE-01", "ps-crafted.site01.example.org", "10.200.0.1"),
           ("SITE-02", "ps-crafted.site02.example.org", "10.200.0.2")]  # fmt: skip
#: A link whose clocks disagree (delays of -18.5 ms) and one whose toolkit went quiet, at a
#: site of its own so that its site pair is stale as a whole.
CLOCK = [("SITE-03", "ps-clock.site03.example.org", "10.201.0.3"),
         ("SITE-04", "ps-clock.site04.example.org", "10.201.0.4")]  # fmt: skip
QUIET = [("SITE-05", "ps-quiet.site05.example.org", "10.202.0.5"),
         ("SITE-QUIET", "ps-quiet.quiet.example.org", "10.202.0.99")]  # fmt: skip
CONGESTED_RULE = (
    "loss above 0.01 % and delay above the link's all-time minimum plus one standard deviation"
)

pytestmark = [pytest.mark.slow, pytest.mark.broker]
if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} missing: apt-get install chromium", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")


@pytest.fixture
def publisher(activemq):
    producer = StompClient(activemq.brokers)
    yield producer
    producer.close()


def write_topology(path: Path) -> Path:
    mesh = build_mesh(SITES, SEED)
    sites = {site: [host] for site, host in zip(mesh.site_names, mesh.host_names, strict=True)}
    for site, host, _ in CRAFTED + CLOCK + QUIET:
        sites.setdefault(site, []).append(host)
    path.write_text(yaml.safe_dump(sites))
    return path


def feed_simulator(port: int) -> int:
    """The seeded mesh's last 40 minutes, published at once (no real-time minutes); the number
    of messages sent."""
    sent: list[int] = []
    feed = threading.Thread(
        target=lambda: sent.append(
            run_demo_feed(
                [("127.0.0.1", port)], seed=SEED, sites=SITES, backfill_minutes=40, realtime=False
            )
        )
    )
    feed.start()
    feed.join(120)
    return sent[0]


def taken_in(url: str, sent: int) -> bool:
    """Every message sent was received and no frame waits to be parsed."""
    text = httpx.get(f"{url}/metrics", timeout=5).text
    received = sum(sample.value for sample in samples_named(text, "nettel_messages_received_total"))
    return received >= sent and sample_value(text, "nettel_ingest_queued_frames") == 0


def matrix_after(url: str, moment: float) -> bool:
    return (get_json(f"{url}/costmatrix") or {}).get("generated_at", 0.0) > moment


def site_links(url: str) -> list[dict]:
    return (get_json(f"{url}/costmatrix", level="site") or {}).get("links", [])


def back_filled(links: list[dict], pairs: int) -> bool:
    """Every site pair has a full window up to the same newest minute."""
    newest = {link["last_measurement"] for link in links}
    return len(links) == pairs and len(newest) == 1 and all(x["samples"] >= 30 for x in links)


def publish_link(publisher, ends, minutes: list[int], delay_ms: float) -> None:
    """One crafted link: 600 packets at `delay_ms` and no loss in each of `minutes`."""
    (_, source_host, source_ip), (_, destination_host, destination_ip) = ends
    meta = {"source": source_ip, "destination": destination_ip, "measurement_agent": source_ip,
            "input_source": source_host, "input_destination": destination_host}  # fmt: skip
    delay = delay_body(minutes, **meta)
    delay["datapoints"] = {str(ts): {f"{delay_ms:.2f}": 600} for ts in minutes}
    publisher.send(DELAY, delay)
    publisher.send(LOSS, loss_body(dict.fromkeys(minutes, 0.0), **meta))


def publish_clock_suspect_and_stale_links(publisher) -> None:
    now = current_minute_ts()
    publish_link(publisher, CLOCK, [now - 60 * m for m in range(20, 0, -1)], -18.5)
    publish_link(publisher, QUIET, [now - 60 * m for m in range(20, 7, -1)], 31.0)


def publish_congested_link(publisher) -> tuple[str, str]:
    """32 quiet minutes then 3 with queueing delay and loss on a SITE-01 -> SITE-02 host pair."""
    (source_site, source_host, source_ip), (destination_site, destination_host, destination_ip) = (
        CRAFTED
    )
    meta = {"source": source_ip, "destination": destination_ip, "measurement_agent": source_ip,
            "input_source": source_host, "input_destination": destination_host}  # fmt: skip
    now = current_minute_ts()
    minutes = [now - 60 * m for m in range(31, 0, -1)]
    delay = delay_body(minutes, **meta)
    delay["datapoints"] = {str(ts): {"20.00": 600} for ts in minutes[:-3]} | {
        str(ts): {"85.00": 570} for ts in minutes[-3:]
    }
    publisher.send(DELAY, delay)
    publisher.send(
        LOSS, loss_body({ts: 0.05 if ts in minutes[-3:] else 0.0 for ts in minutes}, **meta)
    )
    return source_site, destination_site


def find_congested_pair(url: str, publisher) -> tuple[str, str]:
    congested = [link for link in site_links(url) if link["congested"]]
    if congested:
        return congested[0]["source"], congested[0]["destination"]
    pair = publish_congested_link(publisher)
    wait_for(
        lambda: any(
            (x["source"], x["destination"]) == pair and x["congested"] for x in site_links(url)
        ),
        what="the crafted congested link",
    )
    return pair


def test_heatmap_shows_congestion_and_opens_the_series(
    activemq, nettel_service, publisher, tmp_path
):
    topology = write_topology(tmp_path / "topology.yaml")
    service = nettel_service(activemq.brokers, *SERVE_ARGS, "--topology", str(topology))
    wait_for(lambda: get_json(f"{service.url}/readyz"), what="subscribed (plain topics)")
    sent = feed_simulator(activemq.stomp_port)
    pairs = SITES * (SITES - 1)
    wait_for(lambda: back_filled(site_links(service.url), pairs), timeout=60, what="the back-fill")
    # the congested pair is chosen on a matrix of every message: one taken while the last
    # minutes were still being applied can change its verdict before the page is drawn
    wait_for(lambda: taken_in(service.url, sent), timeout=60, what=f"{sent} messages taken in")
    settled = time.time() + 1.0  # the last batch taken off the queue is applied by then
    wait_for(lambda: matrix_after(service.url, settled), what="a matrix of every message")
    source, destination = find_congested_pair(service.url, publisher)
    publish_clock_suspect_and_stale_links(publisher)
    wait_for(lambda: flagged(service.url), what="the clock-suspect and the stale site pair")

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 950})
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("console", lambda m: m.type == "error" and errors.append(m.text))
        page.goto(f"{service.url}/")
        check_page(page, source, destination, (SITES + 1) * SITES)
        check_flags(page)
        check_throughput_and_path(page, service.url)
        page.screenshot(path=str(tmp_path / "web-view.png"), full_page=True)
        browser.close()
    assert errors == []
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(tmp_path / "web-view.png", SCREENSHOT)


def flagged(url: str) -> bool:
    links = {(x["source"], x["destination"]): x for x in site_links(url)}
    clock, quiet = links.get(("SITE-03", "SITE-04")), links.get(("SITE-05", "SITE-QUIET"))
    return bool(clock and clock["clock_suspect"] and quiet and quiet["stale"])


def check_flags(page) -> None:
    """Clock-suspect and stale site pairs are drawn as such and say why."""
    expect = sync_api.expect
    clock = page.locator('#heatmap rect.cell[data-source="SITE-03"][data-destination="SITE-04"]')
    expect(clock).to_have_attribute("data-clock-suspect", "true")
    overlay = page.locator('#heatmap rect.clock-overlay[data-source="SITE-03"]')
    expect(overlay).not_to_have_count(0)
    clock.hover()
    expect(page.locator("#tooltip")).to_contain_text("clock suspect")
    expect(page.locator("#tooltip")).to_contain_text("the two hosts' clocks disagree")
    stale = page.locator('#heatmap rect.cell[data-source="SITE-05"][data-destination="SITE-QUIET"]')
    expect(stale).to_have_class(re.compile(r"\bstale\b"))
    expect(stale).to_have_attribute("fill", "url(#stale-hatch)")
    stale.hover()
    expect(page.locator("#tooltip")).to_contain_text("stale: no datapoint for 5 minutes")
    page.click("#help-toggle")
    expect(page.locator("#help")).to_be_visible()
    expect(page.locator("#help")).to_contain_text("clock suspect")
    expect(page.locator("#help")).to_contain_text(CONGESTED_RULE)
    page.click("#help-close")
    expect(page.locator("#help")).to_be_hidden()


THROUGHPUT_TEXT = re.compile(
    r"throughput \d+(\.\d+)? [GM]b/s \(test started \d+(\.\d)? (s|min|h) ago\)"
)


def check_throughput_and_path(page, url: str) -> None:
    """A simulated site pair's tooltip shows its latest test; its host pair's detail shows the
    test and the path the simulator's traceroutes took, hop by hop, as /links serves it."""
    expect = sync_api.expect
    cell = page.locator('#heatmap rect.cell[data-source="SITE-01"][data-destination="SITE-02"]')
    cell.hover()
    expect(page.locator("#tooltip")).to_contain_text(THROUGHPUT_TEXT)
    cell.click()
    expect(page.locator("#detail-title")).to_have_text("SITE-01 → SITE-02")
    simulated = page.locator("#pair-select option", has_text="ps-latency.site01").first
    page.select_option("#pair-select", simulated.get_attribute("value"))
    line = page.locator("#detail-status li.throughput")
    expect(line).to_contain_text(THROUGHPUT_TEXT)
    expect(line).to_contain_text(
        re.compile(r"newest 4-day bin .* against the mean of \d bins \(z -?\d")
    )
    mesh = build_mesh(SITES, SEED)
    detail = get_json(f"{url}/links/{mesh.host_ips[0]}/{mesh.host_ips[1]}")
    hops = [hop["address"] for hop in detail["path"]["hops"]]
    assert hops[-1] == mesh.host_ips[1] and len(hops) >= 7
    expect(page.locator("#path-hops li")).to_have_count(len(hops))
    expect(page.locator("#path-hops li").first).to_contain_text(f"{hops[0]} (AS")
    expect(page.locator("#path-hops li").last).to_contain_text(hops[-1])
    summary = page.locator("#path-summary")
    expect(summary).to_contain_text(f"{len(hops)} hops, reaches the destination; this path since")
    expect(summary).to_contain_text("0 changes in the last 24 h")


def check_page(page, source: str, destination: str, pairs: int) -> None:
    expect = sync_api.expect
    expect(page.locator("#heatmap rect.cell")).to_have_count(pairs, timeout=15_000)
    cell = page.locator(
        f'#heatmap rect.cell[data-source="{source}"][data-destination="{destination}"]'
    )
    expect(cell).to_have_class(re.compile(r"\bcongested\b"))
    expect(cell).to_have_attribute("fill", CONGESTED_FILL)

    cell.hover()
    tooltip = page.locator("#tooltip")
    expect(tooltip).to_be_visible()
    expect(tooltip).to_contain_text(f"): {CONGESTED_RULE}")
    expect(tooltip).to_contain_text("freshness")
    expect(tooltip).to_contain_text(re.compile(r"utilisation \d\.\d\d \(90 % interval \d\.\d\d–"))
    expect(tooltip).to_contain_text("P(utilisation > 70 %)")

    page.check("#congested-only")
    plain = page.locator("#heatmap rect.cell:not(.congested)").count()
    expect(page.locator("#heatmap rect.cell.dimmed")).to_have_count(plain)
    page.uncheck("#congested-only")
    expect(page.locator("#heatmap rect.cell.dimmed")).to_have_count(0)

    generated = page.locator("body").get_attribute("data-generated-at")
    expect(page.locator("body")).not_to_have_attribute("data-generated-at", generated or "")

    cell.click()
    expect(page.locator("#detail")).to_be_visible()
    expect(page.locator("#detail-title")).to_have_text(f"{source} → {destination}")
    congested_pair = page.locator("#pair-select option", has_text="congested").first
    page.select_option("#pair-select", congested_pair.get_attribute("value"))
    status = page.locator("#detail-status li.congested")
    expect(status).to_contain_text(f"congested: {CONGESTED_RULE}. Here, newest minute: loss ")
    expect(status).to_contain_text(re.compile(r"against all-time minimum -?\d+\.\d\d \+ std"))
    expect(page.locator("#detail-status li.utilisation")).to_contain_text("utilisation")
    expect(page.locator("#charts .chart")).to_have_count(3)
    expect(page.locator("#charts path.series")).to_have_count(5)  # delay x3, loss, utilisation
    loss_axis, utilisation_axis = (page.locator("#charts svg").nth(i) for i in (1, 2))
    expect(loss_axis).to_have_attribute("data-axis-low", "0")  # loss from 0, whatever its values
    expect(utilisation_axis).to_have_attribute("data-axis-low", "0")
    expect(utilisation_axis).to_have_attribute("data-axis-high", "1")
    cell.hover()


def launch(playwright):
    """Headless Chromium and a page whose errors are collected (the page, the list)."""
    browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
    page = browser.new_page(viewport={"width": 1400, "height": 950})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    return browser, page, errors


def test_open_alarms_are_listed_and_their_site_pairs_outlined(
    memory_broker, memory_service, tmp_path
):
    topology = write_mesh_topology(tmp_path)
    service = memory_service(
        memory_broker, "--interval", "1", "--model", "none", "--topology", str(topology)
    )
    book = service.runtime.alarms
    assert book is not None
    detach_alarm_engine(service.runtime.cycle)  # the test records what the engine would
    publisher = service.publisher()
    for topic, body in mesh_messages():
        publisher.send(topic, body)
    publisher.close()
    wait_for(lambda: len(site_links(service.url)) == 5, what="the mesh's five site pairs")
    book.record([opened(HIGH_LOSS)])  # open before the page: in its first `alarms` event
    expect = sync_api.expect
    cell = 'rect.cell[data-source="{}"][data-destination="SITE-B"]'.format
    mark = '#heatmap rect.alarm-mark[data-source="{}"][data-destination="SITE-B"]'.format

    with sync_api.sync_playwright() as playwright:
        browser, page, errors = launch(playwright)
        page.goto(f"{service.url}/")
        expect(page.locator("#alarm-count")).to_have_text("1", timeout=15_000)
        book.record([opened(FIREWALL)])  # while the page is open: an `open` event
        expect(page.locator("#alarm-count")).to_have_text("2")
        items = page.locator("#alarm-list li")
        expect(items).to_have_count(2)
        expect(items.nth(0)).to_have_attribute("data-alarm-id", FIREWALL.id)  # newest first
        expect(items.nth(0).locator(".kind")).to_have_text("firewall issue")
        expect(items.nth(0).locator(".body")).to_contain_text(
            f"{FIREWALL.body()} (SITE-A, SITE-B, SITE-C)"
        )
        expect(items.nth(1).locator(".body")).to_contain_text("(SITE-A, SITE-B)")
        expect(page.locator(f"#heatmap {cell('SITE-A')}")).to_have_attribute("data-alarms", "2")
        expect(page.locator(f"#heatmap {cell('SITE-C')}")).to_have_attribute("data-alarms", "1")
        expect(page.locator(f"#heatmap {cell('SITE-A')}")).to_have_class(re.compile(r"\balarm\b"))
        expect(page.locator(mark("SITE-A"))).to_have_count(1)
        expect(page.locator(mark("SITE-C"))).to_have_count(1)
        expect(page.locator("#heatmap rect.alarm-mark")).to_have_count(2)
        page.locator(f"#heatmap {cell('SITE-C')}").hover()
        expect(page.locator("#tooltip")).to_contain_text(f"alarm: {FIREWALL.body()}")
        page.screenshot(path=str(tmp_path / "web-view-alarms.png"), full_page=True)

        items.nth(1).click()  # the loss alarm's site pair opens
        expect(page.locator("#detail-title")).to_have_text("SITE-A → SITE-B")
        book.record([closed(HIGH_LOSS, OPENED + 600.0)])  # a `close` event
        expect(page.locator("#alarm-count")).to_have_text("1")
        expect(page.locator(f"#heatmap {cell('SITE-A')}")).to_have_attribute("data-alarms", "1")
        book.record([closed(FIREWALL, OPENED + 660.0)])
        expect(page.locator("#alarm-count")).to_have_text("0")
        expect(page.locator("#alarm-list li")).to_have_count(0)
        expect(page.locator("#heatmap rect.alarm-mark")).to_have_count(0)
        expect(page.locator(f"#heatmap {cell('SITE-A')}")).to_have_attribute("data-alarms", "0")
        browser.close()
    assert errors == []


def test_the_page_says_when_the_service_raises_no_alarms(memory_broker, memory_service):
    service = memory_service(
        memory_broker, "--interval", "1", "--model", "none", "--alarms", "false"
    )
    with sync_api.sync_playwright() as playwright:
        browser, page, _ = launch(playwright)
        page.goto(f"{service.url}/")
        note = page.locator("#alarm-note")
        sync_api.expect(note).to_have_text(
            "alarms unavailable: this service raises none, or its streams are full", timeout=15_000
        )
        sync_api.expect(page.locator("#alarm-list li")).to_have_count(0)
        browser.close()
