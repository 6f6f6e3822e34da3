// nettel live view: a site x site cost heatmap fed by /costmatrix/stream?level=site (SSE), with
// the open network alarms (/alarms/stream, SSE) listed and their site pairs outlined.
// Plain DOM and SVG, no libraries; every text from the service is set with textContent.
"use strict";

(() => {
  const SVG_NS = "http://www.w3.org/2000/svg";
  const CONGESTED_FILL = "#8e0152";
  const NODATA_FILL = "#d9dde3";
  const COST_STOPS = [
    [0.0, [26, 152, 80]],
    [0.25, [166, 217, 106]],
    [0.5, [254, 224, 139]],
    [0.75, [253, 174, 97]],
    [1.0, [215, 48, 39]],
  ];
  const HISTORY_POINTS = 240;
  const DETAIL_REFRESH_MS = 20000;
  // The empirical filter's rule, as the service applies it (service/analysis/empirical_filter.py).
  const LOSS_THRESHOLD = 1e-4;
  const CONGESTED_RULE =
    "loss above 0.01 % and delay above the link's all-time minimum plus one standard deviation";
  const STALE_RULE = "no datapoint for 5 minutes: the values are from the newest one";
  const CLOCK_RULE =
    "negative one-way delays in the window: the two hosts' clocks disagree, so delays " +
    "(and the cost from them) cannot be trusted";

  const state = {
    links: new Map(), // "source\0destination" -> site-level record
    generatedAt: null,
    model: null,
    selected: null, // [source site, destination site]
    pairIndex: 0,
    history: new Map(), // pair key -> [[generated_at, utilisation], ...] seen by this page
    detailLoadedAt: 0,
    detailToken: 0,
    alarms: new Map(), // alarm id -> open alarm (the /alarms record)
  };

  const byId = (id) => document.getElementById(id);
  const pairKey = (source, destination) => `${source}\u0000${destination}`;
  const fmt = (value, digits) => (value === null || value === undefined ? "n/a" : value.toFixed(digits));

  function costFill(link) {
    if (link.stale) return "url(#stale-hatch)";
    if (link.congested) return CONGESTED_FILL;
    if (link.cost === null || link.cost === undefined) return NODATA_FILL;
    const cost = Math.min(Math.max(link.cost, 0), 1);
    const upper = COST_STOPS.findIndex(([at]) => at >= cost);
    if (upper <= 0) return rgb(COST_STOPS[0][1]);
    const [a, from] = COST_STOPS[upper - 1];
    const [b, to] = COST_STOPS[upper];
    const t = (cost - a) / (b - a);
    return rgb(from.map((channel, i) => channel + t * (to[i] - channel)));
  }

  const rgb = (channels) => `rgb(${channels.map(Math.round).join(",")})`;

  function svgElement(tag, attributes, parent) {
    const element = document.createElementNS(SVG_NS, tag);
    for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, value);
    if (parent) parent.appendChild(element);
    return element;
  }

  function allSites() {
    const sites = new Set();
    for (const link of state.links.values()) {
      sites.add(link.source);
      sites.add(link.destination);
    }
    return [...sites].sort();
  }

  // ---- stream ----------------------------------------------------------------------------

  function connect() {
    const events = new EventSource("costmatrix/stream?level=site");
    events.addEventListener("open", () => setConnection("live", "live"));
    events.addEventListener("error", () => setConnection("reconnecting", "down"));
    events.addEventListener("matrix", (event) => {
      const matrix = JSON.parse(event.data);
      matrix.links.forEach((link) => dateThroughput(link, matrix.generated_at));
      state.links = new Map(matrix.links.map((link) => [pairKey(link.source, link.destination), link]));
      state.model = matrix.model;
      applyUpdate(matrix.generated_at);
    });
    events.addEventListener("changes", (event) => {
      const changes = JSON.parse(event.data);
      for (const link of changes.links) {
        dateThroughput(link, changes.generated_at);
        state.links.set(pairKey(link.source, link.destination), link);
      }
      for (const gone of changes.removed || []) {
        const key = pairKey(gone.source, gone.destination);
        state.links.delete(key);
        state.history.delete(key);
      }
      applyUpdate(changes.generated_at);
    });
  }

  // A record's throughput age is as of the matrix that carried it; the stream sends a link again
  // only when it changes, so the page keeps the test's start and ages it itself.
  function dateThroughput(link, generatedAt) {
    link.throughputStarted = link.throughput_age_s === null || link.throughput_age_s === undefined
      ? null : generatedAt - link.throughput_age_s;
  }

  // Open alarms: all of them on connect (`alarms`), then each opened or closed; the list and the
  // heatmap's outlines follow. A 503 (alarms off, or too many streams) ends the stream for good.
  function connectAlarms() {
    const events = new EventSource("alarms/stream");
    events.addEventListener("alarms", (event) => {
      const current = JSON.parse(event.data).open;
      state.alarms = new Map(current.map((alarm) => [alarm.id, alarm]));
      alarmsChanged("");
    });
    events.addEventListener("open", (event) => {
      if (event.data === undefined) return; // EventSource's own "connected", not an alarm
      const alarm = JSON.parse(event.data);
      state.alarms.set(alarm.id, alarm);
      alarmsChanged("");
    });
    events.addEventListener("close", (event) => {
      state.alarms.delete(JSON.parse(event.data).id);
      alarmsChanged("");
    });
    events.addEventListener("error", () => {
      const closed = events.readyState === EventSource.CLOSED;
      alarmsChanged(closed ? "alarms unavailable: this service raises none, or its streams are full"
        : "reconnecting to the alarm stream");
    });
  }

  function alarmsChanged(note) {
    byId("alarm-note").textContent = note;
    renderAlarms();
    if (state.generatedAt !== null) renderHeatmap();
  }

  // site pair key -> the open alarms on one or more of its links
  function alarmsByPair() {
    const pairs = new Map();
    for (const alarm of state.alarms.values()) {
      for (const pair of alarm.site_pairs || []) {
        const key = pairKey(pair.source, pair.destination);
        pairs.set(key, [...(pairs.get(key) || []), alarm]);
      }
    }
    return pairs;
  }

  function renderAlarms() {
    const alarms = [...state.alarms.values()].sort((a, b) => b.opened_at - a.opened_at);
    const count = byId("alarm-count");
    count.textContent = String(alarms.length);
    count.className = `pill${alarms.length ? " raised" : ""}`;
    byId("alarm-list").replaceChildren(...alarms.map((alarm) => {
      const item = document.createElement("li");
      item.dataset.alarmId = alarm.id;
      item.dataset.kind = alarm.kind;
      const cells = [
        ["kind", alarm.kind],
        ["since", `since ${new Date(alarm.opened_at * 1000).toLocaleTimeString()}`],
        ["body", `${alarm.body} (${alarm.tags.join(", ") || "no site"})`],
      ];
      item.replaceChildren(...cells.map(([cls, text]) => {
        const span = document.createElement("span");
        span.className = cls;
        span.textContent = text;
        return span;
      }));
      const [first] = alarm.site_pairs || [];
      if (first) {
        item.classList.add("pairs");
        item.title = "show this site pair";
        item.addEventListener("click", () => selectPair(first.source, first.destination));
      }
      return item;
    }));
  }

  function setConnection(text, cls) {
    const pill = byId("connection");
    pill.textContent = text;
    pill.className = `pill ${cls}`;
  }

  function applyUpdate(generatedAt) {
    state.generatedAt = generatedAt;
    recordHistory();
    updateFilters();
    render();
    if (state.selected && Date.now() - state.detailLoadedAt > DETAIL_REFRESH_MS) loadDetail();
  }

  function recordHistory() {
    for (const [key, link] of state.links) {
      const points = state.history.get(key) || [];
      points.push([state.generatedAt, {
        value: link.utilisation, low: link.utilisation_low, high: link.utilisation_high,
      }]);
      if (points.length > HISTORY_POINTS) points.shift();
      state.history.set(key, points);
    }
  }

  // ---- header and filters ----------------------------------------------------------------

  function render() {
    renderHeader();
    renderHeatmap();
    document.body.dataset.generatedAt = String(state.generatedAt);
  }

  function renderHeader() {
    const when = new Date(state.generatedAt * 1000).toLocaleTimeString();
    const model = state.model ? `model ${state.model.name} v${state.model.version}` : "no model";
    byId("generated").textContent = `matrix of ${when}, ${model}`;
    const links = [...state.links.values()];
    const congested = links.filter((link) => link.congested).length;
    byId("summary").textContent = `${links.length} site pairs, ${congested} congested`;
  }

  function updateFilters() {
    const sites = allSites();
    for (const id of ["source-filter", "destination-filter"]) {
      const select = byId(id);
      const current = [...select.options].slice(1).map((option) => option.value);
      if (current.join("\u0000") === sites.join("\u0000")) continue;
      const chosen = select.value;
      select.replaceChildren(new Option("all", ""), ...sites.map((site) => new Option(site, site)));
      select.value = sites.includes(chosen) ? chosen : "";
    }
  }

  // ---- heatmap ---------------------------------------------------------------------------

  function renderHeatmap() {
    const sites = allSites();
    const rows = byId("source-filter").value ? [byId("source-filter").value] : sites;
    const columns = byId("destination-filter").value ? [byId("destination-filter").value] : sites;
    const congestedOnly = byId("congested-only").checked;
    const cell = Math.max(14, Math.min(34, Math.floor(640 / Math.max(sites.length, 1))));
    const margin = 12 + 6.6 * Math.max(4, ...sites.map((site) => site.length));
    const svg = byId("heatmap");
    const alarms = alarmsByPair();
    svg.replaceChildren();
    addPatterns(svg);
    svg.setAttribute("width", margin + columns.length * cell + margin / 2);  // room for the last rotated label
    svg.setAttribute("height", margin + rows.length * cell + 8);
    columns.forEach((site, j) => {
      const x = margin + j * cell + cell / 2 + 4;
      const label = svgElement("text", { x, y: margin - 6, transform: `rotate(-60 ${x} ${margin - 6})` }, svg);
      label.textContent = site;
    });
    rows.forEach((source, i) => {
      const y = margin + i * cell;
      const label = svgElement("text", { x: margin - 6, y: y + cell / 2 + 4, "text-anchor": "end" }, svg);
      label.textContent = source;
      columns.forEach((destination, j) => {
        drawCell(svg, source, destination, margin + j * cell, y, cell, congestedOnly, alarms);
      });
    });
  }

  // Stale cells: grey hatching instead of the cost colour; clock-suspect cells: dark stripes
  // over it. Both say why in the tooltip and the detail panel.
  function addPatterns(svg) {
    const defs = svgElement("defs", {}, svg);
    const stale = svgElement("pattern", {
      id: "stale-hatch", width: 6, height: 6, patternUnits: "userSpaceOnUse",
      patternTransform: "rotate(45)",
    }, defs);
    svgElement("rect", { width: 6, height: 6, fill: NODATA_FILL }, stale);
    svgElement("line", { x1: 0, y1: 0, x2: 0, y2: 6, stroke: "#8a94a3", "stroke-width": 2 }, stale);
    const clock = svgElement("pattern", {
      id: "clock-hatch", width: 5, height: 5, patternUnits: "userSpaceOnUse",
      patternTransform: "rotate(-45)",
    }, defs);
    svgElement("line", { x1: 0, y1: 0, x2: 0, y2: 5, stroke: "#111827", "stroke-width": 1.6 }, clock);
  }

  function drawCell(svg, source, destination, x, y, size, congestedOnly, alarms) {
    const box = { x, y, width: size, height: size };
    if (source === destination) {
      svgElement("rect", { ...box, class: "diagonal" }, svg);
      return;
    }
    const link = state.links.get(pairKey(source, destination));
    const flag = (name) => Boolean(link && link[name]);
    const classes = ["cell"];
    if (!link || link.cost === null) classes.push("nodata");
    if (flag("congested")) classes.push("congested");
    if (flag("stale")) classes.push("stale");
    if (flag("clock_suspect")) classes.push("clock-suspect");
    if (congestedOnly && !flag("congested")) classes.push("dimmed");
    const raised = alarms.get(pairKey(source, destination)) || [];
    if (raised.length) classes.push("alarm");
    if (state.selected && state.selected[0] === source && state.selected[1] === destination) {
      classes.push("selected");
    }
    const rect = svgElement("rect", {
      ...box,
      class: classes.join(" "),
      fill: link ? costFill(link) : NODATA_FILL,
      "data-source": source,
      "data-destination": destination,
      "data-congested": String(flag("congested")),
      "data-stale": String(flag("stale")),
      "data-clock-suspect": String(flag("clock_suspect")),
      "data-alarms": String(raised.length),
    }, svg);
    if (flag("clock_suspect")) {
      const dimmed = classes.includes("dimmed") ? " dimmed" : "";
      const overlay = { ...box, class: `clock-overlay${dimmed}`, fill: "url(#clock-hatch)" };
      svgElement("rect", overlay, svg).setAttribute("data-source", source);
    }
    if (raised.length) {
      const dimmed = classes.includes("dimmed") ? " dimmed" : "";
      const inset = { x: x + 1.5, y: y + 1.5, width: size - 3, height: size - 3 };
      const mark = svgElement("rect", { ...inset, class: `alarm-mark${dimmed}` }, svg);
      mark.setAttribute("data-source", source);
      mark.setAttribute("data-destination", destination);
    }
    rect.addEventListener("mousemove", (event) => showTooltip(event, source, destination));
    rect.addEventListener("mouseleave", hideTooltip);
    rect.addEventListener("click", () => selectPair(source, destination));
  }

  // ---- tooltip ---------------------------------------------------------------------------

  function showTooltip(event, source, destination) {
    const tooltip = byId("tooltip");
    const link = state.links.get(pairKey(source, destination));
    const title = document.createElement("strong");
    title.textContent = `${source} → ${destination}`;
    const raised = alarmsByPair().get(pairKey(source, destination)) || [];
    const lines = [...raised.map((alarm) => `alarm: ${alarm.body}`), ...tooltipLines(link)];
    tooltip.replaceChildren(title, ...lines.map((line) => {
      const div = document.createElement("div");
      div.textContent = line;
      return div;
    }));
    tooltip.hidden = false;
    tooltip.style.left = `${event.clientX + 14}px`;
    tooltip.style.top = `${event.clientY + 14}px`;
  }

  function tooltipLines(link) {
    if (!link) return ["no measurements"];
    const delay = link.delay_ms || {};
    const pairs = link.links === 1 ? "its host pair" : `one or more of its ${link.links} host pairs`;
    const lines = [`cost ${fmt(link.cost, 3)} (0 idle and healthy .. 1 unusable)`];
    if (link.congested) lines.push(`congested (${pairs}): ${CONGESTED_RULE}`);
    lines.push(
      `delay ${fmt(delay.mean, 2)} ms (median ${fmt(delay.median, 2)}, p95 ${fmt(delay.p95, 2)},` +
        ` min ${fmt(delay.min, 2)})`,
      `loss ${percent(link.packet_loss)}`,
      utilisationText(link),
      throughputText(link.throughput_bps, link.throughputStarted),
      `freshness ${freshness(link.last_measurement)}`,
    );
    if (link.stale) lines.push(`stale: ${STALE_RULE}`);
    if (link.clock_suspect) lines.push(`clock suspect (${pairs}): ${CLOCK_RULE}`);
    lines.push(`${link.links} host pair${link.links === 1 ? "" : "s"}`);
    return lines;
  }

  const percent = (ratio) => (ratio === null || ratio === undefined ? "n/a" : `${(ratio * 100).toFixed(3)} %`);

  function utilisationText(link) {
    if (link.utilisation === null || link.utilisation === undefined) {
      const why = link.utilisation_reason || (state.model ? "insufficient_data" : "no_model");
      return `utilisation n/a (${why.replaceAll("_", " ")})`;
    }
    let text = `utilisation ${fmt(link.utilisation, 2)}`;
    if (link.utilisation_low !== null && link.utilisation_low !== undefined) {
      text += ` (90 % interval ${fmt(link.utilisation_low, 2)}–${fmt(link.utilisation_high, 2)})`;
    }
    if (link.congestion_probability !== null && link.congestion_probability !== undefined) {
      text += `, P(utilisation > 70 %) ${fmt(link.congestion_probability, 2)}`;
    }
    return text;
  }

  // The latest throughput test: its rate and how long ago it started (tests run every few hours,
  // so the value can be hours old; the site pair shows the newest of its host pairs').
  function throughputText(bps, startedAt) {
    if (bps === null || bps === undefined) return "throughput: no test yet";
    return `throughput ${rate(bps)} (test started ${age(Date.now() / 1000 - startedAt)} ago)`;
  }

  function rate(bps) {
    const [value, unit] = bps >= 1e9 ? [bps / 1e9, "Gb/s"] : bps >= 1e6 ? [bps / 1e6, "Mb/s"] : [bps / 1e3, "kb/s"];
    return `${value.toFixed(value >= 100 ? 0 : value >= 10 ? 1 : 2)} ${unit}`;
  }

  function age(seconds) {
    seconds = Math.max(0, seconds);
    if (seconds < 120) return `${Math.round(seconds)} s`;
    if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
    return `${(seconds / 3600).toFixed(1)} h`;
  }

  function freshness(lastMeasurement) {
    if (lastMeasurement === null || lastMeasurement === undefined) return "no data";
    const seconds = Math.max(0, Math.round(Date.now() / 1000 - lastMeasurement));
    return seconds < 120 ? `${seconds} s ago` : `${Math.round(seconds / 60)} min ago`;
  }

  function hideTooltip() {
    byId("tooltip").hidden = true;
  }

  // ---- detail: host pairs and their 32-minute series -------------------------------------

  function selectPair(source, destination) {
    state.selected = [source, destination];
    state.pairIndex = 0;
    renderHeatmap();
    loadDetail();
  }

  async function loadDetail() {
    const [source, destination] = state.selected;
    const token = ++state.detailToken;
    state.detailLoadedAt = Date.now();
    byId("detail").hidden = false;
    byId("detail-title").textContent = `${source} → ${destination}`;
    const query = new URLSearchParams({ source, destination });
    const matrix = await fetchJson(`costmatrix?${query}`);
    if (token !== state.detailToken || !matrix) return;
    const pairs = matrix.links.sort((a, b) => (b.cost ?? -1) - (a.cost ?? -1));
    const select = byId("pair-select");
    select.replaceChildren(...pairs.map((link, i) => new Option(
      `${link.source_host || link.source} → ${link.destination_host || link.destination}` +
        ` (cost ${fmt(link.cost, 3)}${marks(link)})`, String(i))));
    state.pairIndex = Math.min(state.pairIndex, Math.max(pairs.length - 1, 0));
    select.value = String(state.pairIndex);
    select.onchange = () => {
      state.pairIndex = Number(select.value);
      loadSeries(pairs[state.pairIndex], token);
    };
    if (pairs.length) await loadSeries(pairs[state.pairIndex], token);
  }

  function marks(link) {
    const flags = [["congested", "congested"], ["stale", "stale"], ["clock_suspect", "clock suspect"]];
    return flags.filter(([name]) => link[name]).map(([, label]) => `, ${label}`).join("");
  }

  async function loadSeries(link, token) {
    const path = `links/${encodeURIComponent(link.source)}/${encodeURIComponent(link.destination)}`;
    const detail = await fetchJson(path);
    if (token !== state.detailToken || !detail) return;
    const series = detail.series;
    const minutes = series.minutes.map((minute) => minute - series.minutes[series.minutes.length - 1]);
    const loss = series.loss.map((value) => (value === null ? null : value * 100));
    const history = state.history.get(pairKey(...state.selected)) || [];
    const ago = history.map(([at]) => (at - state.generatedAt) / 60);
    byId("detail-note").textContent =
      `showing ${link.source_host || link.source} → ${link.destination_host || link.destination}`;
    const lines = [...statusLines(detail.link, detail.features), throughputLine(detail.throughput)];
    byId("detail-status").replaceChildren(...lines.map((line) => {
      const item = document.createElement("li");
      item.className = line.kind;
      item.textContent = line.text;
      return item;
    }));
    renderPath(detail.path);
    byId("charts").replaceChildren(
      lineChart("one-way delay (ms), last 32 minutes", minutes,
        [series.delay_mean, series.delay_median, series.delay_min], ["mean", "median", "min"],
        { minSpan: 1 }),
      lineChart("packet loss (%), last 32 minutes", minutes, [loss], ["loss"],
        { floor: 0, minSpan: 0.1 }),
      lineChart("site-pair utilisation (model estimate, 90 % interval shaded), as received since " +
        "this page opened", ago, [history.map(([, point]) => point.value)], ["utilisation"],
        { floor: 0, ceiling: 1, band: history.map(([, point]) => [point.low, point.high]) }),
    );
  }

  // What the API says of one host pair, and why: the congestion rule with this link's values and
  // thresholds (the all-time minimum and standard deviation are among its features).
  function statusLines(link, features) {
    const delay = link.delay_ms || {};
    const lines = [{ kind: "cost", text: `cost ${fmt(link.cost, 3)} (0 idle and healthy .. 1 unusable)` }];
    const threshold = (features.alltime_delay_min ?? NaN) + (features.alltime_delay_std ?? NaN);
    const delayRule = Number.isFinite(threshold)
      ? `delay ${fmt(delay.mean, 2)} ms against all-time minimum ${fmt(features.alltime_delay_min, 2)}` +
        ` + std ${fmt(features.alltime_delay_std, 2)} = ${threshold.toFixed(2)} ms`
      : `delay ${fmt(delay.mean, 2)} ms (no all-time statistics yet)`;
    const values = `loss ${percent(link.packet_loss)} against ${percent(LOSS_THRESHOLD)}; ${delayRule}`;
    lines.push(link.congested
      ? { kind: "congested", text: `congested: ${CONGESTED_RULE}. Here, newest minute: ${values}` }
      : { kind: "ok", text: `not congested (congested: ${CONGESTED_RULE}). Here, newest minute: ${values}` });
    lines.push({ kind: "utilisation", text: utilisationText(link) });
    if (link.stale) lines.push({ kind: "stale", text: `stale: ${STALE_RULE} (${freshness(link.last_measurement)})` });
    if (link.clock_suspect) {
      lines.push({ kind: "clock", text: `clock suspect: ${CLOCK_RULE} (delay min ${fmt(delay.min, 2)} ms)` });
    }
    return lines;
  }

  // The host pair's latest throughput test, with AAAS's view of its three weeks of results when
  // there are enough of them (the bandwidth alarms' rule).
  function throughputLine(throughput) {
    const text = throughputText(throughput.bps, throughput.started_at);
    const bandwidth = throughput.bandwidth;
    if (!bandwidth || bandwidth.z === null) return { kind: "throughput", text };
    const change = `${(bandwidth.change * 100).toFixed(0)} %`;
    return {
      kind: "throughput",
      text: `${text}; newest ${bandwidth.bin_days}-day bin ${rate(bandwidth.newest_bin_mean_bps)}, ` +
        `${change} against the mean of ${bandwidth.bins} bins (z ${bandwidth.z.toFixed(2)})`,
    };
  }

  // The host pair's current network path (its latest traceroute) and its recent changes.
  function renderPath(path) {
    const summary = byId("path-summary");
    const hops = byId("path-hops");
    if (!path.traced_at) {
      summary.textContent = "no traceroute yet";
      hops.replaceChildren();
      return;
    }
    const reached = path.reaches_destination === null ? "destination not known by address"
      : path.reaches_destination ? "reaches the destination" : "stops before the destination";
    const changes = `${path.changes_last_24h} change${path.changes_last_24h === 1 ? "" : "s"}`;
    summary.textContent = `${path.hops.length} hops, ${reached}; this path since ` +
      `${new Date(path.since * 1000).toLocaleString()}, ${changes} in the last 24 h ` +
      `(traced ${age(Date.now() / 1000 - path.traced_at)} ago)`;
    hops.replaceChildren(...path.hops.map((hop) => {
      const item = document.createElement("li");
      item.value = hop.ttl;
      if (hop.address === null) {
        item.className = "silent";
        item.textContent = "no answer";
      } else {
        const rtt = hop.rtt_ms === null ? "" : ` ${hop.rtt_ms} ms`;
        item.textContent = `${hop.address}${hop.asn ? ` (AS${hop.asn})` : ""}${rtt}`;
      }
      return item;
    }));
  }

  async function fetchJson(url) {
    try {
      const response = await fetch(url);
      return response.ok ? await response.json() : null;
    } catch (error) {
      return null;
    }
  }

  // ---- charts ----------------------------------------------------------------------------

  function lineChart(title, xs, seriesList, names, axis) {
    const box = document.createElement("div");
    box.className = "chart";
    const heading = document.createElement("h3");
    heading.textContent = title;
    const key = document.createElement("div");
    key.className = "key";
    key.replaceChildren(...names.map((name, i) => {
      const span = document.createElement("span");
      span.className = `k${i}`;
      span.textContent = name;
      return span;
    }));
    box.replaceChildren(heading, key, chartSvg(xs, seriesList, axis));
    return box;
  }

  // The value axis from the quantity: `floor`/`ceiling` fix an end (loss and utilisation start
  // at 0, utilisation ends at 1), `minSpan` keeps a flat series from blowing up noise.
  function valueAxis(values, axis) {
    const { floor, ceiling, minSpan = 1 } = axis;
    let low = floor ?? (values.length ? Math.min(...values) : 0);
    let high = ceiling ?? (values.length ? Math.max(...values) : low + minSpan);
    if (floor !== undefined && values.length) low = Math.min(low, ...values);
    if (ceiling !== undefined && values.length) high = Math.max(high, ...values);
    if (high - low < minSpan) {
      if (floor !== undefined) high = low + minSpan;
      else if (ceiling !== undefined) low = high - minSpan;
      else [low, high] = [(low + high - minSpan) / 2, (low + high + minSpan) / 2];
    }
    return [low, high];
  }

  function chartSvg(xs, seriesList, axis) {
    const [width, height, left, right, top, bottom] = [640, 150, 46, 8, 8, 18];
    const svg = svgElement("svg", { viewBox: `0 0 ${width} ${height}` });
    const present = (value) => value !== null && value !== undefined;
    const values = seriesList.flat().filter(present);
    const [low, high] = valueAxis(values, axis);
    const [xLow, xHigh] = xs.length > 1 ? [Math.min(...xs), Math.max(...xs)] : [-1, 0];
    const px = (x) => left + ((x - xLow) / (xHigh - xLow || 1)) * (width - left - right);
    const py = (y) => top + (1 - (y - low) / (high - low)) * (height - top - bottom);
    svgElement("line", { class: "axis", x1: left, y1: height - bottom, x2: width - right, y2: height - bottom }, svg);
    svgElement("line", { class: "axis", x1: left, y1: top, x2: left, y2: height - bottom }, svg);
    axisLabel(svg, left - 4, top + 8, formatTick(high, high - low), "end");
    axisLabel(svg, left - 4, height - bottom, formatTick(low, high - low), "end");
    axisLabel(svg, left, height - 4, `${Math.round(xLow)} min`, "start");
    axisLabel(svg, width - right, height - 4, "now", "end");
    svg.dataset.axisLow = String(low);
    svg.dataset.axisHigh = String(high);
    const band = (axis.band || []).map(([a, b], i) => [xs[i], a, b]).filter(([, a, b]) => present(a) && present(b));
    if (band.length) {
      const upper = band.map(([x, , b]) => `${px(x).toFixed(1)},${py(b).toFixed(1)}`);
      const lower = band.reverse().map(([x, a]) => `${px(x).toFixed(1)},${py(a).toFixed(1)}`);
      svgElement("polygon", { class: "band", points: [...upper, ...lower].join(" ") }, svg);
    }
    seriesList.forEach((series, i) => {
      const d = pathData(xs, series, px, py);
      if (d) svgElement("path", { class: `series series-${i}`, d }, svg);
    });
    if (!values.length) axisLabel(svg, width / 2, height / 2, "no data yet", "middle");
    return svg;
  }

  function pathData(xs, series, px, py) {
    let d = "";
    let pen = "M";
    series.forEach((value, i) => {
      if (value === null || value === undefined) {
        pen = "M";
        return;
      }
      d += `${pen}${px(xs[i]).toFixed(1)},${py(value).toFixed(1)} `;
      pen = "L";
    });
    return d.trim();
  }

  function axisLabel(svg, x, y, text, anchor) {
    svgElement("text", { x, y, "text-anchor": anchor }, svg).textContent = text;
  }

  function formatTick(value, span) {
    const digits = Math.max(0, Math.min(3, 1 - Math.floor(Math.log10(span))));
    return value.toFixed(digits);
  }

  // ---- wiring ----------------------------------------------------------------------------

  function closeDetail() {
    state.selected = null;
    state.detailToken += 1;
    byId("detail").hidden = true;
    renderHeatmap();
  }

  function toggleHelp() {
    const help = byId("help");
    help.hidden = !help.hidden;
    byId("help-toggle").setAttribute("aria-expanded", String(!help.hidden));
  }

  document.addEventListener("DOMContentLoaded", () => {
    for (const id of ["source-filter", "destination-filter", "congested-only"]) {
      byId(id).addEventListener("change", renderHeatmap);
    }
    byId("detail-close").addEventListener("click", closeDetail);
    byId("help-toggle").addEventListener("click", toggleHelp);
    byId("help-close").addEventListener("click", toggleHelp);
    connect();
    connectAlarms();
  });
})();
