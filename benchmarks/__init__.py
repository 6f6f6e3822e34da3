"""nettel's performance suite: `python -m benchmarks [--quick] [--only NAMES] [--output DIR]`.

It runs on the machine it is started on, against private brokers (and a private Rucio server)
it starts itself, and measures (one module each under `benchmarks.measurements`; the `core`
group, run by default, is the first eight):

    ingest, ingest_rabbitmq  broker -> link state: `nettel serve` vs a bare stomp.py consumer
    cycle                    one full matrix recompute at 1k, 15k and 100k full links
    memory                   link-state bytes per link and process RSS (fresh subprocess per size)
    link_flood               a running service's memory and views per link, up to the link cap
    api                      GET /costmatrix under concurrent load (wrk, or a Python generator)
    freshness                publish -> visible in /costmatrix, under 5,000 msg/s of ingest
    start                    process start -> /readyz 200, cold and with a 15k-link snapshot
    warm_start               a replica started from a peer's state (--warm-from)
    backfill                 start -> full matrix from an archive (--backfill-from)
    front_door               /healthz under huge headers, slowloris and idle SSE streams
    ha_failover(_rabbitmq)   telemetry publisher failover and requests through HAProxy
    pscheduler_ingest        pScheduler runs over PUT /ingest/pscheduler
    topology_refresh         a 400-site CRIC export swapped in under live ingest
    alto_endpoint_cost       ALTO endpoint cost requests under load
    alto_updates             ALTO update stream patches and their cost
    rucio_sync               `nettel rucio-sync` against a local Rucio (needs .venv-rucio)
    rucio_staleness          cost change in nettel -> distance readable in Rucio, default interval
    served_calibration       served vs evaluated congestion probability
    decisions                transfer times by policy on the committed decision captures (ns-3)
    spark_dataset(_archive)  `nettel dataset` with Spark vs in memory (needs the spark extra)

Results are merged into the report `docs/performance.md` carries (in HTML comments; a partial
run replaces only its own sections), or into `<output>/report.json` with `--docs none`, and
rendered as tables into the page; the merged report is also written to report.json. Every
comparison is a ratio of two figures measured in the same run. Shared helpers are in
`benchmarks.support`; some of them (the bare consumer, the paced producer, the memory probe) run
as processes of their own with `-m`.
"""
