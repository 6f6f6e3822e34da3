"""nettel's performance suite: `python -m benchmarks [--quick] [--only NAMES] [--output DIR]`.

It runs on the machine it is started on, against private ActiveMQ brokers it starts itself, and
measures (one module each under `benchmarks.measurements`):

    ingest     broker -> link state: the real `nettel serve` vs a bare stomp.py consumer
    cycle      one full matrix recompute at 1k, 15k and 100k full links
    memory     link-state bytes per link and process RSS (fresh subprocess per size)
    api        GET /costmatrix under concurrent load (wrk, or a Python load generator)
    freshness  publish -> visible in /costmatrix, under 5,000 msg/s of background ingest
    start      process start -> /readyz 200, cold and with a 15k-link state snapshot

Results go to `<output>/report.json` and, rendered as tables, to `docs/performance.md`. Every
comparison is a ratio of two figures measured in the same run. Helper processes (the bare
consumer, the paced producer, the memory probe) are modules of this package run with `-m`.
"""
