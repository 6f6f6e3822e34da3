"""Helpers the measurements share: brokers, service processes, load generation, link filling,
memory and CPU probes, the machine description. Some run as processes of their own (`-m`)."""
